"""The tensor-core layer: decode mma text once into an Instruction, fragment layouts, register
packing, sparse metadata, block scales, vector immediates and the per-architecture numerics."""
