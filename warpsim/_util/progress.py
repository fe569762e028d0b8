"""A progress bar on stderr, tqdm-like, without depending on tqdm."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """A progress bar on stderr (tqdm-like, without tqdm): CTAs done, rate, time left; drawn
    at most every 0.2 s."""

    def __init__(self, total: int, what: str = "CTAs") -> None:
        self.total, self.what, self.done = total, what, 0
        self._clock = time.monotonic
        self.t0 = self._last = self._clock()

    def update(self, n: int) -> None:
        self.done += n
        now = self._clock()
        if self.done < self.total and now - self._last < 0.2:
            return
        self._last = now
        width = 30
        k = width * self.done // max(1, self.total)
        dt = now - self.t0
        rate = self.done / dt if dt > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        sys.stderr.write(f"\r[{'#' * k}{'.' * (width - k)}] {self.done}/{self.total} {self.what} "
                         f"{dt:.1f}s elapsed, {rate:.1f} {self.what}/s, {left:.1f}s left")
        if self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()
