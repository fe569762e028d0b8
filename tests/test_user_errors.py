"""What a new user gets wrong, and the one clear error each gets (issue 18's audit): a
ValueError subclass or TypeError from warpsim naming the offending thing, facts as attributes;
on the command line one line and exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

import warpsim
from warpsim.errors import PtxVersionError, TargetError

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "tests" / "kernels" / "gemm_f16.ptx").read_text()


@pytest.mark.parametrize("version", ["9.6", "10.0"])
def test_a_module_newer_than_the_modelled_ptx_isa_is_refused(version):
    text = GEMM.replace(".version 9.0", f".version {version}")
    with pytest.raises(PtxVersionError) as ei:
        warpsim.Module(text)
    e = ei.value
    assert isinstance(e, TargetError) and isinstance(e, ValueError)
    assert e.version == tuple(map(int, version.split("."))) and e.max_ptx == (9, 5) and e.line == 9
    assert f".version {version}" in str(e)


def test_modelled_and_older_versions_still_load():
    for version in ("9.5", "9.0", "8.0"):
        warpsim.Module(GEMM.replace(".version 9.0", f".version {version}"))


@pytest.mark.parametrize("text,kind,words", [
    (None, TypeError, "got NoneType"),
    (GEMM.encode(), TypeError, "data.decode()"),
    ("tests/kernels/gemm_f16.ptx", warpsim.PtxError, "Module(open(path).read())"),
    ("kernel.cu", warpsim.PtxError, "Module.from_cu(path)"),
])
def test_module_of_a_path_or_bytes_says_what_it_takes(text, kind, words):
    with pytest.raises(kind, match="Module takes") as ei:
        warpsim.Module(text)
    assert words in str(ei.value)


def test_from_cu_of_a_missing_file_is_a_file_error(tmp_path):
    # a one-line name ending in .cu was compiled as CUDA source ("expected a declaration")
    missing = str(tmp_path / "kernel.cu")
    with pytest.raises(FileNotFoundError) as ei:
        warpsim.Module.from_cu(missing)
    assert ei.value.filename == missing
    with pytest.raises(TypeError, match="from_cu takes"):
        warpsim.Module.from_cu(None)


@pytest.mark.parametrize("bad", [None, 5, b"m16n8k16.row.col.f32.f16.f16.f32"])
def test_decode_names_itself_for_a_non_string(bad):
    with pytest.raises(TypeError, match="^decode takes an instruction string"):
        warpsim.decode(bad)


# ---- the command line: one line on stderr, exit status 2 ---------------------------------------

def _cli(capsys, *argv) -> tuple[int, str]:
    from warpsim.tools.cli import main
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warpsim: error: "), err
    return rc, err[0]


def test_cli_gemm_refuses_an_out_name_np_save_would_change(tmp_path, capsys):
    import numpy as np
    np.save(tmp_path / "A.npy", np.ones((16, 16)))
    np.save(tmp_path / "B.npy", np.ones((16, 8)))
    out = tmp_path / "D.txt"  # np.save would have written D.txt.npy and reported D.txt
    rc, msg = _cli(capsys, "gemm", "m16n8k16.row.col.f32.f16.f16.f32", tmp_path / "A.npy",
                   tmp_path / "B.npy", "--out", out)
    assert rc == 2 and "ending in .npy" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.npy", "B.npy"]


def test_cli_memory_error_is_an_input_error_not_a_bug(capsys, monkeypatch):
    from warpsim.tools import cli

    def greedy(args):
        raise MemoryError("Unable to allocate 186. TiB for an array")
    monkeypatch.setattr(cli, "cmd_list", greedy)
    rc, msg = _cli(capsys, "list")
    assert rc == 2 and "not enough memory" in msg and "186. TiB" in msg and "internal" not in msg


@pytest.mark.parametrize("grid", ["2,x", "2,", ",2", "2,,2"])
def test_cli_launch_grid_typos_are_refused(tmp_path, capsys, grid):
    ptx = tmp_path / "g.ptx"
    ptx.write_text(GEMM)
    rc, msg = _cli(capsys, "launch", ptx, "--grid", grid, "--block", 128)
    assert rc == 2 and "--grid takes 1 to 3 integers" in msg and repr(grid) in msg


def test_cli_launch_fraction_for_an_integer_parameter(tmp_path, capsys):
    ptx = tmp_path / "g.ptx"
    ptx.write_text(GEMM)
    args = ["--arg", "zeros:float16:16", "--arg", "zeros:float16:16", "--arg", "zeros:float32:16"]
    rc, msg = _cli(capsys, "launch", ptx, "--block", 128, *args, "--arg", "12.5", "--arg", 1,
                   "--arg", 1)
    assert rc == 2 and "'12.5'" in msg and "gemm_f16_f32_param_3 (.u32) is not an integer" in msg
    rc, msg = _cli(capsys, "launch", ptx, "--block", 128, *args, "--arg", "abc", "--arg", 1,
                   "--arg", 1)
    assert rc == 2 and "neither a .npy file nor a number" in msg


def test_cli_launch_of_a_too_new_module(tmp_path, capsys):
    ptx = tmp_path / "g.ptx"
    ptx.write_text(GEMM.replace(".version 9.0", ".version 10.0"))
    rc, msg = _cli(capsys, "launch", ptx, "--list")
    assert rc == 2 and ".version 10.0 is newer than PTX ISA 9.5" in msg


def test_tensor_map_with_the_array_first_says_where_it_goes():
    import numpy as np
    X = np.zeros((64, 64), np.float32)
    with pytest.raises(warpsim.TensorMapError) as ei:
        warpsim.tensor_map(X, (64, 64), box=(8, 8))
    e = ei.value
    assert e.parameter == "dtype" and e.value is X
    assert str(e) == ("tensor map: dtype = <array of shape (64, 64), dtype float32> is not a data "
                      "type: the first argument is the element type; pass the array as tensor=")


@pytest.mark.parametrize("strict", [False, True])
def test_pack_refuses_none_instead_of_packing_nan(strict):
    import numpy as np
    A = np.ones((16, 16), object)
    A[3, 4] = None
    before = A.copy()
    with pytest.raises(warpsim.FormatError) as ei:
        warpsim.pack("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "a", A, strict=strict)
    assert (ei.value.index, ei.value.value, ei.value.why) == ((3, 4), None, "None is not a number")
    assert np.array_equal(A, before)


CXX = """.version 9.0
.target sm_90
.address_size 64
.visible .entry _Z1kPf(.param .u64 _Z1kPf_param_0)
{
    ret;
}
.visible .entry _Z1kPi(.param .u64 _Z1kPi_param_0)
{
    ret;
}
.visible .entry _Z5scalePf(.param .u64 _Z5scalePf_param_0)
{
    ret;
}
"""


def test_cli_launch_takes_a_cuda_kernel_by_its_source_name(tmp_path, capsys):
    # `warpsim launch kernel.cu --kernel k` as the help shows it: nvcc's PTX names it _Z1kPf
    from warpsim.tools.cli import main
    ptx = tmp_path / "k.ptx"
    ptx.write_text(CXX)
    assert main(["launch", str(ptx), "--kernel", "scale", "--arg", "zeros:float32:4",
                 "--out", str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out
    rc, msg = _cli(capsys, "launch", ptx, "--kernel", "k", "--arg", "zeros:float32:4")
    assert rc == 2 and "'k' names 2 kernels" in msg and "_Z1kPi (k(int*))" in msg
    rc, msg = _cli(capsys, "launch", ptx, "--kernel", "nope", "--arg", "zeros:float32:4")
    assert rc == 2 and "_Z5scalePf (scale(float*))" in msg


def test_module_launch_by_source_name_says_how_to_name_it():
    import numpy as np
    with pytest.raises(warpsim.PtxError, match="no kernel named 'scale'") as ei:
        warpsim.Module(CXX).launch("scale", 1, 32, [np.zeros(4, np.float32)])
    assert "_Z5scalePf (scale(float*))" in str(ei.value) and "mangled name" in str(ei.value)


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("old,new,name", [
    ("mov.u32 \t%r23, %tid.x", "mov.u32 \t%q23, %tid.x", "%q23"),  # a register never declared
    ("[gemm_f16_f32_param_5]", "[gemm_f16_f32_param_9]", "gemm_f16_f32_param_9"),  # a typo
])
def test_an_undeclared_name_in_a_kernel_is_refused_before_it_runs(old, new, name, check):
    # ptxas: "Unknown symbol"; the typo'd parameter used to load 0 silently with check=False
    import numpy as np
    A, D = np.ones((128, 128), np.float16), np.zeros((128, 128), np.float32)
    with pytest.raises(warpsim.PtxError) as ei:
        warpsim.Module(GEMM.replace(old, new)).launch("gemm_f16_f32", 1, 128,
                                                     [A, A, D, 128, 128, 128], check=check)
    assert f"{name} is not declared" in str(ei.value) and "Unknown symbol" in str(ei.value)
    assert not isinstance(ei.value, warpsim.SanitizerError)


def test_a_typo_in_a_kernel_directive_is_refused():
    with pytest.raises(warpsim.PtxError, match=r"line 17: unknown directive \.maxntidd on \.entry "
                                               r"gemm_f16_f32; ptxas knows .*\.maxntid,"):
        warpsim.Module(GEMM.replace(".maxntid 128", ".maxntidd 128"))


def test_cli_launch_out_that_is_a_file_is_refused_before_the_run(tmp_path, capsys):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(CXX)
    (tmp_path / "taken.npy").write_bytes(b"x")
    rc, msg = _cli(capsys, "launch", ptx, "--kernel", "scale", "--arg", "zeros:float32:4",
                   "--out", tmp_path / "taken.npy")
    assert rc == 2 and "is a file; --out names the folder" in msg


def test_triton_front_end_names_a_bad_grid_and_a_list_argument():
    pytest.importorskip("triton")
    import sys
    import numpy as np
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from triton_kernels import add_kernel
    finally:
        sys.path.remove(str(ROOT / "examples"))
    from warpsim.frontends.triton import TritonArgError
    k = warpsim.triton.jit(add_kernel)
    x = np.zeros(64, np.float32)
    for grid in ("a", (1, 2, 3, 4), (True,), 1.5):
        with pytest.raises(TritonArgError, match="grid must be an int or a tuple") as ei:
            k[grid](x, x, x, 64, BLOCK=64)
        assert ei.value.arg == "grid"
    with pytest.raises(TritonArgError, match="argument 'x_ptr': a list; pass a NumPy array") as ei:
        k[(1,)](x.tolist(), x, x, 64, BLOCK=64)
    assert ei.value.arg == "x_ptr"


def test_32_bit_addressing_is_refused_by_line():
    from warpsim.errors import PtxError

    text = ".version 8.0\n.target sm_90\n.address_size 32\n.visible .entry k(.param .u32 p)\n{\n ret;\n}\n"
    with pytest.raises(PtxError, match=r"line 3: \.address_size 32 is not modelled"):
        warpsim.Module(text)
    warpsim.Module(text.replace(".address_size 32", ".address_size 64").replace(".u32 p", ".u64 p"))


def test_golden_refuses_a_batch_larger_than_memory_before_allocating():
    from warpsim.errors import ShapeError
    from warpsim.tools.golden import golden

    with pytest.raises(ShapeError, match="batch=100,000,000,000 warps needs") as ei:
        golden("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", batch=10**11)
    assert ei.value.batch == 10**11 and ei.value.bytes_needed > ei.value.bytes_available


def test_a_module_without_version_is_refused_as_ptxas_refuses_it():
    from warpsim.errors import PtxError

    body = ".target sm_90\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n"
    with pytest.raises(PtxError, match=r"no \.version directive"):
        warpsim.Module(body)
    warpsim.Module(".version 8.0\n" + body)
