"""Argument checks at the kernel-level entry points (launch, debug): each refusal a
:class:`~warpsim.errors.WarpsimError` (or TypeError) naming the argument."""

from __future__ import annotations

import numpy as np

import math
import time

from warpsim.errors import StepBudgetError, StepLimitError, TimeBudgetError, WarpsimError, quote


def check_cta_batch(cta_batch) -> None:
    """``cta_batch``: None (the default) or a positive int."""
    if cta_batch is None:
        return
    if isinstance(cta_batch, (bool, np.bool_)) or not isinstance(cta_batch, (int, np.integer)):
        raise TypeError(f"cta_batch must be None or a positive int, got {quote(repr(cta_batch), 60)}")
    if cta_batch < 1:
        raise WarpsimError(f"cta_batch must be >= 1 (CTAs simulated together), got {int(cta_batch)}")


def check_arch(arch) -> None:
    """``arch``: a str such as 'sm_90'."""
    if not isinstance(arch, str):
        raise TypeError(f"arch must be a str such as 'sm_90', got {type(arch).__name__} {quote(repr(arch), 60)}")


def check_array_args(args) -> None:
    """Array arguments must hold numbers (an object array has no device bytes)."""
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and (a.dtype.hasobject or a.dtype.kind in "OUSMm"):
            raise TypeError(f"args[{i}]: an array of dtype {a.dtype} cannot be a device buffer "
                            "(numeric or bool dtypes only)")


def native(arr: np.ndarray) -> np.ndarray:
    """``arr`` in native byte order, C-contiguous (its values kept)."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder not in ("=", "|") or any(
            f[0].byteorder not in ("=", "|") for f in (arr.dtype.fields or {}).values()):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


#: Bytes of ``.local`` page tables held at once for the CTAs of one batch: local memory is
#: paged (:class:`~warpsim.ptx.memory.PagedMemory`: pages exist once stored into), and its
#: page table costs 4 bytes per page per thread, so only very many threads with 512 KiB each
#: give smaller batches.
LOCAL_BATCH_BYTES = 16 << 20


def check_local(body, kernel: str) -> None:
    """``.local`` variables of a routine within the GPU's 512 KiB per thread."""
    from warpsim.errors import PtxError
    from warpsim.facts.limits import MAX_LOCAL_BYTES

    total = 0
    for d in body.vars.values():
        if d.space == "local":
            total = (total + d.align - 1) // d.align * d.align + d.nbytes
            if total > MAX_LOCAL_BYTES:
                raise PtxError(f"line {d.line}: {kernel} declares {total} bytes of .local memory; a "
                               f"thread has at most {MAX_LOCAL_BYTES} (CUDA's limit)")


def local_batch(nb_max: int, local_bytes: int, nwarps: int) -> int:
    """The CTAs per batch, fewer where their ``.local`` page tables would pass LOCAL_BATCH_BYTES."""
    from warpsim.ptx.memory import DENSE_PAGES, PAGE_BYTES

    if not local_bytes:
        return nb_max
    per_cta = nwarps * 32 * 4 * min(DENSE_PAGES, -(-local_bytes // PAGE_BYTES))
    return max(1, min(nb_max, LOCAL_BATCH_BYTES // per_cta))


def check_trace(trace) -> None:
    """``trace``: None or a :class:`~warpsim.kernel.trace.Trace`."""
    from warpsim.kernel.trace import Trace

    if trace is not None and not isinstance(trace, Trace):
        raise TypeError(f"trace must be a warpsim Trace, got {type(trace).__name__}")


def check_total_steps(n) -> None:
    """``max_total_steps`` of a launch: a positive integer."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise TypeError(f"max_total_steps must be a positive integer, got {n!r}")


def budget_error(budget: int, executed: int) -> StepBudgetError:
    """The error of a launch that spent its budget ``max_total_steps`` after ``executed``."""
    err = StepBudgetError(f"the launch ran {executed} warp instructions and reached its budget "
                          f"max_total_steps={budget} (pass a larger max_total_steps to run it on)")
    err.budget, err.executed = int(budget), int(executed)
    return err


def check_timeout(timeout_s) -> None:
    """``timeout_s`` of a launch: None or a positive finite number of seconds."""
    if timeout_s is None:
        return
    if isinstance(timeout_s, (bool, np.bool_)) or not isinstance(timeout_s, (int, float, np.integer, np.floating)):
        raise TypeError(f"timeout_s must be None or a number of seconds, got {quote(repr(timeout_s), 60)}")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise WarpsimError(f"timeout_s must be a positive finite number of seconds, got {timeout_s!r}")


def time_error(budget: float, elapsed: float, executed: int) -> TimeBudgetError:
    """The error of a launch that ran past its wall-time budget ``timeout_s``."""
    err = TimeBudgetError(f"the launch ran {elapsed:.3g} s ({executed} warp instructions) and reached its "
                          f"wall-time budget timeout_s={budget:g} (pass a larger timeout_s, or None, to run it on)")
    err.budget, err.elapsed, err.executed = float(budget), float(elapsed), int(executed)
    return err


#: Instructions a warp batch runs between two looks at the clock when a launch has a
#: ``timeout_s`` (each costs microseconds or more, so the clock is read every few ms at most).
TIME_CHECK_STEPS = 2048


def run_timed(runner, run, P, ctx, state, n: int, k: int, before: int):
    """``run(P, ctx, state, n)`` (the interpreter), stopping with :class:`TimeBudgetError`
    once ``runner.deadline`` (a ``time.monotonic()``, or None) has passed; the clock is read
    every :data:`TIME_CHECK_STEPS` instructions (``k`` warps run together; ``before``: the
    context's instructions before this call, for the count in the error)."""
    deadline = runner.deadline
    if deadline is None:
        return run(P, ctx, state, n)
    end = ctx.executed + n
    while True:
        now = time.monotonic()
        if now > deadline:
            raise time_error(runner.timeout_s, now - runner.started,
                             runner.total_steps + (ctx.executed - before) * k)
        try:
            return run(P, ctx, state, min(end - ctx.executed, TIME_CHECK_STEPS))
        except StepLimitError:
            if ctx.executed >= end:  # the caller's own budget (the interpreter counted its steps)
                raise
