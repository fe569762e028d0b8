"""Issue 21: can MUFU.EX2 be rebuilt as an integer quadratic interpolator (Oberman & Siu, ARITH 2005)
with no per-key data?  Tests on the measured H100/H200 words (warpsim/data/sfu_sm90.npz):

1. the negative half of the ex2 table against the positive half (ones' complement of the fraction);
2. per window of 2**L keys of the positive half, the largest margin ``t`` of a real polynomial ``Q`` of
   degree d with ``y + t <= Q(X) <= y + 1 - t`` for every key (linear programme, scipy): ``t >= 0``
   means ``y = floor(Q(X) + const)`` is possible on that window, ``t < 0`` means no polynomial of that
   degree reproduces the words (the hardware carries bit-level truncation noise of width ``-2t`` ulp);
3. integer datapaths ``y = floor((C0 + floor(C1*X / 2**a1) + floor(C2*floor(X'^2 / 2**j) / 2**a2)) / 2**g)``
   (X' = X or X centred; X the key's low 17 bits) over a grid of guard bits g, coefficient widths and squarer truncations, each
   with C1, C2 near the real fit and the best C0: the slack (feasible when >= 0).

Run: PYTHONPATH=. python benchmarks/sfu_interp_fit.py  (needs scipy; ~1-2 minutes on one core)
"""
from __future__ import annotations

import sys

import numpy as np


def lp_margin(y, cols):
    from scipy.optimize import linprog

    A = np.vstack(cols).T
    n, nv = len(y), A.shape[1] + 1
    a_ub = np.vstack([np.hstack([-A, np.ones((n, 1))]), np.hstack([A, np.ones((n, 1))])])
    b_ub = np.concatenate([-y, y + 1])
    r = linprog(np.r_[np.zeros(nv - 1), -1], A_ub=a_ub, b_ub=b_ub,
                bounds=[(None, None)] * (nv - 1) + [(None, 1)], method="highs")
    return (r.x[-1], r.x[:-1]) if r.status == 0 else (np.nan, None)


def main() -> None:
    from warpsim.ptx import sfu

    t = sfu.table("ex2").astype(np.int64)
    pos, neg = t[: 1 << 23], t[1 << 23:]
    k = np.arange(1, 1 << 23)
    same = np.array_equal(neg[1:], pos[(1 << 23) - 1 - k] - (1 << 23))
    print(f"(1) ex2 table[1, k] == table[0, 2**23 - 1 - k] - 2**23 for every k >= 1: {same}; "
          f"table[1, 0] = {t[1 << 23]:#x}")
    d = np.diff(pos)
    print("    positive half: word steps", dict(zip(*[v.tolist() for v in np.unique(d, return_counts=True)])),
          "(monotone)" if d.min() >= 0 else "(NOT monotone)")
    y = (pos & 0x7FFFFF).astype(np.float64)

    print("(2) LP margin t of a degree-d polynomial per aligned window (positive half, start = key 5 * 2**16)")
    start = 5 << 16
    for W, deg, count in [(64, 1, 4), (256, 1, 4), (256, 2, 4), (1024, 2, 4), (1024, 3, 4), (4096, 2, 4),
                          (4096, 4, 4), (16384, 2, 2), (16384, 4, 2), (65536, 2, 1), (65536, 4, 1),
                          (131072, 2, 1)]:
        ms = []
        for w in range(count):
            s = (start if W <= 65536 else 2 * W) + w * W
            x = np.arange(W) / W * 2 - 1
            ms.append(lp_margin(y[s:s + W], [np.polynomial.legendre.legval(x, np.eye(deg + 1)[i])
                                             for i in range(deg + 1)])[0])
        print(f"    window 2**{int(np.log2(W)):2d} keys, degree {deg}: t = {np.round(ms, 4).tolist()}")
        sys.stdout.flush()

    print("(2b) the segments: one quadratic over 2**17 keys aligned on a multiple of 2**17 or not")
    for W, s in [(1 << 17, 2), (1 << 17, 2.25), (1 << 17, 2.5), (1 << 17, 5), (1 << 17, 5.5), (1 << 18, 2),
                 (1 << 18, 2.5)]:
        a = int(s * W)
        x = np.arange(W) / W * 2 - 1
        mg = lp_margin(y[a:a + W], [np.polynomial.legendre.legval(x, np.eye(3)[i]) for i in range(3)])[0]
        print(f"    2**{int(np.log2(W))} keys from key {s} * 2**{int(np.log2(W))}: t = {mg:.4f}")
        sys.stdout.flush()

    print("(3) integer datapaths on the segment m = 6, Xu = 5 (2**17 keys), keys within 0.12 ulp of a step")
    L = 17
    n = 1 << L
    ys = pos[5 * n: 6 * n] & 0x7FFFFF
    X = np.arange(n, dtype=np.int64)
    x = X / n
    mg, (c0, c1, c2) = lp_margin(ys.astype(np.float64), [np.ones(n), x, x * x])
    Q = c0 + c1 * x + c2 * x * x
    fr = Q - np.floor(Q)
    inf = np.nonzero((fr < 0.12) | (fr > 0.88))[0]
    yi, Xi = ys[inf], X[inf]
    best = []
    for center in (0, 1):
        Xs = Xi - (n >> 1) if center else Xi
        C1r, C2r = (c1 + c2, c2) if center else (c1, c2)
        for sbits in (8, 10, 12, 14, 16, 2 * L):
            j = 2 * L - sbits
            S = (Xs * Xs) >> j
            for g in range(2, 9):
                yl = yi << g
                for b1 in (14, 16, 18, 20):
                    a1 = int(round(b1 - np.log2(C1r / n) - g))
                    C1e = C1r / n * 2.0 ** (g + a1)
                    for b2 in (8, 10, 12, 14):
                        per = C2r / 2.0 ** (2 * L - j)
                        a2 = int(round(b2 - np.log2(per) - g))
                        C2e = per * 2.0 ** (g + a2)
                        for C1 in range(int(C1e) - 3, int(C1e) + 4):
                            T1 = (C1 * Xs) >> a1
                            for C2 in range(int(C2e) - 3, int(C2e) + 4):
                                T = T1 + ((C2 * S) >> a2)
                                sl = (((yl + (1 << g)) - T).min() - (yl - T).max()) / 2.0 ** g
                                best.append((sl, center, sbits, g, b1, b2, C1, C2))
    best.sort(reverse=True)
    print(f"    real quadratic: margin {mg:.4f} (slack {2 * mg:.4f}); {len(best)} integer datapaths tried; best:")
    for b in best[:5]:
        print("    slack %.4f  centred=%d squarer bits=%d g=%d C1 bits~%d C2 bits~%d C1=%d C2=%d" % b)


if __name__ == "__main__":
    main()
