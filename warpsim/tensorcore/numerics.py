"""Per-architecture numerics: parameters of the fused dot-product engine, with their sources.

Each :class:`ArchModel` is data: how many products one hardware step fuses (``L`` per input
family), how many fraction bits below the largest exponent survive alignment (``F``), the
exponent that zero terms take (``e_zero``), the output rounding, and which instruction forms
ptxas lowers to a sequence of other instructions on that target.  :func:`compute` runs an
instruction's floating-point arithmetic under a model, on exact element values.

Sources are named per model: [HW-here] verified word for word on this project's H100
(docs/validation.md); [HW-pub] published hardware-validated models (MMA-Sim, arXiv 2511.10909;
Khattak & Mikaitis, arXiv 2512.07004); [ISA] the PTX ISA text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np

from warpsim.tensorcore import engine
from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS, Instruction

#: Exponent of the smallest normal number of each float format (subnormals share it).
EMIN: Mapping[str, int] = MappingProxyType(
    {"f64": -1022, "f32": -126, "tf32": -126, "f16": -14, "bf16": -126, "e4m3": -6, "e5m2": -14,
     "e3m2": -2, "e2m3": 0, "e2m1": 0, "ue8m0": -127, "ue4m3": -6}
)


@dataclass(frozen=True)
class ArchModel:
    """Numerics of one GPU architecture's mma.sync floating-point paths."""

    name: str
    source: str
    verified: str  # "hardware here", "published model", or what is assumed
    F: int  # fraction bits kept below the largest exponent
    L: Mapping[str, int]  # products fused per step, by input family: f16 (f16/bf16), tf32, fp8, f6f4
    e_zero_f32: int
    e_zero_f16: int
    fp8_F: int | None = None  # sm_89: fp8 products aligned with 13 fraction bits
    fp8_out_frac: int | None = None  # sm_89: fp8 with f32 D keeps 13 fraction bits
    lowered: frozenset = field(default_factory=frozenset)  # forms run as instruction sequences
    m8n8k4: tuple[int, int] | None = None  # (F, L) override for the m8n8k4 f16 path
    block_F: int = 35  # mxf4/mxf4nvf4 group-sum alignment
    block_e_zero: int = -139


_SM80_L = MappingProxyType({"f16": 8, "tf32": 4, "fp8": 8, "f6f4": 8})

MODELS: Mapping[str, ArchModel] = MappingProxyType(
    {
        m.name: m
        for m in (
            ArchModel("sm_70", "[HW-pub] MMA-Sim (V100); Khattak & Mikaitis", "published model",
                      F=23, L=MappingProxyType({"f16": 4, "tf32": 4, "fp8": 4, "f6f4": 4}),
                      e_zero_f32=-131, e_zero_f16=-19),
            ArchModel("sm_75", "[HW-pub] MMA-Sim (T4)", "published model", F=24,
                      L=_SM80_L, e_zero_f32=-132, e_zero_f16=-20, m8n8k4=(23, 4)),
            ArchModel("sm_80", "[HW-pub] MMA-Sim (A100); Khattak & Mikaitis; [SASS] m8n8k4 .f16",
                      "published model", F=24, L=_SM80_L, e_zero_f32=-132, e_zero_f16=-20,
                      lowered=frozenset({"f16-m8n8k4"})),
            ArchModel("sm_89", "[HW-pub] MMA-Sim (RTX 4090); [SASS] m8n8k4 .f16", "published model",
                      F=24, L=MappingProxyType({"f16": 8, "tf32": 4, "fp8": 16, "f6f4": 16}),
                      e_zero_f32=-132, e_zero_f16=-20, fp8_F=13, fp8_out_frac=13,
                      lowered=frozenset({"f16-m8n8k4"})),
            ArchModel("sm_90", "[HW-pub] MMA-Sim (H100) for native HMMA; [HW-here] lowered forms",
                      "hardware here (see docs/validation.md)", F=25,
                      L=MappingProxyType({"f16": 16, "tf32": 8, "fp8": 16, "f6f4": 16}),
                      e_zero_f32=-133, e_zero_f16=-21, lowered=frozenset({"fp8", "f16-m8n8k4"})),
            ArchModel("sm_100a", "[HW-pub] MMA-Sim (B200); [SASS] fp8 and m8n8k4 .f16 lowered as on sm_90",
                      "published model; lowered forms from SASS", F=25,
                      L=MappingProxyType({"f16": 16, "tf32": 8, "fp8": 32, "f6f4": 32}),
                      e_zero_f32=-133, e_zero_f16=-21,
                      lowered=frozenset({"fp8", "f8f6f4", "f16-m8n8k4"})),
            ArchModel("sm_120a", "[HW-pub] MMA-Sim (RTX PRO 6000); [SASS] m8n8k4 .f16", "published model",
                      F=25, L=MappingProxyType({"f16": 16, "tf32": 8, "fp8": 32, "f6f4": 32}),
                      e_zero_f32=-133, e_zero_f16=-21, lowered=frozenset({"f16-m8n8k4"})),
        )
    }
)


#: Operand types whose values have at most 11 significant bits within f16's range: their
#: products are exact in float32, which the engine then uses for its widest arrays.
NARROW = frozenset({"f16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1"})
#: Operand types with at most 12 significant bits over a wider range (float64 values): the
#: engine forms their products in float32 after scaling rows and columns (``short``).
SHORT = NARROW | {"bf16", "tf32"}


def model_for(arch: str) -> ArchModel:
    """The numerics model simulating target ``arch`` (e.g. 'sm_86' -> the sm_80 model)."""
    try:
        return MODELS[ARCHS[arch].model]
    except KeyError:
        known = ", ".join(ARCHS) + ", exact"
        raise PtxError(f"unknown architecture {arch!r}; known: {known}") from None


def _family(instr: Instruction) -> str:
    t = instr.atype
    if t in ("f16", "bf16"):
        return "f16"
    if t == "tf32":
        return "tf32"
    if t in ("e4m3", "e5m2") and instr.btype in ("e4m3", "e5m2"):
        return "fp8"
    return "f6f4"


def _steps(k: int, L: int) -> list[slice]:
    return [slice(s, min(s + L, k)) for s in range(0, k, L)]


def dot_steps(a, b, c, *, groups, emin_a, emin_b, emin_c, emin_out, F, e_zero, out, rounding,
              frac_bits=None, first_c=True, short=False, rows=None):
    """Chain truncated fused steps over k-index groups; each step's result is the next one's c.

    Batch-last arrays (see :mod:`warpsim.tensorcore.engine`): a (K, M, n), b (K, N, n), c (M, N, n).
    ``first_c`` False starts from a zero accumulator (c is then added by the caller).  Each
    step resolves NaN/Inf on its own inputs, its accumulator included, so an Inf produced by an
    earlier step's overflow meets the later steps' products as the hardware's does.
    ``rows`` (sparse mma): (K, M, n) row of B (its logical k) that each element of a, here the
    compressed A, meets; b is then the whole (K_logical, N, n) B and each step works on the
    B rows its elements select (only those: an Inf in a row nobody selects plays no part).
    """
    acc = c if first_c else np.zeros(c.shape)
    ec = emin_c if first_c else emin_out
    if rows is not None:
        pick = _row_picker(b, rows)
        eb_all = engine.exponents(b, emin_b)
        finite_ab = bool(np.isfinite(a).all() and np.isfinite(b).all())
    for ks in groups:
        ak, eb = a[ks], None
        if rows is None:
            bk = b[ks]
            special, sval = engine.special_values(ak, bk, acc)
        else:
            bk, eb = pick(b, ks), pick(eb_all, ks)
            special = sval = None
            if not (finite_ab and np.isfinite(acc).all()):
                special, sval = engine.special_values(ak, bk, acc)
        if special is not None:  # only then are there non-finite values to neutralise
            ak, bk, acc = engine.finite_or_zero(ak), engine.finite_or_zero(bk), engine.finite_or_zero(acc)
            eb = None
        new = engine.truncated_dot_add(
            ak, bk, acc,
            emin_a=emin_a, emin_b=emin_b, emin_c=ec, F=F, e_zero=e_zero, out=out,
            rounding=rounding, frac_bits=frac_bits, short=short, eb=eb)
        acc = new if special is None else np.where(special, sval, new)
        ec = emin_out
    return acc


def _row_picker(b: np.ndarray, rows: np.ndarray):
    """``pick(x, ks)``: for x shaped like b (K, N, n), the (len(ks), M, N, n) array of the rows
    ``rows[ks]`` (K', M, n) select, one B per row of A.  A row gather of N-element rows (x laid
    out (K, n, N)) and one transpose: about half the cost of the products themselves."""
    k, nn, n = b.shape
    flat = rows * n + np.arange(n)  # row of the (K * n, N) layout

    def pick(x: np.ndarray, ks) -> np.ndarray:
        xr = np.ascontiguousarray(x.transpose(0, 2, 1)).reshape(k * n, nn)
        f = flat[ks]
        g = np.take(xr, f.reshape(-1), axis=0).reshape(f.shape + (nn,))
        return np.ascontiguousarray(g.transpose(0, 1, 3, 2))
    return pick


def compute(instr: Instruction, a, b, c, model: ArchModel) -> np.ndarray:
    """D values (exact float64, already rounded to D's type) for a floating-point mma.

    a (..., M, K), b (..., K, N), c (..., M, N) hold exact values of the decoded elements.
    """
    if instr.atype == "f64":
        return engine.fma_chain(a, b, c, instr.rounding or "rn")
    a, b, c, batch = engine.to_batch_last(a, b, c, operand_dtype(instr))
    return engine.from_batch_last(compute_batch_last(instr, a, b, c, model), batch)


def operand_dtype(instr: Instruction) -> type:
    """float32 where A and B values and their products are exact in it (NARROW), else float64."""
    return np.float32 if instr.atype in NARROW and instr.btype in NARROW else np.float64


def step_plan(instr: Instruction, model: ArchModel) -> dict:
    """The fused-step parameters of a dense floating-point form with f32/f16 D on ``model``:
    ``groups`` (k indices per hardware step, in order), ``emin_a`` / ``emin_b`` / ``emin_c`` /
    ``emin_out``, ``F``, ``e_zero``, ``out`` and ``rounding`` of each step, ``frac_bits``,
    ``first_c`` (False: the steps start from a zero accumulator) and ``final_add`` (True: C is
    added to their result by an IEEE add rounded to nearest, the lowered fp8 sequence).
    What :func:`compute_batch_last` runs, as data (the compiled kernel reads it too).
    NotImplementedError for the m8n8k4 .f16 lowering (a different sequence)."""
    fam = _family(instr)
    out = instr.dtype
    e_zero = model.e_zero_f32 if out == "f32" else model.e_zero_f16
    rounding = "rz" if out == "f32" else "rn"
    plan = dict(emin_a=EMIN[instr.atype], emin_b=EMIN[instr.btype], emin_c=EMIN[instr.ctype],
                emin_out=EMIN[out], F=model.F, e_zero=e_zero, out=out, rounding=rounding,
                frac_bits=None, first_c=True, final_add=False)
    k = instr.k
    if instr.form in model.lowered:
        if instr.form not in ("fp8", "f8f6f4"):
            raise NotImplementedError(instr.form)
        # sm_90, sm_100a: fp8 pairs unpacked to f16, two chained f16 HMMA steps from a zero
        # accumulator (first: the low f16 pair of each register, k = 4t+{0,1} (+16)), then C
        # added by an IEEE add (FADD for f32, HADD2 for f16), round to nearest.  The HMMAs see
        # f16 operands: exponents clamp at f16's emin, not the fp8 format's.
        kk = np.arange(k)
        plan.update(groups=[kk[(kk % 4) < 2], kk[(kk % 4) >= 2]], emin_a=EMIN["f16"],
                    emin_b=EMIN["f16"], emin_c=EMIN[out], first_c=False, final_add=True)
        return plan
    L = model.L[fam]
    if instr.quadpair and model.m8n8k4:
        plan["F"], L = model.m8n8k4
    if fam == "fp8" and out == "f32":
        plan["frac_bits"] = model.fp8_out_frac
    if fam == "fp8" and model.fp8_F is not None:
        plan["F"] = model.fp8_F
    plan["groups"] = _steps(k, L)
    return plan


def compute_batch_last(instr: Instruction, a, b, c, model: ArchModel,
                       rows: np.ndarray | None = None) -> np.ndarray:
    """:func:`compute` on batch-last arrays (see :mod:`warpsim.tensorcore.engine`): a (K, M, n) and
    b (K, N, n) of :func:`operand_dtype`, c (M, N, n) float64; returns D values (M, N, n).
    Sparse mma: ``instr`` is the dense equivalent (:func:`warpsim.tensorcore.sparse.dense_equivalent`),
    a the compressed A and ``rows`` (K, M, n) the logical B row of each of its elements
    (see :func:`dot_steps`).  Not for f64 forms."""
    short = instr.atype in SHORT and instr.btype in SHORT
    if instr.form in model.lowered:
        return _lowered(instr, a, b, c, model, short, rows)
    p = step_plan(instr, model)
    del p["first_c"], p["final_add"]
    return dot_steps(a, b, c, short=short, rows=rows, **p)


PAIR_ORDER = (0, 2)  # C + (k0, k1) first, then + (k2, k3): verified on H100


def _lowered(instr: Instruction, a, b, c, model: ArchModel, short, rows) -> np.ndarray:
    """Instruction sequences ptxas emits where the target has no native tensor-core form.
    Batch-last arrays, as :func:`dot_steps`."""
    if instr.form in ("fp8", "f8f6f4"):  # f8f6f4 reaches here only with fp8 types (sm_100a)
        p = step_plan(instr, model)  # two f16 HMMA steps from zero, then an IEEE add of C
        del p["first_c"], p["final_add"]
        prod = dot_steps(a, b, c, first_c=False, short=short, rows=rows, **p)
        with np.errstate(all="ignore"):  # IEEE add: Inf and NaN propagate by themselves
            s = engine.round_odd_sum(prod, c)
        return engine.round_to(s, instr.dtype, "rn")
    if instr.form == "f16-m8n8k4":
        # sm_80 and later have no m8n8k4 HMMA: ptxas converts the f16 elements to f32
        # (HADD2.F32) and runs f32 FMUL/FFMA/FADD per output element, each rounded to f32 (RN);
        # the sequence is the same on sm_80, sm_89, sm_90, sm_100a and sm_120a (SASS).
        # f32 D: one k-ordered chain FFMA(a0, b0, +0), FFMA k = 1..3, then FADD with C.
        # f16 D: two pairs FFMA(a1, b1, FMUL(a0, b0)) and FFMA(a3, b3, FMUL(a2, b2)), added to
        # C by two FADDs, then one F2FP conversion to f16 (RN).  [HW-here] docs/sass/sm_90.md
        def rn32(x):
            return engine.round_to(x, "f32", "rn")

        def prod(kx):
            return a[kx, :, None].astype(np.float64) * b[kx, None]  # exact in float64

        with np.errstate(all="ignore"):
            if instr.dtype == "f32":
                acc = rn32(prod(0) + 0.0)
                for kx in range(1, instr.k):
                    acc = rn32(engine.round_odd_sum(prod(kx), acc))
                return rn32(engine.round_odd_sum(c, acc))
            pairs = [rn32(engine.round_odd_sum(prod(kx + 1), rn32(prod(kx)))) for kx in PAIR_ORDER]
            d = c
            for s_ in pairs:
                d = rn32(engine.round_odd_sum(d, s_))
        return engine.round_to(d, "f16", "rn")
    raise AssertionError(instr.form)


def compute_block_scaled(instr: Instruction, a, b, c, sa, sb, model: ArchModel) -> np.ndarray:
    """D values for .block_scale forms.  sa (..., M, V), sb (..., V, N) hold scale values.

    mxf8f6f4: each product's exponent gains the two scale exponents, then one fused step
    (F, e_zero of the model; RZ to f32).  mxf4 / mxf4nvf4: every group of 16 consecutive k is
    summed exactly, multiplied by both scale values, and those group terms plus c are aligned
    with the model's ``block_F`` / ``block_e_zero`` and rounded toward zero.  [HW-pub] MMA-Sim.
    """
    from warpsim.tensorcore.blockscale import expand

    sa_k, sb_k = expand(instr, sa, sb)  # (..., M, K), (..., K, N)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], np.shape(c)[:-2], sa_k.shape[:-2],
                                sb_k.shape[:-2])
    a, b, c, _ = engine.to_batch_last(a, b, c, batch=batch)
    sa_k, sb_k, _, _ = engine.to_batch_last(sa_k, sb_k, None, batch=batch)
    return engine.from_batch_last(_block_scaled(instr, a, b, c, sa_k, sb_k, model), batch)


def compute_block_scaled_batch_last(instr: Instruction, a, b, c, sa, sb, model: ArchModel) -> np.ndarray:
    """:func:`compute_block_scaled` on batch-last float64 arrays: a (K, M, n), b (K, N, n),
    c (M, N, n), scale values sa (V, M, n) and sb (V, N, n); returns D values (M, N, n)."""
    chunk = instr.k // instr.scale_vec
    return _block_scaled(instr, a, b, c, np.repeat(sa, chunk, axis=0), np.repeat(sb, chunk, axis=0), model)


def _block_scaled(instr: Instruction, a, b, c, sa_k, sb_k, model: ArchModel) -> np.ndarray:
    """Block-scaled D (M, N, n) from batch-last a (K, M, n), b (K, N, n), c (M, N, n) and the
    scale of each element of a and b, sa_k (K, M, n) and sb_k (K, N, n)."""
    # exact products: scales are powers of two or 4-bit significands
    special, sval = engine.special_values(a * sa_k, b * sb_k, c)
    af, bf, cf = engine.finite_or_zero(a), engine.finite_or_zero(b), engine.finite_or_zero(c)
    if instr.kind == "mxf8f6f4":
        sae = np.frexp(engine.finite_or_zero(sa_k))[1] - 1  # ue8m0: exact powers of two
        sbe = np.frexp(engine.finite_or_zero(sb_k))[1] - 1
        d = engine.truncated_dot_add(
            af, bf, cf, emin_a=EMIN[instr.atype], emin_b=EMIN[instr.btype], emin_c=EMIN["f32"],
            F=model.F, e_zero=model.e_zero_f32, out="f32", rounding="rz", exp_a=sae, exp_b=sbe)
    else:
        g = 16
        groups = instr.k // g
        ag = af.reshape((groups, g) + af.shape[1:])  # (G, 16, M, n)
        bg = bf.reshape((groups, g) + bf.shape[1:])  # (G, 16, N, n)
        sums = np.einsum("gkmw,gknw->gmnw", ag, bg)  # exact group sums
        # one scale value per group: (G, M, n) and (G, N, n)
        sa_g = engine.finite_or_zero(sa_k[::g])
        sb_g = engine.finite_or_zero(sb_k[::g])
        scale = sa_g[:, :, None] * sb_g[:, None]  # (G, M, N, n)
        terms = sums * scale
        # a group term is aligned at its scale exponent e_sa + e_sb, whatever its sum; only a
        # group whose products are all zero (or whose scale is zero) takes e_zero
        es = np.int16(EMIN[instr.stype])
        e = engine.exponents(sa_g, es)[:, :, None].astype(np.int32) + engine.exponents(sb_g, es)[:, None]
        prods_zero = np.einsum("gkmw,gknw->gmnw", (ag != 0).astype(np.float64),
                               (bg != 0).astype(np.float64)) == 0
        e = np.where(prods_zero | (scale == 0), model.block_e_zero, e)
        d = engine.truncated_sum(terms, e.max(axis=0), cf, emin_c=EMIN["f32"], F=model.block_F,
                                 e_zero=model.block_e_zero, out="f32", rounding="rz")
    if special is not None:
        d = np.where(special, sval, d)
    return d
