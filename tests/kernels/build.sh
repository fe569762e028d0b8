#!/bin/sh
# Rebuild the suite's PTX from the CUDA sources (nvcc 13.0 was used for the committed files).
set -e
cd "$(dirname "$0")"
for f in *.cu sanitizer/*.cu; do
  nvcc -ptx -arch=sm_90 -o "${f%.cu}.ptx" "$f"
  ptxas -arch=sm_90 "${f%.cu}.ptx" -o /dev/null
done
