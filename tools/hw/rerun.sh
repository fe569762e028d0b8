#!/bin/bash
# Hardware re-run of a tree: dense, sparse and PTX-machine harnesses. On the device, from the
# repository root: bash tools/hw/rerun.sh (writes its summaries under $OUT).
set -u
export PYTHONPATH=$PWD
W=/tmp/hw; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
t0=$(date +%s)
python3 -m warpsim.validation run --seed 2631 --family-words 500000 --out $W/dense > $W/dense.log 2>&1; echo "dense rc=$?" >> $OUT/device.txt
tail -25 $W/dense.log > $OUT/dense.txt; cp $W/dense/report.md $OUT/dense_report.md 2>/dev/null
python3 -m warpsim.validation sparse-collect --seed 2632 --out $W/sparse > $W/sparse.log 2>&1 && \
python3 -m warpsim.validation sparse-check --data $W/sparse --seed 2632 >> $W/sparse.log 2>&1; echo "sparse rc=$?" >> $OUT/device.txt
tail -25 $W/sparse.log > $OUT/sparse.txt
python3 -m warpsim.validation.warp_ptx all $W/wp > $W/wp.log 2>&1; echo "warp_ptx rc=$?" >> $OUT/device.txt
tail -25 $W/wp.log > $OUT/warp_ptx.txt
echo "seconds $(( $(date +%s) - t0 ))" >> $OUT/device.txt
