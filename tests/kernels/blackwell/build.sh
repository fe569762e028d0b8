#!/bin/sh
# How tests/kernels/blackwell/cute_0{1,2,3}_*.ptx.gz were made: CUTLASS (NVIDIA/cutlass at
# 7107b05) examples/cute/tutorial/blackwell/01_mma_sm100.cu, 02_mma_tma_sm100.cu and
# 03_mma_tma_multicast_sm100.cu, unchanged, compiled by nvcc 13.0 for sm_100a (the PTX only;
# the host code is not used: tests/test_tcgen05_machine.py builds the kernel parameters).
set -e
CUTLASS=${CUTLASS:-$HOME/cutlass}
for t in 01_mma_sm100 02_mma_tma_sm100 03_mma_tma_multicast_sm100; do
    /usr/local/cuda-13.0/bin/nvcc -std=c++17 -arch=sm_100a -ptx --expt-relaxed-constexpr \
        -I "$CUTLASS/include" -I "$CUTLASS/tools/util/include" \
        -I "$CUTLASS/examples/cute/tutorial/blackwell" \
        "$CUTLASS/examples/cute/tutorial/blackwell/$t.cu" -o cute_$t.ptx
    gzip -9 -f cute_$t.ptx
done
