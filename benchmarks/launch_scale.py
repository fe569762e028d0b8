"""Launches spread over processes and machines, launch overhead, and a launch's peak memory.

    PYTHONPATH=. python benchmarks/launch_scale.py spread [--n 2048] [--json PATH]
    PYTHONPATH=. python benchmarks/launch_scale.py memory [--n 4096] [--rows 1 2] [--json PATH]
    PYTHONPATH=. python benchmarks/launch_scale.py parts [--n 2048] [--workers 2] [--json PATH]
    PYTHONPATH=. python benchmarks/launch_scale.py small [--json PATH]

``spread``: the suite's cp.async + ldmatrix + mma GEMM (tests/kernels/gemm_f16.cu, 64 x 64
tiles, 4 warps per CTA) at N^3, f16 -> f32, ``check=False``, in this process, on a process pool
of 2 workers and on a 2-worker Dask ``LocalCluster`` (when ``distributed`` is installed), each
once, in one run; every result is compared bit for bit with the one-process result.

``memory``: peak resident memory (``ru_maxrss``) of a child process that launches the same
GEMM with N^3 buffers over the first ``rows`` rows of CTAs (64 CTAs per row at N = 4096: one
CTA batch), against its resident memory just before the launch (inputs made, module decoded):
the launch must need its buffers plus a working set that does not grow with the CTAs run.

``parts``: where a spread launch's extra CPU goes: the GEMM in this process, then the same
``workers`` parts run one after the other here through the workers' entry point (``run_part``:
a part's tracked global memory, its written-byte masks), CPU time of each; their sum over the
one-process CPU time is the software's own cost of spreading (no second core involved).

``small``: CPU time of small launches (the test-suite case) of every suite kernel, first
(parse + decode) and then (module cached by its PTX text), median of 5.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def _cores() -> int:
    """Cores this process may run on (``taskset`` narrows them), else all the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _machine() -> str:
    try:
        from warpsim.tensorcore import accel
        eng = "compiled mma engine" if accel.available() else "NumPy mma engine"
    except Exception:  # noqa: BLE001 - a description only
        eng = "mma engine unknown"
    return (f"{platform.machine()} {_cpu_model()}, {os.cpu_count()} cores ({_cores()} usable here), "
            f"Python {platform.python_version()}, numpy {np.__version__}, {eng}, "
            f"load {os.getloadavg()[0]:.2f}")


def _busy(seconds: float) -> None:
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def affinity_check(seconds: float = 0.5) -> dict:
    """Wall time of ``2 * cores`` processes each burning ``seconds`` of CPU: about
    ``2 * seconds`` where only ``cores`` cores run them (so ``taskset`` holds), about
    ``seconds`` where the machine runs them all at once (an affinity that is not enforced)."""
    from concurrent.futures import ProcessPoolExecutor

    k = 2 * _cores()
    with ProcessPoolExecutor(k) as ex:
        list(ex.map(_busy, [0.01] * k))  # start the workers first
        t = time.perf_counter()
        list(ex.map(_busy, [seconds] * k))
        dt = time.perf_counter() - t
    return {"processes": k, "cpu_each_s": seconds, "wall_s": dt,
            "cores_effective": round(k * seconds / dt, 2)}


def _gemm_args(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    C = np.zeros((n, n), np.float32)
    return [A, B, C, n, n, n]


def spread(n: int, repeat: int = 1, dask: bool = True, workers: tuple = (2,),
           cta_batch: int | None = None) -> dict:
    import warpsim
    from warpsim.validation.kernel_suite import CASES

    case = CASES["gemm_f16"]
    m = warpsim.Module(case.ptx_path.read_text())
    m.program(case.kernel)
    args = _gemm_args(n)
    grid = (n // 64, n // 64)
    res = {"machine": _machine(), "cores_usable": _cores(), "n": n, "ctas": grid[0] * grid[1],
           "cta_batch": cta_batch, "warpsim": os.path.dirname(os.path.dirname(warpsim.__file__)),
           "affinity_check": affinity_check()}
    print(res["machine"], "\nwarpsim from", res["warpsim"], "\naffinity check:", res["affinity_check"], flush=True)

    import resource

    def timed(label, **kw):
        load = os.getloadavg()[0]
        c0 = time.process_time()
        k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        outs = m.launch(case.kernel, grid, 128, args, check=False, cta_batch=cta_batch, **kw)
        dt = time.perf_counter() - t
        k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        kids = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)  # workers reaped by now
        res[label] = {"s": dt, "cpu_here_s": time.process_time() - c0, "cpu_workers_s": kids,
                      "load_at_start": load}
        print(f"{label:24s} {dt:8.2f} s wall, CPU here {res[label]['cpu_here_s']:.2f} s, "
              f"in workers {kids:.2f} s  (load {load:.2f})", flush=True)
        return outs

    small = _gemm_args(128)
    ratios: dict = {w: [] for w in workers}
    cpu_ratios: dict = {w: [] for w in workers}
    for r in range(repeat):  # alternate, so that all see the same load
        ref = timed(f"one_process_{r}")
        one = res[f"one_process_{r}"]
        for w in workers:
            # workers=w: a pool of w processes made (and shut down) by the launch: its start-up,
            # each worker's decode of the module and the transfers are in the figure
            got = timed(f"workers_{w}_{r}", workers=w)
            assert all(a.tobytes() == b.tobytes() for a, b in zip(ref, got)), "bits differ"
            res[f"workers_{w}_{r}"]["same_bits"] = True
            two = res[f"workers_{w}_{r}"]
            ratios[w].append(one["s"] / two["s"])
            # on an idle machine of w cores the wall time would be about the busiest worker's
            # CPU time (about 1/w of the workers' total) plus the parent's: the speed-up it allows
            cpu_ratios[w].append(one["cpu_here_s"] / (two["cpu_workers_s"] / w + two["cpu_here_s"]))
            print(f"  {w} workers: wall speed-up {ratios[w][-1]:.2f}; CPU-time bound on an idle "
                  f"machine {cpu_ratios[w][-1]:.2f}", flush=True)
    for w in workers:
        res[f"same_bits_{w}_processes"] = True
        res[f"speedups_{w}_processes"] = ratios[w]
        res[f"speedup_{w}_processes_median"] = float(np.median(ratios[w]))
        res[f"cpu_bound_speedups_{w}_processes"] = cpu_ratios[w]
    try:
        import distributed
        if not dask:
            raise ImportError
    except ImportError:
        res["dask"] = "not installed or not asked for"
    else:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cl, distributed.Client(cl) as client:
            ex = client.get_executor()
            m.launch(case.kernel, (2, 2), 128, small, check=False, executor=ex, cta_batch=1)  # warm-up
            got = timed("dask_local_cluster_2", executor=ex)
            ref = timed("one_process_beside_dask")
        res["dask_local_cluster_2"]["same_bits"] = all(a.tobytes() == b.tobytes() for a, b in zip(ref, got))
        res["speedup_dask_2"] = res["one_process_beside_dask"]["s"] / res["dask_local_cluster_2"]["s"]
    err = float(np.abs(ref[2] - args[0].astype(np.float64) @ args[1].astype(np.float64).T).max())
    res["max_abs_err_vs_float64"] = err
    res["load_at_end"] = os.getloadavg()[0]
    return res


_CHILD = r"""
import resource, sys, time, numpy as np
sys.path.insert(0, {root!r})
import warpsim
from warpsim.validation.kernel_suite import CASES
n, rows, cta_batch = {n}, {rows}, {cta_batch}
case = CASES["gemm_f16"]
m = warpsim.Module(case.ptx_path.read_text()); m.program(case.kernel)
rng = np.random.default_rng(0)
A = rng.standard_normal((n, n)).astype(np.float16)
B = rng.standard_normal((n, n)).astype(np.float16)
C = np.zeros((n, n), np.float32)
def rss():  # current resident set, MiB
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
before = rss()
t, c = time.perf_counter(), time.process_time()
outs = m.launch(case.kernel, (n // 64, rows), 128, [A, B, C, n, n, n], check=False, cta_batch=cta_batch)
dt, dc = time.perf_counter() - t, time.process_time() - c
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(before, peak, rss(), dt, (A.nbytes + B.nbytes + C.nbytes) / 2**20, dc)
"""


def memory(n: int, rows: list[int], cta_batch: int | None = None) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = {"machine": _machine(), "n": n, "ctas_per_row": n // 64, "cta_batch": cta_batch, "runs": []}
    for r in rows:
        out = subprocess.run([sys.executable, "-c", _CHILD.format(root=root, n=n, rows=r, cta_batch=cta_batch)],
                             capture_output=True, text=True, check=True).stdout.split()
        before, peak, after, dt, buffers, dc = map(float, out)
        row = {"rows": r, "ctas": r * (n // 64), "buffers_mib": buffers, "rss_before_launch_mib": before,
               "peak_rss_mib": peak, "peak_over_before_mib": peak - before, "rss_after_mib": after,
               "launch_s": dt, "launch_cpu_s": dc, "load": os.getloadavg()[0]}
        res["runs"].append(row)
        print(json.dumps(row), flush=True)
    return res


def parts(n: int, workers: int = 2, repeat: int = 1) -> dict:
    import warpsim
    from warpsim.kernel.executor import parts as cut
    from warpsim.kernel.launch import run_part
    from warpsim.validation.kernel_suite import CASES

    case = CASES["gemm_f16"]
    text = case.ptx_path.read_text()
    m = warpsim.Module(text)
    m.program(case.kernel)
    args = _gemm_args(n)
    grid, block = (n // 64, n // 64, 1), (128, 1, 1)
    runner_batch = min(grid[0] * grid[1], 256)  # the launcher's default batch for 128 threads
    ranges = cut(grid[0] * grid[1], runner_batch, workers)
    job = {"text": text, "contract": True, "name": case.kernel, "grid": grid, "block": block,
           "args": args, "shared_bytes": 0, "arch": "sm_90", "cta_batch": None,
           "max_steps": 50_000_000, "check": False, "max_total_steps": 10 ** 12, "timeout_s": None,
           "trace": None}
    res = {"machine": _machine(), "n": n, "workers": workers, "parts": [[r.start, r.stop] for r in ranges],
           "warpsim": os.path.dirname(os.path.dirname(warpsim.__file__)), "runs": []}
    run_part(job, 0, 1)  # the workers' module cache, as a forked worker inherits it
    for r in range(repeat):
        c = time.process_time()
        m.launch(case.kernel, grid[:2], 128, args, check=False)
        one = time.process_time() - c
        each = []
        for rg in ranges:
            c = time.process_time()
            run_part(job, rg.start, rg.stop)
            each.append(time.process_time() - c)
        row = {"one_process_cpu_s": one, "parts_cpu_s": each, "parts_over_one": sum(each) / one,
               "load": os.getloadavg()[0]}
        res["runs"].append(row)
        print(json.dumps(row), flush=True)
    res["parts_over_one_median"] = float(np.median([r["parts_over_one"] for r in res["runs"]]))
    return res


def small() -> dict:
    import warpsim
    from warpsim.validation.kernel_suite import CASES

    res = {"machine": _machine(), "kernels": {}}
    for name, case in CASES.items():
        text = case.ptx_path.read_text()
        args = case.args()

        def go():
            t = time.process_time()
            warpsim.launch(text, case.kernel, case.grid, case.block, args, case.shared_bytes, check=False)
            return time.process_time() - t
        first = go()
        then = sorted(go() for _ in range(5))[2]
        res["kernels"][name] = {"grid": case.grid, "block": case.block, "first_cpu_ms": first * 1e3,
                                "then_cpu_ms": then * 1e3, "load": os.getloadavg()[0]}
        print(f"{name:20s} grid {case.grid} block {case.block}: first {first * 1e3:7.1f} ms, "
              f"then {then * 1e3:7.1f} ms CPU (load {os.getloadavg()[0]:.1f})", flush=True)
    return res


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["spread", "memory", "parts", "small"])
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--rows", type=int, nargs="*", default=[1, 2])
    p.add_argument("--repeat", type=int, default=1, help="spread, parts: rounds of runs")
    p.add_argument("--no-dask", action="store_true", help="spread: skip the Dask LocalCluster")
    p.add_argument("--workers", type=int, nargs="*", default=[2], help="spread: pool sizes (default 2)")
    p.add_argument("--cta-batch", type=int, default=None, help="spread, memory: CTAs per batch (default: the launcher's, 256: a grid of "
                   "B batches splits into at most B parts)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.what == "spread":
        res = spread(a.n or 2048, a.repeat, not a.no_dask, tuple(a.workers), a.cta_batch)
    elif a.what == "parts":
        res = parts(a.n or 2048, a.workers[0], a.repeat)
    elif a.what == "memory":
        res = memory(a.n or 4096, a.rows, a.cta_batch)
    else:
        res = small()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
