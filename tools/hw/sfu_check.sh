#!/bin/bash
# The special-function unit on the device, from the repository root:
#   bash tools/hw/sfu_check.sh SFU_DIR
# SFU_DIR holds sfu_forms.cubin from `python -m warpsim.validation.sfu_prove build SFU_DIR` (made
# here with nvcc).  (1) benchmarks/bench_sfu.py on one core of the idle host (compiled path: the
# band kernels where the host has AVX-512), then (2) the exhaustive proof against the GPU with
# warpsim's compiled SFU path doing the CPU side (sfu_prove run, one worker per other core).
set -u
export PYTHONPATH=$PWD PYTHONDONTWRITEBYTECODE=1 OPENBLAS_NUM_THREADS=1
SFU=${1:?SFU_DIR}
{ date; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-300; uptime; } > $OUT/host.txt
python3 -c "from warpsim.ptx import sfu_accel as a; print('sfu compiled', a.available(), a.reason, 'band kernels', a.bands_available())" >> $OUT/host.txt 2>&1
taskset -c 1 python3 benchmarks/bench_sfu.py --compiled-only --repeats ${REPEATS:-9} > $OUT/bench_sfu.txt 2>&1
echo "bench rc=$?" >> $OUT/host.txt
t0=$(date +%s)
timeout ${SFU_SECONDS:-480} python3 -m warpsim.validation.sfu_prove run $SFU /tmp/sfu_out --workers $(( $(nproc) - 2 )) ${ONLY:+--only $ONLY} > /tmp/sfu.log 2>&1
echo "sfu_prove rc=$? seconds $(( $(date +%s) - t0 ))" >> $OUT/host.txt
cp /tmp/sfu_out/prove.json $OUT/sfu_prove.json 2>/dev/null; tail -45 /tmp/sfu.log > $OUT/sfu.txt
