"""The PTX machine: instructions beyond mma.sync, executed on a warp's registers.

Layers (one module per concept): ``optable`` holds the instruction set as data (one
:class:`~warpsim.ptx.optable.OpSpec` row per opcode); the ALU families (integer, floating point,
conversions, comparisons) are pure bit-level functions over NumPy arrays; the parser, register
state, memory, SIMT control and the warp-level families (data movement, shuffles, matrix loads,
mma) build on them.
"""
