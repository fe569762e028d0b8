"""Is each MUFU table the unit's quadratic datapath?  For every segment, integers C1, C2 and a
constant C0 with 17 fraction bits such that every key's word mantissa is

    N = floor((C0 + C1 X + C2 S) / 2**17),   X = the key's low bits left-aligned to 17 bits,

S the truncated square of X that the tanh analysis found (benchmarks/sfu_tanh_fit.py): X*X / 2**18
less the folded squarer's partial products of weight below 2**19.  Prints, per function, the
segments fitted exactly and the feasible width of C0 (in 2**-17 word), or the misfits.

Usage:  PYTHONPATH=. python benchmarks/sfu_datapath_fit.py [ex2 rcp rsq sqrt ...]
"""

from __future__ import annotations

import sys

import numpy as np

from warpsim.ptx import sfu

#: function -> (keys read, low key bits per segment); ex2: the positive half (the negative half is
#: the positive at ~f, halved); rsq/sqrt: two binades side by side, 64 segments each.
LAYOUT = {"ex2": (1 << 23, 17), "rcp": (1 << 23, 16), "rsq": (1 << 24, 17), "sqrt": (1 << 24, 17)}


def fit(N: np.ndarray, xbits: int, reach: int = 3):
    """(C1, C2, C0 low end, C0 width) exact on every key of one segment, or None."""
    X = np.arange(1 << xbits, dtype=np.int64) << (17 - xbits)
    S = sfu.truncated_square(X)
    A = np.stack([np.ones(X.size), X * 2.0**-17, S * 2.0**-17], 1)
    c = np.linalg.lstsq(A, N + 0.5, rcond=None)[0]
    for d1 in sorted(range(-reach, reach + 1), key=abs):
        for d2 in sorted(range(-reach, reach + 1), key=abs):
            C1, C2 = int(round(c[1])) + d1, int(round(c[2])) + d2
            V = C1 * X + C2 * S
            lo, hi = int(((N << 17) - V).max()), int((((N + 1) << 17) - V).min())
            if lo < hi:
                return C1, C2, lo, hi - lo
    return None


def main(names: list[str]) -> None:
    for name in names or list(LAYOUT):
        n, xbits = LAYOUT[name]
        w = sfu.table(name)[:n]
        N = (w & np.uint32(0x7FFFFF)).astype(np.int64)
        L = 1 << xbits
        ok, bad, widths = 0, [], []
        for s in range(n // L):
            r = fit(N[s * L:(s + 1) * L], xbits)
            if r is None:
                bad.append(s)
            else:
                ok += 1
                widths.append(r[3])
        print(f"{name}: {n // L} segments of 2**{xbits} keys: {ok} exact (C0 feasible width "
              f"{min(widths) if widths else '-'}..{max(widths) if widths else '-'} / 2**17), misfits: {bad}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
