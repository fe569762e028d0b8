"""Measure wmma fragment layouts and numerics on a GPU (the PTX ISA leaves the layout unspecified).

``python -m warpsim.validation.wmma_probe ptx OUT.ptx`` writes one PTX module with

- ``ld_*`` kernels: one ``wmma.load`` form each (natural stride, no stride, doubled stride)
  that store every register of every lane to ``out[lane][reg]``;
- ``st_*`` kernels: registers filled with (lane, reg, slot) codes, stored by ``wmma.store.d``;
- ``mma_*`` kernels: one tile per CTA, loaded, multiplied and stored with wmma.

``python -m warpsim.validation.wmma_probe device CUBIN OUT.npz`` runs them through CuPy on the
GPU: every load form with the matrix elements set to the digits of their own row-major index
(so the registers say which element each bit holds) and once with random bits, every store form,
and every mma form on random tiles.  :func:`layout_from_probe` turns the result into the
layout tables that :mod:`warpsim.tensorcore.wmma` reads.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from warpsim.facts.wmma import ELEMENT_BITS, FRAGMENTS, MMA_GEOMS, SHAPES, Fragment

MMA_TILES = 32  # tiles (CTAs) per mma form on the device


def ld_name(f: Fragment, layout: str, variant: str) -> str:
    return f"ld_{f.frag}_{layout}_{f.shape}_{f.type}_{variant}"


def st_name(f: Fragment, layout: str) -> str:
    return f"st_{layout}_{f.shape}_{f.type}"


def mma_name(g, al: str, bl: str, extra: str) -> str:
    e = f"_{extra}" if extra else ""
    return f"mma_{al}_{bl}_{g.shape}_{g.dtype}_{g.atype}_{g.btype}_{g.ctype}{e}"


def natural_stride(f: Fragment, layout: str) -> int:
    """Elements between consecutive rows (row layout) or columns (col layout)."""
    r, c = f.rows_cols
    return c if layout == "row" else r


def _regs(f: Fragment, base: int) -> tuple[list[str], str]:
    if f.reg_bits == 64:
        return [f"%fd{base + i}" for i in range(f.nregs)], "f64"
    if f.type == "f32":
        return [f"%f{base + i}" for i in range(f.nregs)], "f32"
    return [f"%r{base + i}" for i in range(f.nregs)], "b32"


def _header() -> str:
    return ".version 8.0\n.target sm_90\n.address_size 64\n\n"


def _decls() -> str:
    return ("  .reg .b32 %r<80>;\n  .reg .f32 %f<80>;\n  .reg .f64 %fd<16>;\n"
            "  .reg .b64 %rd<16>;\n  .reg .b32 %t<8>;\n")


def _ld_kernel(f: Fragment, layout: str, variant: str) -> str:
    regs, kind = _regs(f, 0)
    stride = natural_stride(f, layout) * (2 if variant == "p" else 1)
    st = "" if variant == "n" else f", {stride}"
    word = 8 if f.reg_bits == 64 else 4
    lines = [f".visible .entry {ld_name(f, layout, variant)}(.param .u64 pin, .param .u64 pout)", "{",
             _decls(),
             "  ld.param.u64 %rd1, [pin];", "  ld.param.u64 %rd2, [pout];",
             "  mov.u32 %t0, %laneid;",
             f"  mul.wide.u32 %rd3, %t0, {word * f.nregs};", "  add.s64 %rd2, %rd2, %rd3;",
             f"  wmma.load.{f.frag}.sync.aligned.{layout}.{f.shape}.global.{f.type} "
             f"{{{', '.join(regs)}}}, [%rd1]{st};"]
    for i, r in enumerate(regs):
        lines.append(f"  st.global.{'b64' if kind == 'f64' else ('f32' if kind == 'f32' else 'b32')} "
                     f"[%rd2+{i * word}], {r};")
    lines += ["  ret;", "}", ""]
    return "\n".join(lines)


def _st_kernel(f: Fragment, layout: str) -> str:
    regs, kind = _regs(f, 0)
    per = f.elems_per_reg
    w = ELEMENT_BITS[f.type]
    lines = [f".visible .entry {st_name(f, layout)}(.param .u64 pout)", "{", _decls(),
             "  ld.param.u64 %rd2, [pout];", "  mov.u32 %t0, %laneid;"]
    for i, r in enumerate(regs):
        # register i of lane L holds code (L * nregs + i) * per + slot in each element slot
        if kind == "f64":
            lines += [f"  mad.lo.u32 %t1, %t0, {f.nregs}, {i};", "  cvt.u64.u32 %rd4, %t1;",
                      f"  mov.b64 {r}, %rd4;"]
        else:
            lines.append(f"  mad.lo.u32 %t1, %t0, {f.nregs}, {i};")
            if per == 1:
                src = "%t1"
            else:  # two 16-bit slots: (code*2) | ((code*2+1) << 16)
                lines += ["  shl.b32 %t2, %t1, 1;", "  add.u32 %t3, %t2, 1;", "  shl.b32 %t3, %t3, 16;",
                          "  or.b32 %t2, %t2, %t3;"]
                src = "%t2"
            lines.append(f"  mov.b32 {r}, {src};")
    lines.append(f"  wmma.store.d.sync.aligned.{layout}.{f.shape}.global.{f.type} [%rd2], "
                 f"{{{', '.join(regs)}}}, {natural_stride(f, layout)};")
    lines += ["  ret;", "}", ""]
    return "\n".join(lines)


def _elem_bytes_per_tile(f: Fragment) -> int:
    r, c = f.rows_cols
    return r * c * ELEMENT_BITS[f.type] // 8


def mma_text(g, al: str, bl: str, extra: str, regs: dict) -> str:
    sat = ".satfinite" if extra == "satfinite" else ""
    rnd = f".{extra}" if extra in ("rn", "rz", "rm", "rp") else ""
    if g.atype == "b1":
        return (f"wmma.mma.{extra}.popc.sync.aligned.{al}.{bl}.{g.shape}.s32.b1.b1.s32 "
                f"{regs['d']}, {regs['a']}, {regs['b']}, {regs['c']};")
    if g.atype in ("f16",):
        types = f"{g.dtype}.{g.ctype}"
    else:
        types = f"{g.dtype}.{g.atype}.{g.btype}.{g.ctype}"
    return (f"wmma.mma.sync.aligned.{al}.{bl}.{g.shape}{rnd}.{types}{sat} "
            f"{regs['d']}, {regs['a']}, {regs['b']}, {regs['c']};")


def _mma_kernel(g, al: str, bl: str, extra: str) -> str:
    fa = FRAGMENTS[("a", g.shape, g.atype)]
    fb = FRAGMENTS[("b", g.shape, g.btype)]
    fc = FRAGMENTS[("c", g.shape, g.ctype)]
    fd = FRAGMENTS[("c", g.shape, g.dtype)]
    ra, _ = _regs(fa, 0)
    rb, _ = _regs(fb, 16)
    rc, _ = _regs(fc, 32)
    rd, _ = _regs(fd, 48)
    if fc.reg_bits == 64:
        rc = [f"%fd{4 + i}" for i in range(fc.nregs)]
        rd = [f"%fd{8 + i}" for i in range(fd.nregs)]
        rb = [f"%fd{2 + i}" for i in range(fb.nregs)]
    regs = {k: "{" + ", ".join(v) + "}" for k, v in dict(a=ra, b=rb, c=rc, d=rd).items()}
    lines = [f".visible .entry {mma_name(g, al, bl, extra)}(.param .u64 pa, .param .u64 pb, "
             ".param .u64 pc, .param .u64 pd)", "{", _decls(), "  mov.u32 %t0, %ctaid.x;"]
    for i, (p, f, lay) in enumerate((("pa", fa, al), ("pb", fb, bl), ("pc", fc, "row"), ("pd", fd, "row"))):
        lines += [f"  ld.param.u64 %rd{i + 1}, [{p}];",
                  f"  mul.wide.u32 %rd5, %t0, {_elem_bytes_per_tile(f)};",
                  f"  add.s64 %rd{i + 1}, %rd{i + 1}, %rd5;"]
    lines += [
        f"  wmma.load.a.sync.aligned.{al}.{g.shape}.global.{g.atype} {regs['a']}, [%rd1], {natural_stride(fa, al)};",
        f"  wmma.load.b.sync.aligned.{bl}.{g.shape}.global.{g.btype} {regs['b']}, [%rd2], {natural_stride(fb, bl)};",
        f"  wmma.load.c.sync.aligned.row.{g.shape}.global.{g.ctype} {regs['c']}, [%rd3], {natural_stride(fc, 'row')};",
        "  " + mma_text(g, al, bl, extra, regs),
        f"  wmma.store.d.sync.aligned.row.{g.shape}.global.{g.dtype} [%rd4], {regs['d']}, {natural_stride(fd, 'row')};",
        "  ret;", "}", ""]
    return "\n".join(lines)


#: (shape, operand) of the f16 fragments that hold every element more than once
DUP_CASES = (("m16n16k16", "a"), ("m16n16k16", "b"), ("m8n32k16", "a"), ("m32n8k16", "b"))


def dup_name(shape: str, op: str, reg: int) -> str:
    return f"dup_{shape}_{op}{reg}"


def _dup_kernel(shape: str, op: str, reg: int) -> str:
    """row.col f16 -> f32 mma with register ``reg`` of A or B zeroed after the load."""
    g = next(g for g in MMA_GEOMS if g.shape == shape and g.atype == "f16" and g.dtype == "f32"
             and g.ctype == "f32")
    text = _mma_kernel(g, "row", "col", "")
    target = f"%r{reg}" if op == "a" else f"%r{16 + reg}"
    text = text.replace(mma_name(g, "row", "col", ""), dup_name(shape, op, reg))
    return text.replace("  wmma.mma", f"  mov.b32 {target}, 0;\n  wmma.mma")


def mma_cases():
    """(geometry, alayout, blayout, extra qualifier) of every mma kernel the probe runs on sm_90."""
    for g in MMA_GEOMS:
        extras = [""]
        if g.satfinite:
            extras.append("satfinite")
        if g.rnd:
            extras = list(g.rnd)
        if g.ops:
            extras = list(g.ops)
        for al, bl in g.layouts:
            for e in extras:
                yield g, al, bl, e


def probe_ptx() -> str:
    out = [_header()]
    for f in FRAGMENTS.values():
        for lay in f.layouts:
            for v in ("s", "n", "p"):
                out.append(_ld_kernel(f, lay, v))
            if f.frag == "c":
                out.append(_st_kernel(f, lay))
    for g, al, bl, e in mma_cases():
        out.append(_mma_kernel(g, al, bl, e))
    for shape, op in DUP_CASES:
        for r in range(8):
            out.append(_dup_kernel(shape, op, r))
    return "\n".join(out)


# ------------------------------------------------------------------ host side (numpy)

def passes(f: Fragment) -> int:
    r, c = f.rows_cols
    return math.ceil(math.log2(r * c) / ELEMENT_BITS[f.type])


def pack_elements(codes: np.ndarray, bits: int) -> np.ndarray:
    """Element codes (uint64, memory order) -> bytes, sub-byte elements little-end first."""
    codes = np.asarray(codes, np.uint64)
    if bits >= 8:
        dt = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
        return codes.astype(dt).view(np.uint8)
    per = 8 // bits
    c = codes.reshape(-1, per) & np.uint64((1 << bits) - 1)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(bits))
    return (c << shifts).sum(axis=1).astype(np.uint8)


def memory_codes(logical: np.ndarray, layout: str, stride: int) -> np.ndarray:
    """A (rows, cols) matrix of codes -> its memory image (codes) with ``stride`` and ``layout``."""
    r, c = logical.shape
    if layout == "row":
        mem = np.zeros((r, stride), np.uint64)
        mem[:, :c] = logical
    else:
        mem = np.zeros((c, stride), np.uint64)
        mem[:, :r] = logical.T
    return mem.reshape(-1)


def load_inputs(f: Fragment, layout: str, variant: str, rng) -> list[np.ndarray]:
    """Byte images to load: one per index digit, then one of random bits."""
    rows, cols = f.rows_cols
    w = ELEMENT_BITS[f.type]
    idx = np.arange(rows * cols, dtype=np.uint64).reshape(rows, cols)
    stride = natural_stride(f, layout) * (2 if variant == "p" else 1)
    mask = np.uint64((1 << w) - 1) if w < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    imgs = [pack_elements(memory_codes((idx >> np.uint64(w * j)) & mask, layout, stride), w)
            for j in range(passes(f))]
    rnd = rng.integers(0, 1 << 63, size=(rows, cols), dtype=np.uint64) & mask
    imgs.append(pack_elements(memory_codes(rnd, layout, stride), w))
    return imgs


def random_codes(t: str, n: int, rng) -> np.ndarray:
    """Random element codes for mma inputs: mostly moderate values, some arbitrary bit patterns."""
    w = ELEMENT_BITS[t]
    if t in ("f16", "bf16", "tf32", "f32", "f64"):
        dt = {"f16": np.float16, "f32": np.float32, "tf32": np.float32, "f64": np.float64}.get(t)
        v = rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n))
        if t == "bf16":
            codes = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
        else:
            codes = v.astype(dt).view({16: np.uint16, 32: np.uint32, 64: np.uint64}[w]).astype(np.uint64)
        wild = rng.random(n) < 0.05
        mask = (1 << w) - 1 if w < 64 else 0xFFFFFFFFFFFFFFFF
        codes[wild] = rng.integers(0, 1 << 63, int(wild.sum()), dtype=np.uint64) & np.uint64(mask)
        if t == "tf32":  # low mantissa bits are ignored by the hardware; keep some set
            codes ^= rng.integers(0, 1 << 13, n, dtype=np.uint64)
        return codes
    return rng.integers(0, 1 << w, n, dtype=np.uint64)


def mma_inputs(g, al: str, bl: str, tiles: int, rng) -> dict[str, np.ndarray]:
    """Byte images of A (in al), B (in bl) and C (row) for ``tiles`` tiles, and the codes."""
    out = {}
    for op, t, lay in (("a", g.atype, al), ("b", g.btype, bl), ("c", g.ctype, "row")):
        f = FRAGMENTS[(op, g.shape, t)]
        r, c = f.rows_cols
        codes = random_codes(t, tiles * r * c, rng).reshape(tiles, r, c)
        mem = np.concatenate([memory_codes(codes[i], lay, natural_stride(f, lay)) for i in range(tiles)])
        out[op] = pack_elements(mem, ELEMENT_BITS[t])
    return out


def unpack_elements(img: np.ndarray, bits: int, n: int) -> np.ndarray:
    """The inverse of :func:`pack_elements`: bytes -> n element codes (uint64)."""
    img = np.ascontiguousarray(img, np.uint8)
    if bits >= 8:
        dt = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
        return img.view(dt).astype(np.uint64)[:n]
    b = np.unpackbits(img, bitorder="little").reshape(-1, bits).astype(np.uint64)
    return (b << np.arange(bits, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)[:n]


def logical_from_memory(mem: np.ndarray, rows: int, cols: int, layout: str) -> np.ndarray:
    """Memory-order codes (natural stride) -> the (rows, cols) tile."""
    return mem.reshape(rows, cols) if layout == "row" else mem.reshape(cols, rows).T


def layout_from_probe(res) -> dict[str, np.ndarray]:
    """Fragment maps from a device run: ``{"a_m16n16k16_f16": (32, nregs, per) int16, ...}``.

    Checks what the maps rest on and raises AssertionError otherwise: the three stride variants
    give one map, .row and .col give one map, the random pass comes back bit for bit through the
    map, and the store kernel writes each slot where the C map says it came from.
    """
    out = {}
    for f in FRAGMENTS.values():
        r, c = f.rows_cols
        w = ELEMENT_BITS[f.type]
        per = f.elems_per_reg
        mask = np.uint64((1 << w) - 1) if w < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        maps = []
        for lay in f.layouts:
            for v in ("s", "n", "p"):
                d = res[ld_name(f, lay, v)].astype(np.uint64)
                idx = np.zeros((32, f.nregs, per), np.uint64)
                for j in range(passes(f)):
                    for e in range(per):
                        idx[:, :, e] |= ((d[j] >> np.uint64(e * w)) & mask) << np.uint64(w * j)
                maps.append(idx.astype(np.int64))
                img = res[f"in_{ld_name(f, lay, v)}_{passes(f)}"]
                stride = natural_stride(f, lay) * (2 if v == "p" else 1)
                mem = unpack_elements(img, w, len(img) * 8 // w)
                mem = mem.reshape(-1, stride)[:, :natural_stride(f, lay)].reshape(-1)
                tile = logical_from_memory(mem, r, c, lay).reshape(-1)
                want = np.zeros((32, f.nregs), np.uint64)
                for e in range(per):
                    want |= tile[maps[-1][:, :, e]] << np.uint64(e * w)
                assert np.array_equal(want, d[-1]), f"{ld_name(f, lay, v)}: random bits differ"
        assert all(np.array_equal(maps[0], m) for m in maps), f"{f}: maps differ"
        m = maps[0]
        assert np.array_equal(np.bincount(m.reshape(-1), minlength=r * c) > 0, np.ones(r * c, bool))
        if f.frag == "c":
            codes = np.arange(32 * f.nregs * per).reshape(32, f.nregs, per)
            for lay in f.layouts:
                st = res[st_name(f, lay)]
                tile = logical_from_memory(unpack_elements(st, w, r * c), r, c, lay).reshape(-1)
                want = np.zeros(r * c, np.int64)
                want[m.reshape(-1)] = codes.reshape(-1)
                assert np.array_equal(tile.astype(np.int64), want), f"{st_name(f, lay)} differs"
        out[f"{f.frag}_{f.shape}_{f.type}"] = m.astype(np.int16)
    return out


def g_bytes(g, tiles: int = 1) -> int:
    m, n, _ = SHAPES[g.shape]
    return tiles * m * n * ELEMENT_BITS[g.dtype] // 8


def run_device(cubin: str, out_path: str) -> None:  # pragma: no cover - needs a GPU
    import cupy as cp

    mod = cp.RawModule(path=cubin)
    rng = np.random.default_rng(19)
    res = {}
    for f in FRAGMENTS.values():
        word = np.uint64 if f.reg_bits == 64 else np.uint32
        for lay in f.layouts:
            for v in ("s", "n", "p"):
                fn = mod.get_function(ld_name(f, lay, v))
                dumps = []
                for img in load_inputs(f, lay, v, rng):
                    buf = cp.asarray(np.concatenate([img, np.zeros(256, np.uint8)]))
                    o = cp.full((32, f.nregs), word(0xA5A5A5A5), dtype=word)
                    fn((1,), (32,), (buf, o))
                    dumps.append(cp.asnumpy(o))
                    res[f"in_{ld_name(f, lay, v)}_{len(dumps) - 1}"] = img
                res[ld_name(f, lay, v)] = np.stack(dumps)
            if f.frag == "c":
                fn = mod.get_function(st_name(f, lay))
                r, c = f.rows_cols
                nbytes = r * c * ELEMENT_BITS[f.type] // 8
                o = cp.full(nbytes + 64, 0xEE, dtype=np.uint8)
                fn((1,), (32,), (o,))
                res[st_name(f, lay)] = cp.asnumpy(o)
    for g, al, bl, e in mma_cases():
        name = mma_name(g, al, bl, e)
        ins = mma_inputs(g, al, bl, MMA_TILES, rng)
        fd = FRAGMENTS[("c", g.shape, g.dtype)]
        r, c = fd.rows_cols
        d = cp.full(MMA_TILES * r * c * ELEMENT_BITS[g.dtype] // 8, 0xEE, dtype=np.uint8)
        fn = mod.get_function(name)
        fn((MMA_TILES,), (32,), (cp.asarray(ins["a"]), cp.asarray(ins["b"]), cp.asarray(ins["c"]), d))
        for k, v in ins.items():
            res[f"{name}_{k}"] = v
        res[f"{name}_d"] = cp.asnumpy(d)
    for shape, op in DUP_CASES:
        g = next(g for g in MMA_GEOMS if g.shape == shape and g.atype == "f16" and g.dtype == "f32"
                 and g.ctype == "f32")
        ins = mma_inputs(g, "row", "col", 1, rng)
        for k, v in ins.items():
            res[f"dup_{shape}_{op}_{k}"] = v
        for r in range(8):
            d = cp.full(g_bytes(g), 0xEE, dtype=np.uint8)
            mod.get_function(dup_name(shape, op, r))((1,), (32,), (cp.asarray(ins["a"]), cp.asarray(ins["b"]),
                                                                   cp.asarray(ins["c"]), d))
            res[f"{dup_name(shape, op, r)}_d"] = cp.asnumpy(d)
    cp.cuda.Device().synchronize()
    np.savez_compressed(out_path, **res)
    print(f"wrote {out_path}: {len(res)} arrays")


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1] == "ptx":
        open(sys.argv[2], "w").write(probe_ptx())
    elif sys.argv[1] == "layouts":  # probe.npz -> warpsim/data/wmma_layouts.npz
        np.savez_compressed(sys.argv[3], **layout_from_probe(np.load(sys.argv[2])))
    elif sys.argv[1] == "device":
        run_device(sys.argv[2], sys.argv[3])
