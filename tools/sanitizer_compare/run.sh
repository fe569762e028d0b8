#!/bin/sh
# Run every planted-bug kernel (bug and fixed twin) under compute-sanitizer's four tools.
# usage: run.sh PTXDIR OUTDIR   (writes OUTDIR/results.tsv: kernel, fixed, tool, errors, exit status)
set -u
here=$(cd "$(dirname "$0")" && pwd)
ptxdir=$(cd "$1" && pwd); out=$2; mkdir -p "$out/logs"; out=$(cd "$out" && pwd)
nvcc -O2 -o "$out/runner" "$here/runner.cu" -lcuda || nvcc -O2 -o "$out/runner" "$here/runner.cu" -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
grep -v '^#' "$here/cases.txt" | while read -r mod kern g b args; do
  for fixed in 0 1; do
    for tool in memcheck racecheck initcheck synccheck; do
      echo "$ptxdir $out $mod $kern $g $b $fixed $tool $(echo "$args" | sed "s/FIXED/$fixed/")"
    done
  done
done > "$out/jobs.txt"
xargs -P 12 -L 1 sh "$here/one.sh" < "$out/jobs.txt" | sort > "$out/results.tsv"
