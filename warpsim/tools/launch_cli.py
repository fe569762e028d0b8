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
the output arrays afterwards to OUT/argN.npy.  A .cu file is first compiled to PTX with nvcc
(from the PATH, or the nvidia-cuda-nvcc wheel) with -lineinfo, so that findings, traces and
the debugger name CUDA source lines; --keep-ptx DIR keeps that PTX.

Arguments, in the kernel's parameter order (see --list): a .npy file (an array, passed by
pointer; a 0-d array, a scalar), a number (converted to the parameter's declared type), or a
new array: zeros:DTYPE:SHAPE, empty:DTYPE:SHAPE (0xFF bytes), arange:DTYPE:SHAPE (0, 1, 2, ...),
e.g. zeros:float32:64,16.  Written back: arrays the kernel changed, and every zeros:/empty:
array (outputs by construction); inputs the kernel left alone are not.

The sanitizer runs unless --no-check; its findings are printed grouped by (kind, source line)
and --report FILE.json writes them as JSON.  --debug runs the kernel under the debugger (a
cuda-gdb-like command line on stdin; --debug-commands FILE reads commands from a file).

exit status: 0 clean; 1 sanitizer findings (outputs still written when the kernel finished);
2 bad usage, input or an error before the kernel ran.

examples:
  warpsim launch gemm.ptx --list
  warpsim launch gemm.ptx --kernel gemm_f16_f32 --grid 2,2 --block 128 \\
      --arg A.npy --arg B.npy --arg zeros:float32:128,128 --arg 128 --arg 128 --arg 128 --out result
  warpsim launch kernel.cu --kernel k --grid 4 --block 64 --arg x.npy --trace 0:5 --trace-regs %r1,%f2
  warpsim launch kernel.cu --grid 4 --block 64 --arg x.npy --debug
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


def compile_cu(path: str, arch: str, extra: list[str] | None = None, *, lineinfo: bool = True,
               keep: str | None = None) -> str:
    """PTX text of a .cu file (``nvcc -ptx -arch=ARCH``, with ``-lineinfo`` unless told not
    to); ``keep``: a folder to keep the PTX in (as NAME.ptx)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise WarpsimError(f"{path} is CUDA source and no nvcc was found: put nvcc on the PATH "
                           "or pip install nvidia-cuda-nvcc, or pass a .ptx file")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "kernel.ptx")
        flags = ["-lineinfo"] if lineinfo else []
        proc = subprocess.run([nvcc, "-ptx", f"-arch={arch}", *flags, "-o", out, path] + (extra or []),
                              capture_output=True, text=True)
        if proc.returncode:
            raise WarpsimError(f"nvcc failed on {path}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
        with open(out) as f:
            text = f.read()
    if keep:
        os.makedirs(keep, exist_ok=True)
        dest = os.path.join(keep, os.path.splitext(os.path.basename(path))[0] + ".ptx")
        with open(dest, "w") as f:
            f.write(text)
        print(f"kept the PTX in {dest}", file=sys.stderr)
    return text


def _dims(s: str, what: str):
    try:  # "2,x" or "2," is a typo, not grid 2
        v = tuple(int(x) for x in s.replace("x", ",").split(","))
    except ValueError:
        raise WarpsimError(f"--{what} takes 1 to 3 integers such as 4 or 2,2 (got {s!r})") from None
    if what == "trace" and (not 1 <= len(v) <= 3 or any(x < 0 for x in v)):
        raise WarpsimError(f"--trace takes CTA:TID, each 1 to 3 integers >= 0 such as 0:5 or 1,0:3,1 "
                           f"(got {s!r})")
    return v


_NEW = ("zeros", "empty", "arange")


def _new_array(text: str) -> np.ndarray:
    """zeros:DTYPE:SHAPE / empty:DTYPE:SHAPE / arange:DTYPE:SHAPE."""
    parts = text.split(":")
    if len(parts) != 3:
        raise WarpsimError(f"--arg {text!r}: write {parts[0]}:DTYPE:SHAPE such as {parts[0]}:float32:64,16")
    kind, dt, shape = parts
    try:
        dtype = np.dtype(dt)
    except TypeError:
        raise WarpsimError(f"--arg {text!r}: unknown dtype {dt!r} (float32, float16, int32, uint8, ...)") from None
    try:
        dims = tuple(int(x) for x in shape.replace("x", ",").split(",") if x.strip())
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise WarpsimError(f"--arg {text!r}: the shape must be positive integers such as 64 or 64,16")
    n = int(np.prod(dims))
    if kind == "zeros":
        return np.zeros(dims, dtype)
    if kind == "empty":
        return np.full(n * dtype.itemsize, 0xFF, np.uint8).view(dtype).reshape(dims)
    return np.arange(n).astype(dtype).reshape(dims)


def _arg(text: str, param):
    if text.split(":", 1)[0] in _NEW:
        return _new_array(text)
    if text.endswith((".npy", ".npz")):
        try:
            a = np.load(text, allow_pickle=False)
        except ValueError as e:  # pickled objects, a truncated or foreign file
            raise _file_error(text, f"is not a .npy array file warpsim can read: {e}") from None
        if not isinstance(a, np.ndarray):
            raise _file_error(text, "is an .npz archive; --arg takes one .npy array")
        return a[()] if a.ndim == 0 else a
    t = param.type
    try:
        if t.startswith("f"):
            return float(text)
        return int(text, 0)
    except ValueError:
        pass
    try:
        float(text)
    except ValueError:
        raise WarpsimError(f"argument {text!r} for {param.name} (.{t}) is neither a .npy file nor "
                           "a number") from None
    raise WarpsimError(f"argument {text!r} for {param.name} (.{t}) is not an integer: an integer "
                       "parameter takes a whole number (decimal, or 0x... hex)")


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
                    help="spread the CTAs over N processes (same results and sanitizer findings; docs/launch.md)")
    lp.add_argument("--max-steps", type=int, default=50_000_000,
                    help="stop a warp after this many instructions (default 50000000)")
    lp.add_argument("--max-total-steps", type=int, default=None, metavar="N",
                    help="stop the launch after N warp instructions in all (default 300000000)")
    lp.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                    help="stop the launch after this many seconds of wall time (default: none; not with --debug)")
    lp.add_argument("--keep-ptx", metavar="DIR", default=None, help="keep the PTX compiled from a .cu file")
    lp.add_argument("--no-lineinfo", action="store_true", help="compile a .cu file without -lineinfo")
    lp.add_argument("--report", metavar="FILE.json", default=None,
                    help="write the sanitizer report (findings grouped by kind and source line) as JSON")
    lp.add_argument("--debug", action="store_true", help="run under the debugger (commands on stdin)")
    lp.add_argument("--debug-commands", metavar="FILE", default=None,
                    help="debugger commands, one a line (implies --debug)")
    lp.set_defaults(func=cmd_launch)


def read_module_text(path: str) -> str:
    """The text of PTX module file ``path``: a regular file of at most MAX_MODULE_TEXT_BYTES
    (``/dev/zero`` or a pipe would be read until memory runs out)."""
    import os
    import stat

    from warpsim.facts.limits import MAX_MODULE_TEXT_BYTES

    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _file_error(path, "is not a regular file (a PTX module is read from a file)")
    with open(path, "rb") as f:
        raw = f.read(MAX_MODULE_TEXT_BYTES + 1)
    if len(raw) > MAX_MODULE_TEXT_BYTES:
        raise _file_error(path, f"is larger than {MAX_MODULE_TEXT_BYTES} bytes, warpsim's limit on "
                                "PTX module text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _file_error(path, f"is not UTF-8 text (byte {e.start}): not a PTX module") from None


def _file_error(path: str, what: str):
    from warpsim.errors import FileTypeError

    e = FileTypeError(f"{path} {what}")
    e.path = path
    return e


def _by_source_name(name: str, kernels, module: str) -> str:
    """The entry whose C++ name is ``name`` (``k`` for ``_Z1kPf``: what a .cu file calls it)."""
    from warpsim.kernel.source import demangle
    full = demangle(kernels)
    hits = [k for k, d in full.items() if d.split("(", 1)[0] == name or d == name]
    if len(hits) == 1:
        return hits[0]
    shown = ", ".join(k if full[k] == k else f"{k} ({full[k]})" for k in kernels)
    if hits:
        raise WarpsimError(f"{name!r} names {len(hits)} kernels of {module}; pick one by its "
                           f"mangled name: {', '.join(f'{k} ({full[k]})' for k in hits)}")
    raise WarpsimError(f"no kernel {name!r} in {module}; kernels: {shown}")


def cmd_launch(args) -> int:
    from warpsim.kernel.launch import Module
    from warpsim.kernel.sanitizer import SanitizerError, Trace

    if args.module.endswith(".cu"):
        text = compile_cu(args.module, args.arch, args.nvcc_flag, lineinfo=not args.no_lineinfo,
                          keep=args.keep_ptx)
    else:
        text = read_module_text(args.module)
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
        name = _by_source_name(name, kernels, args.module)
    params = kernels[name].params
    grid, block = _dims(args.grid, "grid"), _dims(args.block, "block")
    if len(args.arg) != len(params):
        raise WarpsimError(f"{name} takes {len(params)} arguments ({kernels[name]}), "
                           f"{len(args.arg)} given with --arg")
    values = [_arg(a, p) for a, p in zip(args.arg, params)]
    if os.path.exists(args.out) and not os.path.isdir(args.out):  # before the launch, not after
        raise WarpsimError(f"--out {args.out!r} is a file; --out names the folder the argN.npy "
                           "outputs go to")
    if args.debug or args.debug_commands:
        return _debug(m, name, grid, block, values, args)
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
    report = {"kernel": name, "findings": 0, "groups": []}
    try:
        outs = m.launch(name, grid, block, values,
                        args.shared_bytes, args.arch, check=not args.no_check, trace=trace,
                        progress=args.progress or sys.stderr.isatty(), max_steps=args.max_steps,
                        workers=args.workers, timeout_s=args.timeout, **_total(args))
    except SanitizerError as e:
        sys.stdout.write(getattr(e, "stdout", ""))  # device printf before the finding
        sys.stdout.flush()
        print(f"warpsim: {e.summary()}", file=sys.stderr)
        report = e.report()
        status = 1
        outs = e.outputs
    else:
        sys.stdout.write(getattr(outs, "stdout", ""))  # device printf, in CTA, warp, lane order
    report["status"] = status
    report["finished"] = outs is not None
    if args.report:
        import json
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if trace is not None:
        print(trace)
    if outs is None:
        return status
    os.makedirs(args.out, exist_ok=True)
    k = 0
    written = []
    for i, (v, text) in enumerate(zip(values, args.arg)):
        if isinstance(v, np.ndarray) and v.ndim >= 1:
            o = outs[k]
            k += 1
            new = text.split(":", 1)[0] in ("zeros", "empty")
            if not new and np.array_equal(o.view(np.uint8), np.ascontiguousarray(v).view(np.uint8)):
                continue  # an input the kernel left alone
            path = os.path.join(args.out, f"arg{i}.npy")
            np.save(path, o)
            written.append(path)
            print(f"wrote {path}: {o.dtype} {o.shape}")
    return status


def _total(args) -> dict:
    """``max_total_steps`` where --max-total-steps was given (else the launch's default)."""
    return {} if args.max_total_steps is None else {"max_total_steps": args.max_total_steps}


def _debug(m, name, grid, block, values, args) -> int:
    from warpsim.kernel.debugger import run_repl

    dbg = m.debug(name, grid, block, values, args.shared_bytes, args.arch, max_steps=args.max_steps,
                  **_total(args))
    if args.debug_commands:
        with open(args.debug_commands) as f:
            run_repl(dbg, commands=f.read().splitlines())
    else:
        run_repl(dbg, stdin=sys.stdin)
    return 0
