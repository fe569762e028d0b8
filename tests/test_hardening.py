"""Regression tests for issue 13 (what a hostile user found): each fails on the code before it.

1. cached tables handed to users cannot be made writable (cache poisoning);
2. Warp batch shapes are checked at construction;
3. 64-bit operands are not read from 32-bit words;
5. selectors are integers, and a selector that does not apply is refused;
6. errors come from warpsim's layer (legal_archs argument type, ragged register lists).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.tensorcore import blockscale, layouts, sparse
from warpsim.errors import PtxError, ShapeError

T = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP = "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"
BS = ("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
      ".f32.e4m3.e4m3.f32.ue8m0")


def _words(n: int, dtype=np.uint32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 16, size=(32, n)).astype(dtype)


# ---- 1. cache poisoning ---------------------------------------------------------------------

def _cached_arrays():
    ins = warpsim.decode(T)
    bs = warpsim.decode(BS, arch="sm_120a")
    yield "layout", lambda: warpsim.layout(T, "a")
    yield "layout d", lambda: warpsim.layout(ins, "d")
    yield "register_map", lambda: layouts.register_map(T, "b")
    yield "product_of_lane", lambda: layouts.product_of_lane("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16")
    yield "scale_a layout", lambda: warpsim.layout(BS, "scale_a", thread_id=1)
    yield "scale_b layout", lambda: blockscale.scale_layout(bs, "scale_b", 0, 2)
    yield "sparse metadata layout", lambda: sparse.metadata_layout(SP, 1)


@pytest.mark.parametrize("name,get", list(_cached_arrays()), ids=[n for n, _ in _cached_arrays()])
def test_cached_tables_cannot_be_made_writable(name, get):
    arr = get()
    before = arr.copy()
    node = arr
    while isinstance(node, np.ndarray):  # the array and every array it is a view of
        with pytest.raises(ValueError):
            node.setflags(write=True)
        with pytest.raises(ValueError):
            node.reshape(-1)[0] = 99
        node = node.base
    np.testing.assert_array_equal(get(), before)


def test_poisoning_attempt_leaves_packing_intact():
    A = np.arange(16 * 16, dtype=np.float64).reshape(16, 16) % 7
    want = warpsim.pack(T, "a", A)
    lay = warpsim.layout(T, "a")
    with pytest.raises(ValueError):
        lay.setflags(write=True)
    with pytest.raises(ValueError):
        lay.base.setflags(write=True)
    np.testing.assert_array_equal(warpsim.pack(T, "a", A), want)
    np.testing.assert_array_equal(warpsim.unpack(T, "a", want), A)


# ---- 2. Warp batch shapes ----------------------------------------------------------------------

@pytest.mark.parametrize("batch", ["12", (2.7,), True, (True, 2), 2.0, None, (2, "3"), np.float64(3),
                                   np.array([2.0]), np.array([[2]])])
def test_warp_batch_of_wrong_type(batch):
    with pytest.raises(TypeError, match="batch must be an int or a tuple of ints"):
        warpsim.Warp(batch=batch)


@pytest.mark.parametrize("batch", [2**70, 10**12, (10**6, 10**6), (2**40, 2**40, 0, 2**40)])
def test_warp_batch_too_large_is_refused_at_construction(batch):
    dims = batch if isinstance(batch, tuple) else (batch,)
    if 0 in dims:  # zero warps need no memory: accepted
        assert warpsim.Warp(batch=batch).batch == dims
        return
    warps = int(np.prod(dims, dtype=object))
    with pytest.raises(ShapeError, match="GiB") as e:
        warpsim.Warp(batch=batch)
    assert str(warps) in str(e.value)


@pytest.mark.parametrize("batch,shape", [(3, (3,)), (np.int64(2), (2,)), ((2, np.int32(3)), (2, 3)),
                                         ([4], (4,)), ((), ()), (np.array([2, 3]), (2, 3))])
def test_warp_batch_of_integers(batch, shape):
    assert warpsim.Warp(batch=batch).shape == shape + (32,)


def test_warp_negative_batch():
    with pytest.raises(ShapeError, match="non-negative"):
        warpsim.Warp(batch=(2, -1))


# ---- 3. 64-bit operands -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint16, np.uint8])
def test_f64_operands_from_narrow_words_are_type_errors(dtype):
    a, b, c = _words(1, dtype), _words(1, dtype), _words(2, dtype)
    with pytest.raises(TypeError, match="64-bit"):
        warpsim.mma(F64, a, b, c)
    with pytest.raises(TypeError, match="64-bit"):
        warpsim.mma(F64, a.astype(np.uint64), b.astype(np.uint64), c)
    with pytest.raises(TypeError, match="64-bit"):
        warpsim.unpack(F64, "a", a)


def test_f64_operands_from_64_bit_words_and_lists():
    a, b, c = (_words(n, np.uint64, s) for n, s in ((1, 1), (1, 2), (2, 3)))
    want = warpsim.mma(F64, a, b, c, arch="exact")
    np.testing.assert_array_equal(warpsim.mma(F64, a.astype(np.int64), b, c, arch="exact"), want)
    np.testing.assert_array_equal(warpsim.mma(F64, a.tolist(), b, c, arch="exact"), want)


# ---- 5. selectors -----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [np.array([0, 0]), np.array(0), 0.0, 1.0, False, True, np.bool_(False),
                                   [0], "0", None])
@pytest.mark.parametrize("name", ["byte_id_a", "thread_id_a", "byte_id_b", "thread_id_b"])
def test_mma_selector_types(name, value):
    with pytest.raises(TypeError, match=f"selector {name} must be an integer"):
        warpsim.mma(T, _words(4), _words(2), _words(4), **{name: value})


@pytest.mark.parametrize("value", [np.array([1]), 1.0, True, [1], (1,)])
@pytest.mark.parametrize("sel", ["byte_id", "thread_id"])
def test_layout_selector_types(sel, value):
    with pytest.raises(TypeError, match=f"selector {sel} must be an integer"):
        warpsim.layout(BS, "scale_a", **{sel: value})
    with pytest.raises(TypeError, match=f"selector {sel} must be an integer"):
        warpsim.layout(T, "a", **{sel: value})


def test_numpy_integer_selectors_are_accepted():
    got = warpsim.layout(BS, "scale_b", byte_id=np.int64(1), thread_id=np.uint8(3))
    np.testing.assert_array_equal(got, warpsim.layout(BS, "scale_b", byte_id=1, thread_id=3))
    a, b, c = _words(4), _words(2), _words(4)
    s = np.full(32, 0x7F7F7F7F, np.uint32)
    want = warpsim.mma(BS, a, b, c, arch="sm_120a", scale_a=s, scale_b=s, byte_id_a=1, thread_id_b=2)
    got = warpsim.mma(BS, a, b, c, arch="sm_120a", scale_a=s, scale_b=s, byte_id_a=np.int32(1),
                      thread_id_b=np.int64(2))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw", [dict(byte_id=5), dict(thread_id=1), dict(byte_id=np.int64(2))])
def test_layout_refuses_a_selector_that_does_not_apply(kw):
    with pytest.raises(PtxError, match="takes none"):
        warpsim.layout(T, "a", **kw)
    assert warpsim.layout(T, "a", byte_id=0, thread_id=0).shape == (32, 8, 2)


@pytest.mark.parametrize("arch", [["sm_90"], ("sm_90",), 90, b"sm_90"])
def test_arch_of_wrong_type(arch):
    for call in (lambda: warpsim.mma(T, _words(4), _words(2), _words(4), arch=arch),
                 lambda: warpsim.matmul(T, np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8)), arch=arch),
                 lambda: warpsim.golden(T, arch=arch)):
        with pytest.raises(TypeError, match="arch must be a target name"):
            call()


# ---- 6. messages from warpsim's layer ---------------------------------------------------------------

@pytest.mark.parametrize("x", [None, 5, 1.5, ["mma"], b"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"])
def test_legal_archs_argument_type(x):
    with pytest.raises(TypeError, match="legal_archs takes an instruction string"):
        warpsim.legal_archs(x)


def test_legal_archs_still_answers_strings_and_instructions():
    assert "sm_90" in warpsim.legal_archs(T)
    assert warpsim.legal_archs(warpsim.decode(T)) == warpsim.legal_archs(T)
    assert warpsim.legal_archs("mma.sync.bogus") == []


def test_ragged_register_words_name_the_argument():
    ragged = [[1, 2], [3]]
    with pytest.raises(ShapeError, match="operand b register words must be a rectangular array"):
        warpsim.mma(T, _words(4), ragged, _words(4))
    with pytest.raises(ShapeError, match="'a' register words must be a rectangular array"):
        warpsim.unpack(T, "a", ragged)
    with pytest.raises(ShapeError, match="'c' matrix must be a rectangular array"):
        warpsim.pack(T, "c", ragged)
    w = warpsim.Warp()
    with pytest.raises(ShapeError, match="values for %r0 must be a rectangular array"):
        w.write("%r0", ragged)
    with pytest.raises(ShapeError, match="values for %f1 must be a rectangular array"):
        w.write_float("%f1", ragged)
    with pytest.raises(ShapeError, match="scale_a words must be a rectangular array"):
        warpsim.mma(BS, _words(4), _words(2), _words(4), arch="sm_120a", scale_a=ragged, scale_b=np.zeros(32, np.uint32))


# ---- golden files (the fuzz suite's findings) -----------------------------------------------------

def _golden_files(tmp_path):
    import io
    import json

    g = warpsim.golden(T, seed=1)
    npz = Path(warpsim.write_golden(g, tmp_path / "ok.npz")).read_bytes()
    buf = io.BytesIO()
    np.savez(buf, a=np.array([{"x": 1}], dtype=object))
    pickled = buf.getvalue()
    buf = io.BytesIO()
    np.save(buf, np.zeros(3))
    npy = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, a_regs=np.zeros(3))
    partial = buf.getvalue()
    return {
        "truncated.npz": npz[: len(npz) // 2],  # zipfile.BadZipFile before
        "empty.npz": b"",  # EOFError before
        "npy.npz": npy,  # TypeError about the context manager protocol before
        "partial.npz": partial,  # KeyError 'seed' before
        "pickled.npz": pickled,
        "list.json": b"[1, 2]",  # TypeError 'list indices' before
        "empty-object.json": b"{}",  # KeyError before
        "shape.json": json.dumps({"arrays": {"a_regs": {"dtype": "uint32", "shape": [2], "data": [1]}}}).encode(),
        "objects.json": json.dumps({"arrays": {"a_regs": {"dtype": "O", "shape": [1], "data": [1]}}}).encode(),
        "huge.json": json.dumps({"arrays": {"a_regs": {"dtype": "uint32", "shape": [2**40], "data": []}}}).encode(),
        "big-int.json": json.dumps({"arrays": {"a_regs": {"dtype": "uint8", "shape": [1], "data": [256]}}}).encode(),
    }


def test_read_golden_refuses_files_that_are_not_golden_data(tmp_path):
    for name, content in _golden_files(tmp_path).items():
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(warpsim.WarpsimError, match="is not a golden .* file written by write_golden"):
            warpsim.read_golden(p)
        assert p.read_bytes() == content


def test_read_golden_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        warpsim.read_golden(tmp_path / "missing.npz")
    (tmp_path / "d.json").mkdir()
    with pytest.raises(IsADirectoryError):
        warpsim.read_golden(tmp_path / "d.json")
    with pytest.raises(TypeError):
        warpsim.read_golden(5)


@pytest.mark.parametrize("change", [None, [], {"instruction": T}, dict(seed=None), dict(batch="1"),
                                    dict(instruction=None), dict(d_regs=[1, 2]), dict(a=np.array(["x"]))])
def test_write_golden_refuses_what_is_not_golden_data(tmp_path, change):
    if isinstance(change, dict) and "instruction" in change and len(change) == 1 and change["instruction"] == T:
        data = change  # a dict, but not golden data
    elif isinstance(change, dict):
        data = dict(warpsim.golden(T, seed=1), **change)
    else:
        data = change
    with pytest.raises((ShapeError, TypeError)) as e:
        warpsim.write_golden(data, tmp_path / "g.json")
    assert "golden" in str(e.value)
    assert not (tmp_path / "g.json").exists()


# ---- check-packing's .npy inputs (the fuzz suite's findings) ------------------------------------

def _npy_bytes(arr) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.mark.parametrize("case", ["token-error", "huge-shape", "object"])
def test_check_packing_refuses_malformed_npy_in_one_line(tmp_path, case, capsys):
    from warpsim.tools import cli

    good = _npy_bytes(np.zeros((32, 4), np.uint32))
    if case == "token-error":  # numpy's fallback header parser raised tokenize.TokenError
        raw = good.replace(b"{'descr'", b"z'descr'")
    elif case == "huge-shape":  # numpy tried to allocate 373 GiB
        raw = good.replace(b"'shape': (32, 4), ", b"'shape': (99999999999,),")
    else:
        raw = b"\x93NUMPY" + _npy_bytes(np.array([None], dtype=object))[6:]
    assert raw != good
    regs = tmp_path / "regs.npy"
    regs.write_bytes(raw)
    matrix = tmp_path / "m.npy"
    matrix.write_bytes(_npy_bytes(np.zeros((16, 16))))
    rc = cli.main(["check-packing", T, "--operand", "a", str(regs), str(matrix)])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith("warpsim: error: cannot read REGS file"), err
    assert "internal error" not in err
