"""Cross-check warpsim against MMA-Sim 2.1.1 (arXiv 2511.10909) where both model an instruction.

MMA-Sim is an independent, hardware-validated model of the tensor-core arithmetic of seven
NVIDIA architectures.  For architectures with no GPU here it is the best second opinion we have.
This module is skipped unless ``mmasim`` (and therefore torch) is installed; neither is a
dependency of warpsim.  To run it::

    pip install torch==2.13.0          # a CPU build; install it before mmasim
    pip install mmasim==2.1.1
    PYTHONPATH=. pytest tests/test_mmasim_crosscheck.py
    PYTHONPATH=. python tests/test_mmasim_crosscheck.py     # agreement table + decoded examples

Both sides get the *same bit patterns*: warpsim through its register path
(``pack_bits`` -> ``mma`` -> ``unpack_bits``), MMA-Sim through torch tensors viewing the same
bits (fp6/fp4 as MMA-Sim's uint8 containers).  Results are compared as bit patterns; two NaNs
count as equal whatever their payload.  MMA-Sim's batched ``dpa`` entry point is used so that a
whole batch of tiles runs in one call (``__call__`` is the same computation for one tile; a test
checks that).

Input families per operand type (all drawn from fixed seeds):

normal    values ~ N(0, 1) rounded to the type
wide      exponents uniform over the whole range of the type, subnormals included, 10% zeros;
          C near the magnitude of the products (x 2**[-30, 30]) or, 1 in 5, anywhere
cancel    half of the k terms mirror the other half with the sign flipped (a quarter of them
          perturbed by one ulp), C = -(sum of products) rounded to C's type
sparse    70% zeros, the rest tiny (subnormal-range) values; C zero or tiny: the e_zero rule
specials  normal values with ~4% replaced by +-0, +-Inf, NaN, +-max, +-min subnormal
overflow  values near the largest finite ones; C near its type's largest finite value

``WARPSIM_XCHECK_TILES`` (default 16) sets the tiles per family and case.
"""

from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

mmasim = pytest.importorskip("mmasim")
torch = pytest.importorskip("torch")
from mmasim.nv_ptx import MMA, MMABlockScale  # noqa: E402

torch.set_num_threads(1)  # tiny tensors: threads only add spin-wait on a shared 2-core machine
from mmasim.nv_ptx import isa_mma  # noqa: E402

from warpsim.tensorcore import blockscale
from warpsim.facts import formats  # noqa: E402
from warpsim.tensorcore.execute import mma as ws_mma  # noqa: E402
from warpsim.facts.isa import iter_instructions  # noqa: E402
from warpsim.tensorcore.packing import pack_bits, unpack_bits  # noqa: E402

#: MMA-Sim architecture name -> the warpsim target whose model simulates it.
ARCH_MAP = {
    "Volta": "sm_70",
    "Turing": "sm_75",
    "Ampere": "sm_80",
    "Ada Lovelace": "sm_89",
    "Hopper": "sm_90",
    "Blackwell": "sm_100a",
    "RTX Blackwell": "sm_120a",
}

FAMILIES = ("normal", "wide", "cancel", "sparse", "specials", "overflow")
TILES = int(os.environ.get("WARPSIM_XCHECK_TILES", "16"))

_TORCH_FLOAT = {
    "f64": (torch.float64, np.int64), "f32": (torch.float32, np.int32),
    "tf32": (torch.float32, np.int32), "f16": (torch.float16, np.int16),
    "bf16": (torch.bfloat16, np.int16), "e4m3": (torch.float8_e4m3fn, np.uint8),
    "e5m2": (torch.float8_e5m2, np.uint8), "ue8m0": (torch.float8_e8m0fnu, np.uint8),
    "ue4m3": (torch.float8_e4m3fn, np.uint8),
}
_CODE_DT = {64: np.uint64, 32: np.uint32, 16: np.uint16, 8: np.uint8, 6: np.uint8, 4: np.uint8}


# --------------------------------------------------------------------------------------------
# Which (arch, instruction) pairs both simulators model
# --------------------------------------------------------------------------------------------


def mmasim_name(ins) -> str:
    """The MMA-Sim shape_and_type string of a warpsim Instruction."""
    m, n, k = ins.shape
    s = f"m{m}n{n}k{k}"
    if ins.block_scale:
        return f"{s}.kind::{ins.kind}.block{k // ins.scale_vec}.{ins.dtype}.{ins.atype}.{ins.btype}.{ins.ctype}.{ins.stype}"
    if ins.kind:
        s += f".kind::{ins.kind}"
    return f"{s}.{ins.dtype}.{ins.atype}.{ins.btype}.{ins.ctype}"


def common_cases() -> list[tuple[str, str, object]]:
    """[(mmasim arch, mmasim name, warpsim Instruction)] modelled by both, one layout each."""
    out = []
    for march, sm in ARCH_MAP.items():
        sim_names = set(isa_mma.mma_shape_and_type.get(march, ()))
        sim_names |= set(isa_mma.mma_block_scale_shape_and_type.get(march, ()))
        seen = {}
        for ins in iter_instructions(sm):
            if ins.satfinite or ins.bitop or ins.rounding or ins.dtype == "s32":
                continue
            name = mmasim_name(ins)
            if name not in sim_names:
                continue
            prev = seen.get(name)
            if prev is None or ((ins.alayout, ins.blayout) == ("row", "col")):
                seen[name] = ins
        out += [(march, name, ins) for name, ins in seen.items()]
    return out


def coverage() -> tuple[list[str], list[str]]:
    """(modelled by MMA-Sim only, modelled by warpsim only) per architecture, as strings."""
    only_sim, only_ws = [], []
    for march, sm in ARCH_MAP.items():
        sim_names = set(isa_mma.mma_shape_and_type.get(march, ()))
        sim_names |= set(isa_mma.mma_block_scale_shape_and_type.get(march, ()))
        ws_names = {mmasim_name(i) for i in iter_instructions(sm)
                    if not (i.satfinite or i.bitop or i.rounding or i.dtype == "s32")}
        only_sim += [f"{sm} ({march}): {x}" for x in sorted(sim_names - ws_names)]
        only_ws += [f"{sm} ({march}): {x}" for x in sorted(ws_names - sim_names)]
    return only_sim, only_ws


# --------------------------------------------------------------------------------------------
# Input generation (bit patterns)
# --------------------------------------------------------------------------------------------


def _fmt(t: str):
    return formats.FORMATS[t]


def _max_mag_code(t: str) -> int:
    """Largest magnitude code of a finite value (sign bit clear)."""
    f = _fmt(t)
    if t == "ue8m0":
        return 0xFE
    if t == "ue4m3":
        return 0x7E
    top = (1 << (f.bits - 1)) - 1
    if t in ("tf32",):
        return 0x7F7FE000
    if f.has_inf:
        return ((1 << f.exp_bits) - 2) << f.man_bits | ((1 << f.man_bits) - 1)
    if f.has_nan:  # e4m3: only S.1111.111 is NaN
        return top - 1
    return top


def _compose(t: str, sign, efield, mant) -> np.ndarray:
    f = _fmt(t)
    dt = _CODE_DT[f.bits]
    if t == "tf32":
        mant = mant.astype(np.uint64) << np.uint64(13)
        man_bits = 23
    else:
        man_bits = f.man_bits
    c = (sign.astype(np.uint64) << np.uint64(f.bits - 1)) | (efield.astype(np.uint64) << np.uint64(man_bits)) \
        | mant.astype(np.uint64)
    return c.astype(dt)


def _clip_finite(t: str, codes: np.ndarray) -> np.ndarray:
    f = _fmt(t)
    signbit = np.uint64(1) << np.uint64(f.bits - 1)
    c = codes.astype(np.uint64)
    mag = np.minimum(c & (signbit - np.uint64(1)), np.uint64(_max_mag_code(t)))
    return ((c & signbit) | mag).astype(codes.dtype)


def encode(values, t: str) -> np.ndarray:
    return formats.encode(np.asarray(values, np.float64), t).astype(_CODE_DT[_fmt(t).bits])


def decode(codes, t: str) -> np.ndarray:
    return formats.decode(codes, t)


def gen_wide(rng, t: str, shape, zero_p=0.1) -> np.ndarray:
    f = _fmt(t)
    man_bits = f.man_bits
    top_e = (_max_mag_code(t) >> (man_bits + (13 if t == "tf32" else 0)))
    sign = rng.integers(0, 2, shape)
    efield = rng.integers(0, top_e + 1, shape)
    mant = rng.integers(0, 1 << man_bits, shape, dtype=np.uint64)
    c = _clip_finite(t, _compose(t, sign, efield, mant))
    if zero_p:
        c = np.where(rng.random(shape) < zero_p, np.zeros_like(c), c)
    return c


def gen_normal(rng, t: str, shape) -> np.ndarray:
    return _clip_finite(t, encode(rng.standard_normal(shape), t))


def gen_tiny(rng, t: str, shape) -> np.ndarray:
    """Subnormals and the smallest normals of the type."""
    f = _fmt(t)
    sign = rng.integers(0, 2, shape)
    efield = rng.integers(0, 3, shape)
    mant = rng.integers(0, 1 << f.man_bits, shape, dtype=np.uint64)
    return _compose(t, sign, efield, mant)


def gen_big(rng, t: str, shape) -> np.ndarray:
    f = _fmt(t)
    top = _max_mag_code(t)
    mag = np.uint64(top) - rng.integers(0, max(2, (1 << (f.man_bits + (13 if t == "tf32" else 0))) * 2),
                                        shape).astype(np.uint64)
    if t == "tf32":
        mag &= np.uint64(0xFFFFE000)
    sign = rng.integers(0, 2, shape).astype(np.uint64) << np.uint64(f.bits - 1)
    return (sign | mag).astype(_CODE_DT[f.bits])


def special_codes(t: str) -> list[int]:
    f = _fmt(t)
    sb = 1 << (f.bits - 1)
    top = _max_mag_code(t)
    out = [0, sb, top, sb | top, 1 << (13 if t == "tf32" else 0), sb | (1 << (13 if t == "tf32" else 0))]
    if f.has_inf:
        inf = ((1 << f.exp_bits) - 1) << (f.man_bits + (13 if t == "tf32" else 0))
        out += [inf, sb | inf]
    if f.has_nan:
        out += [f.canonical_nan, sb | f.canonical_nan]
    return out


def sprinkle_specials(rng, t: str, codes: np.ndarray, p=0.04) -> np.ndarray:
    sp = np.array(special_codes(t), dtype=np.uint64).astype(codes.dtype)
    pick = sp[rng.integers(0, sp.size, codes.shape)]
    return np.where(rng.random(codes.shape) < p, pick, codes)


def gen_scale(rng, st: str, shape, family: str) -> np.ndarray:
    if st == "ue8m0":
        if family == "wide":
            c = rng.integers(0, 255, shape)
        elif family == "sparse":
            c = rng.integers(0, 20, shape)
        elif family == "overflow":
            c = rng.integers(230, 255, shape)
        else:
            c = rng.integers(120, 135, shape)
        if family == "specials":
            c = np.where(rng.random(shape) < 0.03, 255, c)
        return c.astype(np.uint8)
    # ue4m3: bit 7 is ignored by both (random here); 0x7F is NaN
    c = rng.integers(0, 0x7F, shape)
    if family in ("normal", "cancel"):
        c = rng.integers(0x30, 0x48, shape)
    if family == "specials":
        c = np.where(rng.random(shape) < 0.03, 0x7F, c)
    c |= rng.integers(0, 2, shape) << 7
    return c.astype(np.uint8)


def mirror_cancel(rng, t: str, a: np.ndarray, b: np.ndarray, k_axis_a=-1, k_axis_b=-2):
    """Make the second half of k mirror the first half (sign of b flipped), some off by 1 ulp."""
    K = a.shape[-1]
    h = K // 2
    f = _fmt(t)
    sb = np.uint64(1) << np.uint64(f.bits - 1)
    a = a.copy()
    b = b.copy()
    a[..., h:2 * h] = a[..., :h]
    bb = b[..., :h, :].astype(np.uint64) ^ sb
    b[..., h:2 * h, :] = bb.astype(b.dtype)
    one = np.uint64(1 << 13) if t == "tf32" else np.uint64(1)
    pert = rng.random(a[..., h:2 * h].shape) < 0.25
    up = rng.random(pert.shape) < 0.5
    aa = a[..., h:2 * h].astype(np.uint64)
    aa = np.where(pert & up, aa + one, np.where(pert & ~up & (aa & (sb - np.uint64(1)) >= one), aa - one, aa))
    a[..., h:2 * h] = _clip_finite(t, aa.astype(a.dtype))
    return a, b


@dataclass
class Inputs:
    a: np.ndarray  # codes (n, [4,] M, K)
    b: np.ndarray  # codes (n, [4,] K, N)
    c: np.ndarray  # codes (n, [4,] M, N)
    sa: np.ndarray | None = None  # scale codes (n, M, V)
    sb: np.ndarray | None = None  # scale codes (n, V, N)
    family: np.ndarray = field(default_factory=lambda: np.zeros(0))  # family index per tile


def gen_inputs(ins, family: str, n: int, seed: int) -> Inputs:
    with np.errstate(all="ignore"):  # huge products in 'wide' / 'overflow' are intended
        return _gen_inputs(ins, family, n, seed)


def _gen_inputs(ins, family: str, n: int, seed: int) -> Inputs:
    rng = np.random.default_rng(seed)
    m, nn, k = ins.shape
    lead = (n, 4) if ins.quadpair else (n,)
    sa_shape = sb_shape = None
    if ins.block_scale:
        sa_shape, sb_shape = (n, m, ins.scale_vec), (n, ins.scale_vec, nn)
    at, bt, ct = ins.atype, ins.btype, ins.ctype
    sa = sb = None
    if family == "normal" or family == "specials" or family == "cancel":
        a = gen_normal(rng, at, lead + (m, k))
        b = gen_normal(rng, bt, lead + (k, nn))
        c = gen_normal(rng, ct, lead + (m, nn))
    elif family == "wide":
        a = gen_wide(rng, at, lead + (m, k))
        b = gen_wide(rng, bt, lead + (k, nn))
        c = None
    elif family == "sparse":
        a = np.where(rng.random(lead + (m, k)) < 0.7, 0, gen_tiny(rng, at, lead + (m, k))).astype(_CODE_DT[_fmt(at).bits])
        b = np.where(rng.random(lead + (k, nn)) < 0.7, 0, gen_tiny(rng, bt, lead + (k, nn))).astype(_CODE_DT[_fmt(bt).bits])
        c = np.where(rng.random(lead + (m, nn)) < 0.5, 0, gen_tiny(rng, ct, lead + (m, nn))).astype(_CODE_DT[_fmt(ct).bits])
        # signed zeros: half of the zero entries are -0 (every term -0 in some outputs)
        for name_, t_ in (("a", at), ("b", bt), ("c", ct)):
            v = {"a": a, "b": b, "c": c}[name_]
            neg = (v == 0) & (rng.random(v.shape) < 0.5)
            if t_ not in ("ue8m0", "ue4m3"):
                v = np.where(neg, v.dtype.type(1 << (_fmt(t_).bits - 1)), v)
            if name_ == "a":
                a = v
            elif name_ == "b":
                b = v
            else:
                c = v
    elif family == "overflow":
        a = gen_big(rng, at, lead + (m, k))
        b = gen_big(rng, bt, lead + (k, nn))
        c = gen_big(rng, ct, lead + (m, nn))
        c = np.where(rng.random(c.shape) < 0.5, c, gen_normal(rng, ct, c.shape))
    else:
        raise ValueError(family)
    if ins.block_scale:
        sa = gen_scale(rng, ins.stype, sa_shape, family)
        sb = gen_scale(rng, ins.stype, sb_shape, family)
    if family == "cancel":
        if at == bt:
            a, b = mirror_cancel(rng, at, a, b)
        else:  # mirror only the sign of b: a and b types differ, so pair terms by position
            f = _fmt(bt)
            h = k // 2
            a = a.copy()
            b = b.copy()
            a[..., h:] = a[..., :h]
            b[..., h:, :] = (b[..., :h, :].astype(np.uint64) ^ (np.uint64(1) << np.uint64(f.bits - 1))).astype(b.dtype)
            flip = rng.random(b[..., h:, :].shape) < 0.25  # perturb: take a fresh value
            b[..., h:, :] = np.where(flip, gen_normal(rng, bt, flip.shape), b[..., h:, :])
    if c is None or family == "cancel":
        A, B = decode(a, at), decode(b, bt)
        if ins.block_scale:
            sak, sbk = blockscale.expand(ins, decode(sa, ins.stype), decode(sb, ins.stype))
            A, B = A * sak, B * sbk
        with np.errstate(all="ignore"):
            prod = np.nan_to_num(A @ B, nan=0.0, posinf=0.0, neginf=0.0)
        if family == "cancel":
            c = encode(-prod, ct)
        else:  # wide: C near the products' magnitude, 1 in 5 anywhere in the type's range
            u = rng.integers(-30, 31, prod.shape)
            near = encode(np.ldexp(np.where(prod == 0, 1.0, prod), u) * rng.choice([-1, 1], prod.shape), ct)
            c = np.where(rng.random(prod.shape) < 0.2, gen_wide(rng, ct, prod.shape), near)
            c = _clip_finite(ct, c.astype(_CODE_DT[_fmt(ct).bits]))
    if family == "specials":
        a = sprinkle_specials(rng, at, a)
        b = sprinkle_specials(rng, bt, b)
        c = sprinkle_specials(rng, ct, c)
    if at == "tf32" and family in ("normal", "wide"):  # low 13 bits: ignored by both
        a = a | rng.integers(0, 1 << 13, a.shape).astype(a.dtype)
    return Inputs(a, b, c.astype(_CODE_DT[_fmt(ct).bits]), sa, sb)


# --------------------------------------------------------------------------------------------
# Running both simulators
# --------------------------------------------------------------------------------------------


def run_warpsim(ins, arch: str, x: Inputs) -> np.ndarray:
    wa, wb, wc = (pack_bits(ins, op, v) for op, v in zip("abc", (x.a, x.b, x.c)))
    kw = {}
    if ins.block_scale:
        kw = dict(scale_a=blockscale.scatter_scales(ins, x.sa, "scale_a"),
                  scale_b=blockscale.scatter_scales(ins, x.sb, "scale_b"))
    d = ws_mma(ins, wa, wb, wc, arch=arch, **kw)
    return unpack_bits(ins, "d", d)


def _to_torch(codes: np.ndarray, t: str, packed_fp4: bool = False):
    if t in _TORCH_FLOAT:
        tdt, ndt = _TORCH_FLOAT[t]
        arr = np.ascontiguousarray(codes.astype(np.uint64).astype(np.dtype(ndt).str.replace("i", "u")).view(ndt))
        return torch.from_numpy(arr).view(tdt)
    # fp6 / fp4: MMA-Sim's uint8 containers
    c = codes.astype(np.uint8)
    if packed_fp4:  # mxf4 / mxf4nvf4: two per byte, even k in the high nibble
        c = (c[..., 0::2] << 4) | c[..., 1::2]
    elif t == "e2m1":
        c = c << 2  # f8f6f4 kinds: fp4 in bits 5:2
    return torch.from_numpy(np.ascontiguousarray(c))


def _from_torch(t: torch.Tensor, d: str) -> np.ndarray:
    ndt = {"f32": np.uint32, "f16": np.uint16, "f64": np.uint64}[d]
    it = {"f32": torch.int32, "f16": torch.int16, "f64": torch.int64}[d]
    return t.contiguous().view(it).numpy().view(ndt)


def run_mmasim(march: str, name: str, ins, x: Inputs) -> np.ndarray:
    """MMA-Sim on every tile of the batch in one ``dpa`` call: vectors (..., M, N, K)."""
    packed = ins.kind in ("mxf4", "mxf4nvf4")
    A = _to_torch(x.a, ins.atype, packed)
    B = _to_torch(np.swapaxes(x.b, -1, -2), ins.btype, packed)  # (..., N, K)
    C = _to_torch(x.c, ins.ctype)
    M, N = ins.m, ins.n
    av = A[..., :, None, :].expand(*A.shape[:-2], M, N, A.shape[-1])
    bv = B[..., None, :, :].expand(*B.shape[:-2], M, N, B.shape[-1])
    if ins.block_scale:
        op = MMABlockScale(march, name)
        SA = _to_torch(x.sa, ins.stype)  # (n, M, V)
        SB = _to_torch(np.swapaxes(x.sb, -1, -2), ins.stype)  # (n, N, V)
        sav = SA[..., :, None, :].expand(SA.shape[0], M, N, SA.shape[-1])
        sbv = SB[..., None, :, :].expand(SB.shape[0], M, N, SB.shape[-1])
        d = op.dpa(av, bv, C, sav, sbv)
    else:
        op = MMA(march, name)
        d = op.dpa(av, bv, C)
    return _from_torch(d, ins.dtype)


def nan_mask(codes: np.ndarray, d: str) -> np.ndarray:
    return np.isnan(decode(codes, d))


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    arch: str
    name: str
    ins: object
    compared: int = 0
    mismatches: int = 0
    by_family: dict = field(default_factory=dict)
    examples: list = field(default_factory=list)  # (family, description)


def _hex(code, t) -> str:
    w = {"f64": 16, "f32": 8, "tf32": 8, "f16": 4, "bf16": 4}.get(t, 2)
    return f"0x{int(code):0{w}x}"


def _val(code, t) -> str:
    v = float(decode(np.array([code]), t)[0])
    return repr(v) if not (v != 0 and abs(v) < 1e-4) and abs(v) < 1e6 else f"{v:.6e}"


def describe(ins, x: Inputs, idx: tuple, ws_code, sim_code) -> str:
    """The inputs of one output element and both results, decoded."""
    tile = idx[:-2]
    i, j = idx[-2:]
    a = x.a[tile][i, :]
    b = x.b[tile][:, j]
    c = x.c[tile][i, j]
    at, bt, ct, dt = ins.atype, ins.btype, ins.ctype, ins.dtype
    lines = [f"  D[{i},{j}]: warpsim {_hex(ws_code, dt)} ({_val(ws_code, dt)})  "
             f"MMA-Sim {_hex(sim_code, dt)} ({_val(sim_code, dt)})",
             f"    c = {_hex(c, ct)} ({_val(c, ct)})"]
    terms = []
    for kk in range(a.size):
        if decode(np.array([a[kk]]), at)[0] != 0 and decode(np.array([b[kk]]), bt)[0] != 0:
            terms.append(f"k{kk}: {_hex(a[kk], at)}*{_hex(b[kk], bt)} ({_val(a[kk], at)}*{_val(b[kk], bt)})")
    if ins.block_scale:
        sa = x.sa[tile][i, :]
        sb = x.sb[tile][:, j]
        lines.append(f"    scale_a row = {[_hex(s, ins.stype) for s in sa]}, "
                     f"scale_b col = {[_hex(s, ins.stype) for s in sb]}")
    lines.append(f"    non-zero a*b terms ({len(terms)} of {a.size}): " + "; ".join(terms))
    return "\n".join(lines)


def mismatch_kind(ws, sim, dt) -> str:
    """A coarse classification of a mismatching pair of D codes."""
    wv, sv = (float(decode(np.array([v]), dt)[0]) for v in (ws, sim))
    if np.isnan(wv) != np.isnan(sv):
        return "NaN vs non-NaN"
    if np.isinf(wv) or np.isinf(sv):
        return "Inf vs finite/other Inf"
    if wv == 0 and sv == 0:
        return "signed zero"
    diff = abs(int(ws) - int(sim))
    if (wv >= 0) == (sv >= 0) and diff <= 2:
        return f"{diff} ulp"
    return "other (sign/magnitude)"


def crosscheck(march: str, name: str, ins, tiles: int = TILES, max_examples_per_kind: int = 1) -> Result:
    sm = ARCH_MAP[march]
    res = Result(sm, name, ins)
    kinds_seen: dict = {}
    for fi, fam in enumerate(FAMILIES):
        x = gen_inputs(ins, fam, tiles, seed=zlib.crc32(f"{sm}|{name}|{fam}".encode()))
        ws = run_warpsim(ins, sm, x)
        if ins.quadpair:  # four independent 8x8x4 products per warp: tiles of MMA-Sim
            xs = Inputs(x.a.reshape((-1,) + x.a.shape[2:]), x.b.reshape((-1,) + x.b.shape[2:]),
                        x.c.reshape((-1,) + x.c.shape[2:]))
            sim = run_mmasim(march, name, ins, xs).reshape(ws.shape)
        else:
            sim = run_mmasim(march, name, ins, x)
        assert ws.shape == sim.shape, (ws.shape, sim.shape)
        both_nan = nan_mask(ws, ins.dtype) & nan_mask(sim, ins.dtype)
        bad = (ws != sim) & ~both_nan
        res.compared += ws.size
        res.mismatches += int(bad.sum())
        res.by_family[fam] = (ws.size, int(bad.sum()))
        for idx in zip(*np.nonzero(bad)):
            kind = mismatch_kind(ws[idx], sim[idx], ins.dtype)
            key = (fam, kind)
            kinds_seen[key] = kinds_seen.get(key, 0) + 1
            if kinds_seen[key] <= max_examples_per_kind:
                res.examples.append((fam, kind, describe(ins, x, idx, ws[idx], sim[idx])))
    res.kinds = kinds_seen
    return res


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

CASES = common_cases()

#: Known disagreements: (predicate on the case, reason); such cases are expected to fail
#: (xfail, not strict, so a fix shows as XPASS).  None at present: the sm_89 fp8 alignment,
#: the mxf4/mxf4nvf4 group alignment and the +0 rule for zero results were fixed in the models
#: (the last one confirmed on the H100).
KNOWN_CASES: list = []

#: Mismatch kinds tolerated (counted and shown, not failed); set WARPSIM_XCHECK_LENIENT=1 to
#: tolerate signed-zero differences while investigating.
LENIENT = os.environ.get("WARPSIM_XCHECK_LENIENT", "") not in ("", "0")
TOLERATED_KINDS = {"signed zero"}
STRICT = not LENIENT


def known_reason(arch: str, ins) -> str | None:
    for pred, why in KNOWN_CASES:
        if pred(arch, ins):
            return why
    return None


def _param(march, name, ins):
    why = known_reason(ARCH_MAP[march], ins)
    marks = [pytest.mark.xfail(reason=why, strict=False)] if why else []
    return pytest.param(march, name, ins, id=f"{ARCH_MAP[march]}-{name}", marks=marks)


def test_cases_found():
    """The mapping finds the instructions both model (guards against a silent empty table)."""
    archs = {ARCH_MAP[m] for m, _, _ in CASES}
    assert archs == set(ARCH_MAP.values())
    assert len(CASES) > 100


def test_dpa_matches_call():
    """MMA-Sim's batched ``dpa`` (used here) equals its one-tile ``__call__``."""
    ins = next(i for m, n, i in CASES if m == "Hopper" and n == "m16n8k16.f32.f16.f16.f32")
    x = gen_inputs(ins, "wide", 3, seed=1)
    batched = run_mmasim("Hopper", "m16n8k16.f32.f16.f16.f32", ins, x)
    op = MMA("Hopper", "m16n8k16.f32.f16.f16.f32")
    for t in range(3):
        one = op(_to_torch(x.a[t], "f16"), _to_torch(x.b[t], "f16"), _to_torch(x.c[t], "f32"))
        assert np.array_equal(_from_torch(one, "f32"), batched[t])


@pytest.mark.parametrize("march,name,ins", [_param(*c) for c in CASES])
def test_agrees_with_mmasim(march, name, ins):
    res = crosscheck(march, name, ins)
    tolerated = set() if STRICT else TOLERATED_KINDS
    bad = {k: n for k, n in res.kinds.items() if k[1] not in tolerated}
    if bad:
        msg = [f"{res.arch} {name}: {res.mismatches} of {res.compared} outputs differ "
               f"(per family: {res.by_family}; kinds {res.kinds})"]
        msg += [f"[{fam}] {kind}:\n{text}" for fam, kind, text in res.examples
                if kind not in tolerated][:4]
        pytest.fail("\n".join(msg))


# --------------------------------------------------------------------------------------------
# Report: python tests/test_mmasim_crosscheck.py [--tiles N] [--markdown PATH]
# --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    import argparse
    import time

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiles", type=int, default=TILES)
    p.add_argument("--arch", default=None, help="only this warpsim target (e.g. sm_89)")
    p.add_argument("--examples", type=int, default=1, help="examples per (family, kind)")
    args = p.parse_args(argv)
    t0 = time.time()
    total = bad = 0
    results = []
    for march, name, ins in CASES:
        if args.arch and ARCH_MAP[march] != args.arch:
            continue
        r = crosscheck(march, name, ins, args.tiles, args.examples)
        results.append(r)
        total += r.compared
        bad += r.mismatches
        fams = ", ".join(f"{f}:{b}" for f, (n, b) in r.by_family.items() if b)
        print(f"| {r.arch} | {name} | {r.compared} | {r.mismatches} | {fams} |", flush=True)
    print(f"\n{len(results)} cases, {total} outputs, {bad} mismatches, {time.time() - t0:.1f} s\n")
    for r in results:
        if r.mismatches:
            print(f"## {r.arch} {r.name}: kinds {r.kinds}")
            for fam, kind, text in r.examples:
                print(f"[{fam}] {kind}\n{text}")
    only_sim, only_ws = coverage()
    print("\nModelled by MMA-Sim only:", *only_sim, sep="\n  ")
    print("\nModelled by warpsim only (non-integer):", *only_ws, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
