"""Whole kernels: modules and launches over grids, argument marshalling, the one-warp Warp face,
the sanitizer and the tracer."""
