#!/bin/sh
# one.sh PTXDIR OUTDIR MODULE KERNEL GRID BLOCK FIXED TOOL ARG...: one compute-sanitizer run, one TSV line
ptxdir=$1; out=$2; mod=$3; kern=$4; g=$5; b=$6; fixed=$7; tool=$8; shift 8
log="$out/logs/$kern.$fixed.$tool.txt"
timeout 60 compute-sanitizer --tool "$tool" --print-limit 5 "$out/runner" "$ptxdir/$mod" "$kern" "$g" "$b" "$@" > "$log" 2>&1
rc=$?
errs=$(grep -o 'ERROR SUMMARY: [0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
printf '%s\t%s\t%s\t%s\t%s\n' "$kern" "$fixed" "$tool" "${errs:-none}" "$rc"
