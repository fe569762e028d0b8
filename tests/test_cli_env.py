"""`warpsim env`: what it reports is what the library uses here."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

from warpsim.ptx import sfu_accel
from warpsim.tensorcore import accel
from warpsim.tools.cli import main


def test_env_json_matches_the_library():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["env", "--format", "json"]) == 0
    d = json.loads(out.getvalue())
    assert d["mma_engine"]["compiled"] == accel.available()
    assert d["sfu"]["compiled"] == sfu_accel.available()
    assert d["sfu"]["kernels"] == sfu_accel.kernels()
    assert set(d["extras"]) >= {"triton", "mmasim", "dask"} and all(isinstance(v, bool) for v in d["extras"].values())
    assert d["ptxas"] is None or os.path.exists(d["ptxas"]["path"])


def test_env_says_why_there_is_no_compiled_path():
    r = subprocess.run([sys.executable, "-m", "warpsim", "env"], env={**os.environ, "WARPSIM_ACCEL": "0"},
                       capture_output=True, text=True, cwd=os.getcwd())
    assert r.returncode == 0, r.stderr
    assert "tensor-core engine: NumPy only (turned off by WARPSIM_ACCEL=0)" in r.stdout
    assert "special-function path: NumPy only (turned off by WARPSIM_ACCEL=0)" in r.stdout
    assert "  ex2                  NumPy" in r.stdout
