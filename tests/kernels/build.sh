#!/bin/sh
# Rebuild the suite's PTX from the CUDA sources (nvcc 13.0 was used for the committed files).
set -e
cd "$(dirname "$0")"
for f in *.cu; do
  nvcc -ptx -arch=sm_90 -o "${f%.cu}.ptx" "$f"
  ptxas -arch=sm_90 "${f%.cu}.ptx" -o /dev/null
done
# with -lineinfo (.file/.loc: findings, traces and the debugger name CUDA lines); the .file
# paths are made relative to the PTX's folder
here=$(pwd)
nvcc -ptx -arch=sm_90 -lineinfo -o sanitizer/sanitizer_cases.ptx sanitizer/sanitizer_cases.cu
nvcc -ptx -arch=sm_90 -lineinfo -o sanitizer/planted.ptx sanitizer/planted.cu
nvcc -ptx -arch=sm_90 -lineinfo -o debug/gemm_f16_lineinfo.ptx gemm_f16.cu
sed -i "s#\"$here/sanitizer/#\"#; s#\"$here/#\"../#" sanitizer/sanitizer_cases.ptx sanitizer/planted.ptx
sed -i "s#\"$here/#\"#" debug/gemm_f16_lineinfo.ptx
for f in sanitizer/sanitizer_cases.ptx sanitizer/planted.ptx debug/gemm_f16_lineinfo.ptx; do ptxas -arch=sm_90 "$f" -o /dev/null; done
