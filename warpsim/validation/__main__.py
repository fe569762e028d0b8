"""Command line: ``python -m warpsim.validation {collect,check,run,subset}``.

collect  build the kernels, dump SASS, run on the GPU, save D words + manifest (needs CuPy)
check    regenerate the inputs, run the simulator, compare, write report.md/report.json
run      collect + check in one go (on the GPU machine), by default >= 1,000,000 D words per
         instruction family
subset   cut the first N warps of every run of a collection into a small fixture
sparse-collect / sparse-check / sparse-ub   the same for sparse mma.sp (warpsim.validation.sparse)
"""

from __future__ import annotations

import argparse
import sys

from .collect import collect, subset
from .compare import check


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m warpsim.validation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def add_collect_opts(q):
        q.add_argument("--arch", default="sm_90")
        q.add_argument("--out", required=True, help="output folder (flat: manifest, SASS, npz files)")
        q.add_argument("--warps", type=int, default=None, help="warps per (instruction, distribution); "
                       "default: per family (collect.DEFAULT_WARPS)")
        q.add_argument("--only", action="append", help="keep instructions whose text contains this (repeatable)")
        q.add_argument("--seed", type=int, default=1)
        q.add_argument("--max-file-mb", type=float, default=15.0)
        q.add_argument("--max-files", type=int, default=None)
        q.add_argument("--build-dir", default=None)
        q.add_argument("--no-gpu", action="store_true", help="build and dump SASS only")
        for tool in ("nvcc", "ptxas", "cuobjdump"):
            q.add_argument(f"--{tool}", default=tool)

    c = sub.add_parser("collect", help="run on the GPU and save D words")
    add_collect_opts(c)
    c.add_argument("--family-words", type=int, default=None)

    k = sub.add_parser("check", help="compare saved D words with the simulator")
    k.add_argument("--data", required=True)
    k.add_argument("--report", default=None, help="report folder (default: the data folder)")
    k.add_argument("--only", action="append")

    r = sub.add_parser("run", help="collect + check")
    add_collect_opts(r)
    r.add_argument("--family-words", type=int, default=1_000_000)

    for name in ("sparse-collect", "sparse-check", "sparse-ub"):
        q = sub.add_parser(name, help=f"{name.split('-')[1]} for sparse mma.sp")
        q.add_argument("--arch", default="sm_90")
        q.add_argument("--out", required=name != "sparse-check")
        q.add_argument("--data", required=name == "sparse-check")
        q.add_argument("--warps", type=int, default=None)
        q.add_argument("--only", action="append")
        q.add_argument("--seed", type=int, default=1)
        q.add_argument("--no-gpu", action="store_true")

    s = sub.add_parser("subset", help="cut a small fixture from a collection")
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--warps", type=int, default=4)
    return p.parse_args(argv)


def main(argv=None) -> int:
    """Run one harness command; problems with the environment (a missing CUDA tool, no CuPy or
    no GPU, unreadable data) and bad arguments end with one line on stderr and exit status 2."""
    a = _args(sys.argv[1:] if argv is None else argv)
    try:
        return _run(a)
    except FileNotFoundError as e:
        tool = getattr(e, "filename", None) or str(e)
        hint = (" (install the CUDA toolkit, or name it with --nvcc/--ptxas/--cuobjdump)"
                if str(tool) in ("nvcc", "ptxas", "cuobjdump") or "cuobjdump" in str(tool) else "")
        print(f"python -m warpsim.validation: error: not found: {tool}{hint}", file=sys.stderr)
    except (RuntimeError, ValueError, OSError, KeyError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"python -m warpsim.validation: error: {msg}", file=sys.stderr)
    return 2


def _run(a) -> int:
    if a.cmd in ("collect", "run"):
        collect(a.arch, a.out, warps=a.warps, family_words=a.family_words, only=a.only, seed=a.seed,
                max_file_mb=a.max_file_mb, max_files=a.max_files, build_dir=a.build_dir,
                run_gpu=not a.no_gpu, nvcc=a.nvcc, ptxas=a.ptxas, cuobjdump=a.cuobjdump)
        if a.cmd == "run" and not a.no_gpu:
            rep = check(a.out, a.out)
            return 0 if rep["summary"]["mismatches"] == 0 else 1
        return 0
    if a.cmd == "check":
        rep = check(a.data, a.report or a.data, only=a.only)
        return 0 if rep["summary"]["mismatches"] == 0 else 1
    if a.cmd.startswith("sparse-"):
        from . import sparse as vs

        if a.cmd == "sparse-collect":
            vs.collect(a.arch, a.out, warps=a.warps, only=a.only, seed=a.seed, run_gpu=not a.no_gpu)
            return 0
        if a.cmd == "sparse-ub":
            vs.collect_ub(a.arch, a.out, seed=a.seed)
            return 0
        rep = vs.check(a.data, a.out or a.data, only=a.only)
        return 0 if rep["summary"]["mismatches"] == 0 else 1
    if a.cmd == "subset":
        m = subset(a.data, a.out, a.warps)
        print(f"subset: {len(m['entries'])} runs, {a.warps} warps each -> {a.out}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
