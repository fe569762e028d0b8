"""CUDA C++ source to PTX with nvcc, for :meth:`warpsim.Module.from_cu` and the CuPy face.

nvcc comes from the ``PATH`` or from the ``nvidia-cuda-nvcc`` wheel
(``pip install nvidia-cuda-nvcc``: ``site-packages/nvidia/cu*/bin/nvcc``); it needs a host C++
compiler as well.  ``name_expressions`` (CuPy's and NVRTC's way to name template
instantiations, such as ``"scale<float>"``) are instantiated by the source nvcc compiles and
mapped to their mangled entry names by demangling the PTX's entries with ``c++filt``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from warpsim.errors import WarpsimError

__all__ = ["CudaCompileError", "NvccNotFound", "CompiledCu", "compile_cu", "find_nvcc",
           "looks_like_cuda"]


class NvccNotFound(WarpsimError):
    """No nvcc on the PATH nor in the nvidia-cuda-nvcc wheel."""


class CudaCompileError(WarpsimError):
    """nvcc refused the source; ``log`` holds its messages."""

    def __init__(self, msg: str, log: str) -> None:
        super().__init__(msg)
        self.log = log


_CUDA_MARKERS = re.compile(r"__global__|__device__|#\s*include\s*[<\"]|\btemplate\s*<|extern\s+\"C\"")
_PTX_MARKERS = re.compile(r"^\s*\.(version|entry|visible|target)\b", re.M)


def looks_like_cuda(text: str) -> bool:
    """Whether ``text`` is CUDA C++ rather than PTX (CUDA keywords and no PTX directives)."""
    return bool(_CUDA_MARKERS.search(text)) and not _PTX_MARKERS.search(text)


def find_nvcc(path: str | None = None) -> str:
    """The nvcc to run: ``path``, ``$WARPSIM_NVCC``, the PATH's, then the wheel's."""
    for cand in (path, os.environ.get("WARPSIM_NVCC"), shutil.which("nvcc")):
        if cand and os.path.exists(cand):
            return cand
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
        locs = list(spec.submodule_search_locations) if spec else []
    except (ImportError, ValueError):
        locs = []
    for loc in locs:
        for p in sorted(Path(loc).glob("cu*/bin/nvcc")) + sorted(Path(loc).glob("cuda_nvcc/bin/nvcc")):
            return str(p)
    raise NvccNotFound("compiling CUDA source needs nvcc: put the CUDA toolkit's bin on the PATH, "
                       "set WARPSIM_NVCC, or pip install nvidia-cuda-nvcc (and a host C++ compiler)")


@dataclass
class CompiledCu:
    """nvcc's PTX for a source, and each name expression's mangled entry name."""

    ptx: str
    names: dict[str, str] = field(default_factory=dict)


def _arch_flag(arch: str) -> str:
    base = arch.split("_", 1)[1] if arch.startswith("sm_") else arch
    return f"-arch=compute_{base}"


def compile_cu(source: str | os.PathLike, arch: str = "sm_90", flags: Sequence[str] = (),
               name_expressions: Sequence[str] = (), nvcc: str | None = None) -> CompiledCu:
    """PTX of a CUDA source text or ``.cu`` file, as ``nvcc -ptx -arch=compute_XX`` writes it."""
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"from_cu takes CUDA source text or a .cu path, got {type(source).__name__}")
    text = str(source)
    if not isinstance(source, os.PathLike) and "\n" not in text and text.strip().endswith((".cu", ".cuh")) \
            and not os.path.exists(text):
        raise FileNotFoundError(2, "no such CUDA source file (from_cu takes a .cu path or the "
                                   "source text itself)", text)
    if isinstance(source, os.PathLike) or (len(text) < 4096 and "\n" not in text
                                            and text.endswith((".cu", ".cuh")) and os.path.exists(text)):
        path = Path(text)
        text = path.read_text()
        incdir = str(path.resolve().parent)
    else:
        incdir = None
    exe = find_nvcc(nvcc)
    extra = ""
    for i, expr in enumerate(name_expressions):
        extra += f"\nstatic auto __warpsim_name_expr_{i} = &{expr};\n"
    with tempfile.TemporaryDirectory(prefix="warpsim_cu_") as d:
        src = os.path.join(d, "kernel.cu")
        Path(src).write_text(text + extra)
        out = os.path.join(d, "kernel.ptx")
        cmd = [exe, "-ptx", _arch_flag(arch), *flags, src, "-o", out]
        if incdir:
            cmd[1:1] = ["-I", incdir]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            log = (r.stderr or r.stdout).replace(src, "<source>")
            first = next((ln for ln in log.splitlines() if "error" in ln), log.strip()[:300])
            raise CudaCompileError(f"nvcc failed: {first}", log)
        ptx = Path(out).read_text()
    return CompiledCu(ptx, _lowered_names(ptx, name_expressions))


def _lowered_names(ptx: str, exprs: Sequence[str]) -> dict[str, str]:
    if not exprs:
        return {}
    entries = re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", ptx)
    filt = shutil.which("c++filt") or shutil.which("cu++filt")
    if filt is None:
        raise WarpsimError("name_expressions need c++filt (binutils) to read nvcc's mangled names")
    r = subprocess.run([filt], input="\n".join(entries), capture_output=True, text=True)
    demangled = r.stdout.splitlines()
    norm = lambda s: re.sub(r"\s+", "", s)
    out = {}
    for expr in exprs:
        want = norm(expr)
        hit = [e for e, dm in zip(entries, demangled) if norm(dm).split("(")[0] == want
               or norm(dm).startswith(want + "(")]
        if not hit:  # e.g. "f<1>" demangles as "void f<1>(...)"
            hit = [e for e, dm in zip(entries, demangled) if norm(dm).replace("void", "", 1).startswith(want + "(")]
        if len(hit) != 1:
            raise WarpsimError(f"name expression {expr!r} matches {len(hit)} kernels of the module")
        out[expr] = hit[0]
    return out
