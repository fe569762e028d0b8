"""How far the measured MUFU tables are from the exact function: the statistics behind the
compact forms of :mod:`warpsim.ptx.sfu_accel` (issue 21, session 6).

Usage::

    PYTHONPATH=. python benchmarks/sfu_table_stats.py [rcp sqrt rsq ex2 sin lg2]

For each table (NumPy, float64, 2**23-2**24 keys; ~5 s a table here) and the exact function
``v`` of each key, with ``h`` the measured word and ``w(v)`` the real-valued f32 word of ``v``
(``floor(w)`` = ``v`` truncated to f32):

* ``h - floor(w(v))``: its values and counts (1 bit a key where they are two adjacent values);
* per segment of ``2**S`` keys the span ``max - min`` of ``h - w(v)`` (below 2: ``h`` is one of
  two words given a per-segment offset, below 1: one word);
* the *banded* rule: with ``g = w(v) + off`` (``off`` = the segment's least ``h - w(v)``),
  ``h - floor(g)`` is 1 or 2, and ``2`` exactly where ``frac(g)`` is above a threshold, except in
  a band where the segment's words round both ways: the share of keys in those bands is the
  share that needs a bit of its own.
"""

from __future__ import annotations

import sys

import numpy as np

from warpsim.ptx import sfu


def wreal(v: np.ndarray) -> np.ndarray:
    """The f32 word of positive float64 ``v`` as a real number (exact for normal f32 range)."""
    u = v.view(np.uint64)
    e = (u >> np.uint64(52)).astype(np.int64) - 1023 + 127
    return e * 2.0**23 + (u & np.uint64((1 << 52) - 1)).astype(np.float64) * 2.0**-29


def exact(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(measured words as float64, exact values) over the keys where the value is positive."""
    m = np.arange(1 << 23, dtype=np.float64) / 2**23
    t = sfu.table(name).astype(np.float64)
    if name == "rcp":
        return t, 1 / (1 + m)
    if name in ("rsq", "sqrt"):               # key [p, M]: p = 0 -> r = 1.M, p = 1 -> r = 2 * 1.M
        r = np.concatenate([1 + m, 2 * (1 + m)])
        return t, (1 / np.sqrt(r) if name == "rsq" else np.sqrt(r))
    if name == "ex2":                         # key [sign, k]: 2**(+-k 2**-23)
        return t, np.concatenate([np.exp2(m), np.exp2(-m)])
    if name == "sin":                         # key k < 2**24: sin(2 pi k 2**-25); k = 0 left out
        k = np.arange(1, 1 << 24, dtype=np.float64)
        return t[1:], np.sin(2 * np.pi * k / 2**25)
    if name == "lg2":                         # key [1, M]: log2(1.M) (M = 0 left out: 0)
        return t[(1 << 23) + 1:], np.log2(1 + m[1:])
    raise KeyError(name)


def report(name: str) -> None:
    h, v = exact(name)
    w = wreal(v)
    d = (h - np.floor(w)).astype(np.int64)
    vals, cnt = np.unique(d, return_counts=True)
    top = np.argsort(cnt)[::-1][:6]
    pair = max(cnt[i] + (cnt[i + 1] if i + 1 < cnt.size and vals[i + 1] == vals[i] + 1 else 0)
               for i in range(cnt.size))
    print(f"{name}: {h.size} keys; h - floor(w(v)): "
          + ", ".join(f"{vals[i]:+d}: {cnt[i]}" for i in sorted(top)) + (" ..." if cnt.size > 6 else "")
          + f"; two adjacent values cover {pair / h.size:.4%}")
    e = h - w
    for S in (8, 10, 12):
        n = e.size >> S << S
        seg = e[:n].reshape(-1, 1 << S)
        span = seg.max(1) - seg.min(1)
        off = seg.min(1, keepdims=True) - 2.0**-20
        g = w[:n].reshape(-1, 1 << S) + off
        fl = np.floor(g)
        phi, k = g - fl, h[:n].reshape(-1, 1 << S) - fl
        bad = ((k < 1) | (k > 2)).any(1)
        a = np.where(k == 1, phi, -1).max(1, keepdims=True)
        b = np.where(k == 2, phi, 2).min(1, keepdims=True)
        amb = (phi >= b) & (phi <= a)
        amb[bad] = True
        print(f"  S={S:2d}: span median {np.median(span):.3f} max {span.max():.3f}; segments with span < 1:"
              f" {np.mean(span < 1):.2%}, < 2: {np.mean(span < 2):.2%}; banded: keys needing a bit"
              f" {amb.mean():.2%} (segments the rule does not fit: {int(bad.sum())})")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["rcp", "sqrt", "rsq", "ex2", "sin", "lg2"]:
        report(name)
