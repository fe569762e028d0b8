"""The shipped examples run and say what they claim."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "registers per lane {'a': 4, 'b': 2, 'c': 4, 'd': 4}" in out.stdout
    assert "Warp.execute result matches mma" in out.stdout


def test_ptx_routine_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "ptx_routine.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "equals matmul, bit for bit: True" in out.stdout


def test_sparse_example_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "sparse.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "logical and compressed matmul agree: True" in out.stdout
    assert "Warp.execute result matches matmul: True" in out.stdout
    assert "sparsity selector 1" in out.stdout and "wrong order" in out.stdout
    assert "MetadataError" in out.stdout


def test_launch_example_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "launch_kernel.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "max |D - float64 reference| = " in out.stdout and "the input C is untouched: True" in out.stdout
    assert "sanitizer: out-of-bounds at PTX line" in out.stdout


def test_triton_example_without_triton_says_what_it_needs():
    # CI has no Triton: the example stops with one line naming the extra, not a traceback
    code = ("import runpy, sys; sys.modules['triton'] = None; "
            "runpy.run_path(sys.argv[1], run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "triton_on_warpsim.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1
    assert "pip install warpsim[triton]" in out.stderr and "Traceback" not in out.stderr
