"""Issue 21: MUFU.TANH rebuilt as its datapath from the measured words (warpsim/data/sfu_sm90_trig.npz).

1. per segment of 2**17 keys (the unit's interpolation segments: the error against tanh repeats
   with that period in every binade), the largest distance in ulps of the words' midpoints from
   the least-squares quadratic in X (the key's low 17 bits), in fixed point (units of the lowest
   output binade of the input binade): several ulps to tens of ulps around |x| ~ 1;
2. the same with X*X replaced by the truncated square S of warpsim.ptx.sfu_tanh (X*X less the
   partial products of weight below 2**19 in the folded squarer array): 0.50 ulp everywhere, i.e.
   nothing left but the truncation of the result;
3. per segment, integers C1, C2 near the fit and the exact range of C0 (in 2**-17) with
   N <= C0 + (C1 X + C2 S) / 2**17 < N + ulp on every key: non-empty, with integer C0, for all 51.

Run: PYTHONPATH=. python benchmarks/sfu_tanh_fit.py  (~20 s on one core)
"""
from __future__ import annotations

import numpy as np


def main() -> None:
    from warpsim.ptx import sfu, sfu_tanh

    t = sfu.table("tanh")
    d = t[-(sfu.TANH_E1 - sfu.TANH_E0 + 3):].astype(np.int64)
    L = 1 << sfu_tanh.SEG
    X = np.arange(L, dtype=np.int64)
    S = sfu.truncated_square(X)
    x = X / L
    c = sfu_tanh.derive()
    print("binade E | max |midpoint - fit| in ulps per segment: quadratic in X  ->  C0 + C1 X + C2 S (truncated square)")
    for E in range(sfu.TANH_E0, sfu.TANH_E1 + 1):
        off, sh = int(d[E - sfu.TANH_E0 + 1] & 0x7FFFFFF), int(d[E - sfu.TANH_E0 + 1] >> 27)
        y = t[off: off + (1 << (23 - sh))].astype(np.int64)
        ey = y >> 23
        elo = int(ey.min())
        N = ((1 << 23) | (y & 0x7FFFFF)) << (ey - elo)
        u = np.left_shift(1, ey - elo)
        plain, trunc = [], []
        for q in range(y.size // L):
            sl = slice(q * L, (q + 1) * L)
            mid = N[sl] + u[sl] / 2
            for cols, out in (([np.ones(L), x, x * x], plain), ([np.ones(L), x, S / L / L], trunc)):
                A = np.stack(cols, 1)
                r = (mid - A @ np.linalg.lstsq(A, mid, rcond=None)[0]) / u[sl]
                out.append(f"{np.abs(r).max():.2f}")
        print(f"  {E} (|x| in [2**{E - 127}, 2**{E - 126}), {23 - sh} key bits, {y.size // L} segments): "
              f"{' '.join(plain)}  ->  {' '.join(trunc)}")
    print("segment | C0 C1 C2 (word units of the input binade's lowest output binade; exact on every key)")
    n = sfu_tanh.key_inputs().size // L
    for s in range(n):
        print(f"  {s:2d}  {c['c0'][s]:9d} {c['c1'][s]:9d} {c['c2'][s]:8d}")
    xs = sfu_tanh.key_inputs()
    ok = np.array_equal(sfu_tanh.evaluate(c, xs), t[: xs.size])
    print(f"the datapath in NumPy on all {xs.size} keys equals the table: {ok}")


if __name__ == "__main__":
    main()
