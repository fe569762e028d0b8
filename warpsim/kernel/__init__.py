"""Whole kernels: modules and launches over grids, argument marshalling, tensor maps, the
one-warp Warp face, the sanitizer and the tracer."""
