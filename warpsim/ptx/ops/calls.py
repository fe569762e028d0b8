"""CUDA's device runtime calls that warpsim runs: ``vprintf`` (device ``printf``) and
``__assertfail`` (device ``assert``).

The linker (:mod:`warpsim.ptx.link`) turns ``call (retval0), vprintf, (param0, param1);`` of a
function declared ``.extern`` without a body into the pseudo-instruction ``vprintf [retval0],
[param0], [param1];`` whose operands are the call's parameter variables (per-thread storage).
``vprintf`` reads the format string (a generic address) and the argument buffer (CUDA's ABI:
arguments in order, each aligned to its size, ``float`` promoted to ``double``), formats as C's
printf (:mod:`warpsim._util.cformat`), and appends one record per executing lane to
``ctx.printf_sink``: ``((CTA linear id, warp in the CTA, lane), text bytes)``, in program order;
the launch sorts them by CTA, warp, lane (the sort is stable, so program order stays) and
returns them.  It returns the number of arguments the format consumed (-1 for a NULL format),
as CUDA's printf does.  ``__assertfail(message, file, line, function, charSize)`` stops the run
with a :class:`~warpsim.errors.DeviceAssertError` written as the GPU's "Assertion failed" line,
for the first executing lane (lowest CTA of the batch, then lane).
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import DeviceAssertError, MemoryAccessError, PrintfError, PtxError
from warpsim._util import cformat
from warpsim.ptx.ops.datamove import load, store
from warpsim.ptx.optable import OpSpec
from warpsim.ptx.parser import Addr

#: Longest string read for a format, a %s argument or an assert message (bytes).
MAX_STRING = 1 << 16


def _param_addrs(ins, dec, n: int, what: str):
    ops = ins.operands
    if len(ops) != n or not all(isinstance(o, Addr) for o in ops):
        raise PtxError(f"{ins.text}: {what} takes {n} parameter operands")
    return [dec.address(o) for o in ops]


def _u64(ctx, raddr, mask, where, nbytes: int = 8) -> np.ndarray:
    raw = load(ctx, "local", raddr(ctx), nbytes, mask, where)
    return np.ascontiguousarray(raw).view(np.uint64 if nbytes == 8 else np.uint32)[..., 0]


def read_cstrings(ctx, addr: np.ndarray, mask: np.ndarray, where: str, what: str) -> dict:
    """{(batch index..., lane): bytes} of the NUL-terminated strings at generic ``addr`` of the
    lanes in ``mask`` (NULL pointers give None); a string past memory or longer than
    MAX_STRING is a PrintfError naming the lane and address."""
    act = mask & (addr != 0)
    out: dict = {tuple(int(x) for x in i): None for i in np.argwhere(mask & (addr == 0))}
    cols = []
    k = 0
    while act.any():
        if k >= MAX_STRING:
            i = tuple(int(x) for x in np.argwhere(act)[0])
            raise PrintfError(f"{where}: {what} at {int(addr[i]):#x} (lane {i[-1]}) has no NUL "
                              f"within {MAX_STRING} bytes").at(warp=i[:-1], lanes=(i[-1],))
        try:
            got = load(ctx, None, addr + np.uint64(k), 1, act, where)[..., 0]
        except MemoryAccessError as e:
            bad = e.address if e.address is not None else 0
            lane = e.lanes[0] if e.lanes else "?"
            raise PrintfError(f"{where}: {what}: lane {lane} passes the pointer {bad - k:#x}, whose "
                              f"byte {k} is outside memory (a bad pointer)").at(
                warp=e.warp, lanes=e.lanes, address=e.address) from None
        got = np.where(act, got, 0)
        cols.append(got)
        act = act & (got != 0)
        k += 1
    if cols:
        data = np.stack(cols, axis=-1)
        for i in np.argwhere(mask & (addr != 0)):
            row = data[tuple(i)]
            z = np.flatnonzero(row == 0)
            out[tuple(int(x) for x in i)] = row[:z[0] if z.size else row.size].tobytes()
    return out


def _keys(ctx) -> tuple[np.ndarray, np.ndarray]:
    """(CTA linear id, thread linear id) of every lane, (*batch, 32)."""
    s = ctx.specials
    g = [np.broadcast_to(s[f"%{r}.{c}"], ctx.shape).astype(np.int64) for r in ("ctaid", "nctaid", "tid", "ntid")
         for c in "xyz"]
    cx, cy, cz, nx, ny, _, tx, ty, tz, bx, by, _ = g
    return cx + nx * (cy + ny * cz), tx + bx * (ty + by * tz)


def _compile_vprintf(ins, dec):
    if len(ins.operands) == 2:  # called without taking the return value
        rret = None
        rfmt, rargs = _param_addrs(ins, dec, 2, "vprintf")
    else:
        rret, rfmt, rargs = _param_addrs(ins, dec, 3, "vprintf")
    where = dec.where
    parsed: dict = {}

    def run(ctx, mask):
        act = np.ones(ctx.shape, bool) if mask is None else mask
        fmtp = _u64(ctx, rfmt, mask, where)
        argp = _u64(ctx, rargs, mask, where)
        fmts = read_cstrings(ctx, fmtp, act, where, "the printf format string")
        ret = np.zeros(ctx.shape, np.int32)
        groups: dict = {}
        for idx, f in fmts.items():
            groups.setdefault(f, []).append(idx)
        texts: dict = {}
        for f, lanes in groups.items():
            sel = np.zeros(ctx.shape, bool)
            for idx in lanes:
                sel[idx] = True
            if f is None:  # NULL format: prints nothing, returns -1
                ret[sel] = -1
                continue
            items = parsed.get(f)
            if items is None:
                try:
                    items = cformat.parse(f, device=True)
                except cformat.FormatSpecError as e:
                    i = lanes[0]
                    raise PrintfError(f"{where}: printf format {f[:80]!r}: {e}").at(
                        warp=i[:-1], lanes=(i[-1],)) from None
                parsed[f] = items
            layout = cformat.arg_layout(items)
            total = max((o + s for _, o, s in layout), default=0)
            buf = None
            if total:
                if (argp[sel] == 0).any():
                    i = tuple(int(x) for x in np.argwhere(sel & (argp == 0))[0])
                    raise PrintfError(f"{where}: printf format {f[:80]!r} takes arguments but the "
                                      "argument buffer is NULL").at(warp=i[:-1], lanes=(i[-1],))
                buf = load(ctx, None, argp, total, sel, where, align=1)
            # %s arguments: read each string argument for the whole group at once
            strings = {}
            vals_per_conv = []
            li = 0
            for it in items:
                if isinstance(it, bytes):
                    continue
                w = p = None
                if it.width == "*":
                    w = layout[li]
                    li += 1
                if it.precision == "*":
                    p = layout[li]
                    li += 1
                v = layout[li]
                li += 1
                if it.conv == b"s":
                    ptr = np.ascontiguousarray(buf[..., v[1]:v[1] + 8]).view(np.uint64)[..., 0]
                    strings[id(it), v[1]] = read_cstrings(ctx, np.where(sel, ptr, 0), sel, where,
                                                          f"printf argument {it.text.decode()}")
                vals_per_conv.append((it, w, p, v))
            for idx in lanes:
                out = []
                conv_i = 0
                row = None if buf is None else buf[idx].tobytes()
                for it in items:
                    if isinstance(it, bytes):
                        out.append(it)
                        continue
                    _, w, p, (_, off, size) = vals_per_conv[conv_i]
                    conv_i += 1
                    width = it.width if w is None else int.from_bytes(row[w[1]:w[1] + 4], "little", signed=True)
                    prec = it.precision if p is None else int.from_bytes(row[p[1]:p[1] + 4], "little", signed=True)
                    raw = int.from_bytes(row[off:off + size], "little")
                    s = strings[id(it), off][idx] if it.conv == b"s" else None
                    out.append(cformat.format_one(it, raw, width, prec, s))
                texts[idx] = b"".join(out)
                ret[idx] = sum(1 for r, _, _ in layout if r == "value")
        sink = getattr(ctx, "printf_sink", None)
        if sink is None:
            sink = ctx.printf_sink = []
        cta, tid = _keys(ctx)
        for idx in sorted(texts):  # lanes of the batch in order; the launch sorts by CTA, warp, lane
            t = int(tid[idx])
            sink.append(((int(cta[idx]), t // 32, t % 32), texts[idx]))
        if rret is not None:
            store(ctx, "local", rret(ctx), np.ascontiguousarray(ret).view(np.uint8).reshape(ctx.shape + (4,)),
                  mask, where)
    return run


def _compile_assertfail(ins, dec):
    rmsg, rfile, rline, rfunc, _ = _param_addrs(ins, dec, 5, "__assertfail")
    where = dec.where

    def run(ctx, mask):
        act = np.ones(ctx.shape, bool) if mask is None else mask
        i = tuple(int(x) for x in np.argwhere(act)[0])
        one = np.zeros(ctx.shape, bool)
        one[i] = True
        texts = []
        for r in (rmsg, rfile, rfunc):
            p = _u64(ctx, r, one, where)
            s = read_cstrings(ctx, np.where(one, p, 0), one, where, "an assert argument")[i]
            texts.append((s or b"").decode("utf-8", "backslashreplace"))
        line = int(_u64(ctx, rline, one, where, 4)[i])
        msg, file, func = texts
        s = ctx.specials
        cta = tuple(int(np.broadcast_to(s[f"%ctaid.{c}"], ctx.shape)[i]) for c in "xyz")
        thr = tuple(int(np.broadcast_to(s[f"%tid.{c}"], ctx.shape)[i]) for c in "xyz")
        e = DeviceAssertError(
            f"{file}:{line}: {func}: block: [{cta[0]},{cta[1]},{cta[2]}], thread: "
            f"[{thr[0]},{thr[1]},{thr[2]}] Assertion `{msg}` failed.")
        e.assertion, e.file, e.source_line, e.function, e.cta, e.thread = msg, file, line, func, cta, thr
        raise e.at(warp=i[:-1], lanes=(i[-1],))
    return run


OPS: dict[str, OpSpec] = {
    "vprintf": OpSpec("vprintf", (), None, 2, compile=_compile_vprintf,
                      doc="device printf (a call of the extern vprintf): C formatting, output collected per launch"),
    "__assertfail": OpSpec("__assertfail", (), None, 5, compile=_compile_assertfail,
                           doc="device assert failed (a call of the extern __assertfail): stops the launch"),
}
