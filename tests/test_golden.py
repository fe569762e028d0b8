"""warpsim.tools.golden (warpsim.golden): reproducible golden values in .npz / .json / .h."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.errors import WarpsimError
from warpsim.tools.golden import META_KEYS, golden, read_golden, write_golden

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MXF4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"


def same(x, y):
    assert set(x) == set(y)
    for k in x:
        if isinstance(x[k], np.ndarray):
            assert x[k].dtype == y[k].dtype and x[k].shape == y[k].shape, k
            assert np.array_equal(x[k], y[k], equal_nan=True), k
        else:
            assert x[k] == y[k], k


def test_contents_are_consistent():
    g = golden(F16, batch=2, seed=5)
    for k in META_KEYS:
        assert k in g
    assert g["instruction"] == F16 and g["warpsim_version"] == warpsim.__version__
    assert g["a_regs"].shape == (2, 32, 4) and g["a_regs"].dtype == np.uint32
    assert g["a"].shape == (2, 16, 16)
    np.testing.assert_array_equal(warpsim.unpack(F16, "a", g["a_regs"]), g["a"])
    d = warpsim.mma(F16, g["a_regs"], g["b_regs"], g["c_regs"], arch="sm_90")
    np.testing.assert_array_equal(d, g["d_regs"])


def test_same_seed_same_bits_other_seed_differs():
    g1, g2 = golden(F16, seed=3), golden(F16, seed=3)
    same(g1, g2)
    assert not np.array_equal(golden(F16, seed=4)["a_regs"], g1["a_regs"])
    # prefix-stable: warp 0 of a batch equals the single-warp run
    np.testing.assert_array_equal(golden(F16, seed=3, batch=3)["d_regs"][:1], g1["d_regs"])


@pytest.mark.parametrize("instr,arch,dist", [(F16, "sm_90", "special"), (MXF4, "sm_120a", "normal"),
                                             (F64, "sm_80", None)])
@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_round_trip(tmp_path, instr, arch, dist, suffix):
    g = golden(instr, arch=arch, dist=dist, batch=2)
    p = write_golden(g, tmp_path / f"g{suffix}")
    same(read_golden(p), g)


@pytest.mark.parametrize("suffix", [".npz", ".json", ".h"])
def test_byte_identical_across_runs(tmp_path, suffix):
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    a = write_golden(golden(F16, seed=9, batch=2), tmp_path / "1" / f"g{suffix}")
    b = write_golden(golden(F16, seed=9, batch=2), tmp_path / "2" / f"g{suffix}")
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()


def test_npz_readable_by_numpy(tmp_path):
    g = golden(F16)
    p = write_golden(g, tmp_path / "g.npz")
    with np.load(p) as z:
        np.testing.assert_array_equal(z["d_regs"], g["d_regs"])
        assert str(z["instruction"]) == F16


def test_header(tmp_path):
    g = golden(MXF4, arch="sm_120a", batch=2)
    text = Path(write_golden(g, tmp_path / "mx.h")).read_text(encoding="utf-8")
    assert "#include <stdint.h>" in text
    assert f'#define MX_INSTRUCTION "{MXF4}"' in text
    assert "static const uint32_t mx_a_regs[2][32][4] = {" in text
    assert "static const uint8_t mx_a_bits[2][16][64] = {" in text
    assert "mx_scale_a_regs[2][32]" in text
    assert text.count("{") == text.count("}")
    first = text.split("mx_d_regs[2][32][4] = {")[1].split("0x")[1][:8]
    assert int(first, 16) == int(g["d_regs"][0, 0, 0])
    t64 = Path(write_golden(golden(F64, arch="sm_80"), tmp_path / "f.h", prefix="dd")).read_text(encoding="utf-8")
    assert "static const uint64_t dd_d_regs[1][32][2]" in t64 and "ULL" in t64


def test_errors(tmp_path):
    with pytest.raises(WarpsimError):
        golden("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32", arch="sm_80", dist="normal")
    with pytest.raises(WarpsimError):
        golden(F16, batch=0)
    with pytest.raises(WarpsimError):
        write_golden(golden(F16), tmp_path / "g.txt")
    with pytest.raises(WarpsimError, match="sm_120a"):
        golden(MXF4, arch="sm_90")  # not legal there; the message names the targets that are


def test_default_arch_follows_the_instruction():
    # arch="auto" (the default): sm_90 where legal, else the first target that accepts the form,
    # the rule `warpsim run` uses; the target is recorded.
    assert golden(F16)["arch"] == "sm_90"
    g = golden(MXF4)
    assert g["arch"] == "sm_120a"
    assert np.array_equal(g["d_regs"], golden(MXF4, arch="sm_120a")["d_regs"])


def test_progress_callback():
    seen = []
    golden(F16, batch=3, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (3, 3)


def test_golden_sparse_selector_and_incomplete_sparse_data():
    from warpsim.errors import PtxError, ShapeError
    from warpsim.tools.golden import golden, write_golden

    sp = "mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    d0, d3 = golden(sp, seed=1, batch=1), golden(sp, seed=1, batch=1, selector=3)
    assert int(d0["selector"]) == 0 and int(d3["selector"]) == 3
    # m16n8k16 16-bit: 16 rows x 4 chunks = 64 nibbles, 8 per word: thread f of each group of
    # four supplies the metadata (the words of the others are 0)
    for d, f in ((d0, 0), (d3, 3)):
        assert (np.flatnonzero(d["e_regs"][0]) == np.arange(f, 32, 4)).all()
    with pytest.raises(PtxError, match="not sparse"):
        golden("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", selector=0)
    with pytest.raises(PtxError, match="selector 3 is undefined"):
        golden(sp.replace("k16", "k32"), selector=3)
    bad = {k: v for k, v in d3.items() if k != "selector"}
    with pytest.raises(ShapeError, match="needs e_regs and selector"):
        write_golden(bad, "/nonexistent/never.h")


def test_reading_a_header_or_an_unknown_suffix_is_a_file_type_error(tmp_path):
    from warpsim.errors import FileTypeError

    g = warpsim.golden("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", seed=1, batch=1)
    h = warpsim.write_golden(g, tmp_path / "g.h")
    with pytest.raises(FileTypeError, match="C header") as ei:
        warpsim.read_golden(h)
    assert ei.value.path == str(h)
    with pytest.raises(FileTypeError, match="output format"):
        warpsim.write_golden(g, tmp_path / "g.txt")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(FileTypeError, match="not a golden .npz file"):
        warpsim.read_golden(tmp_path / "bad.npz")


SP = "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"


@pytest.mark.parametrize("instr,arch,dist", [(F16, "sm_90", "special"), (MXF4, "sm_120a", "normal"),
                                             (SP, "sm_90", "normal"),
                                             ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "sm_90", None)])
def test_spread_same_bits(instr, arch, dist):
    """golden(executor=, workers=): the same arrays for every worker count and executor, parts
    cut at warp 256 and 512 (a thread pool here: processes are covered by the CLI test)."""
    from concurrent.futures import ThreadPoolExecutor

    one = golden(instr, arch=arch, dist=dist, batch=600, seed=9)
    seen = []
    with ThreadPoolExecutor(3) as ex:
        for w in (2, 3):
            g = golden(instr, arch=arch, dist=dist, batch=600, seed=9, executor=ex, workers=w,
                       progress=lambda done, total: seen.append((done, total)))
            same(g, one)
    assert seen[-1] == (600, 600) and (256, 600) in seen


def test_spread_inputs_parts():
    """make_inputs(start=): warps start.. of the stream, the same bits as a slice of the whole."""
    from warpsim.validation.inputs import make_inputs
    from warpsim.tensorcore.execute import resolve

    ins = resolve(F16, "sm_90")
    whole = make_inputs(ins, "special", 40, 2)
    part = make_inputs(ins, "special", 15, 2, start=25)
    assert all((whole[op][25:] == part[op]).all() for op in "abc")


def test_cli_workers(tmp_path):
    """`warpsim run --workers 2`: byte-identical files from two processes and from one."""
    from warpsim.tools.cli import main

    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    assert main(["run", F16, "--batch", "300", "--seed", "4", "--out", str(one), "--no-progress"]) == 0
    assert main(["run", F16, "--batch", "300", "--seed", "4", "--out", str(two), "--no-progress",
                 "--workers", "2"]) == 0
    assert one.read_bytes() == two.read_bytes()
