"""PTX instruction families, one module each, every one exporting ``OPS`` (see ptx.registry)."""
