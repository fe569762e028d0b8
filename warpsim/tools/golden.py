"""Golden values: reproducible inputs and simulated outputs of an ``mma.sync`` instruction.

:func:`golden` generates ``batch`` warps of inputs from a seed and runs the instruction on the
chosen architecture model; :func:`write_golden` stores the result as ``.npz`` (numpy), ``.json``
or ``.h`` (a C header a CUDA test can ``#include``), and :func:`read_golden` reads ``.npz`` /
``.json`` back.

Reproducibility: inputs come from ``warpsim.validation.inputs.make_inputs``, a counter-based
generator (splitmix64 in numpy ``uint64`` arithmetic, keyed by a hash of seed, instruction and
distribution), so the same seed gives the same bits on every platform and numpy version.  Block
scale metadata (``.block_scale`` forms) is generated the same way here.  The files contain no
timestamps: two runs with the same arguments write byte-identical files.

Contents (arrays carry a leading batch dimension ``B``):

* ``a_regs``, ``b_regs``, ``c_regs``, ``d_regs``: register words ``(B, 32, nregs)`` (uint32, or
  uint64 for .f64 operands), lane-major as the hardware holds them;
* ``a``, ``b``, ``c``, ``d``: the same data as matrices of values ``(B, rows, cols)`` (float64,
  or int64 for integer types; ``(B, 4, rows, cols)`` for m8n8k4 .f16);
* for ``.block_scale`` forms ``scale_a_regs`` / ``scale_b_regs`` ``(B, 32)`` (selectors byte-id 0,
  thread-id 0) and the scale values ``scale_a`` ``(B, M, V)`` / ``scale_b`` ``(B, V, N)``;
* for sparse ``mma.sp`` forms (``a`` is then the compressed ``(B, M, K/2)``) the metadata words
  ``e_regs`` ``(B, 32)`` (seeded valid index nibbles where the sparsity selector reads, 0
  elsewhere), ``selector`` (a 0-d array) and the logical sparse A ``a_sparse`` ``(B, M, K)``;
* metadata: ``instruction``, ``arch``, ``seed``, ``dist``, ``batch``, ``warpsim_version``,
  ``generator``.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import tokenize
import zipfile
import zlib
from typing import Callable

import numpy as np

from warpsim.tensorcore import blockscale
from warpsim.facts import formats
from warpsim.errors import FileTypeError, PtxError, ShapeError, WarpsimError
from warpsim.tensorcore.execute import CHUNK, mma, resolve_target
from warpsim.facts.isa import Instruction
from warpsim.tensorcore.packing import unpack, unpack_bits
from warpsim.validation.inputs import FLOAT_DISTS as DISTS

__all__ = ["DISTS", "META_KEYS", "golden", "load_npy", "read_golden", "write_golden"]

META_KEYS = ("instruction", "arch", "seed", "dist", "batch", "warpsim_version", "generator")
SUFFIXES = (".npz", ".json", ".h")


def _version() -> str:
    from warpsim._util.version import VERSION as __version__

    return __version__


def _inputs_module():
    from warpsim.validation import inputs

    return inputs


def default_dist(instr: Instruction) -> str:
    """'normal' for floating-point inputs, 'uniform-bits' for integer and b1 inputs."""
    return "normal" if _inputs_module().is_float_type(instr.atype) else "uniform-bits"


def _scale_words(ins: Instruction, dist: str, batch: int, seed: int, start: int = 0) -> dict[str, np.ndarray]:
    """Block-scale metadata words (B, 32): every byte a scale code (moderate powers of two or
    ue4m3 values near 1, or any bits for 'uniform-bits')."""
    inp = _inputs_module()
    out = {}
    for op in ("scale_a", "scale_b"):
        key = inp.stable_key("warpsim-golden-scales", 1, seed, ins.text, dist, op)
        rng = inp.CounterRNG(key, (batch, 32, 4), start)
        if dist == "uniform-bits":
            codes = rng.draw(0) & np.uint64(0xFF)
        elif ins.stype == "ue8m0":
            codes = np.uint64(124) + rng.below(0, 7)  # 2**-3 .. 2**3
        else:  # ue4m3: exponent field 4..10 (2**-3 .. 2**3), random 3-bit fraction
            codes = ((np.uint64(4) + rng.below(0, 7)) << np.uint64(3)) | (rng.draw(1) & np.uint64(7))
        sh = np.arange(4, dtype=np.uint64) * np.uint64(8)
        out[op] = np.bitwise_or.reduce(codes << sh, axis=-1).astype(np.uint32)
    return out


def _metadata_words(ins: Instruction, selector: int, batch: int, seed: int, start: int = 0) -> np.ndarray:
    """Sparsity metadata words (B, 32): a seeded valid nibble wherever ``selector`` reads one."""
    from warpsim.tensorcore import sparse

    inp = _inputs_module()
    rng = inp.CounterRNG(inp.stable_key("warpsim-golden-metadata", 1, seed, ins.text, selector),
                         (batch, 32, 8), start)
    valid = np.array(sparse.valid_nibbles(ins), np.uint64)
    used = sparse.metadata_layout(ins, selector)[..., 0] >= 0  # (32, 8)
    nib = np.where(used, valid[rng.below(0, len(valid)).astype(np.intp)], np.uint64(0))
    return np.bitwise_or.reduce(nib << (np.arange(8, dtype=np.uint64) * np.uint64(4)), axis=-1
                                ).astype(np.uint32)


def _check_fits(ins: Instruction, batch: int) -> None:
    """Refuse a batch whose input and output words alone exceed this machine's memory."""
    import os

    need = batch * 32 * 4 * (sum(ins.regs.values()) + 1)  # a, b, c, d and metadata words
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf: nothing to compare with
        return
    if need > have:
        err = ShapeError(f"batch={batch:,} warps needs at least {need / 2**30:,.1f} GiB for its "
                         f"register words; this machine has {have / 2**30:,.1f} GiB")
        err.batch, err.bytes_needed, err.bytes_available = batch, need, have
        raise err


def golden(instr: Instruction | str, arch: str = "auto", seed: int = 0, dist: str | None = None,
           batch: int = 1, *, selector: int | None = None,
           progress: Callable[[int, int], None] | None = None, executor=None,
           workers: int | None = None) -> dict:
    """Inputs and outputs of ``batch`` warps running ``instr`` on ``arch`` ('exact' allowed).

    ``dist``: 'normal', 'narrow', 'wide', 'uniform-bits', 'special' or 'tiny' (integer types take
    'uniform-bits' and 'special'); None picks 'normal' for float inputs and 'uniform-bits' for
    integer ones.  ``arch="auto"`` picks sm_90 where the instruction is legal there, else the
    first target that accepts it (sm_120a for block scaling), as ``warpsim run`` does; the
    target used is recorded under ``"arch"``.  ``progress(done, total)`` is called after each
    chunk of warps.  ``selector``: the sparsity selector of an ``mma.sp`` form (default 0; the
    metadata words are generated for it).  ``executor`` / ``workers``: generate and run parts
    of the batch on a ``concurrent.futures`` executor ('process': a process pool of
    ``workers``, default all cores; a Dask client's ``get_executor()``), as ``launch`` spreads
    CTAs; the same bits whatever the executor and worker count.  Returns a dict of metadata and
    arrays (see the module docstring).
    """
    ins, arch = resolve_target(instr, arch)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ShapeError(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ShapeError(f"batch must be a positive integer, got {batch!r}")
    seed, batch = int(seed), int(batch)
    _check_fits(ins, batch)
    inp = _inputs_module()
    if dist is None:
        dist = default_dist(ins)
    allowed = inp.distributions_for(ins)
    if dist not in allowed:
        raise PtxError(f"distribution {dist!r} does not apply to .{ins.atype} inputs; "
                       f"choose one of: {', '.join(allowed)}")
    if ins.sparse:
        from warpsim.tensorcore.sparse import check_selector

        selector = check_selector(ins, 0 if selector is None else selector)
    elif selector is not None:
        raise PtxError(f"{ins.text} is not sparse: it takes no sparsity selector")
    if executor is None and workers is None:
        p = _golden_part(ins, arch, dist, seed, selector, 0, batch, progress)
    else:
        parts = inp.spread_ranges(_golden_part, (ins.text, arch, dist, seed, selector), 0, batch,
                                  executor, workers, progress)
        p = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
    regs = {op: p[op] for op in "abc"}
    d = p["d"]
    scales = {k: p[k] for k in ("scale_a", "scale_b") if k in p}
    meta = p.get("e")
    out: dict = {
        "instruction": ins.text, "arch": arch, "seed": seed, "dist": dist, "batch": batch,
        "warpsim_version": _version(),
        "generator": f"warpsim.validation.inputs v{inp.GENERATOR_VERSION}",
    }
    for op, words in (("a", regs["a"]), ("b", regs["b"]), ("c", regs["c"]), ("d", d)):
        out[f"{op}_regs"] = words
        out[op] = unpack(ins, op, words)
    for op, words in scales.items():
        out[f"{op}_regs"] = words
        out[op] = formats.decode(blockscale.gather_scales(ins, words, op, 0, 0), ins.stype)
    if ins.sparse:
        from warpsim.tensorcore.sparse import expand

        out["e_regs"] = meta
        out["selector"] = np.array(selector)
        out["a_sparse"] = expand(ins, out["a"], meta, selector=selector)
    return out


def _golden_part(ins: Instruction | str, arch: str, dist: str, seed: int, selector: int | None,
                 start: int, count: int, progress=None) -> dict:
    """Register words of warps start .. start + count - 1 of a golden sweep: inputs 'a', 'b',
    'c' (and 'scale_a' / 'scale_b', 'e') and the results 'd'.  ``ins`` travels to workers as
    text (decoded for ``arch``)."""
    if isinstance(ins, str):
        ins, _ = resolve_target(ins, None if arch == "exact" else arch)
    inp = _inputs_module()
    out = inp.make_inputs(ins, dist, count, seed, start=start)
    if ins.block_scale:
        out.update(_scale_words(ins, dist, count, seed, start))
    if ins.sparse:
        out["e"] = _metadata_words(ins, selector, count, seed, start)
    d = np.empty((count, 32, ins.regs["d"]), np.uint64 if ins.dtype == "f64" else np.uint32)
    for s in range(0, count, CHUNK):
        e = min(count, s + CHUNK)
        kw = {k: out[k][s:e] for k in ("scale_a", "scale_b") if k in out}
        if ins.sparse:
            kw.update(metadata=out["e"][s:e], selector=selector)
        d[s:e] = mma(ins, out["a"][s:e], out["b"][s:e], out["c"][s:e], arch=arch, **kw)
        if progress is not None:
            progress(e, count)
    out["d"] = d
    return out


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _arrays(data: dict) -> list[tuple[str, np.ndarray]]:
    return [(k, np.asarray(v)) for k, v in data.items() if k not in META_KEYS]


def _check(data: dict) -> None:
    """Refuse anything but golden data, before a byte is written."""
    if not isinstance(data, dict):
        raise TypeError(f"write_golden takes the dict that golden() returns, got {type(data).__name__}")
    missing = [k for k in META_KEYS if k not in data]
    if missing or "a_regs" not in data:
        raise ShapeError(f"not golden data (missing {', '.join(missing or ['a_regs'])}); make it with golden()")
    for k in META_KEYS:
        v = data[k]
        ok = (isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 0
              if k in ("seed", "batch") else isinstance(v, str))
        if not ok:
            want = "a non-negative integer" if k in ("seed", "batch") else "a string"
            raise ShapeError(f"not golden data: {k} must be {want}, got {v!r}")
    for k, v in data.items():
        if k in META_KEYS:
            continue
        arr = np.asarray(v) if isinstance(v, np.ndarray) else None
        if arr is None or arr.dtype.kind not in "biuf":
            raise ShapeError(f"not golden data: {k!r} must be a numeric array, got "
                             f"{type(v).__name__}{'' if arr is None else ' of ' + str(arr.dtype)}")


def _npz_bytes(data: dict) -> bytes:
    """An .npz archive with fixed timestamps (np.savez stamps the current time)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        items = [(k, np.asarray(data[k])) for k in META_KEYS] + _arrays(data)
        for name, arr in items:
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            b = io.BytesIO()
            np.lib.format.write_array(b, np.array(arr, order="C"), allow_pickle=False)
            with zf.open(info, "w", force_zip64=True) as f:
                f.write(b.getvalue())
    return buf.getvalue()


def _json_value(x: float):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _json_text(data: dict) -> str:
    """Metadata one key a line, then each array on one line: {"dtype", "shape", "data"}.

    Floats are written exactly (shortest round-trip repr); NaN and infinities as the strings
    "nan", "inf", "-inf" (JSON has no literal for them)."""
    meta = {k: data[k] for k in META_KEYS}
    meta["seed"], meta["batch"] = int(meta["seed"]), int(meta["batch"])
    parts = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in meta.items()]
    arrays = []
    for k, a in _arrays(data):
        if a.dtype.kind == "f":
            vals = [_json_value(float(x)) for x in a.ravel().tolist()]
        else:
            vals = [int(x) for x in a.ravel().tolist()]
        spec = {"dtype": a.dtype.str.lstrip("<>|="), "shape": list(a.shape), "data": vals}
        arrays.append(f"  {json.dumps(k)}: {json.dumps(spec, separators=(',', ':'))}")
    parts.append(' "arrays": {\n' + ",\n".join(arrays) + "\n }")
    return "{\n" + ",\n".join(parts) + "\n}\n"


_CTYPE = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}


def _c_array(name: str, arr: np.ndarray, ctype: str, per_line: int) -> str:
    """A fully braced C initializer (one brace level per dimension: no -Wmissing-braces)."""
    dims = "".join(f"[{n}]" for n in arr.shape)
    suffix = "ULL" if ctype == "uint64_t" else ("u" if ctype == "uint32_t" else "")
    digits = {"uint8_t": 2, "uint16_t": 4, "uint32_t": 8, "uint64_t": 16}[ctype]

    def body(a: np.ndarray, indent: int) -> list[str]:
        pad = "  " * indent
        if a.ndim == 1:
            vals = [f"0x{v:0{digits}x}{suffix}" for v in a.tolist()]
            rows = [", ".join(vals[i:i + per_line]) for i in range(0, len(vals), per_line)]
            if len(rows) == 1:
                return [pad + "{" + rows[0] + "}"]
            return [pad + "{"] + [pad + "  " + r + "," for r in rows] + [pad + "}"]
        out = [pad + "{"]
        for i, sub in enumerate(a):
            lines = body(sub, indent + 1)
            if i < len(a) - 1:
                lines[-1] += ","
            out += lines
        return out + [pad + "}"]

    lines = body(arr, 0)
    lines[0] = f"static const {ctype} {name}{dims} = " + lines[0].lstrip()
    return "\n".join(lines) + ";\n"


def _header_text(data: dict, prefix: str) -> str:
    from warpsim.tensorcore.decode import as_instruction

    ins = as_instruction(data["instruction"])
    m, n, k = ins.shape
    B = int(data["batch"])
    P = prefix.upper()
    guard = f"WARPSIM_{P}_H"
    lines = [
        f"/* Golden values for {data['instruction']}",
        f" * generated by warpsim {data['warpsim_version']} ({data['generator']})",
        f" * arch {data['arch']}, seed {data['seed']}, dist {data['dist']}, batch {B} warp(s).",
        " *",
        f" * {prefix}_<op>_regs[warp][lane][register]: the .b32 (.b64 for .f64) register words each lane",
        " *   passes to / gets from mma.sync, in operand order (d0, d1, ...).",
        f" * {prefix}_<op>_bits[warp][row][col]: the same elements as a matrix of raw element bit patterns",
        " *   (A is M x K, B is K x N, C and D are M x N; m8n8k4 .f16: [warp][product][row][col]).",
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        f'#define {P}_INSTRUCTION "{data["instruction"]}"',
        f'#define {P}_ARCH "{data["arch"]}"',
        f"#define {P}_SEED {int(data['seed'])}",
        f"#define {P}_BATCH {B}",
        f"#define {P}_M {m}",
        f"#define {P}_N {n}",
        f"#define {P}_K {k}",
    ]
    for op in "abcd":
        lines.append(f"#define {P}_{op.upper()}_REGS {ins.regs[op]}  /* registers per lane, .{ins.type_of(op)} */")
    if ins.block_scale:
        lines.append(f"/* {prefix}_scale_a_regs / {prefix}_scale_b_regs: the .b32 scale metadata per lane, for "
                     f"byte-id-a = thread-id-a = byte-id-b = thread-id-b = 0 (.{ins.stype}, "
                     f".scale_vec::{ins.scale_vec}X). */")
    if ins.sparse:
        sel = np.asarray(data.get("selector", -1))
        if "e_regs" not in data or sel.shape != () or sel.dtype.kind not in "iu" or sel < 0:
            raise ShapeError(f"not golden data for sparse {ins.text}: it needs e_regs and selector (a "
                             "non-negative integer); make it with golden()")
        lines.append(f"#define {P}_SELECTOR {int(data['selector'])}  /* sparsity selector (the f operand) */")
        lines.append(f"/* {prefix}_e_regs: the .b32 sparsity metadata per lane (the e operand); A is the "
                     f"compressed {m} x {k // 2} matrix. */")
    lines.append("")
    body = []
    for op in ("a", "b", "c", "d", "scale_a", "scale_b", "e"):
        key = f"{op}_regs"
        if key not in data:
            continue
        words = np.asarray(data[key])
        body.append(_c_array(f"{prefix}_{op}_regs", words, _CTYPE[words.dtype.itemsize], 4 if words.dtype.itemsize == 8 else 8))
        if op in "abcd" and len(op) == 1:
            bits = unpack_bits(ins, op, words)
            body.append(_c_array(f"{prefix}_{op}_bits", bits, _CTYPE[bits.dtype.itemsize], 8 if bits.dtype.itemsize >= 4 else 16))
    return "\n".join(lines) + "\n" + "\n".join(body) + f"\n#endif  /* {guard} */\n"


def write_golden(data: dict, path: str | os.PathLike, *, prefix: str | None = None) -> str:
    """Write golden data to ``path``; the suffix picks the format (.npz, .json, .h).

    For .h, C names start with ``prefix`` (default: the file name, e.g. ``golden_f16.h`` ->
    ``golden_f16_a_regs``, macro ``GOLDEN_F16_INSTRUCTION``), so several headers can be included
    together.  Returns the path written.  The output depends only on ``data`` (no timestamps).
    """
    _check(data)
    p = os.fspath(path)
    suffix = os.path.splitext(p)[1].lower()
    if suffix == ".npz":
        payload: bytes = _npz_bytes(data)
    elif suffix == ".json":
        payload = _json_text(data).encode()
    elif suffix == ".h":
        if prefix is None:
            prefix = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(os.path.basename(p))[0]).lower()
            if not prefix or prefix[0].isdigit():
                prefix = "golden_" + prefix
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix):
            raise ShapeError(f"prefix {prefix!r} is not a C identifier")
        payload = _header_text(data, prefix).encode()
    else:
        raise FileTypeError(f"cannot tell the output format of {p!r}: use a file name ending in "
                            f"{', '.join(SUFFIXES)}").at(path=p)
    with open(p, "wb") as f:
        f.write(payload)
    return p


def read_golden(path: str | os.PathLike) -> dict:
    """Read a .npz or .json file written by :func:`write_golden` (arrays with their dtypes).

    A file that is not golden data (truncated, corrupted, another format, pickled objects, a .h
    header) is a :class:`~warpsim.errors.FileTypeError` naming the path; a missing path or a directory is the
    ``OSError`` that opening it raises (FileNotFoundError, IsADirectoryError, ...).
    """
    p = os.fspath(path)
    if not isinstance(p, str):
        raise TypeError(f"read_golden takes a path of text, got {type(path).__name__}")
    suffix = os.path.splitext(p)[1].lower()
    if suffix not in (".npz", ".json"):
        raise FileTypeError(f"read_golden reads .npz and .json files, not {p!r}"
                            + (" (a C header is for the device side: read the .npz or .json "
                               "written beside it)" if suffix == ".h" else "")).at(path=p)
    with open(p, "rb") as f:
        raw = f.read()
    try:
        out = _from_npz(raw) if suffix == ".npz" else _from_json(raw)
        missing = [k for k in META_KEYS + ("a_regs",) if k not in out]
        if missing:
            raise WarpsimError(f"missing {', '.join(missing)}")
        for k in ("seed", "batch"):
            if isinstance(out[k], bool) or not isinstance(out[k], (int, np.integer)):
                raise WarpsimError(f"{k} is {out[k]!r}, not an integer")
            out[k] = int(out[k])
        return out
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, EOFError, SyntaxError,
            tokenize.TokenError, zipfile.BadZipFile, zlib.error) as e:
        why = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        raise FileTypeError(f"{p!r} is not a golden {suffix} file written by write_golden: "
                            f"{why}").at(path=p) from None


#: dtype kinds a golden array may have: numbers and text (no objects, no pickles).
_ARRAY_KINDS = "buifU"


def _npy_from(f, size: int, name: str) -> np.ndarray:
    """One .npy array from stream ``f`` of ``size`` bytes: numbers only (no pickles), and the
    header's shape checked against the bytes there are before anything is allocated."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    try:
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            raise WarpsimError(f"{name} has .npy format version {version}")
    except (SyntaxError, tokenize.TokenError) as e:  # numpy's fallback header parser lets these out
        raise WarpsimError(f"{name} has a corrupted header ({type(e).__name__})") from None
    if dtype.hasobject or dtype.kind not in _ARRAY_KINDS:
        raise WarpsimError(f"{name} holds {dtype} data, not numbers")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > size:
        raise WarpsimError(f"{name} claims shape {shape} ({nbytes} bytes) in {size} bytes")
    data = f.read(nbytes + 1)
    if len(data) != nbytes:
        raise WarpsimError(f"{name} holds {len(data)} data bytes; its shape {shape} needs {nbytes}")
    arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return np.array(arr)


def load_npy(raw: bytes, name: str = "the file") -> np.ndarray:
    """The array in the bytes of a .npy file, or WarpsimError (never a pickle, never an
    allocation larger than the file)."""
    try:
        return _npy_from(io.BytesIO(raw), len(raw), name)
    except WarpsimError:
        raise
    except (ValueError, TypeError, OverflowError, EOFError) as e:
        why = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        raise WarpsimError(f"{name}: {why}") from None


def _from_npz(raw: bytes) -> dict:
    """The arrays of an .npz archive, read with :func:`_npy_from`."""
    out: dict = {}
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.endswith(".npy"):
                raise WarpsimError(f"archive member {name!r} is not a .npy array")
            with zf.open(info) as f:
                arr = _npy_from(f, info.file_size, f"member {name!r}")
            key = name[:-4]
            out[key] = arr.item() if key in META_KEYS else arr
    return out


def _from_json(raw: bytes) -> dict:
    doc = json.loads(raw.decode("utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("arrays"), dict):
        raise WarpsimError("no 'arrays' object at the top level")
    out = {k: doc[k] for k in META_KEYS if k in doc}
    for k, spec in doc["arrays"].items():
        if not isinstance(spec, dict) or not {"dtype", "shape", "data"} <= spec.keys():
            raise WarpsimError(f"array {k!r} is not a {{dtype, shape, data}} object")
        dt = np.dtype(spec["dtype"])
        shape, vals = spec["shape"], spec["data"]
        if dt.hasobject or dt.kind not in _ARRAY_KINDS:
            raise WarpsimError(f"array {k!r} has dtype {dt}, not a number type")
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool)
                                                  and n >= 0 for n in shape):
            raise WarpsimError(f"array {k!r} has shape {shape!r}, not a list of sizes")
        if not isinstance(vals, list) or len(vals) != math.prod(shape):
            raise WarpsimError(f"array {k!r} of shape {shape} needs {math.prod(shape)} values")
        if dt.kind == "f":
            vals = [float(v) for v in vals]  # 'nan', 'inf', '-inf' strings parse too
        elif not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            raise WarpsimError(f"array {k!r} of dtype {dt} holds values that are not integers")
        out[k] = np.array(vals, dtype=dt).reshape(shape)
    return out
