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
