"""Spread a launch's CTAs over processes or machines, with the results of one process.

``Module.launch(..., executor=..., workers=...)`` lands here.  The grid is cut into ``workers``
parts of whole CTA batches (the batches one process would run, so nothing about a batch
changes); each part goes to the executor with the module text and the launch's inputs, runs
on a fresh global memory holding every input, and comes back as the bytes its CTAs stored
(a written-byte mask and the values, per array argument).  The parts are merged in CTA
order onto copies of the inputs: the last store to a byte wins, as in one process, so the
outputs are the same bits whatever the executor and the number of workers.

What a part does not see is what other parts' CTAs did: that is fine for every kernel whose
CTAs do not communicate, and a race (reported by ``check=True``) otherwise.  Kernels that
communicate on purpose run in this process instead, with a :class:`SerialLaunchWarning`
naming the instruction and why (:func:`communication`):

- atomics (``atom``/``red``, ``cp.reduce.async.bulk``) on global or generic addresses: their
  results and their floating-point sums depend on the order of all CTAs' operations;
- loads that can watch another CTA's stores (``ld.volatile``, ``ld.acquire``, ``ld.relaxed``
  at ``.gpu``/``.sys`` scope, ``.mmio``) from global or generic addresses: a spin-wait;
- cluster kernels (``barrier.cluster``, ``mapa``, ``::cluster`` state spaces, ``%cluster*``
  registers, ``multimem``) and cluster launches: their CTAs share memory.

The sanitizer (``check=True``, the default) spreads too: each part runs its own
:class:`~warpsim.kernel.checks.Recorder` and sends back its findings (with their aggregation
keys) and its log of global accesses; the parent merges the findings in CTA order as one run
aggregates them, runs the cross-CTA race check once over every part's log, and raises the
:class:`SanitizerError` one process raises.  A
:class:`~warpsim.kernel.sanitizer.Trace` collects the records of every part, in CTA order,
and device printf records are merged as one process orders them.  An error that stops a part
is raised as the first (in CTA order) part's error, as one process would raise it.

Executors: any :class:`concurrent.futures.Executor` (``submit`` and futures); ``"process"``
(or ``executor=None`` with ``workers``) makes a :class:`~concurrent.futures.ProcessPoolExecutor`
of ``workers`` processes (default: the cores this process may use, :func:`~warpsim._util.cores.usable_cores`) for this launch.  A Dask ``distributed``
client's ``client.get_executor()`` spreads a launch over a cluster (``pip install
warpsim[dask]``).  Each worker process parses and decodes a module once per PTX text (and
contraction setting); workers forked from the launching process (a process pool on Linux)
start with the launching module and its decoded kernel.
"""

from __future__ import annotations

import warnings
from concurrent.futures import Executor, ProcessPoolExecutor, wait, FIRST_COMPLETED

import numpy as np

from warpsim._util.cores import usable_cores
from warpsim.ptx.memory import TrackedGlobal

__all__ = ["SerialLaunchWarning", "TrackedGlobal", "communication", "parts", "spread"]


class SerialLaunchWarning(UserWarning):
    """A launch given an executor runs in one process: its CTAs may communicate.  ``reason``
    says why, ``line`` and ``instruction`` where (None for a whole-kernel reason)."""

    def __init__(self, message: str, reason: str, line: int | None, instruction: str | None) -> None:
        super().__init__(message)
        self.reason, self.line, self.instruction = reason, line, instruction


# ------------------------------------------------------------------------------------------
# which kernels' CTAs communicate (decided from the instructions, before anything runs)
# ------------------------------------------------------------------------------------------
_WATCHING_LOADS = {"volatile", "acquire", "mmio"}
_WIDE_SCOPES = {"gpu", "sys"}


def communication(program) -> tuple[str, int | None, str | None] | None:
    """Why the CTAs of ``program`` (a decoded :class:`~warpsim.ptx.program.Program`) may
    communicate: ``(reason, line, instruction)`` for the first instruction that may, or None
    when every CTA's results depend only on the inputs and its own work."""
    for ins in program.instrs:
        if not getattr(ins, "opcode", None):
            continue
        parts = ins.opcode.split(".")
        op, quals = parts[0], set(parts[1:])
        shared_only = bool(quals & {"shared", "shared::cta"}) and not quals & {"global"}
        if "%cluster" in ins.text or op in ("mapa", "multimem") or any("cluster" in q for q in quals):
            return ("a cluster kernel: the CTAs of a cluster share memory and barriers",
                    ins.line, ins.text)
        if op in ("atom", "red") and not shared_only:
            return (f"{op} on {'global' if 'global' in quals else 'generic'} memory: atomics of "
                    "all CTAs apply in one order (their old values and floating-point sums "
                    "depend on it)", ins.line, ins.text)
        if op == "cp" and "reduce" in quals and "global" in quals:
            return ("a bulk reduction into global memory (an atomic update shared by CTAs)",
                    ins.line, ins.text)
        if op == "ld" and not shared_only and (
                quals & _WATCHING_LOADS or ("relaxed" in quals and quals & _WIDE_SCOPES)):
            return ("a load that watches other CTAs' stores (.volatile/.acquire/.relaxed at "
                    "gpu or sys scope): a spin-wait on another CTA would never end",
                    ins.line, ins.text)
    return None


# ------------------------------------------------------------------------------------------
# the parent side
# ------------------------------------------------------------------------------------------
def _default_workers(executor) -> int:
    n = getattr(executor, "_max_workers", None)
    client = getattr(executor, "_client", None)  # dask.distributed's ClientExecutor
    if n is None and client is not None:
        try:
            n = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        except Exception:  # noqa: BLE001 - any failure: fall back to this machine's cores
            n = None
    return int(n or usable_cores())


def parts(ncta: int, batch: int, workers: int) -> list[range]:
    """``workers`` (at most) ranges of linear CTA ids covering the grid, each whole batches of
    ``batch`` CTAs, sizes as even as whole batches allow."""
    nb = -(-ncta // batch)
    k = max(1, min(workers, nb))
    cuts = [i * nb // k * batch for i in range(k)] + [ncta]
    return [range(a, min(b, ncta)) for a, b in zip(cuts, cuts[1:]) if a < min(b, ncta)]


def _merge(arrays: list, results: list, key: str) -> tuple:
    """Copies of ``arrays`` with every part's stored bytes written over them, in part order."""
    outs = []
    for k, a in enumerate(arrays):
        arr = np.array(a, copy=True, order="C")
        flat = arr.reshape(-1).view(np.uint8)
        for r in results:
            packed, vals = r[key][k]
            if vals.size:
                flat[np.unpackbits(packed, count=flat.size).view(bool)] = vals
        outs.append(arr)
    return tuple(outs)


def spread(module, runner, check: bool, executor, workers: int | None, *, run_part, fallback
           ) -> tuple[np.ndarray, ...]:
    """Run the launch ``runner`` (a ``_Launch`` of ``module``) on ``executor`` (see the module
    docstring); the outputs, device printf and trace of one process's run.  ``run_part(job,
    start, stop)``: runs CTAs start..stop-1 in a worker (a module-level function, so that it
    pickles); ``fallback(runner, check)``: runs the launch here."""
    import dataclasses

    from warpsim._util.progress import Progress
    from warpsim.kernel.printf import LaunchResult, ordered
    from warpsim.kernel.sanitizer import SanitizerError

    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, (int, np.integer))
                                or workers < 1):
        raise TypeError(f"workers must be a positive integer, got {workers!r}")
    if executor is not None and executor != "process" and not isinstance(executor, Executor) \
            and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor must be a concurrent.futures.Executor or 'process', got {executor!r}")
    prog = module.program(runner.fn.name, runner.shared_bytes, runner.arch)
    why = communication(prog.program)
    if why is None and getattr(runner, "cluster_size", 1) > 1:
        why = ("a cluster launch: the CTAs of a cluster share memory and barriers", None, None)
    if why is not None:
        reason, line, text = why
        where = f" (line {line}: {text})" if line is not None else ""
        warnings.warn(SerialLaunchWarning(
            f"kernel {runner.fn.name} runs in one process: {reason}{where}", reason, line, text),
            stacklevel=3)
        return fallback(runner, check)
    own = executor is None or executor == "process"
    n = int(workers) if workers is not None else usable_cores() if own else _default_workers(executor)
    ranges = parts(runner.ncta, runner.batch_size(), n)
    tr = runner.trace
    job = {"text": module.text, "contract": module.contract, "name": runner.fn.name, "grid": runner.grid, "block": runner.block,
           "args": runner.args, "shared_bytes": runner.shared_bytes, "arch": runner.arch,
           "cta_batch": runner.cta_batch, "max_steps": runner.max_steps, "check": bool(check),
           "max_total_steps": runner.max_total_steps, "timeout_s": runner.timeout_s,
           "trace": None if tr is None else {"threads": tr.threads, "regs": tr.regs,
                                              "lines": tr.lines, "limit": tr.limit}}
    pool = ProcessPoolExecutor(max_workers=min(n, len(ranges))) if own else executor
    client = getattr(pool, "_client", None)  # Dask: send the inputs to the workers once
    payload = job
    if client is not None and callable(getattr(client, "scatter", None)):
        payload = client.scatter([job], broadcast=True, hash=False)[0]
    try:
        futures = [pool.submit(run_part, payload, r.start, r.stop) for r in ranges]
        if runner.progress:
            bar = Progress(runner.ncta)
            size = {f: len(r) for f, r in zip(futures, ranges)}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                bar.update(sum(size[f] for f in done))
        results = [f.result() for f in futures]
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    if tr is not None:
        recs = [r for res in results for r in (res["trace"] or [])][:tr.limit]
        tr.records = [dataclasses.replace(r, step=i) for i, r in enumerate(recs)]

    def printed(upto: int) -> list:
        return ordered([r for res in results[:upto] for r in res.get("printf", ())])

    for i, res in enumerate(results):  # the first part (in CTA order) that stopped: as one process stops
        if res["error"] is not None:
            err = SanitizerError(*res["error"], None)
            if hasattr(err, "with_sources"):  # CUDA source lines, as one process names them
                err = err.with_sources(prog.program)
            err.printf = printed(i + 1)  # what the kernel printed up to there, as on the GPU
            err.stdout = "".join(r.text for r in err.printf)
            raise err
    # each part ran under the whole budget; the parts together are held to it too
    total = sum(res.get("steps", 0) for res in results)
    if total > runner.max_total_steps:
        from warpsim.kernel.guards import budget_error

        raise budget_error(runner.max_total_steps, total)
    runner.buffer_addresses = results[0]["addresses"]
    outs = _merge([a for _, a in runner.arrays()], results, "diffs")
    if check:
        findings = _checked(module, runner, results)
        if findings:
            err = SanitizerError(runner.fn.name, findings, outs).with_sources(prog.program)
            err.printf = printed(len(results))
            err.stdout = "".join(r.text for r in err.printf)
            raise err
    return LaunchResult(outs, printed(len(results)))


def _checked(module, runner, results: list) -> list:
    """The sanitizer's findings of a spread launch: the parts' findings merged in CTA order
    as one run aggregates them, then the cross-CTA race check over the whole launch."""
    from warpsim.kernel.checks import Recorder

    rec = Recorder(runner.fn.name, runner, enabled=True)
    rec.attach(module.program(runner.fn.name, runner.shared_bytes, runner.arch, fresh=True))
    for res in results:
        rec.merge(res["checks"])
    rec.finish()
    return rec.findings
