#!/bin/bash
# (laid out as run.sh says)
# which vCPU pairs share a physical core? 2-worker 2048^3 GEMM pinned to several pairs
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list /sys/devices/system/cpu/cpu0/topology/core_id 2>&1 | head -3
for c in 0,8 0,1 2,3 0,2; do
  echo "== cpus $c"; date -u
  python3 pin.py $c python3 benchmarks/launch_scale.py spread --n ${N:-2048} --workers 2 --no-dask --json $OUT/spread2048_cpus_${c/,/_}.json 2>&1 | grep -v -i warn | tee -a $OUT/log3.txt
done
date -u
