"""Front-ends: run kernels written for other tools on warpsim (Triton, CuPy's RawKernel, CUDA source)."""
