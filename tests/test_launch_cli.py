"""``warpsim launch``: list kernels, run one from .npy arguments, sanitizer exit status, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from warpsim.tools.cli import main

KERNELS = Path(__file__).parent / "kernels"


def test_list(capsys):
    assert main(["launch", str(KERNELS / "gemm_f16.ptx"), "--list"]) == 0
    assert capsys.readouterr().out.strip() == "gemm_f16_f32(.u64, .u64, .u64, .u32, .u32, .u32)"


def _gemm_args(tmp_path, n=64):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    for name, arr in (("A", A), ("B", B), ("C", np.zeros((n, n), np.float32))):
        np.save(tmp_path / f"{name}.npy", arr)
    args = []
    for a in ("A.npy", "B.npy", "C.npy", str(n), str(n), str(n)):
        args += ["--arg", str(tmp_path / a) if a.endswith(".npy") else a]
    return A, B, args


def test_run_writes_outputs_and_trace(tmp_path, capsys):
    A, B, args = _gemm_args(tmp_path)
    rc = main(["launch", str(KERNELS / "gemm_f16.ptx"), "--kernel", "gemm_f16_f32", "--grid", "1,1",
               "--block", "128", *args, "--out", str(tmp_path / "out"), "--no-check",
               "--trace", "0:5", "--trace-regs", "%r1", "--trace-lines", "45-45"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "line 45" in out and "%r1=0x5" in out  # thread 5's lane index, after line 45
    C = np.load(tmp_path / "out" / "arg2.npy")
    assert np.abs(C - A.astype(np.float64) @ B.astype(np.float64).T).max() < 1e-3
    assert not (tmp_path / "out" / "arg0.npy").exists()  # an input the kernel left alone


def test_findings_exit_status_1(tmp_path, capsys):
    np.save(tmp_path / "o.npy", np.zeros(32, np.float32))
    rc = main(["launch", str(KERNELS / "sanitizer" / "sanitizer_cases.ptx"), "--kernel", "uninit_shared",
               "--block", "32", "--arg", str(tmp_path / "o.npy"), "--arg", "0", "--out", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "[uninitialised] uninit_shared: sanitizer_cases.cu:58 (in function uninit_shared), PTX line" in err
    assert (tmp_path / "arg0.npy").exists()


@pytest.mark.parametrize("argv,msg", [
    (["--kernel", "nope"], "no kernel 'nope'"),
    (["--arg", "1"], "takes 6 arguments"),
    (["--grid", "a"], "--grid takes"),
])
def test_bad_input_is_one_line_exit_2(argv, msg, capsys):
    rc = main(["launch", str(KERNELS / "gemm_f16.ptx"), *argv])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("warpsim: error:") and msg in err and err.count("\n") == 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cu_is_compiled_with_nvcc(tmp_path, capsys):
    A, B, args = _gemm_args(tmp_path)
    rc = main(["launch", str(KERNELS / "gemm_f16.cu"), "--grid", "1", "--block", "128", *args,
               "--out", str(tmp_path), "--no-check"])
    assert rc == 0
    C = np.load(tmp_path / "arg2.npy")
    assert np.abs(C - A.astype(np.float64) @ B.astype(np.float64).T).max() < 1e-3


def test_progress_bar(tmp_path, capsys):
    np.save(tmp_path / "o.npy", np.zeros(64, np.float32))
    rc = main(["launch", str(KERNELS / "sanitizer" / "sanitizer_cases.ptx"), "--kernel", "race_global",
               "--grid", "2", "--block", "32", "--arg", str(tmp_path / "o.npy"), "--arg", str(tmp_path / "o.npy"),
               "--arg", "1", "--out", str(tmp_path), "--no-check", "--progress"])
    assert rc == 0
    assert "2/2 CTAs" in capsys.readouterr().err


def test_workers_spread_the_launch_with_the_same_outputs(tmp_path, capsys):
    A, B, args = _gemm_args(tmp_path, n=128)
    base = ["launch", str(KERNELS / "gemm_f16.ptx"), "--kernel", "gemm_f16_f32", "--grid", "2,2",
            "--block", "128", *args, "--no-check"]
    assert main(base + ["--out", str(tmp_path / "one")]) == 0
    assert main(base + ["--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    one, two = np.load(tmp_path / "one" / "arg2.npy"), np.load(tmp_path / "two" / "arg2.npy")
    assert one.tobytes() == two.tobytes() and one.any()


def test_workers_report_the_findings_of_one_process(tmp_path, capsys):
    """A checked launch with --workers reports what it reports without (the split of a race
    over parts is tested in test_executor.py)."""
    np.save(tmp_path / "a.npy", np.arange(64, dtype=np.float32))
    np.save(tmp_path / "o.npy", np.zeros(64, np.float32))
    base = ["launch", str(KERNELS / "sanitizer" / "sanitizer_cases.ptx"), "--kernel", "race_global",
            "--grid", "2", "--block", "32", "--arg", str(tmp_path / "a.npy"), "--arg", str(tmp_path / "o.npy"),
            "--arg", "0"]
    rc1 = main(base + ["--out", str(tmp_path / "one")])
    c1 = capsys.readouterr()
    rc2 = main(base + ["--out", str(tmp_path / "two"), "--workers", "2"])
    c2 = capsys.readouterr()
    out1, out2 = c1.out + c1.err, c2.out + c2.err
    assert rc1 == rc2 != 0 and "race" in out1
    assert out1.replace(str(tmp_path / "one"), "") == out2.replace(str(tmp_path / "two"), "")
