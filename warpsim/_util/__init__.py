"""Leaf helpers shared by every layer (allocator policy, batch chunking); import only errors."""
