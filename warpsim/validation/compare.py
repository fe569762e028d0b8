"""``check``: regenerate inputs from a manifest, run the simulator, compare word for word."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from warpsim.facts.isa import Instruction, iter_instructions

from warpsim.validation import inputs as _inputs


def _element_view(words: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, is_nan) per element of D words, for D type f16 / f32 / f64 / s32."""
    if dtype == "f16":
        w = words.astype(np.uint32)
        codes = np.stack([w & 0xFFFF, w >> 16], axis=-1)
        return codes, ((codes & 0x7C00) == 0x7C00) & ((codes & 0x3FF) != 0)
    if dtype == "f32":
        w = words.astype(np.uint32)
        return w, ((w & 0x7F800000) == 0x7F800000) & ((w & 0x7FFFFF) != 0)
    if dtype == "f64":
        w = words.astype(np.uint64)
        e, f = np.uint64(0x7FF0000000000000), np.uint64(0x000FFFFFFFFFFFFF)
        return w, ((w & e) == e) & ((w & f) != 0)
    return words, np.zeros(words.shape, dtype=bool)


def compare_words(instr: Instruction, hw: np.ndarray, sim: np.ndarray, x: dict | None = None) -> dict:
    """Counts and the first mismatch between hardware and simulator D words."""
    hw = np.asarray(hw)
    sim = np.asarray(sim).astype(hw.dtype, copy=False)
    res = {"words": int(hw.size), "mismatches": 0, "nan_payload_only": 0, "first": None}
    if hw.shape != sim.shape:
        res.update(mismatches=int(hw.size), error=f"shape: hw {hw.shape} vs sim {sim.shape}")
        return res
    diff = hw != sim
    res["mismatches"] = int(np.count_nonzero(diff))
    if res["mismatches"]:
        hc, hn = _element_view(hw, instr.dtype)
        sc, sn = _element_view(sim, instr.dtype)
        ediff = hc != sc
        nan_ok = ~ediff | (hn & sn)
        if ediff.ndim > diff.ndim:
            nan_ok = nan_ok.all(axis=-1)
        res["nan_payload_only"] = int(np.count_nonzero(diff & nan_ok))
        w, lane, reg = (int(v) for v in np.argwhere(diff)[0])
        width = 16 if hw.dtype == np.uint64 else 8
        first = {"warp": w, "lane": lane, "reg": reg,
                 "hw": f"0x{int(hw[w, lane, reg]):0{width}x}", "sim": f"0x{int(sim[w, lane, reg]):0{width}x}"}
        if x is not None:
            for op in "abc":
                wd = 16 if x[op].dtype == np.uint64 else 8
                first[op] = [f"0x{int(v):0{wd}x}" for v in x[op][w, lane]]
        res["first"] = first
    return res


def _instructions(arch: str) -> dict[str, Instruction]:
    table = {i.text: i for i in iter_instructions(arch)}
    table.update({i.text: i for i in iter_instructions(None) if i.text not in table})
    return table


def _default_simulator():
    from warpsim.tensorcore.execute import mma  # the simulator's entry point

    return mma


def check(data_dir, report_dir=None, simulator=None, only: list[str] | None = None,
          log=print) -> dict:
    """Compare every run in ``data_dir`` with the simulator; write report.md and report.json."""
    data = Path(data_dir)
    man = json.loads((data / "manifest.json").read_text())
    if man.get("generator_version") != _inputs.GENERATOR_VERSION:
        raise RuntimeError(f"data made by input generator v{man.get('generator_version')}, "
                           f"this is v{_inputs.GENERATOR_VERSION}: inputs cannot be regenerated")
    mma = simulator or _default_simulator()
    arch = man["arch"]
    table = _instructions(arch)
    files: dict[str, np.lib.npyio.NpzFile] = {}
    rows = []
    t0 = time.time()
    for e in man["entries"]:
        if only and not any(s in e["instr"] for s in only):
            continue
        ins = table[e["instr"]]
        if e["file"] not in files:
            files[e["file"]] = np.load(data / e["file"])
        f = files[e["file"]]
        hw = f[e["key"]]
        x = _inputs.make_inputs(ins, e["dist"], e["n_warps"], e["seed"])
        row = {"instr": e["instr"], "form": e["form"], "dist": e["dist"]}
        try:
            sim = mma(ins, x["a"], x["b"], x["c"], arch=arch)
            row.update(compare_words(ins, hw, sim, x))
        except Exception as exc:  # a simulator failure is a result too
            row.update(words=int(hw.size), mismatches=int(hw.size), nan_payload_only=0, first=None,
                       error=f"{type(exc).__name__}: {exc}")
        rows.append(row)
    return finish_check(rows, {"arch": arch, "data": str(data),
                               "device": (man.get("device") or {}).get("gpu")},
                        {"rejected_by_ptxas": man.get("rejected_by_ptxas", {})}, t0,
                        report_dir, "report", render_markdown, log, "check")


def finish_check(rows: list[dict], head: dict, tail: dict, t0: float, report_dir, stem: str,
                 render, log, label: str) -> dict:
    """The report of a check: summary (``head``, the run and word totals of ``rows``, ``tail``,
    seconds since ``t0``) and rows; written to ``<stem>.json`` and ``<stem>.md`` (``render``)
    under ``report_dir`` when given, and logged in one line."""
    summary = {
        **head, "runs": len(rows), "words": sum(r["words"] for r in rows),
        "mismatches": sum(r["mismatches"] for r in rows),
        "runs_exact": sum(1 for r in rows if r["mismatches"] == 0),
        **tail, "seconds": round(time.time() - t0, 1),
    }
    report = {"summary": summary, "rows": rows}
    if report_dir is not None:
        rd = Path(report_dir)
        rd.mkdir(parents=True, exist_ok=True)
        (rd / f"{stem}.json").write_text(json.dumps(report, indent=1))
        (rd / f"{stem}.md").write_text(render(report))
    log(f"{label}: {summary['runs_exact']}/{summary['runs']} runs exact, "
        f"{summary['mismatches']} of {summary['words']} words differ")
    return report


def render_markdown(report: dict) -> str:
    s = report["summary"]
    out = [f"# warpsim validation report ({s['arch']}, {s.get('device') or 'unknown GPU'})", "",
           f"{s['runs_exact']} of {s['runs']} (instruction, distribution) runs match bit for bit; "
           f"{s['mismatches']} of {s['words']} D words differ.", ""]
    if s.get("rejected_by_ptxas"):
        out += ["Rejected by ptxas (not run):", ""]
        out += [f"- `{t}`: {m}" for t, m in s["rejected_by_ptxas"].items()] + [""]
    out += ["| instruction | dist | words | mismatches | NaN payload only | first mismatch (warp, lane, reg): hw vs sim |",
            "|---|---|---|---|---|---|"]
    for r in report["rows"]:
        out.append(f"| `{r['instr']}` | {r['dist']} | {r['words']} | {r['mismatches']} | "
                   f"{r.get('nan_payload_only', 0)} | {row_note(r)} |")
    return "\n".join(out) + "\n"


def row_note(r: dict) -> str:
    """A report row's note: its first mismatch (warp, lane, reg): hw vs sim, else its error."""
    first = r.get("first")
    if first:
        return f"({first['warp']}, {first['lane']}, {first['reg']}): {first['hw']} vs {first['sim']}"
    return r.get("error", "")
