"""Run generated mma.sync kernels on a real GPU through CuPy (imported lazily)."""

from __future__ import annotations

import subprocess

import numpy as np

from warpsim.facts.isa import Instruction

from warpsim.validation.kernels import THREADS_PER_BLOCK, kernel_name

POISONS = (0xA5A5A5A5A5A5A5A5, 0x5A5A5A5A5A5A5A5A)


def _cupy():
    try:
        import cupy  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "warpsim.validation needs CuPy and an NVIDIA GPU to run kernels "
            "(pip install cupy-cuda12x or cupy-cuda13x); 'check' needs neither"
        ) from e
    return cupy


class GpuRunner:
    """Loads a cubin once and runs one instruction's kernel on register words."""

    def __init__(self, cubin_path):
        cp = _cupy()
        self.cp = cp
        self.module = cp.RawModule(path=str(cubin_path))

    def run(self, instr: Instruction, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """D words (n, 32, regs_d): uint32, or uint64 for f64.

        The kernel runs twice, over outputs poisoned with two different patterns; the two
        results must agree (every word written, and the hardware deterministic).
        """
        cp = self.cp
        fn = self.module.get_function(kernel_name(instr))
        n = inputs["a"].shape[0]
        dev = {op: cp.asarray(np.ascontiguousarray(inputs[op])) for op in "abc"}
        d_dtype = np.uint64 if instr.register_bits("d") == 64 else np.uint32
        blocks = (n * 32 + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        results = []
        for poison in POISONS:
            d = cp.full((n, 32, instr.regs["d"]), d_dtype(poison & np.iinfo(d_dtype).max), dtype=d_dtype)
            fn((blocks,), (THREADS_PER_BLOCK,), (dev["a"], dev["b"], dev["c"], d, np.int32(n)))
            cp.cuda.Device().synchronize()
            results.append(cp.asnumpy(d))
        if not np.array_equal(results[0], results[1]):
            bad = int(np.count_nonzero(results[0] != results[1]))
            raise RuntimeError(f"{instr.text}: {bad} D words differ between two runs "
                               "(unwritten output or nondeterminism)")
        return results[0]


def device_info() -> dict:
    """GPU name, compute capability, driver and runtime versions, nvidia-smi and nvcc lines."""
    cp = _cupy()
    rt = cp.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props["name"]
    info = {
        "gpu": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "driver_version": rt.driverGetVersion(),
        "runtime_version": rt.runtimeGetVersion(),
        "cupy": cp.__version__,
    }
    for key, cmd in (("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,vbios_version,clocks.max.sm",
                                     "--format=csv,noheader"]),
                     ("nvcc", ["nvcc", "--version"])):
        try:
            info[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
        except Exception as e:  # pragma: no cover - best effort
            info[key] = f"unavailable: {e}"
    return info
