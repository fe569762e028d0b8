#!/bin/sh
# How tests/kernels/blackwell/cute_01_mma_sm100.ptx.gz was made: CUTLASS (NVIDIA/cutlass at
# 7107b05) examples/cute/tutorial/blackwell/01_mma_sm100.cu, compiled by nvcc 13.0 for sm_100a.
# Two changes, because warpsim runs no external functions (vprintf, __assertfail): the
# tutorial's `if (thread0()) { print(...) }` blocks are disabled, and -DNDEBUG drops asserts.
# The kernel itself (TMEM alloc, tcgen05.mma, commit, mbarrier wait, tcgen05.ld, epilogue) is
# unchanged.
set -e
CUTLASS=${CUTLASS:-$HOME/cutlass}
sed 's/  if (thread0()) {/  if (false) {/' "$CUTLASS/examples/cute/tutorial/blackwell/01_mma_sm100.cu" > /tmp/01_noprint.cu
/usr/local/cuda-13.0/bin/nvcc -std=c++17 -DNDEBUG -arch=sm_100a -ptx --expt-relaxed-constexpr \
    -I "$CUTLASS/include" -I "$CUTLASS/tools/util/include" \
    -I "$CUTLASS/examples/cute/tutorial/blackwell" /tmp/01_noprint.cu -o cute_01_mma_sm100.ptx
gzip -9 -f cute_01_mma_sm100.ptx
