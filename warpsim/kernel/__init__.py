"""Whole kernels: launching, arguments, tensor maps."""
