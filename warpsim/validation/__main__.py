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
import subprocess
import sys

from warpsim.validation.collect import collect, subset
from warpsim.validation.compare import check


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one worth showing."""

    def _get_help_string(self, action):
        h = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in h:
            return h
        return super()._get_help_string(action)


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m warpsim.validation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{collect,check,run,subset,sparse-collect,sparse-check,sparse-ub}")
    fmt = _Formatter

    def add_collect_opts(q):
        q.add_argument("--arch", default="sm_90", help="target the kernels are built for (and whose "
                       "instructions are validated)")
        q.add_argument("--out", required=True, help="output folder (flat: manifest, SASS, npz files)")
        q.add_argument("--warps", type=int, default=None, help="warps per (instruction, distribution); "
                       "default: per family (collect.DEFAULT_WARPS), or from --family-words")
        q.add_argument("--only", action="append", metavar="TEXT",
                       help="keep instructions whose text contains TEXT (repeatable)")
        q.add_argument("--seed", type=int, default=1, help="input seed (check regenerates the inputs from it)")
        q.add_argument("--max-file-mb", type=float, default=15.0, metavar="MB",
                       help="start a new d_NN.npz file after this many MiB of D words")
        q.add_argument("--max-files", type=int, default=None, metavar="N",
                       help="stop after N data files (keeps a transfer small)")
        q.add_argument("--build-dir", default=None, metavar="DIR",
                       help="where the .cu/.ptx/.cubin files go (default: a temporary folder)")
        q.add_argument("--no-gpu", action="store_true", help="build and dump SASS only (no CuPy or GPU needed)")
        for tool in ("nvcc", "ptxas", "cuobjdump"):
            q.add_argument(f"--{tool}", default=tool, metavar="PATH",
                           help=f"the {tool} to run" + (" (it needs nvdisasm on the PATH)" if tool == "cuobjdump" else ""))

    c = sub.add_parser("collect", help="run on the GPU and save D words", formatter_class=fmt,
                       description="Build one kernel per instruction, dump its SASS, run it on the GPU "
                                   "and save D words and a manifest (needs nvcc, ptxas, cuobjdump, CuPy).")
    add_collect_opts(c)
    c.add_argument("--family-words", type=int, default=None, metavar="N",
                   help="instead of --warps: enough warps for N D words per instruction family")

    k = sub.add_parser("check", help="compare saved D words with the simulator", formatter_class=fmt,
                       description="Regenerate the inputs of a collection, run the simulator and compare; "
                                   "writes report.md and report.json.  Exit status 1 if any word differs.")
    k.add_argument("--data", required=True, metavar="DIR", help="a folder written by collect or run")
    k.add_argument("--report", default=None, metavar="DIR", help="report folder (default: the data folder)")
    k.add_argument("--only", action="append", metavar="TEXT", help="check only instructions containing TEXT")

    r = sub.add_parser("run", help="collect + check", formatter_class=fmt,
                       description="collect, then check, on the GPU machine.")
    add_collect_opts(r)
    r.add_argument("--family-words", type=int, default=1_000_000, metavar="N",
                   help="D words per instruction family (ignored with --warps)")

    for name, what in (("sparse-collect", "collect for sparse mma.sp: run every sparse form and "
                         "selector on the GPU, save D and metadata words"),
                       ("sparse-check", "check a sparse collection against the simulator"),
                       ("sparse-ub", "record what the GPU does on undefined metadata (not modelled)")):
        q = sub.add_parser(name, help=what, formatter_class=fmt, description=what)
        q.add_argument("--arch", default="sm_90", help="target the kernels are built for")
        q.add_argument("--out", required=name != "sparse-check", metavar="DIR",
                       help="output folder (sparse-check: report folder, default the data folder)")
        q.add_argument("--data", required=name == "sparse-check", metavar="DIR",
                       help="a folder written by sparse-collect")
        q.add_argument("--warps", type=int, default=None, help="warps per (instruction, selector, "
                       "distribution)")
        q.add_argument("--only", action="append", metavar="TEXT",
                       help="keep instructions whose text contains TEXT (repeatable)")
        q.add_argument("--seed", type=int, default=1, help="input seed")
        q.add_argument("--no-gpu", action="store_true", help="build only (no CuPy or GPU needed)")

    s = sub.add_parser("subset", help="cut a small fixture from a collection", formatter_class=fmt,
                       description="Copy the first --warps warps of every run of a collection into a "
                                   "small folder (the committed test fixtures are made this way).")
    s.add_argument("--data", required=True, metavar="DIR", help="a folder written by collect or run")
    s.add_argument("--out", required=True, metavar="DIR", help="the fixture folder to write")
    s.add_argument("--warps", type=int, default=4, help="warps kept per run")
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
    except subprocess.CalledProcessError as e:
        tool = e.cmd[0] if isinstance(e.cmd, (list, tuple)) and e.cmd else str(e.cmd)
        err = (e.stderr or e.output or "")
        err = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
        first = next((ln.strip() for ln in err.splitlines() if ln.strip()), "")
        hint = " (cuobjdump -sass needs nvdisasm: install it or put it on the PATH)" \
            if "cuobjdump" in str(tool) else ""
        print(f"python -m warpsim.validation: error: {tool} failed with exit status {e.returncode}"
              f"{': ' + first if first else ''}{hint}", file=sys.stderr)
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
        from warpsim.validation import sparse as vs

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
