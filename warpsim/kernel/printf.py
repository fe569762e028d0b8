"""Device printf output of a launch, and what a launch returns.

``vprintf`` (:mod:`warpsim.ptx.ops.calls`) appends one record per printing thread; the launch
orders them by CTA (linear id, x fastest), warp, lane, then program order, whatever order the
scheduler ran the warps in, so the output of a launch is deterministic.
:class:`LaunchResult` is the tuple of output arrays ``Module.launch`` has always returned, with
the printf output on it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LaunchResult", "PrintfRecord", "ordered"]


@dataclass(frozen=True)
class PrintfRecord:
    """One printf of one thread: CTA linear id, warp in the CTA, lane, and the text."""
    cta: int
    warp: int
    lane: int
    text: str


def ordered(sink: list) -> list[PrintfRecord]:
    """The records of ``sink`` (``((cta, warp, lane), bytes)`` in program order) sorted by CTA,
    warp, lane; a thread's records keep their program order (the sort is stable)."""
    recs = sorted(sink, key=lambda r: r[0])
    return [PrintfRecord(c, w, lane, b.decode("utf-8", "backslashreplace")) for (c, w, lane), b in recs]


class LaunchResult(tuple):
    """The output arrays of a launch (one per array argument, unpack it as a tuple), and
    ``printf``: the :class:`PrintfRecord` list of the kernel's device printf; ``stdout``: their
    text concatenated, as the GPU's printf buffer would print it."""

    printf: list

    def __new__(cls, outputs, printf=()):
        self = super().__new__(cls, outputs)
        self.printf = list(printf)
        return self

    @property
    def stdout(self) -> str:
        return "".join(r.text for r in self.printf)
