#!/bin/bash
# The device runs of benchmarks/results/launch_*-device*.json (issue 22: spreading a launch on an
# idle machine).  It ran from a folder .dev/spread/ of the checkout, carried to the device machine,
# holding: warpsim/ (the branch's package), benchmarks/launch_scale.py, tests/kernels/*.ptx, this
# script, pin.py, run3.sh and whl/ (dask, distributed, tornado, tblib, zict, partd, locket wheels
# for CPython 3.12: `pip download --no-deps --only-binary=:all: --python-version 3.12 ...`; the
# device has no internet).  Run there as `bash .dev/spread/run.sh` with $OUT set; N and M (default
# 2048 and 4096) shrink the GEMMs for a local dry run.  The "before" step runs the repository
# root's warpsim (main at the time) with the same benchmark script.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
L=$OUT/log.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl >>$L 2>&1 || { echo pip failed; cat $L; exit 1; }
export PYTHONPATH=/tmp/site:$PWD
{ date -u; nproc; uptime; python3 -V; cc --version | head -1; (lscpu || grep -m1 'model name' /proc/cpuinfo) | head -25
  python3 -c 'import numpy, ml_dtypes, dask, distributed, warpsim; from warpsim.tensorcore import accel; print("numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__, "dask", dask.__version__, "distributed", distributed.__version__, "accel", accel.available())'
} >>$L 2>&1
cat $L
echo "== before (main e0ee9a6's warpsim, the repo root): 2 cores, 1 and 2 processes"; date -u
PYTHONPATH=/tmp/site:$(cd ../.. && pwd) python3 pin.py 0,1 python3 benchmarks/launch_scale.py spread --n ${N:-2048} --workers 2 --no-dask --json $OUT/spread2048_2cores_before.json 2>&1 | grep -v -i warn | tee -a $L
echo "== 2 cores: 1 process, 2 processes, Dask 2 workers"; date -u
python3 pin.py 0,1 python3 benchmarks/launch_scale.py spread --n ${N:-2048} --workers 2 --repeat 2 --json $OUT/spread2048_2cores.json 2>&1 | grep -v -i warn | tee -a $L
echo "== memory 4096^3 on 2 cores"; date -u; uptime
python3 pin.py 0,1 python3 benchmarks/launch_scale.py memory --n ${M:-4096} --rows 1 2 4 --json $OUT/memory4096.json 2>&1 | tee -a $L
echo "== 8 cores: 1, 4, 8 processes"; date -u; uptime
python3 pin.py 0-7 python3 benchmarks/launch_scale.py spread --n ${N:-2048} --workers 4 8 --no-dask --cta-batch 128 --json $OUT/spread2048_8cores.json 2>&1 | grep -v -i warn | tee -a $L
date -u; uptime
