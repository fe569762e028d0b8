"""Sparse ``tcgen05.mma.sp`` on the machine: metadata written into Tensor Memory with
``tcgen05.st`` (the forms harness fills all 256 columns from an image), one mma.sp from thread 0,
D read back with ``tcgen05.ld``; the image must equal the matrix-level model
(:func:`warpsim.tensorcore.tcgen05.compute_sparse_codes`) given the same stored A, B and metadata.

The metadata layout is restated here from its sources, not imported: CuTe ``tmem_e_frg`` (M=128)
and JAX Mosaic GPU's sparse tcgen05 path -- 16-bit and tf32 A: one 32-bit column per
instruction, row m in lane m%8 + 16(m//16) + 8(chunk//4), bits 4(chunk%4) + 16((m//8)%2), the
sparsity selector picking the column of a pair; 8-bit and 4-bit A: row m in lane m, 16 nibbles
over two columns.  No Blackwell GPU has run these kernels.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warpsim.errors import MetadataError
from warpsim.kernel.sanitizer import SanitizerError
from warpsim.tensorcore import tcgen05 as T

from test_tcgen05_forms import FULL, COLS, _offsets, d_cells, k_major, launch, pack_dense4, random_codes

META_COL = 160  # metadata columns (even: CuTe/Mosaic pass an even column, the selector adds 0/1)
SF_A, SF_B = 192, 224

#: (kind, atype, dtype, extra make() keywords): one case per sparse kind
CASES = [
    ("f16", "bf16", "f32", {}),
    ("tf32", "tf32", "f32", {}),
    ("f8f6f4", "e4m3", "f16", {}),
    ("i8", "s8", "s32", {}),
    ("mxf8f6f4", "e5m2", "f32", {}),
    ("mxf4", "e2m1", "f32", {}),
    ("mxf4nvf4", "e2m1", "f32", dict(block=16, stype="ue4m3")),
]
#: nibble values per granularity (ISA lists; 0b0110 included)
NIBS = {2: (0x4, 0xE), 4: (0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE), 8: (0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE)}


def meta_cell(kind, m, c, sel, group=16):
    """(lane, column, bit) of the nibble of row m, chunk c (restated, see the module text);
    ``group``: lanes between 16-row groups (32 in the half-data-path layout F of M=64, where rows
    16g..16g+15 use lanes 32g..32g+15 as D does [noheat61/triton, run on an sm_110])."""
    if kind in ("f16", "tf32"):
        return m % 8 + group * (m // 16) + 8 * (c // 4), sel, 4 * (c % 4) + 16 * ((m // 8) % 2)
    return m % 16 + group * (m // 16), c // 8, 4 * (c % 8)


def _image(kind, codes, t):
    if kind in ("mxf4", "mxf4nvf4"):
        return k_major(pack_dense4(codes.astype(np.uint8)))
    esz = {"f16": 2, "bf16": 2, "tf32": 4}.get(t, 1)
    by = codes.astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[esz]).view(np.uint8)
    return k_major(by.reshape(codes.shape[0], -1))


def run_case(kind, atype, dtype, extra, n=64, sel=0, seed=0, bad=None, m=128, ws=False,
             d_lane=0, meta_lane=None, copies_differ=False, specials=False, zcm=None, max_shift=0):
    """One sparse mma on the harness; ``m``/``ws`` pick the data-path layout: M=64 (layout F:
    16-row groups 32 lanes apart, D and metadata at lane ``d_lane`` / ``meta_lane``, 0 or 16),
    .ws M=64/32 (CuTe tmem_e_frg_ws: the M=128 rule over M rows, copied 128/M times M lanes
    apart; ``copies_differ`` gives each copy its own nibbles, copy g serving D's g-th N part)."""
    rng = np.random.default_rng(seed)
    ins = T.make(kind, (m, n), dtype=dtype, atype=atype, sparse=True, sparse_id2=sel, ws=ws,
                 max_shift=max_shift, **extra)
    meta_lane = d_lane if meta_lane is None else meta_lane
    copies = 128 // m if ws else 1
    group = 32 if (m == 64 and not ws) else 16
    m, n, k = ins.shape
    g = {"tf32": 2, "mxf4": 8, "mxf4nvf4": 8}.get(kind, 4)
    a = random_codes(atype, (m, k // 2), rng)  # the stored (compressed) A
    b = random_codes(atype, (k, n), rng)
    if specials:  # +-0, +-Inf, NaN and the extremes sprinkled over A and B
        sp = np.asarray(T.formats.encode(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0,
                                                   -6e-8]), atype), np.uint64)
        a[3::7, 1::5] = sp[rng.integers(0, sp.size, a[3::7, 1::5].shape)]
        b[5::11, 2::9] = sp[rng.integers(0, sp.size, b[5::11, 2::9].shape)]
    nibs = rng.choice(NIBS[g], (copies if copies_differ else 1, m, k // g))
    nibs = np.broadcast_to(nibs, (copies, m, k // g)).copy()
    if bad is not None:
        nibs[:, bad[0], bad[1]] = bad[2]
    nib = nibs[0]
    A_img, da = _image(kind, a, atype)
    b_img = b
    if zcm is not None:  # .ws zero-column mask: B holds N + 8 columns, D reads them shifted
        b_img = random_codes(atype, (k, n + 8), rng)
        b = T.ws_b_operand(ins, b_img, zcm)
    B_img, db = _image(kind, b_img.T.copy(), atype)
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    for cp in range(copies):
        for r in range(m):
            for c in range(k // g):
                lane, col, bit = meta_cell(kind, r, c, sel, group)
                lane += meta_lane + m * cp
                cell = int(tmem[0, lane, META_COL + col])
                tmem[0, lane, META_COL + col] = (cell & ~(0xF << bit) | int(nibs[cp, r, c]) << bit) & 0xFFFFFFFF
    P, L, C = d_cells(m, n, 1, ws)
    L, C = L + d_lane, C + 32
    c_codes = tmem[0, L, C] & (0xFFFF if dtype == "f16" else 0xFFFFFFFF)
    kw, extra_ops = {}, ""
    if ins.block_scale:
        v = ins.scale_vec
        sfa = np.asarray(T.formats.encode(2.0 ** rng.integers(-2, 3, (m, v)), ins.stype), np.uint32)
        sfb = np.asarray(T.formats.encode(2.0 ** rng.integers(-2, 3, (v, n)), ins.stype), np.uint32)
        for s, nmn, col0 in ((sfa, m, SF_A), (sfb.T, n, SF_B)):  # CuTe tmem_sf_frg 4by1
            for r in range(nmn):
                for j in range(v):
                    for q in range(4):
                        cell = int(tmem[0, r % 32 + 32 * q, col0 + r // 32])
                        tmem[0, r % 32 + 32 * q, col0 + r // 32] = (cell & ~(0xFF << 8 * j) | int(s[r, j]) << 8 * j)
        kw = dict(sa=sfa, sb=sfb)
        extra_ops = ", [%r18], [%r19]"
    # %r17 (the A offset slot) carries the metadata address
    stmt = _offsets(f"{ins.opcode} [%r16], %rd15, %rd17, [%r17], %r15{extra_ops}, %p4"
                    f"{', %rd38' if zcm is not None else ''};",
                    d=(d_lane << 16) + 32, a=(meta_lane << 16) + META_COL, sfa=SF_A, sfb=SF_B)
    if zcm is not None:
        stmt = f"mov.b64 %rd38, {zcm:#x};\n" + stmt
    out = launch(stmt, A_img, B_img, tmem, ins.idesc, da, db)
    want = tmem.copy()
    w = n // copies  # copy g of the .ws metadata serves D columns [g w, (g + 1) w) [INF]
    for cp in range(copies):
        sub = ins if copies == 1 else replace(ins, n=w)
        cols = slice(cp * w, cp * w + w)
        want[0, L[:, cols], C[:, cols]] = T.compute_sparse_codes(
            sub, a, b[:, cols], c_codes[:, cols], nibs[cp], **kw).astype(np.uint32)
    return out, want, (ins, a, b, nib, c_codes)


@pytest.mark.parametrize("kind,atype,dtype,extra", CASES, ids=[c[0] for c in CASES])
def test_sparse_mma_from_tmem_metadata(kind, atype, dtype, extra):
    out, want, (ins, a, b, nib, c) = run_case(kind, atype, dtype, extra)
    assert np.array_equal(out, want)
    # kind::i8 is exact: D = (A scattered to its logical positions by the metadata) . B + C,
    # which a misplaced nibble or a wrong metadata column would break
    if kind == "i8":
        cols = T.sparse_positions(ins, nib)
        logical = np.zeros((128, ins.k), np.int64)
        np.put_along_axis(logical, cols, T.formats.decode(a, "s8").astype(np.int64), axis=-1)
        ref = logical @ T.formats.decode(b, "s8").astype(np.int64) + T.formats.decode(c, "s32").astype(np.int64)
        assert np.array_equal(out[0, :, 32:96].astype(np.int64), ref & 0xFFFFFFFF)


def test_selector_one_reads_the_odd_column():
    out, want, _ = run_case("f16", "f16", "f32", {}, sel=1, seed=3)
    assert np.array_equal(out, want)


def _finding(match, **kw):
    with pytest.raises(SanitizerError) as ei:
        run_case(**kw)
    f = ei.value.findings[0]
    assert f.kind == "sparse-metadata" and re.search(match, f.message), ei.value
    return f


def test_invalid_metadata_is_a_metadata_error():
    # row 5, chunk 2: nibble 0x5 (equal indices) is undefined in the ISA; the machine stops with
    # the matrix level's MetadataError (finding kind 'sparse-metadata', as mma.sp), naming row,
    # chunk and value
    _finding(r"row 5, chunk 2 .*0x5", kind="f16", atype="f16", dtype="f32", extra={},
             bad=(5, 2, 0x5), seed=1)
    _finding(r"row 100, chunk 7 .*0x8", kind="tf32", atype="tf32", dtype="f32", extra={},
             bad=(100, 7, 0x8), seed=2)
    ins = T.make("f16", (128, 16), dtype="f32", atype="f16", sparse=True)
    nib = np.full((128, 8), 0x4)
    nib[9, 3] = 0xF
    with pytest.raises(MetadataError, match=r"row 9, chunk 3 \(k 12\.\.15\) has nibble 0xF") as e:
        T.compute_sparse_codes(ins, np.zeros((128, 16), np.uint64), np.zeros((32, 16), np.uint64),
                               np.zeros((128, 16), np.uint64), nib)
    assert (e.value.row, e.value.chunk, e.value.value) == (9, 3, 0xF)


def test_refused_layouts_say_why():
    # selectors 2-3 of f16/tf32: no source uses them (CuTe takes bit 0 of the column, Mosaic GPU
    # and the Triton port k % 2)
    with pytest.raises(SanitizerError, match="selector 2"):
        run_case("f16", "f16", "f32", {}, sel=2)
    # cta_group::2 M=128 sparse uses the ISA's layout C (4x1, half the data path), drawn only
    ins = T.make("f16", (128, 64), dtype="f32", atype="f16", cta_group=2, sparse=True)
    desc = T.SmemDescriptor(0, 128, 512).encode()
    with pytest.raises(SanitizerError, match="layout C"):
        launch(_offsets(f"{ins.opcode} [%r16], %rd15, %rd17, [%r17], %r15, %p4;", d=32, a=META_COL),
               np.zeros((2, 4096), np.uint8), np.zeros((2, 4096), np.uint8),
               np.zeros((2, 128, COLS), np.uint32), ins.idesc, desc, desc, cg=2)


#: M=64 (layout F) and .ws M=64/32 (layouts E, G) cases: (kind, atype, dtype, extra, keywords)
LAYOUT_CASES = [
    pytest.param("f16", "bf16", "f32", {}, dict(m=64), id="m64-f16"),
    pytest.param("f16", "f16", "f32", {}, dict(m=64, sel=1, d_lane=16), id="m64-f16-lane16-sel1"),
    pytest.param("tf32", "tf32", "f32", {}, dict(m=64), id="m64-tf32"),
    pytest.param("f16", "f16", "f16", {}, dict(m=64, specials=True), id="m64-f16-specials"),
    pytest.param("f16", "f16", "f32", {}, dict(m=32, ws=True, specials=True, sel=1),
                 id="ws-m32-f16-specials-sel1", marks=FULL),
    pytest.param("f8f6f4", "e4m3", "f32", {}, dict(m=64, d_lane=16), id="m64-e4m3-lane16"),
    pytest.param("i8", "s8", "s32", {}, dict(m=64), id="m64-i8", marks=FULL),
    pytest.param("f16", "f16", "f32", {}, dict(m=32, ws=True), id="ws-m32-f16"),
    pytest.param("i8", "s8", "s32", {}, dict(m=64, ws=True, n=128), id="ws-m64-i8"),
    pytest.param("tf32", "tf32", "f32", {}, dict(m=64, ws=True, sel=1), id="ws-m64-tf32-sel1",
                 marks=FULL),
    pytest.param("f8f6f4", "e5m2", "f16", {}, dict(m=32, ws=True, n=128), id="ws-m32-e5m2",
                 marks=FULL),
    pytest.param("f16", "bf16", "f32", {}, dict(m=128, ws=True), id="ws-m128-bf16", marks=FULL),
    # sparse .ws with a zero-column mask: ISA Example 4's descriptor (M=32, shift 2)
    pytest.param("f16", "f16", "f32", {}, dict(m=32, ws=True, max_shift=8, zcm=(
        0x01020100 | 0b0011 << 32 | 1 << 39 | 2 << 40 | 3 << 48 | 2 << 56)), id="ws-m32-f16-zcm-shift2"),
]


@pytest.mark.parametrize("kind,atype,dtype,extra,kw", LAYOUT_CASES)
def test_sparse_layouts_f_e_g(kind, atype, dtype, extra, kw):
    """M=64 (layout F) and .ws M=64/32: metadata written at the layout restated in meta_cell /
    run_case, D read back equal to compute_sparse_codes; i8 also equal to the exact integer
    product of the scattered A (a misplaced nibble breaks it)."""
    out, want, (ins, a, b, nib, c) = run_case(kind, atype, dtype, extra, seed=21, **kw)
    assert np.array_equal(out, want)
    if kind == "i8" and not ins.ws:
        cols = T.sparse_positions(ins, nib)
        logical = np.zeros((ins.m, ins.k), np.int64)
        np.put_along_axis(logical, cols, T.formats.decode(a, "s8").astype(np.int64), axis=-1)
        ref = logical @ T.formats.decode(b, "s8").astype(np.int64) + T.formats.decode(c, "s32").astype(np.int64)
        P, L, C = d_cells(ins.m, ins.n)
        assert np.array_equal(out[0, L, C + 32].astype(np.int64), ref & 0xFFFFFFFF)


def test_ws_copies_serve_their_part_of_n():
    """.ws M=32: four copies of the metadata (CuTe tmem_e_frg_ws); with different nibbles in each
    copy, D's g-th quarter of N follows copy g [INF: the lanes computing that quarter read their
    own copy] -- and differs from what copy 0 alone gives."""
    out, want, (ins, a, b, nib, c) = run_case("f16", "f16", "f32", {}, m=32, ws=True, seed=5,
                                             copies_differ=True)
    assert np.array_equal(out, want)
    P, L, C = d_cells(32, 64, 1, True)
    only0 = T.compute_sparse_codes(ins, a, b, c, nib).astype(np.uint32)
    assert not np.array_equal(out[0, L, C + 32], only0)


def test_half_data_path_alignment_is_checked():
    """Layout F: D at lane 16 and metadata at lane 0 break the ISA's rule that A, D and the
    metadata use the same lane alignment (the Triton port saw a misaligned-address fault)."""
    with pytest.raises(SanitizerError, match="same lane alignment"):
        run_case("f16", "f16", "f32", {}, m=64, d_lane=16, meta_lane=0)


@pytest.mark.parametrize("key", [(128, 1, False), (128, 2, False), (128, 1, True), (64, 1, False),
                                 (64, 1, True), (32, 1, True)], ids=lambda k: f"m{k[0]}-cg{k[1]}{'-ws' if k[2] else ''}")
def test_meta_cells_are_disjoint(key):
    """Every layout of facts.tcgen05.SPARSE_META_LAYOUTS gives each nibble of each copy its own 4
    bits inside 128 lanes; copies do not overlap; layout F leaves lanes 16-31 of every 32 free
    (the lane-16-aligned twin's)."""
    from warpsim.facts.tcgen05 import SPARSE_META, SPARSE_META_LAYOUTS, sparse_meta_cells

    lay = SPARSE_META_LAYOUTS[key]
    for kind in lay.kinds:
        chunks = 8 if SPARSE_META[kind].layout == "pair" else 16  # one instruction's
        seen = set()
        for cp in range(lay.copies):
            L, C, B = sparse_meta_cells(kind, lay.rows, chunks, 0, group_stride=lay.group_stride, copy=cp)
            assert L.min() >= 0 and L.max() < 128 and (B % 4 == 0).all() and B.max() < 32
            cells = set(zip(L.ravel().tolist(), C.ravel().tolist(), B.ravel().tolist()))
            assert len(cells) == L.size and not cells & seen, (kind, cp)
            seen |= cells
            if lay.layout == "F":
                assert ((L % 32) < 16).all()


def test_matrix_level_sparse_m64_and_ws_forms():
    """warpsim.matmul on the M=64 and .ws sparse forms (A as its logical 2:4 matrix) agrees with a
    float64 product within the f32 rounding of the fused sum."""
    import warpsim

    rng = np.random.default_rng(3)
    for kind, shape, ws, atype in (("f16", "m64n64k32", False, "bf16"), ("tf32", "m32n64k16", True, "tf32")):
        m, n, k = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
        a = rng.standard_normal((m, k))
        g = 2 if kind == "tf32" else 4
        keep = np.argsort(rng.random((m, k // g, g)), -1)[..., : g // 2]
        mask = np.zeros((m, k // g, g), bool)
        np.put_along_axis(mask, keep, True, -1)
        a = np.where(mask.reshape(m, k), a, 0.0)
        b = rng.standard_normal((k, n))
        op = f"tcgen05.mma{'.ws' if ws else ''}.sp.cta_group::1.kind::{kind}"
        d = warpsim.matmul(op, a, b, None, shape=shape, dtype="f32", atype=atype)
        ref = T.formats.decode(T.formats.encode(a, atype), atype) @ T.formats.decode(T.formats.encode(b, atype), atype)
        assert np.allclose(d, ref, rtol=1e-5, atol=1e-5), kind


def _cute_eval(shape, stride, coord):
    """A CuTe layout (nested shape / stride tuples) at a flat coordinate per top-level mode,
    each mode colexicographic."""
    off = 0
    for sh, st, x in zip(shape, stride, coord):
        shs, sts = (sh, st) if isinstance(sh, tuple) else ((sh,), (st,))
        for a_, b_ in zip(shs, sts):
            off += (x % a_) * b_
            x //= a_
    return off


#: CuTe tmem_e_frg_ws atoms (mma_traits_sm100_frag.hpp, CUTLASS 7107b05), restated as data:
#: (kind, M) -> (shape, stride) over (M, K[, copy]); virtual address v -> TMEM lane v % 128 and
#: bit (v // 128) * bits-per-logical-element (tf32: 2, the sparse_elem<4> storage; else 1)
CUTE_WS = {
    ("tf32", 128): (((8, 2, 8), (8, 2)), ((1, 1024, 16), (128, 8))),
    ("tf32", 64): (((8, 2, 4), (8, 2), 2), ((1, 1024, 16), (128, 8), 64)),
    ("tf32", 32): (((8, 2, 2), (8, 2), 4), ((1, 1024, 16), (128, 8), 32)),
    ("f16", 128): (((8, 2, 8), (16, 2)), ((1, 2048, 16), (128, 8))),
    ("f16", 64): (((8, 2, 4), (16, 2), 2), ((1, 2048, 16), (128, 8), 64)),
    ("f16", 32): (((8, 2, 2), (16, 2), 4), ((1, 2048, 16), (128, 8), 32)),
    ("i8", 128): ((128, 64), (1, 128)),
    ("i8", 64): ((64, (64, 2)), (1, (128, 64))),
    ("i8", 32): ((32, (64, 4)), (1, (128, 32))),
}


@pytest.mark.parametrize("kind,m", sorted(CUTE_WS), ids=[f"{k}-m{m}" for k, m in sorted(CUTE_WS)])
def test_ws_metadata_layout_is_cutes(kind, m):
    """facts.tcgen05 (SPARSE_META_LAYOUTS + sparse_meta_cells) puts every metadata bit of every
    copy where CuTe's tmem_e_frg_ws atom does."""
    from warpsim.facts.tcgen05 import SPARSE_META, SPARSE_META_LAYOUTS, sparse_meta_cells

    shape, stride = CUTE_WS[(kind, m)]
    lay = SPARSE_META_LAYOUTS[(m, 1, True)]
    chunk = SPARSE_META[kind].chunk
    k = {"tf32": 16, "f16": 32, "i8": 64}[kind]
    bpe = 4 // chunk  # metadata bits per logical element
    assert lay.copies == 128 // m  # CuTe's copy mode (M=64: 2 at +64 lanes, M=32: 4 at +32)
    for cp in range(128 // m):
        L, C, B = sparse_meta_cells(kind, m, k // chunk, 0, group_stride=lay.group_stride, copy=cp)
        for r in range(m):
            for kk in range(k):
                coord = (r, kk, cp) if len(shape) == 3 else (r, kk + k * cp)
                v = _cute_eval(shape, stride, coord)
                c = kk // chunk
                assert (L[r, c], 32 * C[r, c] + B[r, c] + bpe * (kk % chunk)) == \
                    (v % 128, (v // 128) * bpe), (r, kk, cp)


def test_m64_metadata_layout_is_the_triton_ports():
    """Layout F restated from noheat61/triton's TMEM encodings (DOT_SPARSE_INTERNALS.md, section
    10): 16-bit i16 element (m, j) (4 nibbles, j = chunk // 4) at lane bits (r0..r6) and 16-bit
    column bits (c0, c1) with m = r0 + 2 r1 + 4 r2 + 16 r5 + 32 r6 + 8 c0, j = r3 + 2 c1
    (sparseMetaRowPaired, blockM=64); 8-bit: m = r0 + 2 r1 + 4 r2 + 8 r3 + 16 r5 + 32 r6,
    j = c0 + 2 c1 (blockM=64 identity)."""
    from warpsim.facts.tcgen05 import SPARSE_META_LAYOUTS, sparse_meta_cells

    lay = SPARSE_META_LAYOUTS[(64, 1, False)]
    for kind, paired, chunks in (("f16", True, 8), ("i8", False, 16)):
        L, C, B = sparse_meta_cells(kind, 64, chunks, 0, group_stride=lay.group_stride)
        for lane in range(128):
            for h in range(2 * (chunks // 8)):  # 16-bit halves of the metadata columns
                r = [(lane >> i) & 1 for i in range(7)]
                c0, c1 = h & 1, h >> 1
                if r[4]:
                    continue  # lanes 16-31 of each 32: unused (half the data path)
                if paired:
                    m, j = r[0] + 2 * r[1] + 4 * r[2] + 16 * r[5] + 32 * r[6] + 8 * c0, r[3] + 2 * c1
                else:
                    m, j = r[0] + 2 * r[1] + 4 * r[2] + 8 * r[3] + 16 * r[5] + 32 * r[6], c0 + 2 * c1
                for q in range(4):  # nibble q of the i16
                    c = 4 * j + q
                    assert (L[m, c], 32 * C[m, c] + B[m, c]) == (lane, 16 * h + 4 * q), (kind, m, c)


def test_matrix_level_compress_round_trip():
    rng = np.random.default_rng(7)
    for kind, atype, dtype, extra in CASES:
        ins = T.make(kind, (128, 16), dtype=dtype, atype=atype, sparse=True, **extra)
        g = {"tf32": 2, "mxf4": 8, "mxf4nvf4": 8}.get(kind, 4)
        a = random_codes(atype, (128, ins.k // 2), rng)
        one = T.formats.encode(np.ones(1), atype)[0]
        a = np.where(T.formats.decode(a, atype) == 0, one, a)  # stored values non-zero
        nib = rng.choice(NIBS[g], (128, ins.k // g))
        cols = T.sparse_positions(ins, nib)
        logical = np.zeros((128, ins.k), a.dtype)
        np.put_along_axis(logical, cols, a, axis=-1)
        a2, nib2 = T.compress(ins, logical)
        # same logical matrix back (0b0110 comes back as 0b1001 with its elements swapped)
        back = np.zeros_like(logical)
        np.put_along_axis(back, T.sparse_positions(ins, nib2), a2, axis=-1)
        assert np.array_equal(back, logical)


#: ptxas 13.5 (cuda_13.5.r13.5, 39125733) on the whole generated kernel of each CASES entry:
#: every one assembles on sm_100a / sm_103a / sm_110a except kind::i8 on sm_103a
PTXAS_13_5 = {(kind, t): not (kind == "i8" and t == "sm_103a")
              for kind, *_ in CASES for t in ("sm_100a", "sm_103a", "sm_110a")}


def _stmt(kind, atype, dtype, extra, m=128, ws=False, zcm=None, **_):
    ins = T.make(kind, (m, 64), dtype=dtype, atype=atype, sparse=True, ws=ws, **extra)
    ex = ", [%r18], [%r19]" if ins.block_scale else ""
    return f"{ins.opcode} [%r16], %rd15, %rd17, [%r17], %r15{ex}, %p4{', %rd38' if zcm else ''};"


def _all_cases(sample=False):
    """(name, _stmt arguments) of CASES and LAYOUT_CASES (``sample``: without the ones CI
    leaves out unless WARPSIM_TCGEN05_FULL=1)."""
    for kind, atype, dtype, extra in CASES:
        yield kind, (kind, atype, dtype, extra), {}
    full = bool(os.environ.get("WARPSIM_TCGEN05_FULL"))
    for p in LAYOUT_CASES:
        if sample and p.marks and not full:
            continue
        kind, atype, dtype, extra, kw = p.values
        yield p.id, (kind, atype, dtype, extra), kw


#: ptxas 13.5 on the whole generated kernel of each LAYOUT_CASES entry (M=64, .ws.sp M=32/64/128):
#: every one assembles on sm_100a / sm_103a / sm_110a except kind::i8 on sm_103a
PTXAS_13_5.update({(p.id, t): not (p.values[0] == "i8" and t == "sm_103a")
                   for p in LAYOUT_CASES for t in ("sm_100a", "sm_103a", "sm_110a")})


def test_legality_agrees_with_ptxas():
    from warpsim.errors import PtxError
    from warpsim.ptx.ops.tcgen05 import check

    for name, args, kw in _all_cases():
        for t in ("sm_100a", "sm_103a", "sm_110a"):
            try:
                check(_stmt(*args, **kw), t, (9, 0))
                ok = True
            except PtxError:
                ok = False
            assert ok == PTXAS_13_5[(name, t)], (name, t)


def test_kernels_assemble_with_ptxas_13_5(tmp_path):
    """Live re-check of PTXAS_13_5 where ptxas 13.5 is installed (pip nvidia-cuda-nvcc==13.5.*)."""
    import glob
    import subprocess

    from test_tcgen05_forms import _kernel

    found = [p for p in glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "nvidia", "cu13", "bin", "ptxas"))]
    if not found or "13.5" not in subprocess.run([found[0], "--version"], capture_output=True, text=True).stdout:
        pytest.skip("ptxas 13.5 not installed")
    for name, args, kw in _all_cases(sample=True):
        lane = kw.get("d_lane", 0) << 16
        stmt = _offsets(_stmt(*args, **kw), d=lane + 32, a=lane + META_COL, sfa=SF_A, sfb=SF_B)
        if kw.get("zcm"):
            stmt = f"mov.b64 %rd38, {kw['zcm']:#x};\n" + stmt
        for t in ("sm_100a", "sm_103a", "sm_110a"):
            f = tmp_path / f"{name}_{t}.ptx"
            f.write_text(_kernel(stmt, 4096, 8192, 1, t))
            r = subprocess.run([found[0], f"-arch={t}", str(f), "-o", str(tmp_path / "x.cubin")],
                               capture_output=True, text=True)
            assert (r.returncode == 0) == PTXAS_13_5[(name, t)], (name, t, r.stderr)


def mosaic_meta_image(idx: np.ndarray) -> np.ndarray:
    """JAX Mosaic GPU's shared-memory image of 16-bit-A metadata (its test_mma_sparse format,
    restated): idx (128, 32, 2) holds the two 2-bit indices of 32 chunks (64 entries, four K32
    instructions) per row; entry e = 2 chunk + j of row m = 16a + 8b + c goes to image row
    16a + 8(e // 8 % 2) + c, entry slot 16(e // 16) + 8b + e % 8 of that row's 64 2-bit slots
    (16 bytes, little-endian).  Mosaic copies the 128 x 16-byte image with one
    tcgen05.cp.128x128b (image row r -> TMEM lane r, slot q -> column q // 16, bits 2(q % 16))."""
    ent = idx.reshape(128, 64)
    m, e = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    row = 16 * (m // 16) + 8 * (e // 8 % 2) + m % 8
    slot = 16 * (e // 16) + 8 * (m // 8 % 2) + e % 8
    bits = np.zeros((128, 128), np.uint8)
    bits[row, 2 * slot] = ent & 1
    bits[row, 2 * slot + 1] = ent >> 1
    return np.packbits(bits, axis=-1, bitorder="little").ravel()


def test_metadata_copied_by_tcgen05_cp_in_mosaic_layout():
    """Metadata staged in shared memory as JAX Mosaic GPU stages it and copied into TMEM with
    tcgen05.cp.128x128b; the mma of K step 3 (metadata address + 2, selector 1) must use chunks
    24..31 of every row: CuTe's tmem_e_frg and Mosaic's format describe the same cells."""
    rng = np.random.default_rng(11)
    ins = T.make("f16", (128, 64), dtype="f32", atype="f16", sparse=True, sparse_id2=1)
    m, n, k = ins.shape
    pairs = np.array([(i, j) for i in range(4) for j in range(4) if i < j])
    idx = pairs[rng.integers(0, 6, (128, 32))]  # (128, 32, 2) for four K steps
    a = random_codes("f16", (m, k // 2), rng)
    b = random_codes("f16", (k, n), rng)
    A_img, da = _image("f16", a, "f16")
    meta_off = A_img.size
    A_img = np.concatenate([A_img, mosaic_meta_image(idx)])
    B_img, db = _image("f16", b.T.copy(), "f16")
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    cp_desc = T.SmemDescriptor(meta_off, 128, 128).encode()
    stmt = _offsets(f"""mov.u32 %r14, sA;
    shr.u32 %r14, %r14, 4;
    cvt.u64.u32 %rd14, %r14;
    add.u64 %rd21, %rd14, {cp_desc};
    tcgen05.cp.cta_group::1.128x128b [%r17], %rd21;
    add.u32 %r17, %r17, 2;
    {ins.opcode} [%r16], %rd15, %rd17, [%r17], %r15, %p4;""", d=32, a=META_COL)
    out = launch(stmt, A_img, B_img, tmem, ins.idesc, da, db)
    P, L, C = d_cells(m, n)
    C = C + 32
    nib = (idx[:, 24:32, 0] | idx[:, 24:32, 1] << 2)  # K step 3: chunks 24..31
    want = T.compute_sparse_codes(ins, a, b, tmem[0, L, C], nib).astype(np.uint32)
    assert np.array_equal(out[0, L, C], want)
    other = T.compute_sparse_codes(ins, a, b, tmem[0, L, C], idx[:, 16:24, 0] | idx[:, 16:24, 1] << 2)
    assert not np.array_equal(other, want)  # the step matters


def test_cta_group_2_m256_pair():
    """Sparse cta_group::2, M=256 (layout A): each CTA of the pair holds 128 rows of stored A,
    N/2 columns of B, its 128 rows of D, and -- at the same address -- its own rows' metadata
    (JAX Mosaic GPU's collective sparse test allocates the metadata per CTA that way) [INF]."""
    rng = np.random.default_rng(12)
    m, n = 256, 64
    ins = T.make("f16", (m, n), dtype="f32", atype="f16", cta_group=2, sparse=True)
    k = ins.k
    a = random_codes("f16", (m, k // 2), rng)
    b = random_codes("f16", (k, n), rng)
    nib = rng.choice(NIBS[4], (m, k // 4))
    imgs = [_image("f16", a[128 * p:128 * p + 128], "f16") for p in (0, 1)]
    bimg = [_image("f16", b[:, 32 * p:32 * p + 32].T.copy(), "f16") for p in (0, 1)]
    tmem = rng.integers(0, 2**32, (2, 128, COLS), dtype=np.uint64).astype(np.uint32)
    for p in (0, 1):
        for r in range(128):
            for c in range(k // 4):
                lane, col, bit = meta_cell("f16", r, c, 0)
                cell = int(tmem[p, lane, META_COL + col])
                tmem[p, lane, META_COL + col] = (cell & ~(0xF << bit) | int(nib[128 * p + r, c]) << bit)
    stmt = _offsets(f"{ins.opcode} [%r16], %rd15, %rd17, [%r17], %r15, %p4;", d=32, a=META_COL)
    out = launch(stmt, np.stack([i[0] for i in imgs]), np.stack([i[0] for i in bimg]), tmem,
                 ins.idesc, imgs[0][1], bimg[0][1], cg=2)
    P, L, C = d_cells(m, n, 2)
    want = tmem.copy()
    want[P, L, C + 32] = T.compute_sparse_codes(ins, a, b, tmem[P, L, C + 32], nib)
    assert np.array_equal(out, want)


def test_a_in_tensor_memory():
    """Stored A (128 x K/2 16-bit values) in Tensor Memory, two per 32-bit cell (as JAX Mosaic
    GPU's test_mma_sparse_lhs_tmem packs it; warpsim's dense A-in-TMEM layout), metadata from
    TMEM: D equals the model."""
    rng = np.random.default_rng(13)
    ins = T.make("f16", (128, 64), dtype="f32", atype="f16", sparse=True)
    m, n, k = ins.shape
    a = random_codes("f16", (m, k // 2), rng)
    b = random_codes("f16", (k, n), rng)
    nib = rng.choice(NIBS[4], (m, k // 4))
    B_img, db = _image("f16", b.T.copy(), "f16")
    tmem = rng.integers(0, 2**32, (1, 128, COLS), dtype=np.uint64).astype(np.uint32)
    A_COL = 120
    tmem[0, :, A_COL:A_COL + k // 4] = (a[:, 0::2] | a[:, 1::2] << 16).astype(np.uint32)
    for r in range(m):
        for c in range(k // 4):
            lane, col, bit = meta_cell("f16", r, c, 0)
            cell = int(tmem[0, lane, META_COL + col])
            tmem[0, lane, META_COL + col] = (cell & ~(0xF << bit) | int(nib[r, c]) << bit)
    stmt = _offsets(f"add.u32 %r18, %r11, {A_COL};\n    "
                    f"{ins.opcode} [%r16], [%r18], %rd17, [%r17], %r15, %p4;", d=32, a=META_COL)
    out = launch(stmt, np.zeros(16, np.uint8), B_img, tmem, ins.idesc, 0, db)
    P, L, C = d_cells(m, n)
    want = tmem.copy()
    want[0, L, C + 32] = T.compute_sparse_codes(ins, a, b, tmem[0, L, C + 32], nib)
    assert np.array_equal(out, want)


_KIND_OF = {c[0]: c for c in CASES}


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(sorted(_KIND_OF)), seed=st.integers(0, 2**32 - 1),
       bad=st.integers(0, 15))
def test_positions_compress_property(kind, seed, bad):
    """Scattering stored values by their nibbles and compressing the result gives back the same
    logical matrix; every nibble outside the ISA's list is a MetadataError, every one inside is
    accepted."""
    _, atype, dtype, extra = _KIND_OF[kind]
    ins = T.make(kind, (128, 16), dtype=dtype, atype=atype, sparse=True, **extra)
    rng = np.random.default_rng(seed)
    g = {"tf32": 2, "mxf4": 8, "mxf4nvf4": 8}.get(kind, 4)
    rows = 4
    a = np.asarray(T.formats.encode(rng.integers(1, 4, (rows, ins.k // 2)).astype(float), atype),
                   np.uint64)  # non-zero values
    nib = rng.choice(NIBS[g], (rows, ins.k // g))
    logical = np.zeros((rows, ins.k), np.uint64)
    np.put_along_axis(logical, T.sparse_positions(ins, nib), a, axis=-1)
    a2, nib2 = T.compress(ins, logical)
    back = np.zeros_like(logical)
    np.put_along_axis(back, T.sparse_positions(ins, nib2), a2, axis=-1)
    assert np.array_equal(back, logical)
    nib[rows - 1, 0] = bad
    if bad in NIBS[g]:
        T.sparse_positions(ins, nib)
    else:
        with pytest.raises(MetadataError):
            T.sparse_positions(ins, nib)
