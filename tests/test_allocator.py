"""warpsim._util.allocator: glibc's allocator is set up once a large batch runs, and it stops the
page-fault storm of large batches; WARPSIM_MALLOC=default leaves the allocator alone."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys

import pytest

from warpsim._util import allocator


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "gnu_get_libc_version")
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _glibc(), reason="mallopt settings are glibc's")

# Runs an mma on a batch of warps three times; reports whether the allocator was tuned and the
# minor page faults of the last run (the first ones also fault in the process's working set).
_CHILD = r"""
import json, resource, numpy as np, warpsim
from warpsim._util import allocator
ins = warpsim.decode("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_90")
n = int(__import__("sys").argv[1])
rng = np.random.default_rng(0)
a = rng.integers(0, 2**32, (n, 32, 4), dtype=np.uint64).astype(np.uint32) & 0x3BFF3BFF
b = rng.integers(0, 2**32, (n, 32, 2), dtype=np.uint64).astype(np.uint32) & 0x3BFF3BFF
c = np.zeros((n, 32, 4), np.uint32)
before = allocator._state
faults = []
for _ in range(4):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    warpsim.mma(ins, a, b, c, arch="sm_90")
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps({"before": before, "after": allocator._state, "faults": min(faults[1:])}))
"""


def _child(n: int, **env) -> dict:
    e = {k: v for k, v in os.environ.items() if k != "WARPSIM_MALLOC"}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], env=e, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_a_large_batch_tunes_the_allocator_and_stops_the_page_faults():
    tuned = _child(2048)
    assert tuned["before"] is None and tuned["after"] is True
    # once tuned, a repeated call reuses its temporaries (about 20 MB of them per call): with
    # glibc's default policy this measured ~10,000 faults per call under one Python build here
    # (0 under another, whose allocator pattern glibc's adaptive threshold happens to absorb)
    assert tuned["faults"] < 200, tuned


def test_warpsim_malloc_default_leaves_the_allocator_alone():
    assert _child(2048, WARPSIM_MALLOC="default")["after"] is False


def test_a_small_batch_leaves_the_allocator_alone():
    assert _child(allocator.MIN_WARPS - 1)["after"] is None
