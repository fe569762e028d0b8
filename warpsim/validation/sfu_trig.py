"""Probe MUFU.SIN, MUFU.COS and MUFU.TANH exhaustively on the GPU and build their tables.

Steps::

    python -m warpsim.validation.sfu_trig build DIR      # here: sfu_trig.cu -> sfu_trig.cubin (nvcc)
    python -m warpsim.validation.sfu_trig run DIR OUT    # on the GPU machine (CuPy): the probe
    python -m warpsim.validation.sfu_trig table DIR OUT  # on the GPU machine: the sine table + check

``run`` is the probe below (its ``tanh_raw*.npz`` feed :func:`tanh_arrays`); ``table`` builds the
fixed-point sine table from every input of sin and cos, checks the model on all 2**32 inputs on
the GPU, and writes the package arrays (:func:`sin_arrays`, :func:`write_tables`).

ptxas compiles ``sin/cos.approx(.ftz).f32`` to ``FMUL.RZ t, x, 1/2pi`` then ``MUFU.SIN/COS t`` (the
``.ftz`` forms give the same SASS) and ``tanh.approx.f32`` to a bare ``MUFU.TANH``.  ``run`` computes
the GPU's answers on all 2**32 inputs and reduces them on the GPU:

* sin/cos: a table over the angle in turns ``t`` (a 2**32-word scatter), the count of inputs whose
  answer differs from ``table[t(x)]`` (0: the answer depends on ``t`` alone), the count of ``t`` in
  [0, 1) whose answer differs from that of ``t`` truncated / rounded to ``F`` fraction bits (F = 16..31),
  period and sign relations, the fixed-point table ``Z[k] = MUFU(k * 2**-F)`` for the best ``F`` and its
  quadrant relations, the distance of ``Z`` from the rounded function; slices of ``Z`` come back raw;
* tanh: the count of inputs whose answer changes when the low ``b`` mantissa bits are cleared
  (b = 1..12), odd symmetry, per exponent: answers equal to ``x``, to 1, to the rounded tanh, the
  ulp range against the rounded tanh; the raw answers for the exponents that are neither ``x`` nor 1.

``OUT/trig.json`` gets the counts; ``OUT/*.npz`` the raw slices (first differences, compressed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SENT = 0xFFFFFFFF          # never a MUFU answer (NaN answers are 0x7FFFFFFF)
NCFG = 32                  # F = 16..31, truncated and rounded

SRC = r"""
#define U2F __uint_as_float
#define F2U __float_as_uint
#define SENT 0xFFFFFFFFu
__device__ __forceinline__ float p_sin(float x){float y; asm volatile("sin.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ float p_cos(float x){float y; asm volatile("cos.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ float p_sinf(float x){float y; asm volatile("sin.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ float p_cosf(float x){float y; asm volatile("cos.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ float p_tanh(float x){float y; asm volatile("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y;}
__device__ __forceinline__ unsigned turns(unsigned x){ return F2U(__fmul_rz(U2F(x), U2F(0x3E22F983u))); }

__device__ __forceinline__ void flush(unsigned long long* cnt, int j, unsigned long long v){
  for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0 && v) atomicAdd(&cnt[j], v);
}

// all x: tab[t(x)] = op(x); cnt[0] += (op(x) != op_ftz(x)); out t and y kept in tab only.
extern "C" __global__ void scatter(int op, unsigned long long base, unsigned long long n, unsigned* tab,
                                   unsigned long long* cnt){
  unsigned long long c0 = 0;
  for (unsigned long long i = blockIdx.x*(unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x*blockDim.x){
    unsigned x = (unsigned)(base + i);
    unsigned y = op == 0 ? F2U(p_sin(U2F(x))) : F2U(p_cos(U2F(x)));
    unsigned yf = op == 0 ? F2U(p_sinf(U2F(x))) : F2U(p_cosf(U2F(x)));
    c0 += (y != yf);
    tab[turns(x)] = y;
  }
  flush(cnt, 0, c0);
}
// all x: cnt[0] += tab[t(x)] != op(x)   (0: the answer is a function of t)
extern "C" __global__ void verify(int op, unsigned long long base, unsigned long long n, const unsigned* tab,
                                  unsigned long long* cnt){
  unsigned long long c0 = 0;
  for (unsigned long long i = blockIdx.x*(unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x*blockDim.x){
    unsigned x = (unsigned)(base + i);
    unsigned y = op == 0 ? F2U(p_sin(U2F(x))) : F2U(p_cos(U2F(x)));
    c0 += (tab[turns(x)] != y);
  }
  flush(cnt, 0, c0);
}
// t in [0, 1) (bits < 0x3F800000): cnt[2j] (F = 16 + j truncated), cnt[2j+1] (rounded, 1 -> 0) mismatches,
// cnt[64] unreached t.
extern "C" __global__ void fixcheck(const unsigned* tab, unsigned long long* cnt){
  unsigned long long c[32]; for (int j = 0; j < 32; ++j) c[j] = 0;
  unsigned long long un = 0;
  const unsigned n = 0x3F800000u;
  for (unsigned i = blockIdx.x*blockDim.x + threadIdx.x; i < n; i += gridDim.x*blockDim.x){
    unsigned y = tab[i];
    if (y == SENT){ ++un; continue; }
    double t = (double)U2F(i);
    for (int j = 0; j < 16; ++j){
      int F = 16 + j;
      double s = ldexp(t, F);
      double q = floor(s);
      unsigned u = tab[F2U((float)ldexp(q, -F))];
      c[2*j] += (u != SENT && u != y);
      double r = rint(s); if (r >= ldexp(1.0, F)) r = 0.0;
      unsigned v = tab[F2U((float)ldexp(r, -F))];
      c[2*j+1] += (v != SENT && v != y);
    }
  }
  for (int j = 0; j < 32; ++j) flush(cnt, j, c[j]);
  flush(cnt, 64, un);
}
// t >= 1 (bits 0x3F800000 .. 0x7F7FFFFF): answer vs answer of frac(t)  -> cnt[0];
// negative t: tab[t|sign] vs tab[t] ^ sign -> cnt[1], vs tab[t] -> cnt[2]  (both reached)
extern "C" __global__ void relcheck(const unsigned* tab, unsigned long long* cnt){
  unsigned long long a = 0, b = 0, c = 0, un = 0;
  for (unsigned i = blockIdx.x*blockDim.x + threadIdx.x; i < 0x7F800000u; i += gridDim.x*blockDim.x){
    unsigned y = tab[i], yn = tab[i | 0x80000000u];
    if (y == SENT){ ++un; continue; }
    if (i >= 0x3F800000u){
      float t = U2F(i); float f = t - floorf(t);
      unsigned u = tab[F2U(f)];
      a += (u != SENT && u != y);
    }
    if (yn != SENT){ b += (yn != (y ^ 0x80000000u)); c += (yn != y); }
  }
  flush(cnt, 0, a); flush(cnt, 1, b); flush(cnt, 2, c); flush(cnt, 3, un);
}
// Z[k] = tab[bits(k * 2^-F)], k < 2^F
extern "C" __global__ void fixtable(const unsigned* tab, int F, unsigned long long nk, unsigned* Z){
  for (unsigned long long k = blockIdx.x*(unsigned long long)blockDim.x + threadIdx.x; k < nk;
       k += (unsigned long long)gridDim.x*blockDim.x)
    Z[k] = tab[F2U((float)ldexp((double)k, -F))];
}

// tanh on the exponent field E (x = E << 23 | m, x >= 0): cnt[b-1] += tanh(x) != tanh(x & ~(2^b-1)) for
// b = 1..12; cnt[12] odd symmetry; per exponent (e = cnt + 16 + 8E): [0] y == x, [1] y == 1.0, [2] y == rn(tanh(x)),
// [3] y == rn(tanh(key)) with key = x with the low KB bits cleared, [4] max (y - rn) ulps, [5] max (rn - y) ulps
__device__ __forceinline__ void wmax(unsigned long long* p, unsigned long long v){
  for (int o = 16; o; o >>= 1){ unsigned long long w = __shfl_down_sync(0xffffffffu, v, o); v = w > v ? w : v; }
  if ((threadIdx.x & 31) == 0 && v) atomicMax(p, v);
}
extern "C" __global__ void tanhcheck(unsigned E, int KB, unsigned long long* cnt){
  unsigned long long c[13]; for (int j = 0; j < 13; ++j) c[j] = 0;
  unsigned long long q[4] = {0, 0, 0, 0}, up = 0, dn = 0;
  for (unsigned m = blockIdx.x*blockDim.x + threadIdx.x; m < (1u << 23); m += gridDim.x*blockDim.x){
    unsigned i = (E << 23) | m;
    unsigned y = F2U(p_tanh(U2F(i)));
    for (int b = 1; b <= 12; ++b) c[b-1] += (F2U(p_tanh(U2F(i & ~((1u << b) - 1u)))) != y);
    c[12] += (F2U(p_tanh(U2F(i | 0x80000000u))) != (y ^ 0x80000000u));
    float r = (float)tanh((double)U2F(i));
    float rk = (float)tanh((double)U2F(i & ~((1u << KB) - 1u)));
    q[0] += (y == i); q[1] += (y == 0x3F800000u); q[2] += (y == F2U(r)); q[3] += (y == F2U(rk));
    if (E < 255){
      long long d = (long long)y - (long long)F2U(r);
      if (d > 0 && (unsigned long long)d > up) up = d;
      if (d < 0 && (unsigned long long)(-d) > dn) dn = -d;
    }
  }
  for (int j = 0; j < 13; ++j) flush(cnt, j, c[j]);
  for (int j = 0; j < 4; ++j) flush(cnt, 16 + 8*E + j, q[j]);
  wmax(&cnt[16 + 8*E + 4], up); wmax(&cnt[16 + 8*E + 5], dn);
}
// raw tanh answers of x = (E << 23) | (k << KB), k < 2^(23-KB)
extern "C" __global__ void tanhtable(unsigned E, int KB, unsigned* out){
  unsigned n = 1u << (23 - KB);
  for (unsigned k = blockIdx.x*blockDim.x + threadIdx.x; k < n; k += gridDim.x*blockDim.x)
    out[k] = F2U(p_tanh(U2F((E << 23) | (k << KB))));
}

// the model's key: a = |t| (finite), k = floor(frac(a) * 2^25); sin: Zk[k] = y ^ sign(t); cos: Zk[k + 2^23 mod 2^25] = y
__device__ __forceinline__ long long tkey(unsigned t){
  double a = (double)fabsf(U2F(t));
  return (long long)((a - floor(a)) * 33554432.0);
}
extern "C" __global__ void keyscatter(int op, unsigned long long base, unsigned long long n, unsigned* Zk){
  for (unsigned long long i = blockIdx.x*(unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x*blockDim.x){
    unsigned x = (unsigned)(base + i);
    unsigned t = turns(x);
    if ((t & 0x7FFFFFFFu) >= 0x7F800000u) continue;
    long long k = tkey(t);
    if (op == 0) Zk[k] = F2U(p_sin(U2F(x))) ^ (t & 0x80000000u);
    else Zk[(k + (1 << 23)) & ((1 << 25) - 1)] = F2U(p_cos(U2F(x)));
  }
}
// cnt[0] sin mismatches, cnt[1] cos, cnt[2] sin.ftz, cnt[3] cos.ftz, cnt[4] lanes reading SENT
extern "C" __global__ void keyverify(unsigned long long base, unsigned long long n, const unsigned* Zk,
                                     unsigned long long* cnt){
  unsigned long long c[5] = {0, 0, 0, 0, 0};
  for (unsigned long long i = blockIdx.x*(unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x*blockDim.x){
    unsigned x = (unsigned)(base + i);
    unsigned t = turns(x);
    unsigned es, ec;
    if ((t & 0x7FFFFFFFu) >= 0x7F800000u){ es = ec = 0x7FFFFFFFu; }
    else {
      long long k = tkey(t);
      unsigned zs = Zk[k], zc = Zk[(k + (1 << 23)) & ((1 << 25) - 1)];
      c[4] += (zs == SENT) + (zc == SENT);
      es = zs ^ (t & 0x80000000u); ec = zc;
    }
    c[0] += (F2U(p_sin(U2F(x))) != es); c[1] += (F2U(p_cos(U2F(x))) != ec);
    c[2] += (F2U(p_sinf(U2F(x))) != es); c[3] += (F2U(p_cosf(U2F(x))) != ec);
  }
  for (int j = 0; j < 5; ++j) flush(cnt, j, c[j]);
}
"""


def build(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "sfu_trig.cu").write_text(SRC)
    subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-O3", "-o", str(d / "sfu_trig.cubin"),
                    str(d / "sfu_trig.cu")], check=True)


def _pack(v: np.ndarray) -> np.ndarray:
    """u32 words -> lzma of their second differences (int32; the first two words kept)."""
    import lzma

    v = v.astype(np.int64)
    d = np.concatenate([v[:2], np.diff(v, 2)]).astype(np.int32)
    return np.frombuffer(lzma.compress(d.tobytes(), preset=1), np.uint8)


def unpack(p: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_pack`."""
    import lzma

    d = np.frombuffer(lzma.decompress(p.tobytes()), np.int32).astype(np.int64)
    v = np.empty_like(d)
    v[:2] = d[:2]
    if d.size > 2:
        with np.errstate(over="ignore"):
            dd = np.cumsum(np.concatenate([[d[1] - d[0]], d[2:]]))    # first differences
            v[1:] = d[0] + np.cumsum(dd)                              # modulo 2**32 throughout
    return (v & 0xFFFFFFFF).astype(np.uint32)


def _save_parts(out: Path, stem: str, arrays: dict, limit: int = 15 << 20, maxfiles: int = 2) -> list:
    """Write ``arrays`` (already packed) into at most ``maxfiles`` npz files under ``limit`` bytes each."""
    files, cur, size, skipped = [], {}, 0, []
    for name, a in arrays.items():
        if a.nbytes > limit:
            skipped.append(name)
            continue
        if size + a.nbytes > limit:
            files.append(cur)
            cur, size = {}, 0
        cur[name] = a
        size += a.nbytes
    files.append(cur)
    for j, f in enumerate(files[:maxfiles]):
        np.savez(out / f"{stem}{j}.npz", **f)
    skipped += [n for f in files[maxfiles:] for n in f]
    return skipped


def run(d: Path, out: Path) -> dict:
    import cupy as cp

    out.mkdir(parents=True, exist_ok=True)
    mod = cp.RawModule(path=str(d / "sfu_trig.cubin"))
    k = {n: mod.get_function(n) for n in ("scatter", "verify", "fixcheck", "relcheck", "fixtable",
                                          "tanhcheck", "tanhtable")}
    G, B = (132 * 16,), (256,)
    dev = cp.cuda.runtime.getDeviceProperties(0)
    rep: dict = {"device": {"name": dev["name"].decode(), "driver": cp.cuda.runtime.driverGetVersion(),
                            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}}
    print(rep["device"], flush=True)

    def save():
        (out / "trig.json").write_text(json.dumps(rep, indent=1))

    # ---------------- tanh first (no big tables)
    t0 = time.time()
    KB = 3
    cnt = cp.zeros(16 + 8 * 256, cp.uint64)
    for E in range(256):
        k["tanhcheck"](G, B, (np.uint32(E), np.int32(KB), cnt))
    c = cnt.get().astype(np.int64)
    th = {"clear_low_bits_changes": {b: int(c[b - 1]) for b in range(1, 13)}, "odd_mismatch": int(c[12]),
          "by_exponent": {}}
    for E in range(256):
        e = c[16 + 8 * E:24 + 8 * E]
        th["by_exponent"][E] = {"eq_x": int(e[0]), "eq_1": int(e[1]), "eq_rn": int(e[2]), f"eq_rn_key{KB}": int(e[3]),
                                "max_up_ulps": int(e[4]), "max_down_ulps": int(e[5])}
    rep["tanh"] = th
    th["seconds"] = round(time.time() - t0, 1)
    print("tanh", th["clear_low_bits_changes"], th["odd_mismatch"], th["seconds"], flush=True)
    save()
    kb = max([b for b in range(1, 13) if th["clear_low_bits_changes"][b] == 0], default=0)
    th["ignored_low_bits"] = kb
    nontriv = [E for E in range(255) if th["by_exponent"][E]["eq_x"] < (1 << 23)
               and th["by_exponent"][E]["eq_1"] < (1 << 23)]
    th["nontrivial_exponents"] = nontriv
    o = cp.empty(1 << (23 - kb), cp.uint32)
    raw = {}
    for E in nontriv:
        k["tanhtable"](G, B, (np.uint32(E), np.int32(kb), o))
        raw[f"E{E}"] = _pack(o.get())
    th["raw_skipped"] = _save_parts(out, "tanh_raw", raw, maxfiles=3)
    th["raw_bytes"] = {n: int(a.nbytes) for n, a in raw.items()}
    print("tanh raw", nontriv, sum(a.nbytes for a in raw.values()), flush=True)
    save()
    del raw

    # ---------------- sin / cos
    tab = cp.empty(1 << 32, cp.uint32)
    zs = {}
    for op, name in ((0, "sin"), (1, "cos")):
        t0 = time.time()
        tab.fill(SENT)
        cnt = cp.zeros(128, cp.uint64)
        for base in range(0, 1 << 32, 1 << 30):
            k["scatter"](G, B, (np.int32(op), np.uint64(base), np.uint64(1 << 30), tab, cnt))
        ftzdiff = int(cnt.get()[0])
        cnt[:] = 0
        for base in range(0, 1 << 32, 1 << 30):
            k["verify"](G, B, (np.int32(op), np.uint64(base), np.uint64(1 << 30), tab, cnt))
        notfn = int(cnt.get()[0])
        cnt[:] = 0
        k["fixcheck"](G, B, (tab, cnt))
        c = cnt.get().astype(np.int64)
        fx = {16 + j: {"trunc": int(c[2 * j]), "round": int(c[2 * j + 1])} for j in range(16)}
        cnt[:] = 0
        k["relcheck"](G, B, (tab, cnt))
        r = cnt.get().astype(np.int64)
        res = {"ftz_vs_plain_diff": ftzdiff, "not_function_of_t": notfn, "unreached_t_below_1": int(c[64]),
               "fixed_point": fx, "period_mismatch": int(r[0]), "neg_is_signflip_mismatch": int(r[1]),
               "neg_is_equal_mismatch": int(r[2]), "unreached_pos": int(r[3])}
        good = [(F, m) for F in range(16, 32) for m in ("trunc", "round") if fx[F][m] == 0]
        F, mode = good[0] if good else (28, "trunc")
        F = min(F, 30)
        res["F"], res["mode"] = F, mode
        sp = np.array([0, 1, 0x007FFFFF, 0x00800000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF,
                       0x4B000000, 0x4B000001, 0x4B800000, 0x3F800000, 0x3E800000, 0x3F000000], np.uint32)
        sp = np.concatenate([sp, sp | np.uint32(0x80000000)])
        res["special_t"] = {f"{int(s):08x}": f"{int(v):08x}" for s, v in zip(sp, tab[cp.asarray(sp)].get())}
        nk = 1 << F
        Z = cp.empty(nk, cp.uint32)
        k["fixtable"](G, B, (tab, np.int32(F), np.uint64(nk), Z))
        zs[name] = Z
        hist = np.zeros(129, np.int64)
        amax, eq, holes = 0.0, 0, 0
        for a0 in range(0, nk, 1 << 26):
            z = Z[a0:a0 + (1 << 26)]
            ok = z != np.uint32(SENT)
            holes += int((~ok).sum())
            ang = (cp.arange(a0, a0 + z.size, dtype=cp.float64)) * (2 * np.pi / nk)
            ref = cp.sin(ang) if op == 0 else cp.cos(ang)
            err = (z.view(cp.float32).astype(cp.float64) - ref)[ok]
            amax = max(amax, float(cp.abs(err).max()))
            sc = cp.clip(cp.rint(err * 2.0 ** 24).astype(cp.int64) + 64, 0, 128)
            hist += cp.bincount(sc, minlength=129).get()
            eq += int((z == ref.astype(cp.float32).view(cp.uint32)).sum())
        res["Z_holes"] = holes
        res["abs_err_max"] = amax
        res["abs_err_hist_2m24"] = {int(i) - 64: int(v) for i, v in enumerate(hist) if v}
        res["eq_rn_f32"] = eq
        res["seconds"] = round(time.time() - t0, 1)
        rep[name] = res
        print(name, json.dumps({a: b for a, b in res.items() if a != "fixed_point"})[:900], flush=True)
        print(name, "fixed", fx, flush=True)
        save()
    del tab
    # quadrant relations and raw slices of Z
    Fs = rep["sin"]["F"]
    if rep["cos"]["F"] == Fs:
        S, C = zs["sin"], zs["cos"]
        nk = 1 << Fs
        Q = nk // 4
        kk = cp.arange(1, Q, dtype=cp.int64)
        SG = np.uint32(0x80000000)

        def mism(a, b, flip=False):
            ok = (a != np.uint32(SENT)) & (b != np.uint32(SENT))
            return int(((a != ((b ^ SG) if flip else b)) & ok).sum())
        rel = {
            "sin[k+H] == -sin[k]": mism(S[kk + 2 * Q], S[kk], True),
            "sin[H-k] == sin[k]": mism(S[2 * Q - kk], S[kk]),
            "cos[k] == sin[k+Q]": mism(C[kk], S[kk + Q]),
            "cos[k] == sin[Q-k]": mism(C[kk], S[Q - kk]),
            "cos[-k] == cos[k]": mism(C[nk - kk], C[kk]),
            "sin[-k] == -sin[k]": mism(S[nk - kk], S[kk], True),
            "cos[k+Q] == -sin[k]": mism(C[kk + Q], S[kk], True),
        }
        rep["quadrant_relations_mismatch"] = rel
        print(rel, flush=True)
        save()
        seg = 1 << max(0, Fs - 2 - 6)
        sl = {}
        for nm, Z in (("sin", S), ("cos", C)):
            for a in (0, 1, 2, Q // seg // 2, Q // seg - 1, Q // seg, 2 * Q // seg):
                sl[f"{nm}_{a * seg}"] = _pack(Z[a * seg:(a + 1) * seg].get())
        rep["slices_skipped"] = _save_parts(out, "trig_slices", sl, maxfiles=1)
        q0 = {f"{nm}_q0": _pack(Z[:Q + 1].get()) for nm, Z in (("sin", S), ("cos", C))} if Q <= 1 << 24 else {}
        rep["q0_bytes"] = {n: int(a.nbytes) for n, a in q0.items()}
        rep["q0_skipped"] = _save_parts(out, "trig_q0_", q0, maxfiles=2)
        save()
    print("done", flush=True)
    return rep


# ---------------------------------------------------------------------------------------------
# package tables (here, from a run's files)
# ---------------------------------------------------------------------------------------------

TRIG_OUT = Path(__file__).resolve().parent.parent / "data" / "sfu_sm90_trig.npz"


def tanh_arrays(raw: dict) -> dict:
    """``raw``: exponent field -> the 2**23 answers of MUFU.TANH over that binade.  Each binade's
    table keeps one answer per run of inputs that share it (the unit reads 17..21 mantissa bits)."""
    from warpsim.ptx import sfu

    m = np.arange(1 << 23, dtype=np.uint32)
    parts, shifts = [], []
    for E in range(sfu.TANH_E0, sfu.TANH_E1 + 1):
        y = raw[E]
        b = 0
        while b < 23 and np.array_equal(y, y[m & ~np.uint32((1 << (b + 1)) - 1)]):
            b += 1
        shifts.append(b)
        parts.append(y[::1 << b])
    t = np.concatenate(parts)
    return {"tanh.shift": np.array(shifts, np.int8), "tanh.d": _pack(t), "tanh.n": np.array(t.size)}


def sin_arrays(S: np.ndarray) -> dict:
    """``S``: MUFU.SIN over the 2**25 fixed-point angles ``k * 2**-25`` turn (``SENT`` where no input
    reaches ``k``).  The second half turn must be the first negated (checked); the first is stored
    as a cubic per segment of 2**SEG keys (float64 coefficients, evaluated with IEEE multiply/add)
    plus each key's distance from it in ulps (int8, -128: listed apart)."""
    from warpsim.ptx import sfu

    lo, hi = S[:S.size // 2], S[S.size // 2:]
    both = (lo != np.uint32(SENT)) & (hi != np.uint32(SENT))
    if (hi != (lo ^ np.uint32(0x80000000)))[both].any() or ((lo == np.uint32(SENT)) & (hi != np.uint32(SENT))).any():
        raise ValueError("MUFU.SIN: the second half turn is not the first negated")
    S = lo
    n, L = S.size, 1 << sfu.SIN_SEG
    ok = S != np.uint32(SENT)
    x = (np.arange(L, dtype=np.float64) - L / 2) / L
    V = np.vander(x, sfu.SIN_DEG + 1)
    w = ok.reshape(-1, L).astype(np.float64)
    y = np.where(ok, S, 0).view(np.float32).astype(np.float64).reshape(-1, L)
    A = np.einsum("sl,li,lj->sij", w, V, V) + np.eye(V.shape[1]) * 1e-9
    rhs = np.einsum("sl,li->si", w * y, V)
    coef = np.linalg.solve(A, rhs[..., None])[..., 0]
    k = np.arange(n, dtype=np.int64)
    model = sfu.sin_model(coef, k).astype(np.int64)
    res = np.where(ok, S.astype(np.int64) - model, 0)
    big = np.abs(res) > 127
    r8 = np.where(big, -128, res).astype(np.int8)
    return {"sin.coef": coef, "sin.res": np.frombuffer(lzma_pack(r8.tobytes()), np.uint8),
            "sin.xi": np.flatnonzero(big).astype(np.int32), "sin.xv": S[big],
            "sin.holes": np.array(int((~ok).sum()))}


def lzma_pack(b: bytes) -> bytes:
    import lzma

    return lzma.compress(b, preset=9 | lzma.PRESET_EXTREME)


def write_tables(arrays: dict, meta: dict, out: Path = TRIG_OUT) -> None:
    old = {}
    if out.exists():
        with np.load(out) as z:
            old = {k: z[k] for k in z.files}
    old.update(arrays)
    old["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(out, **old)


def table_run(d: Path, out: Path) -> dict:
    """On the GPU: the fixed-point sine table from every input of sin and cos, the exhaustive check
    of the model ``sin(x) = Zk[key(t)] ^ sign(t)``, ``cos(x) = Zk[key(t) + 2**23]``, then the
    package arrays (fit here, on the device's CPU) written to TRIG_OUT and OUT."""
    import cupy as cp

    out.mkdir(parents=True, exist_ok=True)
    mod = cp.RawModule(path=str(d / "sfu_trig.cubin"))
    G, B = (132 * 16,), (256,)
    t0 = time.time()
    Zk = cp.full(1 << 25, SENT, cp.uint32)
    for op in (0, 1):
        for base in range(0, 1 << 32, 1 << 30):
            mod.get_function("keyscatter")(G, B, (np.int32(op), np.uint64(base), np.uint64(1 << 30), Zk))
    cnt = cp.zeros(8, cp.uint64)
    for base in range(0, 1 << 32, 1 << 30):
        mod.get_function("keyverify")(G, B, (np.uint64(base), np.uint64(1 << 30), Zk, cnt))
    c = cnt.get()
    dev = cp.cuda.runtime.getDeviceProperties(0)
    rep = {"device": {"name": dev["name"].decode(), "driver": cp.cuda.runtime.driverGetVersion(),
                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
           "words_per_form": 1 << 32, "sin_mismatch": int(c[0]), "cos_mismatch": int(c[1]),
           "sin_ftz_mismatch": int(c[2]), "cos_ftz_mismatch": int(c[3]), "sent_reads": int(c[4])}
    S = Zk.get()
    rep["holes"] = int((S == SENT).sum())
    rep["half_antisymmetric_mismatch"] = int(((S[1 << 24:] != (S[:1 << 24] ^ np.uint32(0x80000000)))
                                              & (S[1 << 24:] != SENT) & (S[:1 << 24] != SENT)).sum())
    rep["gpu_seconds"] = round(time.time() - t0, 1)
    print(rep, flush=True)
    (out / "table.json").write_text(json.dumps(rep, indent=1))
    np.savez(out / "sin_zk.npz", lo=_pack(S[:1 << 24]), hi=_pack(S[1 << 24:]))
    t0 = time.time()
    arrays = sin_arrays(S)
    meta = {"sin": {**rep["device"], "harness": "warpsim.validation.sfu_trig table"},
            "tanh": {"device": "NVIDIA H100 80GB HBM3", "driver": 13000, "date": "2026-11-26 05:57 UTC",
                     "harness": "warpsim.validation.sfu_trig run"}}
    write_tables(arrays, meta)
    import shutil

    shutil.copy(TRIG_OUT, out / TRIG_OUT.name)
    rep["fit_seconds"] = round(time.time() - t0, 1)
    (out / "table.json").write_text(json.dumps(rep, indent=1))
    print("fit", rep["fit_seconds"], {k: v.nbytes for k, v in arrays.items()}, flush=True)
    return rep


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m warpsim.validation.sfu_trig")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build").add_argument("dir", type=Path)
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("out", type=Path)
    t = sub.add_parser("table")
    t.add_argument("dir", type=Path)
    t.add_argument("out", type=Path)
    th = sub.add_parser("tanh")
    th.add_argument("run_out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        build(a.dir)
    elif a.cmd == "tanh":
        raw = {}
        for f in sorted(a.run_out.glob("tanh_raw*.npz")):
            with np.load(f) as z:
                raw.update({int(k[1:]): unpack(z[k]) for k in z.files})
        rep = json.loads((a.run_out / "trig.json").read_text())
        meta = {}
        if TRIG_OUT.exists():
            with np.load(TRIG_OUT) as z:
                meta = json.loads(bytes(z["meta"]).decode())
        meta["tanh"] = {**rep["device"], "harness": "warpsim.validation.sfu_trig run"}
        write_tables(tanh_arrays(raw), meta)
    elif a.cmd == "table":
        table_run(a.dir, a.out)
    else:
        run(a.dir, a.out)


if __name__ == "__main__":
    main(sys.argv[1:])
