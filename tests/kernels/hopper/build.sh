#!/bin/sh
# Rebuild the Hopper async kernels' PTX (nvcc 13.0) and the cubin the device harness loads.
set -e
cd "$(dirname "$0")"
nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -o async_kernels.ptx async_kernels.cu
ptxas -arch=sm_90a async_kernels.ptx -o async_kernels.cubin
# The FlashAttention-3-style warp-specialised kernel (tools/hopper_real_device.py runs it on the GPU)
nvcc -ptx -arch=sm_90a -lineinfo -o fa3_ws.ptx fa3_ws.cu
sed -i "s#\"$PWD/fa3_ws.cu\"#\"fa3_ws.cu\"#" fa3_ws.ptx  # the source's name only
# ... and its planted twins for the sanitizer's tests (gzip): no wait on the K-full barrier; setmaxnreg in 2 of 4 warps
for d in NO_WAIT_K SETMAXNREG; do
  nvcc -ptx -arch=sm_90a -lineinfo -DFA3_PLANT_$d -o fa3_ws_$d.ptx fa3_ws.cu
  sed -i "s#\"$PWD/fa3_ws.cu\"#\"fa3_ws.cu\"#" fa3_ws_$d.ptx && gzip -nf fa3_ws_$d.ptx
done
