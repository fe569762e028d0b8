#!/bin/bash
# End-of-session hardware check of a tree, on the device, from the repository root:
#   bash tools/hw/final_check.sh SFU_DIR
# SFU_DIR holds sfu_forms.cubin from `python -m warpsim.validation.sfu_prove build SFU_DIR` (made
# here with nvcc).  Runs (1) tools/hw/rerun.sh (dense / sparse / PTX-machine harnesses), (2) the
# exhaustive special-function proof against the GPU with warpsim's compiled SFU path doing the
# CPU side, and, in the background, (3) the peak memory of a whole 4096^3 GEMM launch.
set -u
export PYTHONPATH=$PWD PYTHONDONTWRITEBYTECODE=1
SFU=${1:?SFU_DIR}
timeout 560 python3 benchmarks/launch_scale.py memory --n 4096 --rows 64 --json $OUT/launch_memory-4096-full.json \
  > $OUT/memory.log 2>&1 &
mem=$!
bash tools/hw/rerun.sh
python3 - > $OUT/accel.txt 2>&1 <<'PY'
from warpsim.tensorcore import accel
from warpsim.ptx import sfu_accel
print("mma accel available:", accel.available(), "sfu accel available:", sfu_accel.available())
PY
t0=$(date +%s)
timeout ${SFU_SECONDS:-430} python3 -m warpsim.validation.sfu_prove run $SFU /tmp/sfu_out --workers 13 > /tmp/sfu.log 2>&1
echo "sfu_prove rc=$? seconds $(( $(date +%s) - t0 ))" >> $OUT/device.txt
cp /tmp/sfu_out/prove.json $OUT/sfu_prove.json 2>/dev/null; tail -40 /tmp/sfu.log > $OUT/sfu.txt
wait $mem; echo "memory rc=$?" >> $OUT/device.txt
# $OUT returns at most 8 files: fold the harness summaries into one
for f in dense sparse warp_ptx sfu accel memory; do
  [ -f $OUT/$f.txt ] || [ -f $OUT/$f.log ] || continue
  { echo "== $f"; cat $OUT/$f.txt $OUT/$f.log 2>/dev/null; } >> $OUT/summaries.txt
  rm -f $OUT/$f.txt $OUT/$f.log
done
