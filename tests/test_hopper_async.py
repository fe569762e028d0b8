"""mbarrier, TMA, bulk copies and clusters: the kernels of tests/kernels/hopper/async_kernels.cu
run in warpsim against what an H200 (sm_90, driver 580.159.04) wrote (tests/data/hopper_async_h200.npz,
made by warpsim/validation/hopper_async_device.py), byte for byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.facts import tensormap as fmt
from warpsim.validation import hopper_async_device as dev

HERE = Path(__file__).parent
PTX = (HERE / "kernels" / "hopper" / "async_kernels.ptx").read_text()
Z = np.load(HERE / "data" / "hopper_async_h200.npz")


@pytest.fixture(scope="module")
def mod():
    return warpsim.Module(PTX)


def _load_params():
    out = []
    for i, c in enumerate(dev.load_cases()):
        for k in range(len(c["coords"])):
            out.append(pytest.param(i, k, id=f"{c['name']}-{k}"))
    return out


@pytest.mark.parametrize("i,k", _load_params())
def test_tma_load_box(mod, i, k):
    c = dev.load_cases()[i]
    esz = dev.DTYPES[c["dtype"]][1]
    t = dev.tensor_bytes(100 + i, c["nbytes_tensor"])
    nb = dev.box_bytes(c["box"], c["es"], esz)
    ncopy = (nb + 128 + 3) // 4 * 4
    key = f"load/{c['name']}/{k}/"
    coords = np.array(c["coords"][k:k + 1], np.int32)
    if key + "out" not in Z.files:  # the H200 faulted: the start is not 16-byte aligned
        assert (c["coords"][k][0] * esz) % 16
        tm = warpsim.tensor_map(c["dtype"], c["dims"], c["strides"], c["box"], c["es"], swizzle=c["swz"],
                                oob_fill=c["oob"], tensor=t)
        with pytest.raises(warpsim.SanitizerError, match="not a multiple of 16"):
            mod.launch("tma_load_box", 1, 128, [tm, coords, c["rank"], nb, ncopy, np.zeros(ncopy, np.uint8),
                                                np.zeros(1, np.int32)], arch="sm_90a", check=False)
        return
    # the driver's map, bound to our copy of the tensor
    tm = warpsim.TensorMap.from_bytes(Z[key + "map"], tensor=t, device_base=int(Z[key + "addr"][0]))
    # ... and warpsim's own encoding of the same parameters gives the same bytes
    mine = warpsim.tensor_map(c["dtype"], c["dims"], c["strides"], c["box"], c["es"], swizzle=c["swz"],
                              oob_fill=c["oob"], address=int(Z[key + "addr"][0]), tensor=t)
    assert mine.raw == Z[key + "map"].tobytes()
    outs = mod.launch("tma_load_box", 1, 128, [tm, coords, c["rank"], nb, ncopy, np.zeros(ncopy, np.uint8),
                                               np.zeros(1, np.int32)], arch="sm_90a", check=k == 0)
    np.testing.assert_array_equal(outs[2], Z[key + "out"])
    assert outs[3][0] == Z[key + "flag"][0] == 1


def _store_params():
    return [pytest.param(i, k, id=f"{c['name']}-{k}") for i, c in enumerate(dev.store_cases())
            for k in range(len(c["coords"]))]


@pytest.mark.parametrize("i,k", _store_params())
def test_tma_store_box(mod, i, k):
    c = dev.store_cases()[i]
    key = f"store/{c['name']}/{k}/"
    esz = dev.DTYPES[c["dtype"]][1]
    nb = dev.box_bytes(c["box"], (1, 1), esz)
    x, y = c["coords"][k]
    if key + "out" not in Z.files:
        assert (x * esz) % 16
        return
    t = Z[key + "in"].copy()
    tm = warpsim.TensorMap.from_bytes(Z[key + "map"], tensor=t, device_base=int(Z[key + "addr"][0]))
    outs = mod.launch("tma_store_box", 1, 128, [tm, x, y, c["mode"], nb, Z[key + "src"]], arch="sm_90a")
    np.testing.assert_array_equal(outs[0], Z[key + "out"])
    np.testing.assert_array_equal(t, Z[key + "in"])  # the input is not modified


def test_bulk_copy_and_reduce(mod):
    outs = mod.launch("bulk_copy", 1, 64, [Z["bulk/src"], np.zeros(8192, np.uint8), Z["bulk/acc_in"], 48, 32,
                                           4096, np.zeros(1, np.int32)], arch="sm_90a")
    np.testing.assert_array_equal(outs[1], Z["bulk/dst"])
    np.testing.assert_array_equal(outs[2].view(np.uint32), Z["bulk/acc"].view(np.uint32))
    assert outs[3][0] == 1


def test_pingpong_mbarrier_pipeline(mod):
    inp = Z["pingpong/in"]
    outs = mod.launch("pingpong", 1, 96, [inp, np.zeros_like(inp), 7], arch="sm_90a")
    np.testing.assert_array_equal(outs[1], Z["pingpong/out"])


def test_cluster_dsmem(mod):
    outs = mod.launch("cluster_dsmem", 8, 64, [np.zeros(256, np.uint32)], arch="sm_90a")
    ref = Z["cluster/out"].reshape(8, 32)
    np.testing.assert_array_equal(outs[0].reshape(8, 32)[:, :20], ref[:, :20])


def test_tma_multicast(mod):
    t = dev.tensor_bytes(500, 128 * 70 * 2)
    tm = warpsim.TensorMap.from_bytes(Z["multicast/map"], tensor=t, device_base=int(Z["multicast/addr"][0]))
    outs = mod.launch("tma_multicast", 2, 64, [tm, 40, 50, 4096, np.zeros(8192, np.uint8), np.zeros(2, np.int32)],
                      arch="sm_90a")
    np.testing.assert_array_equal(outs[1], Z["multicast/out"])
    np.testing.assert_array_equal(outs[2], [1, 1])


def test_tensormap_replace_from_zeros(mod):
    v = Z["replace/v"]
    outs = mod.launch("tmap_replace", 1, 32, [v, np.zeros(128, np.uint8)], arch="sm_90a")
    np.testing.assert_array_equal(outs[1], Z["replace/out"])
    # the fields equal the driver's map of the same parameters; the derived words stay zero
    drv = Z["replace/driver"]
    same = np.r_[0:64, 68:72, 76:128]
    np.testing.assert_array_equal(outs[1][same], drv[same])
    assert fmt.decode(outs[1].tobytes(), strict=False) == fmt.decode(drv.tobytes())


def test_mbarrier_words_match_hardware_states():
    """The arrive states the H200 returned, and its word after the sequence."""
    from warpsim.ptx.mbarrier_state import MBarriers, decode_word
    from warpsim.ptx.memory import FlatMemory

    w = Z["mbar/words"]
    m = MBarriers(FlatMemory("shared", 16, (1,)))
    b, o = np.array([0]), np.array([8])
    m.init(b, o, 3)
    assert m.update(b, o, arrive=1)[0] == w[2]
    m.update(b, o, expect=100)
    m.update(b, o, complete=40)
    assert m.update(b, o, arrive=2)[0] == w[6]
    assert m.parity(b, o)[0] == 0 and w[7] == 0
    m.update(b, o, complete=60)
    assert m.parity(b, o)[0] == 1 and w[9] == 1
    assert m.update(b, o, arrive=1, drop=1)[0] == w[11]
    m.update(b, o, complete=16)
    assert decode_word(m.update(b, o, arrive=1, no_complete=True))[1][0] == w[14]
    assert m.update(b, o, arrive=1, expect=16)[0] == w[16]
    assert m.read(b, o)[0] == w[17]


def test_mbar_words_kernel(mod):
    """The same sequence as PTX: states and wait results (the word reads the compiler hoisted
    on the GPU are not compared)."""
    outs = mod.launch("mbar_words", 1, 32, [np.zeros(32, np.uint64)], arch="sm_90a")
    w = Z["mbar/words"]
    for i in (2, 6, 7, 9, 11, 14, 16):
        assert outs[0][i] == w[i], i


# ------------------------------------------------------------------------------------------
# tensor-map encoder vs the driver's sweep
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", range(len(dev.sweep_cases())), ids=[c["name"] for c in dev.sweep_cases()])
def test_tensor_map_matches_driver(k):
    p = dev.sweep_cases()[k]
    rc = int(Z["sweep_rc"][k])
    drv = Z["sweep_bytes"][k].tobytes()
    args = dict(dtype=p["dtype"], dims=p["dims"], strides=p["strides"], box=p["box"], element_strides=p["es"],
                interleave=p["inter"], swizzle=p["swz"], l2_promotion=p["l2"], oob_fill=p["oob"], address=p["addr"])
    if rc != 0:
        with pytest.raises(warpsim.TensorMapError) as e:
            warpsim.tensor_map(**args)
        assert e.value.parameter
        return
    tm = warpsim.tensor_map(**args)
    assert tm.raw == drv
    assert fmt.decode(drv) == tm.fields


def test_tma_stores_of_two_ctas_to_one_box_race(mod):
    c = dev.store_cases()[0]
    key = "store/f16_store/0/"
    t = Z[key + "in"].copy()
    tm = warpsim.TensorMap.from_bytes(Z[key + "map"], tensor=t, device_base=int(Z[key + "addr"][0]))
    with pytest.raises(warpsim.SanitizerError) as e:
        mod.launch("tma_store_box", 2, 128, [tm, 0, 0, 0, 4096, Z[key + "src"]], arch="sm_90a")
    assert e.value.findings[0].kind == "race" and "between CTAs" in e.value.findings[0].message
    assert c["mode"] == 0


CUTE = HERE / "data" / "real" / "cute" / "wgmma_tma_sm90_sm_90a.ptx.gz"


@pytest.mark.skipif(not CUTE.exists(), reason="CuTe's wgmma_tma_sm90 PTX is not in this checkout")
@pytest.mark.parametrize("variant", ["nt", "tn"])
def test_cute_wgmma_tma_sm90(variant):
    """CuTe's tutorial GEMM (examples/cute/tutorial/hopper/wgmma_tma_sm90.cu, compiled by nvcc
    13.0 for sm_90a): TMA loads into a 3-stage mbarrier pipeline, a 2x1 cluster, elect.sync,
    wgmma m64n64k16 f16; tensor maps as CuTe's make_tma_atom builds them (128B swizzle; boxes
    64x8 MN-major, 64x128 K-major; each Copy_Atom parameter is 256 bytes, the map first).
    Inputs are multiples of 1/4, so the f16 product is exact: C must equal it."""
    import gzip

    m = warpsim.Module(gzip.decompress(CUTE.read_bytes()).decode())
    kern = [k for k in m.kernels if k.startswith("_Z11gemm_device")][0 if variant == "nt" else 1]
    M = N = 256
    K = 128
    rng = np.random.default_rng(5)
    if variant == "nt":  # A(m,k) at A[k, m], B(n,k) at B[k, n]
        A = (rng.integers(-3, 4, (K, M)) / 4).astype(np.float16)
        B = (rng.integers(-3, 4, (K, N)) / 4).astype(np.float16)
        ta = warpsim.tensor_map("f16", (M, K), (M * 2,), (64, 8), swizzle="128B", tensor=A)
        tb = warpsim.tensor_map("f16", (N, K), (N * 2,), (64, 8), swizzle="128B", tensor=B)
        want = (A.astype(np.float64).T @ B.astype(np.float64)).T
    else:  # A(m,k) at A[m, k], B(n,k) at B[n, k]
        A = (rng.integers(-3, 4, (M, K)) / 4).astype(np.float16)
        B = (rng.integers(-3, 4, (N, K)) / 4).astype(np.float16)
        ta = warpsim.tensor_map("f16", (K, M), (K * 2,), (64, 128), swizzle="128B", tensor=A)
        tb = warpsim.tensor_map("f16", (K, N), (K * 2,), (64, 128), swizzle="128B", tensor=B)
        want = (A.astype(np.float64) @ B.astype(np.float64).T).T
    C = np.zeros((N, M), np.float16)  # C(m,n) at C[n, m]
    accumulate = np.array([1, 1], np.int32).tobytes()  # TiledMMA's GMMA::ScaleOut::One
    args = [np.array([M, N, K], np.int32).tobytes(), b"\0", A, ta, B, tb, C, np.array([M], np.int32).tobytes(),
            accumulate, np.float16(1).tobytes(), np.float16(0).tobytes()]
    outs = m.launch(kern, (2, 2), 128, args, shared_bytes=98352, arch="sm_90a", cluster=(2, 1, 1),
                    check=variant == "tn")
    np.testing.assert_array_equal(outs[-1].astype(np.float64), want)
