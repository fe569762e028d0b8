"""Summarise run.sh's logs: per kernel and tool, what compute-sanitizer reported for the
planted bug (fixed=0) and for its fixed twin (fixed=1).  usage: python summarise.py LOGDIR"""

import re
import sys
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


def verdict(text: str) -> str:
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
    if m:
        e, w = int(m.group(2)), int(m.group(3))
        return f"{e} error(s)" if e else (f"{w} warning(s)" if w else "-")
    m = re.findall(r"ERROR SUMMARY: (\d+) error", text)
    if m:
        n = int(m[-1])
        return f"{n} error(s)" if n else "-"
    return "hang (killed after 60 s)" if "COMPUTE-SANITIZER" in text else "?"


def main(logdir: str) -> None:
    logs = Path(logdir)
    kernels = sorted({p.name.split(".")[0] for p in logs.glob("*.txt")})
    print("| kernel | " + " | ".join(TOOLS) + " | fixed twin |")
    print("|---|" + "---|" * (len(TOOLS) + 1))
    for k in kernels:
        row = [verdict((logs / f"{k}.0.{t}.txt").read_text()) for t in TOOLS]
        fixed = [verdict((logs / f"{k}.1.{t}.txt").read_text()) for t in TOOLS]
        clean = "clean" if all(v == "-" for v in fixed) else ", ".join(f"{t}: {v}" for t, v in zip(TOOLS, fixed) if v != "-")
        print(f"| {k} | " + " | ".join(row) + f" | {clean} |")


if __name__ == "__main__":
    main(sys.argv[1])
