"""The tensor-core layer's public entry points: one name per operation, whatever the family.

``warpsim.layout`` and ``warpsim.matmul`` take ``mma.sync``/``mma.sp`` text or Instructions
(:mod:`warpsim.tensorcore.layouts`, :mod:`warpsim.tensorcore.execute`), ``wgmma.mma_async``
text (:mod:`warpsim.tensorcore.wgmma`) and ``tcgen05.mma`` forms (:mod:`warpsim.tensorcore.tcgen05`,
matmul only); the family is chosen here, once, from the opcode or object, so the modules below
never dispatch on text.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import ShapeError
from warpsim.facts.isa import Instruction
from warpsim.tensorcore import execute, layouts, tcgen05, wgmma


def _family(instr: object) -> str:
    if isinstance(instr, tcgen05.Tcgen05Mma):
        return "tcgen05"
    if isinstance(instr, str):
        head = instr.lstrip()
        if head.startswith("wgmma"):
            return "wgmma"
        if head.startswith("tcgen05."):
            return "tcgen05"
    return "mma"


def layout(instr: str | Instruction, operand: str, **selectors) -> np.ndarray:
    """Where each lane's fragment elements sit: see :func:`warpsim.tensorcore.layouts.layout`.
    ``wgmma.mma_async`` text: (128, elements, 2) over the warpgroup's threads
    (:func:`warpsim.tensorcore.wgmma.layout`; operands 'a' and 'd')."""
    if _family(instr) == "wgmma":
        if selectors:
            raise ShapeError(f"wgmma forms take no selectors; got {', '.join(selectors)}")
        return wgmma.layout(instr, operand)
    return layouts.layout(instr, operand, **selectors)


def matmul(instr: str | Instruction, A: object, B: object, C: object = None, *, arch: str = "auto",
           scale_A: object = None, scale_B: object = None, metadata: object = None,
           selector: int | None = None, **form) -> np.ndarray:
    """D = A @ B + C through one instruction: see :func:`warpsim.tensorcore.execute.matmul`.
    ``wgmma.mma_async`` text runs :func:`warpsim.tensorcore.wgmma.matmul` (A 64 x K, B K x N)
    on sm_90a unless ``arch`` says otherwise.  ``tcgen05.mma`` forms (an opcode such as
    ``'tcgen05.mma.cta_group::1.kind::f16'`` with ``shape=``, ``dtype=``, ``atype=`` or
    ``idesc=`` keywords, or a decoded :class:`~warpsim.tensorcore.tcgen05.Tcgen05Mma`) run
    :func:`warpsim.tensorcore.tcgen05.matmul` on sm_100a unless ``arch`` says otherwise."""
    family = _family(instr)
    if family == "tcgen05":
        given = [k for k, v in (("metadata", metadata), ("selector", selector)) if v is not None]
        if given:
            raise ShapeError(f"tcgen05 forms take no {', '.join(given)} here")
        return tcgen05.matmul(instr, A, B, C, arch="sm_100a" if arch == "auto" else arch,
                              scale_A=scale_A, scale_B=scale_B, **form)
    if form:
        raise TypeError(f"matmul() got unexpected keywords {sorted(form)}")
    if C is None:
        raise TypeError("matmul() needs C for mma.sync and wgmma forms")
    extra = dict(scale_A=scale_A, scale_B=scale_B, metadata=metadata, selector=selector)
    if family == "wgmma":
        given = [k for k, v in extra.items() if v is not None]
        if given:
            raise ShapeError(f"wgmma forms take no {', '.join(given)}")
        return wgmma.matmul(instr, A, B, C, arch="sm_90a" if arch == "auto" else arch)
    return execute.matmul(instr, A, B, C, arch=arch, **extra)
