"""Facts as data: targets and PTX versions, element formats, type tables, instruction forms.

No decoding and no execution here; every layer above reads these tables.
"""
