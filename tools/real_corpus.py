"""Regenerate the PTX corpus of real compiler output in tests/data/real/.

    PYTHONPATH=/path/to/triton-3.9 python tools/real_corpus.py triton   # Triton tutorials, sm_80/89/90a
    python tools/real_corpus.py cuda                                    # tests/data/real/cuda/*.cu, nvcc
    python tools/real_corpus.py cute /path/to/cutlass                   # CuTe tutorial examples, nvcc

Triton compiles ahead of time without a GPU (``triton.compile(ASTSource(...), target=GPUTarget(...))``).
The CUDA sources are compiled with the nvcc on the PATH (``nvcc -ptx -arch=sm_XX``).  CUTLASS is not
stored in the project: pass a checkout of NVIDIA/cutlass; only the PTX it produces is kept (gzip).
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "real")
TRITON_ARCHS = (80, 89, 90)
#: CUDA sources of tests/data/real/cuda -> the targets compiled for
CUDA_ARCHS = {"wmma_gemm.cu": ("sm_80", "sm_90"), "coop_groups.cu": ("sm_80", "sm_90"),
              "half_math_printf.cu": ("sm_80", "sm_90"), "printf_cases.cu": ("sm_80",),
              "fa3_ws.cu": ("sm_90a",)}
#: planted-bug twins (-D macros) of CUDA sources -> (target, macros); written as NAME_MACRO_ARCH.ptx.gz
CUDA_PLANTED = {"fa3_ws.cu": ("sm_90a", ("FA3_PLANT_NO_WAIT_K", "FA3_PLANT_SETMAXNREG"))}
#: CuTe tutorial examples (examples/cute/tutorial/) -> targets
CUTE = {"sgemm_1.cu": ("sm_80",), "sgemm_2.cu": ("sm_80",), "sgemm_sm80.cu": ("sm_80",),
        "tiled_copy.cu": ("sm_80",), "hopper/wgmma_sm90.cu": ("sm_90a",),
        "hopper/wgmma_tma_sm90.cu": ("sm_90a",), "blackwell/01_mma_sm100.cu": ("sm_100a",),
        "blackwell/04_mma_tma_2sm_sm100.cu": ("sm_100a",),
        "blackwell/05_mma_tma_epi_sm100.cu": ("sm_100a",)}


def _write(path: str, text: str) -> None:
    if path.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
    print("wrote", os.path.relpath(path), len(text), "chars")


def _strip_debug_sections(ptx: str) -> str:
    """``ptx`` without its DWARF ``.section .debug_*`` blocks (the .loc/.file lines stay)."""
    i = ptx.find("\t.section\t.debug")
    ptx = ptx if i < 0 else ptx[:i].rstrip() + "\n"
    # .loc's function_name names a label of the dropped .debug_str section: drop the attribute
    return re.sub(r"(\.loc\s+\d+\s+\d+\s+\d+),\s*function_name[^\n]*", r"\1", ptx)


def triton_corpus() -> None:
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, DATA)
    from triton_tutorials import KERNELS

    for name, (fn, sig, consts, warps) in KERNELS.items():
        for cc in TRITON_ARCHS:
            src = ASTSource(fn=fn, signature=sig, constexprs=consts)
            k = triton.compile(src, target=GPUTarget("cuda", cc, 32), options={"num_warps": warps})
            arch = f"sm_{cc}a" if cc >= 90 else f"sm_{cc}"
            ptx = _strip_debug_sections(k.asm["ptx"])
            meta = f"// triton {triton.__version__} {name} {arch} num_warps={warps} shared={k.metadata.shared}\n"
            _write(os.path.join(DATA, "triton", f"{name}_{arch}.ptx"), meta + ptx)


def cuda_corpus() -> None:
    for src, archs in CUDA_ARCHS.items():
        for arch in archs:
            out = os.path.join(DATA, "cuda", f"{src[:-3]}_{arch}.ptx")
            # compiled from inside the folder: the PTX names the source file relatively
            subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-lineinfo", "-o", os.path.basename(out), src],
                           check=True, cwd=os.path.join(DATA, "cuda"))
            with open(out) as f:  # .file names the absolute path: keep the name only
                text = f.read().replace(os.path.abspath(os.path.join(DATA, "cuda")) + "/", "")
            with open(out, "w") as f:
                f.write(text)
            print("wrote", os.path.relpath(out))
    for src, (arch, macros) in CUDA_PLANTED.items():
        for d in macros:
            tmp = f"/tmp/{src[:-3]}_{d}.ptx"
            subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-lineinfo", f"-D{d}", "-o", tmp, src], check=True,
                           cwd=os.path.join(DATA, "cuda"))
            with open(tmp) as f:
                text = f.read().replace(os.path.abspath(os.path.join(DATA, "cuda")) + "/", "")
            _write(os.path.join(DATA, "cuda", f"{src[:-3]}_{d.rsplit('_PLANT_', 1)[-1]}_{arch}.ptx.gz"), text)


def cute_corpus(cutlass: str) -> None:
    tut = os.path.join(cutlass, "examples", "cute", "tutorial")
    for src, archs in CUTE.items():
        for arch in archs:
            stem = os.path.basename(src)[:-3]
            tmp = f"/tmp/cute_{stem}_{arch}.ptx"
            subprocess.run(["nvcc", "-ptx", f"-arch={arch}", "-std=c++17", "--expt-relaxed-constexpr",
                            "-I", os.path.join(cutlass, "include"), "-I", os.path.join(cutlass, "tools", "util", "include"),
                            "-o", tmp, os.path.join(tut, src)], check=True)
            with open(tmp) as f:
                _write(os.path.join(DATA, "cute", f"{stem}_{arch}.ptx.gz"), f.read())


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    os.makedirs(os.path.join(DATA, what), exist_ok=True)
    if what == "triton":
        triton_corpus()
    elif what == "cuda":
        cuda_corpus()
    elif what == "cute":
        cute_corpus(sys.argv[2])
    else:
        sys.exit(__doc__)
