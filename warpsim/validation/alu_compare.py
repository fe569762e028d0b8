"""Compare warpsim's ALU semantics with hardware words from :mod:`warpsim.validation.alu`.

Each instruction form is decoded against the family tables (``warpsim.ptx.{integer, floating,
convert, compare, approx}.OPS``), evaluated on the regenerated source words, and compared word
for word.  Exact forms count mismatching words; approximate ones (``OpSpec.exact`` False) report
their distance in units in the last place (ulps of the destination format).
"""

from __future__ import annotations

import glob
import json
import zlib
from pathlib import Path

import numpy as np


from warpsim.validation.alu_cases import WIDTH, Case, inputs, load_cases


def all_ops():
    """The merged ALU registry (:data:`warpsim.ptx.alu.ALU_OPS`)."""
    from warpsim.ptx.alu import ALU_OPS

    return ALU_OPS


def decode(text: str, ops=None):
    """(OpSpec, type, mods) of a form (:func:`warpsim.ptx.alu.decode_form`)."""
    from warpsim.ptx.alu import decode_form

    return decode_form(text, ops if ops is not None else all_ops())


_DT = {1: np.bool_, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def evaluate(case: Case, words: np.ndarray, ops: dict, fast: bool = False) -> list[np.ndarray]:
    """warpsim's destination words (uint64 per destination) for (n, nsrc) source words.

    ``fast``: through the form's fast path (``OpSpec.specialize``, what the PTX machine runs)
    where it has one, which gives the first destination only; ``[]`` where it has none."""
    spec, typ, mods = decode(case.text, ops)
    srcs = []
    for k, f in enumerate(case.srcs):
        w = words[:, k]
        srcs.append(w != 0 if f == "pred" else w.astype(_DT[WIDTH[f]]))
    if fast:
        def generic(*s):
            o = spec.fn(list(s), type=typ, **mods)
            return o[0] if isinstance(o, tuple) else o
        f = spec.specialize(typ, mods, len(srcs), generic) if spec.specialize else None
        if f is None:
            return []
        with np.errstate(all="ignore"):  # as the PTX machine runs them
            return [np.asarray(f(*srcs)).astype(np.uint64)]
    out = spec.fn(srcs, type=typ, **mods)
    outs = list(out) if isinstance(out, tuple) else [out]
    return [np.asarray(o).astype(np.uint64) for o in outs[: len(case.dsts)]]


def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Float bit patterns -> integers ordered like the values (-0 and +0 adjacent)."""
    b = bits.astype(np.int64) if width < 64 else bits.view(np.int64)
    sign = np.int64(1) << np.int64(width - 1)
    if width == 64:
        return np.where(b < 0, np.int64(-(2**63)) - b, b)  # wraps: fine for distances < 2**62
    return np.where(b & sign, -(b & (sign - 1)), b)


def _nan(bits, fmt):
    w = bits.astype(np.uint64)
    e, m = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}[fmt]
    return (((w >> np.uint64(m)) & np.uint64((1 << e) - 1)) == np.uint64((1 << e) - 1)) & \
        ((w & np.uint64((1 << m) - 1)) != 0)


def ulp_distance(hw: np.ndarray, sim: np.ndarray, fmt: str) -> np.ndarray:
    """|hw - sim| in ulps of ``fmt`` (per 16-bit lane for x2 formats; max of the two);
    -1 where exactly one side is NaN, 0 where both are NaN."""
    if fmt.endswith("x2"):
        base = fmt[:-2]
        lo = ulp_distance(hw & np.uint64(0xFFFF), sim & np.uint64(0xFFFF), base)
        hi = ulp_distance(hw >> np.uint64(16), sim >> np.uint64(16), base)
        return np.where((lo < 0) | (hi < 0), -1, np.maximum(lo, hi))
    width = 64 if fmt == "f64" else 32 if fmt == "f32" else 16
    na, nb = _nan(hw, fmt), _nan(sim, fmt)
    d = np.abs(_ordered(hw, width) - _ordered(sim, width))
    d = np.where(na & nb, 0, d)
    return np.where(na != nb, -1, d)


def _values(w: np.ndarray, fmt: str) -> list[np.ndarray]:
    from warpsim.ptx.fp import FORMATS, decode

    if fmt.endswith("x2"):
        f = FORMATS[fmt[:-2]]
        return [decode(w & np.uint64(0xFFFF), f), decode(w >> np.uint64(16), f)]
    return [decode(w, FORMATS[fmt])]


def _max_abs_err(hw: np.ndarray, sim: np.ndarray, fmt: str) -> float:
    """Largest |hw - sim| over finite pairs (the metric for sin, cos and lg2 near 1)."""
    worst = 0.0
    for a, b in zip(_values(hw, fmt), _values(sim, fmt)):
        ok = np.isfinite(a) & np.isfinite(b)
        if ok.any():
            worst = max(worst, float(np.abs(a[ok] - b[ok]).max()))
    return worst


def load_words(words_dir) -> dict:
    d: dict = {}
    for f in sorted(glob.glob(str(Path(words_dir) / "alu_*.npz"))):
        z = np.load(f)
        d.update({k: z[k] for k in z.files})
    return d


def compare(build_dir, words_dir, show: int = 3) -> dict:
    """Per-form results: {'text': {'words', 'mismatches', 'examples' | 'max_ulp', ...}}."""

    man = json.loads((Path(build_dir) / "manifest.json").read_text())
    hw = load_words(words_dir)
    if "|seed" in hw:  # a run with its own seed / size
        man = dict(man, seed=int(hw["|seed"]), n_words=int(hw["|n_words"]))
    ops = all_ops()
    report = {}
    for c in load_cases(man):
        x = inputs(c, man["n_words"], man["seed"])
        if int(hw[c.text + "|crc"]) != zlib.crc32(x.tobytes()):
            raise RuntimeError(f"{c.text}: regenerated inputs differ from the device run's")
        got = hw[c.text].astype(np.uint64)
        r: dict = {"words": int(got.size)}
        try:
            spec, _, _ = decode(c.text, ops)
            sim = evaluate(c, x, ops)
        except Exception as e:  # noqa: BLE001 - reported per form
            r["error"] = f"{type(e).__name__}: {e}"
            report[c.text] = r
            continue
        bad = np.zeros(len(x), bool)
        for j, s in enumerate(sim):
            bad |= got[:, j] != s
        r["mismatches"] = int(bad.sum())
        if not spec.exact:
            d = ulp_distance(got[:, 0], sim[0], c.dsts[0])
            r["max_ulp"] = int(d.max()) if (d >= 0).all() else "nan-mismatch"
            r["nan_mismatch"] = int((d < 0).sum())
            r["exact_fraction"] = float((d == 0).mean())
            r["max_abs_err"] = _max_abs_err(got[:, 0], sim[0], c.dsts[0])
        idx = np.flatnonzero(bad)[:show]
        r["examples"] = [{"in": [hex(int(v)) for v in x[i]], "hw": [hex(int(v)) for v in got[i]],
                          "sim": [hex(int(s[i])) for s in sim]} for i in idx]
        report[c.text] = r
    return report


def summary(report: dict) -> str:
    exact = {k: v for k, v in report.items() if "max_ulp" not in v}
    words = sum(v["words"] for v in report.values())
    bad = {k: v for k, v in exact.items() if v.get("mismatches") or "error" in v}
    lines = [f"{len(report)} forms, {words} words; exact forms with mismatches or errors: {len(bad)}"]
    for k, v in bad.items():
        lines.append(f"  {k}: {v.get('error') or str(v['mismatches']) + ' mismatches'} "
                     f"{v.get('examples', [])[:1]}")
    for k, v in report.items():
        if "max_ulp" in v:
            lines.append(f"  approx {k}: max {v['max_ulp']} ulp, max abs error {v['max_abs_err']:.3g}, "
                         f"{v['exact_fraction']:.4f} exact, {v['nan_mismatch']} NaN mismatches")
    return "\n".join(lines)


def compare_main(build_dir, words_dir, json_out=None, show=3) -> int:
    rep = compare(build_dir, words_dir, show)
    print(summary(rep))
    if json_out:
        Path(json_out).write_text(json.dumps(rep, indent=1))
    bad = [k for k, v in rep.items() if "max_ulp" not in v and (v.get("mismatches") or "error" in v)]
    return 1 if bad else 0


# ---------------------------------------------------------------------------------------------
# The committed fixture: a slice of the H100's words that CI re-checks without a GPU
# ---------------------------------------------------------------------------------------------

FIXTURE_ROWS = 64


def make_fixture(build_dir, words_dir, out, rows: int = FIXTURE_ROWS) -> None:
    """Write ``out`` (.npz): every form's text and operand formats, ptxas's rejected forms,
    and the H100's destination words for ``rows`` evenly spaced source rows of each form
    (sources are regenerated from the seed; their CRC is stored to catch generator drift)."""

    man = json.loads((Path(build_dir) / "manifest.json").read_text())
    hw = load_words(words_dir)
    if "|seed" in hw:
        man = dict(man, seed=int(hw["|seed"]), n_words=int(hw["|n_words"]))
    cases = load_cases(man)
    words = np.zeros((len(cases), rows, 2), np.uint64)
    crc = np.zeros(len(cases), np.uint32)
    for i, c in enumerate(cases):
        x = inputs(c, man["n_words"], man["seed"])
        idx = np.linspace(0, len(x) - 1, rows).astype(np.int64)
        words[i, :, : len(c.dsts)] = hw[c.text][idx]
        crc[i] = zlib.crc32(np.ascontiguousarray(x[idx]).tobytes())
    meta = {"seed": man["seed"], "n_words": man["n_words"], "rows": rows, "arch": man["arch"],
            "cases": man["cases"], "rejected": sorted(man["rejected"])}
    np.savez_compressed(out, words=words, crc=crc,
                        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))


def check_fixture(path, fast: bool = False) -> tuple[dict, dict]:
    """(mismatching words per form, meta) of warpsim against a fixture from
    :func:`make_fixture`.  ``fast``: check the fast paths (:func:`evaluate`); ``meta['fast']``
    then counts the forms that have one."""
    z = np.load(path)
    meta = json.loads(bytes(z["meta"]).decode())
    words, crc = z["words"], z["crc"]
    ops = all_ops()
    bad = {}
    for i, cj in enumerate(meta["cases"]):
        c = Case(cj["text"], tuple(cj["dsts"]), tuple(cj["srcs"]), cj["pq"])
        x = inputs(c, meta["n_words"], meta["seed"])
        idx = np.linspace(0, len(x) - 1, meta["rows"]).astype(np.int64)
        x = np.ascontiguousarray(x[idx])
        if int(crc[i]) != zlib.crc32(x.tobytes()):
            raise RuntimeError(f"{c.text}: input generator changed; regenerate the fixture")
        spec, _, _ = decode(c.text, ops)
        if not spec.exact:
            continue
        got = words[i]
        sim = evaluate(c, x, ops, fast=fast)
        if fast and sim:
            meta["fast"] = meta.get("fast", 0) + 1
        n = sum(int((got[:, j] != s).sum()) for j, s in enumerate(sim))
        if n:
            bad[c.text] = n
    return bad, meta
