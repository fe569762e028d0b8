"""Is MUFU.LG2 the unit's quadratic datapath too?  Its table holds trunc24(P) (x >= 1) and
trunc24(P - 1) (x < 1), P with 36 fraction bits (every word is a multiple of 2**-36); per
segment of 2**17 keys (64 per half), integers C1, C2 and C0 (2 fraction bits) such that every
key's P * 2**36 lies in its word's truncation cell as

    N = floor((C0 + C1 X + C2 S) / 4),   X = the key's low 17 bits, S their truncated square

(warpsim.ptx.sfu.truncated_square; benchmarks/results/sfu-datapath.txt for ex2/rcp/rsq/sqrt).
Prints the segments fitted, the feasible width of C0, the coefficient ranges and, for a segment
that does not fit, how many of its keys the best candidate misses.

Usage:  PYTHONPATH=. python benchmarks/sfu_lg2_datapath.py [--reach 4]
"""

from __future__ import annotations

import argparse

import numpy as np

from warpsim.ptx import sfu


def cells(w: np.ndarray, up: bool) -> tuple[np.ndarray, np.ndarray]:
    """Least and greatest N = P * 2**36 of each word's truncation cell."""
    T = (w.view(np.float32).astype(np.float64) * 2.0**36).astype(np.int64)
    u = (((w & np.uint32(0x7FFFFFFF)) + np.uint32(1)).view(np.float32).astype(np.float64) * 2.0**36
         ).astype(np.int64) - np.abs(T)
    return (T, T + u - 1) if up else (T - u + 1 + (1 << 36), T + (1 << 36))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reach", type=int, default=4)
    a = ap.parse_args()
    t = sfu.table("lg2")
    assert not np.any((t.view(np.float32).astype(np.float64) * 2.0**36) % 1), "P has 36 fraction bits"
    L = 1 << 17
    X = np.arange(L, dtype=np.int64)
    S = sfu.truncated_square(X)
    A = np.stack([np.ones(L), X * 0.25, S * 0.25], 1)
    fits, widths, coef = [], [], []
    for s in range(128):
        lo, hi = cells(t[s * L:(s + 1) * L], s >= 64)
        keep = slice(1, None) if s == 64 else slice(None)    # x = 1: P = 0 exactly
        c = np.linalg.lstsq(A[keep], (lo[keep] + hi[keep]) / 2 + 0.5, rcond=None)[0]
        best = None
        for d1 in range(-a.reach, a.reach + 1):
            for d2 in range(-a.reach, a.reach + 1):
                C1, C2 = int(round(c[1])) + d1, int(round(c[2])) + d2
                V = C1 * X[keep] + C2 * S[keep]
                lo4, hi4 = lo[keep] << 2, (hi[keep] + 1) << 2
                lo_, hi_ = int((lo4 - V).max()), int((hi4 - V).min())
                if lo_ < hi_:
                    best = (hi_ - lo_, C1, C2, 0)
                    break
                C0 = (lo_ + hi_) // 2                          # the keys this candidate misses
                miss = int(np.count_nonzero((C0 + V < lo4) | (C0 + V >= hi4)))
                if best is None or (best[0] <= 0 and miss < best[3]):
                    best = (hi_ - lo_, C1, C2, miss)
            if best[0] > 0:
                break
        if best[0] > 0:
            fits.append(s)
            widths.append(best[0])
            coef.append(best[1:3])
        else:
            print(f"segment {s} ({'x >= 1' if s >= 64 else 'x < 1'}, {s % 64}): no exact fit; best misses "
                  f"{best[3]} of {L} keys (C1 {best[1]}, C2 {best[2]})")
            for near in (2**8, 2**10, 2**12, 2**14):              # without the keys next to x = 1
                k = slice(near, None) if s >= 64 else slice(0, L - near)
                c = np.linalg.lstsq(A[k], (lo[k] + hi[k]) / 2 + 0.5, rcond=None)[0]
                ok = [(C1, C2) for d1 in range(-a.reach, a.reach + 1) for d2 in range(-a.reach, a.reach + 1)
                      for C1, C2 in [(int(round(c[1])) + d1, int(round(c[2])) + d2)]
                      if int(((lo[k] << 2) - C1 * X[k] - C2 * S[k]).max())
                      < int((((hi[k] + 1) << 2) - C1 * X[k] - C2 * S[k]).min())]
                if ok:
                    print(f"    exact on every key but the {near} next to x = 1 (C1 {ok[0][0]}, C2 {ok[0][1]})")
                    break
    coef = np.array(coef)
    print(f"lg2: {len(fits)} of 128 segments of 2**17 keys exact (C0 feasible width {min(widths)}..{max(widths)} "
          f"/ 4); C1 {coef[:, 0].min()}..{coef[:, 0].max()}, C2 {coef[:, 1].min()}..{coef[:, 1].max()}")


if __name__ == "__main__":
    main()
