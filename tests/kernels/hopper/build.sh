#!/bin/sh
# Rebuild the Hopper async kernels' PTX (nvcc 13.0) and the cubin the device harness loads.
set -e
cd "$(dirname "$0")"
nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -o async_kernels.ptx async_kernels.cu
ptxas -arch=sm_90a async_kernels.ptx -o async_kernels.cubin
nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -o im2col_kernels.ptx im2col_kernels.cu
ptxas -arch=sm_90a im2col_kernels.ptx -o im2col_kernels.cubin
