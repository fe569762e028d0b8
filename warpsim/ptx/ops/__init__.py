"""Instruction families, one module each (listed in :data:`warpsim.ptx.registry.FAMILIES`)."""
