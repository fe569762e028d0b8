"""GPU validation harness: generate inputs, run every mma.sync form on a real GPU, compare.

``python -m warpsim.validation {collect,check,run,subset}``; see ``__main__.py``.
Modules: :mod:`.inputs` (deterministic register words), :mod:`.kernels` (CUDA source, build,
SASS), :mod:`.gpu` (CuPy runner), :mod:`.collect` (data collection), :mod:`.compare` (check
against the simulator and report).
"""

from warpsim.validation.inputs import DISTRIBUTIONS, distributions_for, make_inputs

__all__ = ["DISTRIBUTIONS", "distributions_for", "make_inputs"]
