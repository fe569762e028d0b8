"""The launch sanitizer: findings, their report, and the checks that run during a launch.

A :class:`Finding` names the kernel, the instruction with its PTX line and CUDA source
location (``file.cu:LINE (in function f(int), inlined from ...)``, from ``.loc`` when the PTX
has them: ``nvcc -lineinfo``), the CTA, the warp (index within the CTA), lanes and the address.
:meth:`warpsim.Module.launch` raises :class:`SanitizerError` holding every finding, grouped
by (kind, source line) into :class:`Group` s with counts, and the outputs of the launch.
Kinds (see docs/launch.md for how each is checked):

``out-of-bounds`` / ``misaligned``  an access outside every buffer, outside the static
    variable its address was computed from (an overrun into the next ``.shared``/``.const``/
    ``.global`` variable), or not aligned to its width.
``divergent-sync``  a ``.sync.aligned`` instruction reached by part of a warp, or a membermask
    naming lanes that do not run it.
``barrier-divergence``  the warps of a CTA complete one barrier from different places: some
    at ``bar.sync N`` while others exited without reaching it, or at another ``bar.sync N``.
``race``  two warps of a CTA access the same bytes between two barriers, at least one
    writing (a CTA of a cluster reaching into another's shared memory counts as another warp
    there, until a ``barrier.cluster`` or mbarrier wait); two lanes of one warp the same bytes from different instructions, not ordered by
    a warp synchronisation (``bar.warp.sync``, ``shfl/vote/match/redux.sync``); two CTAs the
    same global bytes.  Atomics never race with atomics.  One instruction storing to one
    address from several lanes is not a race (one lane's value lands; warpsim: the highest lane).
``async-copy``  shared memory read (or global source memory written) while a ``cp.async``
    that writes (reads) it is still in flight (before its ``cp.async.wait_group``/
    ``wait_all``); the read sees the old bytes.  Likewise for bulk/tensor copies (TMA): a
    destination read or written before a wait observes its mbarrier phase, a store's shared
    source written before ``cp.async.bulk.wait_group.read``, its global destination touched
    before ``wait_group``; a landed copy's bytes touched by a warp that neither observed its
    phase nor had it passed on (a ``bar.sync``, or an arrive by a warp that had, on an
    mbarrier this warp then waited on) (docs/hopper.md, "Copies in flight").
``uninitialised``  a value computed from never-written state (registers, shared or local
    bytes: shadow state per register lane and per byte) is stored to global memory or
    decides a branch or predicate.
``sparse-metadata``  an ``mma.sp`` metadata nibble the ISA leaves undefined.
``deadlock``  warps wait at a barrier that the others never reach, or for an mbarrier phase that
    nothing left running can complete.
``mbarrier``  an mbarrier used without ``init`` (or after ``inval``), re-initialised while live,
    its tx-count out of range, or given more arrivals than its phase expects.
``async-proxy``  shared memory written by ordinary stores and read by the async proxy (TMA store,
    bulk copy, wgmma's shared-memory operands) with no ``fence.proxy.async`` between.
``error``  any other error that stopped execution (e.g. a register read before any write).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass


from warpsim.errors import DivergenceError, MemoryAccessError, WarpsimError, quote

__all__ = ["Finding", "Group", "SanitizerError", "Trace", "TraceRecord", "EXIT_CODES"]

#: Exit status of ``warpsim launch``: 0 clean, 1 sanitizer findings, 2 usage or input errors.
EXIT_CODES = {"clean": 0, "findings": 1, "error": 2}


@dataclass(frozen=True)
class Finding:
    """One problem found by the sanitizer (see the module docstring for the kinds).

    ``source``: the CUDA source location of ``instruction`` (None without ``.loc``);
    ``nbytes``: bytes concerned (races, uninitialised stores, overruns)."""

    kind: str
    kernel: str
    instruction: str | None
    line: int | None
    cta: tuple | None
    warp: int | None
    lanes: tuple | None
    address: int | None
    message: str
    source: str | None = None
    nbytes: int | None = None

    def where(self) -> str:
        """``k.cu:12 (in function k), PTX line 30: st.shared.u32 [%r2], %r1`` (without a
        source location: ``line 30: ...``)."""
        text = quote(self.instruction or "")
        if self.source:
            return f"{self.source}, PTX line {self.line}: {text}"
        return f"line {self.line}: {text}" if self.line else text

    def __str__(self) -> str:
        where = []
        if self.cta is not None:
            where.append(f"CTA {self.cta}")
        if self.warp is not None:
            where.append(f"warp {self.warp}")
        if self.lanes:
            where.append("lane" + ("s " if len(self.lanes) > 1 else " ") + _ranges(self.lanes))
        if self.address is not None:
            where.append(f"address {self.address:#x}")
        return f"[{self.kind}] {self.kernel}: {self.where()} ({', '.join(where)}): {self.message}"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["cta"] = list(self.cta) if self.cta is not None else None
        d["lanes"] = list(self.lanes) if self.lanes is not None else None
        return d


def _ranges(xs) -> str:
    xs = sorted(set(int(x) for x in xs))
    runs, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        runs.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(runs)


@dataclass
class Group:
    """Findings of one kind at one source line (or PTX line without ``.loc``), with counts."""

    kind: str
    where: str
    findings: list

    @property
    def first(self) -> Finding:
        return self.findings[0]

    def counts(self) -> dict:
        ctas = {f.cta for f in self.findings if f.cta is not None}
        warps = {(f.cta, f.warp) for f in self.findings if f.warp is not None}
        lanes = {(f.cta, f.warp, l) for f in self.findings for l in (f.lanes or ())}
        nbytes = sum(f.nbytes or 0 for f in self.findings)
        return {"findings": len(self.findings), "ctas": len(ctas), "warps": len(warps),
                "lanes": len(lanes), "bytes": nbytes}

    def __str__(self) -> str:
        c = self.counts()
        parts = [f"{c['findings']} finding(s)", f"{c['ctas']} CTA(s)", f"{c['warps']} warp(s)",
                 f"{c['lanes']} lane(s)"] + ([f"{c['bytes']} byte(s)"] if c["bytes"] else [])
        return f"[{self.kind}] {self.where}: {', '.join(parts)}; first: {self.first}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "where": self.where, "counts": self.counts(),
                "first": self.first.to_dict()}


def group_findings(findings) -> list[Group]:
    """Findings grouped by (kind, source line or PTX line), in order of first appearance."""
    groups: dict = {}
    for f in findings:
        src = f.source.split(" (", 1)[0] if f.source else None
        key = (f.kind, src or (f.line, f.instruction))
        g = groups.get(key)
        if g is None:
            where = f.where() if not src else f"{f.source}, PTX line {f.line}"
            g = groups[key] = Group(f.kind, where, [])
        g.findings.append(f)
    return list(groups.values())


class SanitizerError(WarpsimError):
    """A launch found problems: ``findings`` (list of :class:`Finding`), ``groups`` (the
    findings grouped by kind and source line, with counts), ``outputs`` (the launch's outputs
    where it ran to the end, else None), ``error`` (the error that stopped the launch, or
    None), ``stdout``/``printf`` (the kernel's device printf before it stopped).
    ``report()``: the report as a JSON-ready dict."""

    SHOWN = 20  # groups in the message; the rest are counted ("N more")
    error = None
    stdout = ""
    printf: list = []

    def __init__(self, kernel: str, findings: list, outputs=None) -> None:
        self.kernel = kernel
        self.findings = list(findings)
        self.outputs = outputs
        super().__init__(self.summary())

    @property
    def groups(self) -> list[Group]:
        return group_findings(self.findings)

    def summary(self, shown: int | None = None) -> str:
        shown = self.SHOWN if shown is None else shown
        groups = self.groups
        head = (f"{self.kernel}: {len(self.findings)} sanitizer finding(s) in {len(groups)} "
                f"group(s) (kind, source line)")
        lines = [f"  {g}" for g in groups[:shown]]
        if len(groups) > shown:
            lines.append(f"  ... {len(groups) - shown} more group(s) "
                         f"({sum(len(g.findings) for g in groups[shown:])} finding(s))")
        return head + ":\n" + "\n".join(lines)

    def report(self) -> dict:
        return {"kernel": self.kernel, "findings": len(self.findings),
                "groups": [g.to_dict() for g in self.groups]}

    def with_sources(self, program) -> "SanitizerError":
        """The same error with each finding's ``source`` filled in from ``program``'s
        ``.loc`` table (see :mod:`warpsim.kernel.source`)."""
        new = SanitizerError(self.kernel, [with_source(f, program) for f in self.findings], self.outputs)
        new.__cause__ = self.__cause__
        new.error = self.error
        return new


def with_source(f: Finding, program) -> Finding:
    from warpsim.kernel.source import site_source

    smap = getattr(program, "source", None)
    if f.source is not None or smap is None or f.line is None:
        return f
    text = smap.describe(site_source(program, f.line, f.instruction))
    if text is None:
        return f
    msg = re.sub(r"(?<!PTX )\bline (\d+)", lambda m: _line_src(m, program, smap), f.message)
    return dataclasses.replace(f, source=text, message=msg)


def _line_src(m, program, smap) -> str:
    from warpsim.kernel.source import site_source

    s = smap.short(site_source(program, int(m.group(1))))
    return f"{s} (PTX line {m.group(1)})" if s else m.group(0)


# ------------------------------------------------------------------------------------------
# errors raised while running -> findings
# ------------------------------------------------------------------------------------------
def _kind(e: Exception) -> str:
    from warpsim.errors import MetadataError

    if isinstance(e, MemoryAccessError):
        return {"misaligned": "misaligned", "outside": "out-of-bounds"}.get(e.reason, "error")
    if isinstance(e, DivergenceError):
        return "divergent-sync"
    if getattr(e, "finding_kind", None):  # e.g. wgmma-async (warpsim.ptx.ops.wgmma)
        return e.finding_kind
    if isinstance(e, MetadataError):
        return "sparse-metadata"
    return getattr(e, "finding_kind", None) or "error"


def unravel(linear, dims) -> tuple:
    """(x, y, z) of a linear thread or CTA index (int or array) in a block or grid ``dims``
    (x fastest)."""
    dx, dy, _ = dims
    return (linear % dx, (linear // dx) % dy, linear // (dx * dy))


def tid_of(launch, warp: int, lane: int) -> tuple:
    return tuple(int(x) for x in unravel(warp * 32 + lane, launch.block))


def finding_from_error(e: Exception, launch, batch, warp: int, rec) -> SanitizerError:
    """Wrap an error raised by warp ``warp`` of CTA batch ``batch`` as a SanitizerError (the
    error's location attributes say which instruction, lanes and address)."""
    lanes = getattr(e, "lanes", None) or None
    b = getattr(e, "warp", None)  # the interpreter's warp index: the CTA's place in the batch
    cta = tuple(int(x) for x in batch[min(b[0], len(batch) - 1) if b else 0])
    if isinstance(e, WarpsimError):  # in a launch, say which CTA and which of its warps
        e.at(cta=cta, warp=(warp,))
    msg = str(e)
    extra = f" [thread ctaid={cta} tid={tid_of(launch, warp, lanes[0])}]" if lanes else ""
    f = Finding(_kind(e), launch.fn.name, getattr(e, "instruction", None), getattr(e, "line", None),
                cta, warp, lanes, getattr(e, "address", None), f"{type(e).__name__}: {msg}{extra}")
    err = SanitizerError(launch.fn.name, [f] + (list(rec.findings) if rec is not None else []), None)
    err.__cause__ = e
    err.error = e  # the error itself (a raise ... from None clears __cause__)
    return err


# the checks live in kernel/checks.py (which imports this module); the tracer in
# kernel/trace.py, re-exported here
from warpsim.kernel.trace import Trace, TraceRecord  # noqa: E402
