"""Block-scaled tcgen05.mma with cta_group::2 and M=128: each CTA of the pair holds 64 rows of D
in the "2x2" data-path layout (lane quarters 0-1: columns n < N/2, quarters 2-3: n >= N/2), and
the scale factors sit in Tensor Memory as CuTe's ``tmem_sf_frg`` ScaleFactorDuplicated2by2
atom says: SFA as for 128 rows (row r at lane r % 32 of every quarter, column r // 32), SFB per
N half, each half in its two quarters.

The layouts are restated here from CuTe's atoms (evaluated as CuTe layouts, independently of
warpsim.facts) and from CUTLASS's CuTe DSL example
``examples/python/CuTeDSL/experimental/primitives/tcgen05/2cta_mma_blockscale_m128.py``, whose
shared-memory images and tcgen05.cp forms one test replays.  Machine D is compared with the
matrix-level model (warpsim.tensorcore.tcgen05).  No Blackwell GPU has run these kernels;
ptxas 13.5 accepts them (stored verdicts, re-checked live where ptxas 13.5 is installed).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warpsim
from warpsim.facts import formats
from warpsim.facts.tcgen05 import scale_factor_cells
from warpsim.tensorcore import tcgen05 as T

from test_tcgen05_forms import (COLS, FULL, _kernel, _offsets, d_cells, k_major, launch, pack_dense4,
                                pack_padded, random_codes)

SFA_COL, SFB_COL = 192, 224


# --- CuTe's tmem_sf_frg atoms, evaluated as layouts --------------------------------------------

def _layout(shape, stride, idx):
    """CuTe layout (flattened, colexicographic) at flat index ``idx``."""
    out = 0
    for s, d in zip(shape, stride):
        out += (idx % s) * d
        idx //= s
    return out


def cute_sf_cells(operand: str, datapath: str, mn: int):
    """{index of the row (A) / column (B): [(lane, column, byte), ...]} of scale factor 0 from
    CuTe's atoms in virtual TMEM addressing (DP stride 1, column stride 128; 8-bit values, so a
    virtual column is one byte: column = v // 128 // 4, byte = v // 128 % 4).
    SFA and 4x1 SFB: (((32, MN/32), 4), ...) : (((1, 512), 32), ...); 2x2 SFB:
    (((32, MN/64), 2, 2), ...) : (((1, 512), 64, 32), ...)."""
    if operand == "A" or datapath == "4x1":
        shape, stride, reps = (32, mn // 32, 4), (1, 512, 32), 4
    else:
        shape, stride, reps = (32, mn // 64, 2, 2), (1, 512, 64, 32), 2
    cells = {}
    for flat in range(mn * reps):  # the last mode is the replication
        v = _layout(shape, stride, flat)
        cells.setdefault(flat % mn, []).append((v % 128, v // 128 // 4, v // 128 % 4))
    return cells


@pytest.mark.parametrize("n", [64, 128, 192, 256])
def test_scale_factor_layouts_equal_cutes_atoms(n):
    """facts.tcgen05.scale_factor_cells (read per lane quarter) visits exactly the cells CuTe's
    atoms fill: 4x1 (M=128 / cta_group::2 M=256) SFA and SFB, and the 2x2 data path of
    cta_group::2 M=128 (SFA of the CTA's 64 rows, SFB per N half)."""
    for operand, dp, mn in (("A", "4x1", 128), ("B", "4x1", n), ("A", "2x2", 64), ("B", "2x2", n)):
        cute = cute_sf_cells(operand, dp, mn)
        for i in range(mn):
            quarters = range(4) if operand == "A" or dp == "4x1" else (2 * (i // (n // 2)),
                                                                        2 * (i // (n // 2)) + 1)
            ours = sorted(tuple(int(x[0, 0]) for x in scale_factor_cells(operand, dp, [i], 1, 0, q, n))
                          for q in quarters)
            assert ours == sorted(cute[i]), (operand, dp, i)
    with pytest.raises(warpsim.errors.ShapeError):  # quarter 0 works on the low half only
        scale_factor_cells("B", "2x2", [n - 1], 1, 0, 0, n)


@settings(max_examples=int(os.environ.get("WARPSIM_FUZZ_EXAMPLES", 25)), deadline=None)
@given(n=st.integers(1, 16).map(lambda i: 16 * i), vec=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from(["4x1", "2x2"]))
def test_scale_factor_cells_are_disjoint_and_bounded(n, vec, dp):
    """For every legal N: each (column, scale j) of B and (row, j) of A owns its own byte per
    reading quarter (no two share a cell byte), lanes stay in the reading quarter, and columns
    stay within ceil(rows / 32) (A) or ceil(N / 32) / ceil(N/2 / 32) (B, 4x1 / 2x2)."""
    ml = 128 if dp == "4x1" else 64
    for operand, count in (("A", ml), ("B", n)):
        seen = set()
        for q in range(4):
            idx = np.arange(count) if operand == "A" or dp == "4x1" else \
                np.arange(n // 2) + n // 2 * (q // 2)
            L, C, B = scale_factor_cells(operand, dp, idx, vec, 4 - vec, q, n)
            assert ((L // 32) == q).all()
            span = count if operand == "A" or dp == "4x1" else n // 2
            assert (C < -(-span // 32)).all() and (B < 4).all()
            cells = set(zip(L.ravel().tolist(), C.ravel().tolist(), B.ravel().tolist()))
            assert len(cells) == L.size and not cells & seen
            seen |= cells


# --- the machine against the model -------------------------------------------------------------

def _ins(kind, n, **kw):
    return T.make(kind, (128, n), dtype="f32", cta_group=2, **kw)


def _scales(stype, shape, rng, special=False):
    if stype == "ue8m0":
        s = rng.integers(118, 136, shape)
        if special:  # NaN scale, the extremes
            s.flat[rng.choice(s.size, 6, replace=False)] = [255, 0, 254, 255, 1, 0]
        return s.astype(np.uint32)
    return formats.encode(2.0 ** rng.integers(-2, 3, shape), "ue4m3").astype(np.uint32)


def _specials(codes, t, rng):
    """Plant +-0, +-Inf/NaN (where the type has them) and the largest finite codes."""
    bits = {"e2m1": 4, "e2m3": 6, "e3m2": 6}.get(t, 8)
    top = 1 << (bits - 1)
    pool = [0, top, top - 1, 2 * top - 1]
    if t == "e4m3":
        pool += [0x7F, 0xFF]  # NaN
    if t == "e5m2":
        pool += [0x7C, 0xFC, 0x7F]  # +-Inf, NaN
    out = codes.copy()
    out.flat[rng.choice(out.size, out.size // 8, replace=False)] = rng.choice(pool, out.size // 8)
    return out


def _operand_image(kind, codes_rows, t, rng):
    """K-major no-swizzle image: mxf4*: two e2m1 per byte; fp6/fp4 of mxf8f6f4: the padded
    16-element chunks (ISA packed formats); 8-bit: one code per byte."""
    if kind in ("mxf4", "mxf4nvf4"):
        return k_major(pack_dense4(codes_rows.astype(np.uint8)))
    bits = {"e2m1": 4, "e2m3": 6, "e3m2": 6}.get(t)
    if bits:
        return k_major(pack_padded(codes_rows.astype(np.uint8), bits, rng))
    return k_major(codes_rows.astype(np.uint8))


def _put(tmem, p, lane, col, byte, val):
    cell = int(tmem[p, lane, col])
    tmem[p, lane, col] = (cell & ~(0xFF << 8 * byte) | int(val) << 8 * byte) & 0xFFFFFFFF


def run_direct(kind, n, atype, btype, block, stype, a_scale_id=0, b_scale_id=0, seed=0,
               special=False, sfb_datapath="2x2"):
    """One cta_group::2 M=128 block-scaled mma on a 2-CTA cluster; the scale factors written
    straight into each CTA's Tensor Memory at the cells of CuTe's atoms (restated above), every
    other cell random.  Returns (machine image, expected image)."""
    rng = np.random.default_rng(seed)
    ins = _ins(kind, n, atype=atype, btype=btype, block=block, stype=stype,
               a_scale_id=a_scale_id, b_scale_id=b_scale_id)
    k, v = ins.k, ins.scale_vec
    a, b = random_codes(atype, (128, k), rng), random_codes(btype, (k, n), rng)
    if special:
        a, b = _specials(a, atype, rng), _specials(b, btype, rng)
    sa, sb = _scales(stype, (128, v), rng, special), _scales(stype, (v, n), rng, special)
    tmem = rng.integers(0, 2**32, (2, 128, COLS), dtype=np.uint64).astype(np.uint32)
    sfa_cells, sfb_cells = cute_sf_cells("A", "2x2", 64), cute_sf_cells("B", sfb_datapath, n)
    for p in range(2):  # each CTA: its own 64 rows' SFA, all of B's SFB
        for r in range(64):
            for (lane, col, byte) in sfa_cells[r]:
                for j in range(v):
                    _put(tmem, p, lane, SFA_COL + col, byte + a_scale_id + j, sa[64 * p + r, j])
        for c in range(n):
            for (lane, col, byte) in sfb_cells[c]:
                for j in range(v):
                    _put(tmem, p, lane, SFB_COL + col, byte + b_scale_id + j, sb[j, c])
    A = [_operand_image(kind, a[64 * p:64 * p + 64], atype, rng) for p in (0, 1)]
    B = [_operand_image(kind, b[:, n // 2 * p:n // 2 * (p + 1)].T, btype, rng) for p in (0, 1)]
    stmt = direct_stmt(ins.opcode)
    out = launch(stmt, np.stack([x[0] for x in A]), np.stack([x[0] for x in B]), tmem, ins.idesc,
                 A[0][1], B[0][1], cg=2)
    P, L, C = d_cells(128, n, 2)
    want = tmem.copy()
    want[P, L, C] = T.compute_codes(ins, a, b, tmem[P, L, C], sa=sa, sb=sb)
    return out, want, ins


DIRECT = [
    pytest.param(dict(kind="mxf8f6f4", n=128, atype="e4m3", btype="e2m1", block=32, stype="ue8m0",
                      a_scale_id=1, b_scale_id=3), id="mxf8f6f4-n128-ids"),
    pytest.param(dict(kind="mxf8f6f4", n=64, atype="e5m2", btype="e3m2", block=32, stype="ue8m0",
                      special=True, seed=3), id="mxf8f6f4-n64-specials"),
    pytest.param(dict(kind="mxf4", n=256, atype="e2m1", btype="e2m1", block=32, stype="ue8m0",
                      a_scale_id=2, seed=5), id="mxf4-n256", marks=FULL),
    pytest.param(dict(kind="mxf4nvf4", n=192, atype="e2m1", btype="e2m1", block=16, stype="ue4m3",
                      special=True, seed=7), id="mxf4nvf4-n192-specials", marks=FULL),
]


@pytest.mark.parametrize("case", DIRECT)
def test_2x2_block_scaled_mma_matches_the_model(case):
    out, want, _ = run_direct(**case)
    assert np.array_equal(out, want)


def test_sfb_staged_as_4x1_gives_another_d():
    """The 2x2 cells matter: SFB staged where the 4x1 layout would put it (other cells random)
    gives a D that differs from the model's, so the test above can fail."""
    case = dict(kind="mxf8f6f4", n=128, atype="e4m3", btype="e2m1", block=32, stype="ue8m0")
    out, want, _ = run_direct(**case, sfb_datapath="4x1")
    assert not np.array_equal(out, want)


def dsl_stmt(op: str, sfa_off: int, sfb_off: int) -> str:
    """The cp + two-mma sequence of the DSL-example test (SF images at B-buffer offsets)."""
    desc = lambda off: T.SmemDescriptor(off, 16, 128).encode()  # noqa: E731  (rows of 16 bytes)
    return _offsets(f"""mov.b64 %rd31, {desc(sfa_off):#x};
    add.u64 %rd31, %rd31, %rd14;
    mov.b64 %rd32, {desc(sfb_off):#x};
    add.u64 %rd32, %rd32, %rd14;
    mov.b64 %rd33, {desc(sfb_off + 1024):#x};
    add.u64 %rd33, %rd33, %rd14;
    add.u32 %r171, %r18, 2;
    add.u32 %r172, %r19, 4;
    tcgen05.cp.cta_group::2.32x128b.warpx4 [%r18], %rd31;
    tcgen05.cp.cta_group::2.64x128b.warpx2::01_23 [%r19], %rd32;
    tcgen05.cp.cta_group::2.64x128b.warpx2::01_23 [%r172], %rd33;
    {op} [%r16], %rd15, %rd17, %r15, [%r18], [%r19], %p4;
    add.u64 %rd34, %rd15, 16;
    add.u64 %rd35, %rd17, 16;
    {op} [%r16], %rd34, %rd35, %r15, [%r171], [%r172], 1;""", d=0, sfa=SFA_COL, sfb=SFB_COL)


def direct_stmt(op: str) -> str:
    return _offsets(f"{op} [%r16], %rd15, %rd17, %r15, [%r18], [%r19], %p4;", d=0, sfa=SFA_COL,
                    sfb=SFB_COL)


def _words(rows16: np.ndarray) -> np.ndarray:
    """(R, 16) bytes -> (R, 4) little-endian 32-bit cells."""
    w = rows16.astype(np.uint32).reshape(-1, 4, 4)
    return w[..., 0] | w[..., 1] << 8 | w[..., 2] << 16 | w[..., 3] << 24


def test_cute_dsl_example_2cta_m128_nvfp4():
    """CUTLASS's CuTe DSL example 2cta_mma_blockscale_m128.py, one K tile of two K64 blocks:
    mxf4nvf4 block16 ue4m3, M=128 N=256 on a CTA pair.  SFA: each CTA packs its 64 rows' scales
    of both K blocks into 16-byte lane slots ([block 0: local rows lane, lane+32][block 1: ...])
    and copies them with tcgen05.cp.cta_group::2.32x128b.warpx4; the mma of K block k reads SFA
    at address + 2k.  SFB: per K block one 1024-byte image of two 128-column atoms, copied by
    tcgen05.cp.cta_group::2.64x128b.warpx2::01_23 to address + 4k.  The cp images follow CuTe's
    Copy_Traits (32x128b.warpx4: row i to lane i of every quarter; 64x128b.warpx2::01_23: rows
    0-31 to lanes 0-63, rows 32-63 to lanes 64-127); D equals two chained model mmas."""
    rng = np.random.default_rng(23)
    n = 256
    ins = _ins("mxf4nvf4", n, atype="e2m1", block=16, stype="ue4m3")
    a, b = random_codes("e2m1", (128, 128), rng), random_codes("e2m1", (128, n), rng)
    sa = formats.encode(2.0 ** rng.integers(-2, 3, (128, 8)), "ue4m3").astype(np.uint8)
    sb = formats.encode(2.0 ** rng.integers(-2, 3, (8, n)), "ue4m3").astype(np.uint8)
    A = [k_major(pack_dense4(a[64 * p:64 * p + 64].astype(np.uint8))) for p in (0, 1)]
    Bop = [k_major(pack_dense4(b[:, 128 * p:128 * p + 128].T.astype(np.uint8))) for p in (0, 1)]
    sfa_off, sfb_off = Bop[0][0].size, Bop[0][0].size + 512
    sfb_img = np.zeros(2048, np.uint8)  # per K block: atoms of columns 0-127 and 128-255
    lane, n1, j = np.meshgrid(np.arange(32), np.arange(4), np.arange(4), indexing="ij")
    for kb in range(2):
        for at in range(2):
            sfb_img[kb * 1024 + at * 512 + lane * 16 + n1 * 4 + j] = sb[4 * kb + j, 128 * at + 32 * n1 + lane]
    B_imgs, sfa_imgs = [], []
    for p in range(2):
        sfa_img = np.zeros(512, np.uint8)
        lane, kb, ml, j = np.meshgrid(np.arange(32), np.arange(2), np.arange(2), np.arange(4), indexing="ij")
        sfa_img[lane * 16 + kb * 8 + ml * 4 + j] = sa[64 * p + 32 * ml + lane, 4 * kb + j]
        sfa_imgs.append(sfa_img)
        B_imgs.append(np.concatenate([Bop[p][0], sfa_img, sfb_img]))
    stmt = dsl_stmt(ins.opcode, sfa_off, sfb_off)
    tmem = rng.integers(0, 2**32, (2, 128, COLS), dtype=np.uint64).astype(np.uint32)
    out = launch(stmt, np.stack([x[0] for x in A]), np.stack(B_imgs), tmem, ins.idesc, A[0][1],
                 Bop[0][1], cg=2)
    want = tmem.copy()
    for p in range(2):
        w = _words(sfa_imgs[p].reshape(32, 16))
        for q in range(4):
            want[p, 32 * q:32 * q + 32, SFA_COL:SFA_COL + 4] = w
        for kb in range(2):
            w = _words(sfb_img[kb * 1024:(kb + 1) * 1024].reshape(64, 16))
            for grp, quarters in ((0, (0, 1)), (1, (2, 3))):
                for q in quarters:
                    want[p, 32 * q:32 * q + 32, SFB_COL + 4 * kb:SFB_COL + 4 * kb + 4] = w[32 * grp:32 * grp + 32]
    P, L, C = d_cells(128, n, 2)
    d = T.compute_codes(ins, a[:, :64], b[:64], tmem[P, L, C], sa=sa[:, :4], sb=sb[:4])
    d = T.compute_codes(ins, a[:, 64:], b[64:], d, sa=sa[:, 4:], sb=sb[4:])
    want[P, L, C] = d
    assert np.array_equal(out, want)


TARGETS = ("sm_100a", "sm_103a", "sm_110a", "sm_100f")
#: ptxas 13.5 (cuda_13.5.r13.5, 39125733) on the whole generated 2-CTA kernel of every case in
#: this file: each assembles on every target in TARGETS
PTXAS_13_5 = {(cid, t): True for cid in [p.id for p in DIRECT] + ["dsl"] for t in TARGETS}


def _statements():
    out = {}
    for p in DIRECT:
        c = {k: v for k, v in p.values[0].items() if k not in ("special", "seed")}
        out[p.id] = direct_stmt(_ins(c.pop("kind"), c.pop("n"), **c).opcode)
    out["dsl"] = dsl_stmt(_ins("mxf4nvf4", 256, atype="e2m1", block=16, stype="ue4m3").opcode,
                          8192, 8704)
    return out


def test_kernels_legality_agrees_with_ptxas(tmp_path):
    """warpsim's checker accepts every tcgen05 statement used here where ptxas 13.5 accepted the
    kernel (stored); live re-check where ptxas 13.5 is installed (pip nvidia-cuda-nvcc==13.5.*)."""
    import glob
    import subprocess

    from warpsim.ptx.ops.tcgen05 import check

    stmts = _statements()
    for cid, st in stmts.items():
        for t in TARGETS:
            for line in st.splitlines():
                if line.strip().startswith("tcgen05"):
                    check(line.strip(), t, (9, 0))  # raises where warpsim would refuse
            assert PTXAS_13_5[(cid, t)]
    found = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "nvidia", "cu13", "bin", "ptxas"))
    if not found or "13.5" not in subprocess.run([found[0], "--version"], capture_output=True, text=True).stdout:
        pytest.skip("ptxas 13.5 not installed")
    for cid, st in stmts.items():
        for t in TARGETS:
            f = tmp_path / f"{cid}_{t}.ptx"
            f.write_text(_kernel(st, 4096, 10752, 2, t))
            r = subprocess.run([found[0], f"-arch={t}", str(f), "-o", str(tmp_path / "x.cubin")],
                               capture_output=True, text=True)
            assert (r.returncode == 0) == PTXAS_13_5[(cid, t)], (cid, t, r.stderr)
