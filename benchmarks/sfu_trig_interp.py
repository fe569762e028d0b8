"""Issue 21, session 7 (helper bandtrig): what MUFU.SIN's measured words say about its interpolator.

Reads the measured sine table (warpsim.ptx.sfu.table("sin"): the first half turn, 2**24 keys of the
25-bit fixed-point angle) and prints
(1) its symmetry under the ones' complement of the key (one quarter of 2**23 keys holds every word);
(2) the words of the smallest keys: k times the unit's slope S[1], exactly (the output carries at
    least 37 fraction bits; f32 truncation of it);
(3) per segment of 2**17 keys (the interpolator's 64 over the quarter), in ulps of the segment's
    binade, the least-squares fit of c0 + c1 X + c2 Q(X) through the words' midpoints, where Q is X**2
    or a truncated square keeping only the partial products x_i x_j 2**(i+j) with i + j >= cut:
    residual std (0.2887 = a uniform quantisation error alone) and e = model - word's lower edge
    (an exact truncating model has e in [0, 1));
(4) the integer datapath: every segment but 0 exactly floor((C0 + C1 X + C2 S) / 2**17), S truncated.

    PYTHONPATH=. python benchmarks/sfu_trig_interp.py
"""

from __future__ import annotations

import numpy as np

from warpsim.ptx import sfu

S = sfu.table("sin")
N, Q, L = 1 << 24, 1 << 23, 1 << 17
print(f"(1) S[k] == S[2**24 - 1 - k] for every k < 2**23: {bool(np.array_equal(S[:Q], S[Q:][::-1]))}")
c = int(S[1])
k = np.arange(1, 4096)
exact = S[1:4096].view(np.float32).astype(np.float64) == k * float(np.uint32(c).view(np.float32))
print(f"(2) S[1] = {c:#010x} = {float(np.uint32(c).view(np.float32)) * 2**37:.0f} * 2**-37; "
      f"S[k] == k S[1] exactly for k < {int(np.argmin(exact)) + 1} (and {int(exact.sum())} of k < 4096)")

w = S[:Q].astype(np.int64)
E = (w >> 23) & 255
X = np.arange(L, dtype=np.int64)
bits = [(X >> b) & 1 for b in range(17)]


def trsq(cut: int) -> np.ndarray:
    s = np.zeros(L)
    for i in range(17):
        for j in range(17):
            if i + j >= cut:
                s += (bits[i] * bits[j]) * 2.0 ** (i + j)
    return s


print("(3) per single-binade segment s (of 64): c0 + c1 X + c2 Q(X), least squares in ulps")
print("    Q            segments  std(mean)  std(max)  e min    e max")
segs = [s for s in range(64) if len(np.unique(E[s * L:(s + 1) * L])) == 1]
for name, cut in [("X**2", 0), ("trunc >= 16", 16), ("trunc >= 17", 17), ("trunc >= 18", 18), ("trunc >= 19", 19)]:
    q = trsq(cut)
    A = np.stack([np.ones(L), X / L, q / L / L], 1)
    stds, lo, hi = [], 1e9, -1e9
    for s in segs:
        y = w[s * L:(s + 1) * L].astype(np.uint32).view(np.float32).astype(np.float64)
        u = 2.0 ** (int(E[s * L]) - 150)
        y = y / u + 0.5
        v = A @ np.linalg.lstsq(A, y, rcond=None)[0]
        stds.append((y - v).std())
        e = v - (y - 0.5)
        lo, hi = min(lo, e.min()), max(hi, e.max())
    print(f"    {name:12s} {len(segs):8d}  {np.mean(stds):.4f}     {np.max(stds):.4f}    {lo:+.3f}  {hi:+.3f}")

# (4) the integer datapath (as benchmarks/sfu_datapath_fit.py for ex2/rcp/rsq/sqrt): per segment s >= 1, in units
# u of the ulp of its lowest binade, integers C1, C2 and C0 (17 fraction bits) with floor((C0 + C1 X + C2 S) / 2**17)
# inside every key's word (two units wide one binade up), S = sfu_accel.truncated_square(X)
from warpsim.ptx import _sfu_trig  # noqa: E402

m = _sfu_trig.Trig()
ok = _sfu_trig._datapath(np.ascontiguousarray(S[:Q]), m)
c1 = np.frombuffer(m.c1x, np.int32)[1:] & 0xFFFFFF
c2 = np.frombuffer(m.c2lo, np.int32)[1:] >> 17
print(f"(4) integer datapath, segments 1..63: {'all exact' if ok else 'NOT exact'}; C1 {c1.min()}..{c1.max()}, "
      f"C2 {c2.min()}..{c2.max()}, units 2**{int((np.frombuffer(m.c1x, np.int32)[1:] >> 24).min())}"
      f"..2**{int((np.frombuffer(m.c1x, np.int32)[1:] >> 24).max())}")
