"""``warpsim launch``: run a kernel of a PTX module (or of a .cu file, compiled with nvcc)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from warpsim.errors import WarpsimError

LAUNCH_HELP = """\
Run kernel NAME of a PTX module over a grid on the CPU, bit for bit as the GPU does, and write
every array argument's contents afterwards to OUT/argN.npy.  A .cu file is first compiled to
PTX with nvcc (from the PATH, or the nvidia-cuda-nvcc wheel).

Arguments, in the kernel's parameter order (see --list): a .npy file (an array, passed by
pointer; a 0-d array, a scalar) or a number (converted to the parameter's declared type).
The sanitizer runs unless --no-check; its findings are printed and the exit status is 1.

examples:
  warpsim launch gemm.ptx --list
  warpsim launch gemm.ptx --kernel gemm_f16_f32 --grid 2,2 --block 128 \\
      --arg A.npy --arg B.npy --arg C.npy --arg 128 --arg 128 --arg 128 --out result
  warpsim launch kernel.cu --kernel k --grid 4 --block 64 --arg x.npy --trace 0:5 --trace-regs %r1,%f2
"""


def find_nvcc() -> str | None:
    """nvcc from the PATH, else from an installed nvidia-cuda-nvcc wheel, else None."""
    exe = shutil.which("nvcc")
    if exe:
        return exe
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for cand in sorted(glob.glob(os.path.join(root, "*", "bin", "nvcc"))):
            if os.access(cand, os.X_OK):
                return cand
    return None


def compile_cu(path: str, arch: str, extra: list[str] | None = None) -> str:
    """PTX text of a .cu file (``nvcc -ptx -arch=ARCH``)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise WarpsimError(f"{path} is CUDA source and no nvcc was found: put nvcc on the PATH "
                           "or pip install nvidia-cuda-nvcc, or pass a .ptx file")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "kernel.ptx")
        proc = subprocess.run([nvcc, "-ptx", f"-arch={arch}", "-o", out, path] + (extra or []),
                              capture_output=True, text=True)
        if proc.returncode:
            raise WarpsimError(f"nvcc failed on {path}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
        with open(out) as f:
            return f.read()


def _dims(s: str, what: str):
    try:
        v = tuple(int(x) for x in s.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise WarpsimError(f"--{what} takes 1 to 3 integers such as 4 or 2,2 (got {s!r})") from None
    return v


def _arg(text: str, param):
    if text.endswith(".npy"):
        a = np.load(text)
        return a[()] if a.ndim == 0 else a
    t = param.type
    try:
        if t.startswith("f"):
            return float(text)
        return int(text, 0)
    except ValueError:
        raise WarpsimError(f"argument {text!r} for {param.name} (.{t}) is neither a .npy file nor "
                           "a number") from None


def _thread(s: str):
    try:
        cta, tid = s.split(":")
        return _dims(cta, "trace"), _dims(tid, "trace")
    except ValueError:
        raise WarpsimError(f"--trace takes CTA:TID such as 0:5 or 1,0:3,1 (got {s!r})") from None


def add_parser(sub, formatter) -> None:
    lp = sub.add_parser("launch", help="run a kernel of a PTX module or .cu file", description=LAUNCH_HELP,
                        formatter_class=formatter)
    lp.add_argument("module", help="kernel.ptx or kernel.cu")
    lp.add_argument("--kernel", help="entry name (default: the only kernel)")
    lp.add_argument("--list", action="store_true", help="list the kernels and their parameters")
    lp.add_argument("--grid", default="1", help="grid size: N, X,Y or X,Y,Z (default 1)")
    lp.add_argument("--block", default="32", help="block size: N, X,Y or X,Y,Z (default 32)")
    lp.add_argument("--arg", action="append", default=[], help="one argument (.npy or number), in order")
    lp.add_argument("--shared-bytes", type=int, default=0, help="dynamic shared memory in bytes")
    lp.add_argument("--arch", default="sm_90")
    lp.add_argument("--out", default=".", help="folder for argN.npy outputs (default .)")
    lp.add_argument("--no-check", action="store_true", help="skip the sanitizer")
    lp.add_argument("--trace", action="append", default=[], metavar="CTA:TID",
                    help="trace this thread (repeatable), e.g. 0:5 or 1,0:3,1")
    lp.add_argument("--trace-regs", default=None, help="registers to trace, comma-separated "
                    "(default: what each instruction writes)")
    lp.add_argument("--trace-lines", default=None, help="PTX line range FIRST-LAST to trace")
    lp.add_argument("--nvcc-flag", action="append", default=[], help="extra flag for nvcc (.cu input)")
    lp.add_argument("--progress", action="store_true", help="progress bar on stderr")
    lp.add_argument("--workers", type=int, default=None, metavar="N",
                    help="spread the CTAs over N processes (same results; docs/launch.md)")
    lp.set_defaults(func=cmd_launch)


def cmd_launch(args) -> int:
    from warpsim.kernel.launch import Module
    from warpsim.kernel.sanitizer import SanitizerError, Trace

    if args.module.endswith(".cu"):
        text = compile_cu(args.module, args.arch, args.nvcc_flag)
    else:
        with open(args.module) as f:
            text = f.read()
    m = Module(text)
    kernels = m.kernels
    if args.list:
        for k in kernels.values():
            print(k)
        return 0
    name = args.kernel
    if name is None:
        if len(kernels) != 1:
            raise WarpsimError(f"{args.module} has {len(kernels)} kernels ({', '.join(kernels)}); "
                               "pick one with --kernel")
        name = next(iter(kernels))
    if name not in kernels:
        raise WarpsimError(f"no kernel {name!r} in {args.module}; kernels: {', '.join(kernels)}")
    params = kernels[name].params
    grid, block = _dims(args.grid, "grid"), _dims(args.block, "block")
    if len(args.arg) != len(params):
        raise WarpsimError(f"{name} takes {len(params)} arguments ({kernels[name]}), "
                           f"{len(args.arg)} given with --arg")
    values = [_arg(a, p) for a, p in zip(args.arg, params)]
    trace = None
    if args.trace:
        lines = None
        if args.trace_lines:
            try:
                lo, hi = (int(x) for x in args.trace_lines.split("-"))
            except ValueError:
                raise WarpsimError(f"--trace-lines takes FIRST-LAST (got {args.trace_lines!r})") from None
            lines = (lo, hi)
        regs = [r.strip() for r in args.trace_regs.split(",")] if args.trace_regs else None
        trace = Trace(threads=[_thread(t) for t in args.trace], regs=regs, lines=lines)
    status = 0
    try:
        outs = m.launch(name, grid, block, values,
                        args.shared_bytes, args.arch, check=not args.no_check, trace=trace,
                        progress=args.progress or sys.stderr.isatty(), workers=args.workers)
    except SanitizerError as e:
        sys.stdout.write(getattr(e, "stdout", ""))  # device printf before the finding
        sys.stdout.flush()
        for f in e.findings:
            print(f"warpsim: finding: {f}", file=sys.stderr)
        if e.outputs is None:
            return 1
        outs, status = e.outputs, 1
    else:
        sys.stdout.write(getattr(outs, "stdout", ""))  # device printf, in CTA, warp, lane order
    if trace is not None:
        print(trace)
    os.makedirs(args.out, exist_ok=True)
    k = 0
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray) and v.ndim >= 1:
            path = os.path.join(args.out, f"arg{i}.npy")
            np.save(path, outs[k])
            print(f"wrote {path}: {outs[k].dtype} {outs[k].shape}")
            k += 1
    return status
