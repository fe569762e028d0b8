"""The public surface: what `import warpsim` gives and what it does not load."""

from __future__ import annotations

import json
import subprocess
import sys

import warpsim


def test_every_public_name_exists_and_is_documented():
    for name in warpsim.__all__:
        obj = getattr(warpsim, name)
        if callable(obj):
            assert obj.__doc__, name


def test_import_loads_no_optional_dependency_and_no_front_end():
    code = ("import json, sys, warpsim; print(json.dumps(sorted(m for m in sys.modules if "
            "m.split('.')[0] in ('triton', 'cupy', 'torch', 'dask', 'mmasim') "
            "or m.startswith('warpsim.frontends'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_front_ends_come_on_first_use():
    from warpsim.frontends import cupy as face

    assert warpsim.cupy is face and callable(face.RawKernel)
    try:
        warpsim.no_such_thing
    except AttributeError as e:
        assert "no_such_thing" in str(e)
    else:
        raise AssertionError("unknown attribute resolved")
