"""Every file the library reads at run time from its own folders ships in the wheel: the C
sources and headers compiled on first use, and the measured tables (pyproject's package-data)."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_package_data_covers_c_sources_headers_and_tables():
    import tomllib

    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["warpsim"]
    pkg = ROOT / "warpsim"
    needed = [p for ext in ("*.c", "*.h", "data/*") for p in pkg.rglob(ext) if p.is_file()]
    assert any(p.suffix == ".c" for p in needed) and any(p.suffix == ".h" for p in needed)
    missing = [str(p.relative_to(pkg)) for p in needed
               if not any(fnmatch.fnmatch(str(p.relative_to(pkg)), g) for g in globs)]
    assert not missing, missing
