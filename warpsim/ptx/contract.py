"""ptxas's floating-point contraction: which ``mul`` + ``add``/``sub`` pairs become one FMA.

PTX ``mul``/``add``/``sub`` written without a rounding modifier may be contracted by the
compiler (the ISA allows it; ``.rn`` forbids it), and ptxas does so: the GPU then rounds
``a * b + c`` once.  A kernel compiled by ptxas gives the GPU's bits only if the simulator
contracts the same pairs.  :func:`plan` finds them in a decoded program, :func:`apply` makes each
chosen ``add``/``sub`` compute the fused result (the producer keeps running as written; its
result is simply no longer read by the fused consumers).  A :class:`~warpsim.Module` applies
this by default (``contract=True``); ``Warp.run``/``execute`` stay literal.

The rule, as ptxas 13.0 and 13.5 apply it for sm_80, sm_89, sm_90a and sm_100a (read from the
SASS of the patterns in ``tests/data/ptxas_contraction.json``, ``tools/ptxas_contraction.py``):

* **Producers**: an unpredicated ``mul`` of f32, f64, f16, f16x2, bf16, bf16x2 with no rounding
  modifier and no ``.sat`` (``.ftz`` allowed); ``div.full.f32`` and ``div.approx.f32`` (their
  expansion ends in an FMUL of ``MUFU.RCP(b')`` and ``a'``), and ``rcp.approx.f32`` without
  ``.ftz`` (ends in ``FMUL s, MUFU.RCP(x * s)``).  ``rcp.approx.ftz``, ``sqrt``/``rsqrt``/
  ``ex2``/``lg2.approx`` and the ``.rn`` divisions are not.
* **Consumers**: ``add``/``sub`` of the same type with no rounding modifier, ``.ftz`` equal to
  the producer's, ``.sat`` allowed (FFMA.SAT), predicated or not, in the same basic block (a
  label no branch targets does not split a block; ``bar.sync`` does not).  ``mov`` copies and
  plain ``neg`` are looked through.
* A producer is contracted **into all its uses or none**: every use must be such a consumer
  reading it in exactly one operand; a use by anything else (a store, a ``mul``, ``setp``,
  ``t + t``), a use in another block, or a value live out of the block keeps it unfused.
  (So ptxas duplicates the product into several FFMAs: Triton's layer norm ``x_i - mean`` for
  8 elements becomes 8 FFMAs of ``div.full``'s operands.)
* An add of two contractible products fuses the one with **fewer uses**, the **first operand**
  on a tie; the other product then has a use that is not contracted, so it is fused nowhere.

Not modelled (left unfused, literal): a producer whose source register is rewritten before
one of its uses (ptxas works on values and would still fuse).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warpsim.ptx.parser import Imm, Pipe, Reg, Vec

__all__ = ["Fusion", "plan", "apply", "FLOAT_TYPES"]

#: Types whose mul/add ptxas contracts (bf16 forms need sm_90).
FLOAT_TYPES = ("f32", "f64", "f16", "f16x2", "bf16", "bf16x2")
_SIGN = {"f32": np.uint32(0x80000000), "f64": np.uint64(1 << 63), "f16": np.uint16(0x8000),
         "bf16": np.uint16(0x8000), "f16x2": np.uint32(0x80008000), "bf16x2": np.uint32(0x80008000)}
_PRODUCERS = {"mul", "div.full", "div.approx", "rcp.approx"}


@dataclass(frozen=True)
class Fusion:
    """The ``add``/``sub`` at ``consumer`` (instruction index) computes ``fma`` of producer
    ``producer``'s factors with its other operand: ``sign * product + sign_c * c``, one
    rounding, with the consumer's ``.ftz``/``.sat``; ``operand`` is the consumer source (0, 1)
    that held the product."""

    consumer: int
    producer: int
    operand: int
    product_sign: int
    addend_sign: int


def _is_producer(ins) -> bool:
    if ins.guard is not None or ins.key not in _PRODUCERS:
        return False
    if ins.key == "mul":
        return ins.type in FLOAT_TYPES and not ins.mods.get("rnd") and not ins.mods.get("sat")
    if ins.type != "f32":
        return False
    return ins.key != "rcp.approx" or not ins.mods.get("ftz")


def _consumes(ins, prod) -> bool:
    """``ins`` is an add/sub that may absorb producer ``prod``."""
    return (ins.key in ("add", "sub") and ins.type == prod.type and not ins.mods.get("rnd")
            and bool(ins.mods.get("ftz")) == bool(prod.mods.get("ftz")) and len(ins.operands) == 3)


def _names(op) -> list[str]:
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, (Vec, Pipe)):
        return [n for x in op.items for n in _names(x)]
    base = getattr(op, "base", None)
    return [base] if isinstance(base, str) else []


def _split(ins) -> tuple[list, list]:
    """(destination names, source operands) of ``ins``: ALU rows write their first slot; for
    other instructions every register named is treated as read and written (conservative)."""
    ops = list(ins.operands)
    if ins.spec.compile is None and ins.spec.ndst and ops:
        return _names(ops[0]), ops[1:]
    if ins.key == "mov" and len(ops) == 2 and isinstance(ops[0], Reg) and not ops[0].neg:
        return [ops[0].name], ops[1:]
    names = [n for o in ops for n in _names(o)]
    return names, ops


def _blocks(instrs) -> list[int]:
    """Block id of every instruction: a new block starts at a branch target and after a branch
    or exit."""
    n = len(instrs)
    lead = [False] * (n + 1)
    lead[0] = True
    for pc, ins in enumerate(instrs):
        if ins.kind in (1, 2):
            lead[pc + 1] = True
        if ins.kind == 1 and 0 <= ins.target <= n:
            lead[ins.target] = True
    out, b = [], -1
    for pc in range(n):
        b += lead[pc]
        out.append(b)
    return out


def plan(instrs) -> list[Fusion]:
    """The contractions ptxas makes in a decoded program (see the module docstring)."""
    n = len(instrs)
    if not any(i.key in _PRODUCERS for i in instrs):
        return []
    block = _blocks(instrs)
    reads: dict[str, list[int]] = {}
    for pc, ins in enumerate(instrs):
        _, srcs = _split(ins)
        names = [x for o in srcs for x in _names(o)]
        if ins.guard is not None:
            names.append(ins.guard[0])
        for x in names:
            reads.setdefault(x, []).append(pc)
    uses: dict[int, list] = {}      # producer -> [(consumer pc, operand, sign)]
    bad: set[int] = set()
    cur: dict[str, tuple[int, int]] = {}   # register -> (producer pc, sign) it holds now
    srcs_of: dict[str, list] = {}          # register -> producers reading it
    clobber: dict[int, int] = {}           # producer -> first pc rewriting one of its sources
    for pc, ins in enumerate(instrs):
        if pc and block[pc] != block[pc - 1]:
            _close(cur, reads, block, pc - 1, bad)
            cur = {}
        dsts, srcs = _split(ins)
        alias = None
        if ins.guard is None and len(srcs) == 1 and isinstance(srcs[0], Reg) \
                and srcs[0].name in cur and len(dsts) == 1 and (
                    ins.key == "mov" or ins.key == "neg" and not ins.mods.get("ftz")
                    and ins.type == instrs[cur[srcs[0].name][0]].type):
            p, s = cur[srcs[0].name]
            alias = (p, -s if ins.key == "neg" else s)
        else:
            if ins.guard is not None and ins.guard[0] in cur:
                bad.add(cur[ins.guard[0]][0])
            for k, o in enumerate(srcs):
                for x in _names(o):
                    if x not in cur:
                        continue
                    p, s = cur[x]
                    other = srcs[1 - k] if len(srcs) == 2 and k < 2 else None
                    twice = isinstance(other, Reg) and other.name in cur and cur[other.name][0] == p
                    if isinstance(o, Reg) and k < 2 and not twice and _consumes(ins, instrs[p]):
                        uses.setdefault(p, []).append((pc, k, s))
                    else:
                        bad.add(p)
        for d in dsts:
            cur.pop(d, None)
            for p in srcs_of.pop(d, ()):
                clobber.setdefault(p, pc)
        if alias is not None:
            cur[dsts[0]] = alias
        elif _is_producer(ins) and len(dsts) == 1:
            cur[dsts[0]] = (pc, 1)
            names = {x for o in srcs for x in _names(o)}
            for x in names:
                srcs_of.setdefault(x, []).append(pc)
            if dsts[0] in names:
                clobber[pc] = pc
    if n:
        _close(cur, reads, block, n - 1, bad)
    for p, at in clobber.items():   # a source rewritten before a use: kept literal
        if any(c > at for c, _, _ in uses.get(p, ())):
            bad.add(p)
    live = {p for p in uses if p not in bad}
    # an add of two contractible products: the one with fewer uses wins, then the first operand
    by_consumer: dict[int, list] = {}
    for p in live:
        for c, k, s in uses[p]:
            by_consumer.setdefault(c, []).append((len(uses[p]), k, p))
    changed = True
    while changed:
        changed = False
        for c, cands in sorted(by_consumer.items()):
            alive = sorted(x for x in cands if x[2] in live)
            for _, _, p in alive[1:]:
                live.discard(p)
                changed = True
    out = []
    for p in sorted(live):
        for c, k, s in uses[p]:
            ins = instrs[c]
            if ins.key == "sub" and k == 1:
                out.append(Fusion(c, p, k, -s, 1))
            elif ins.key == "sub":
                out.append(Fusion(c, p, k, s, -1))
            else:
                out.append(Fusion(c, p, k, s, 1))
    return sorted(out, key=lambda f: f.consumer)


def _close(cur: dict, reads: dict, block: list, last: int, bad: set) -> None:
    """End of a block: a product still held in a register read elsewhere escapes it."""
    b = block[last]
    for name, (p, _) in cur.items():
        if any(block[r] != b or r <= p for r in reads.get(name, ())):
            bad.add(p)


def apply(program, decoder, where=str, fusions: list[Fusion] | None = None) -> list[Fusion]:
    """Make every fused consumer of ``program`` compute its FMA (see :func:`plan`); returns the
    fusions, also kept as ``program.contractions``.  ``where(instr)``: how errors name an
    instruction (the decoder's ``where``)."""
    instrs = program.instrs
    fusions = plan(instrs) if fusions is None else fusions
    for f in fusions:
        _fuse(instrs[f.consumer], instrs[f.producer], f, decoder, where)
    program.contractions = fusions
    return fusions


def _fuse(ins, prod, f: Fusion, dec, where) -> None:
    from warpsim.ptx.alu import decode_form
    from warpsim.ptx.ops import approx

    t = ins.type
    form = "fma.rn" + (".ftz" if ins.mods.get("ftz") else "") + (".sat" if ins.mods.get("sat") else "") + "." + t
    spec, _, mods = decode_form(form)
    kw = dict(mods)
    kw["type"] = t

    def generic(*s):
        out = spec.fn(list(s), **kw)
        return out[0] if isinstance(out, tuple) else out
    fma = spec.specialize(t, mods, 3, generic) if spec.specialize is not None else None
    fma = fma or generic
    dec.where = where(prod)
    preads = [dec.reader(o, t) for o in prod.operands[1:]]
    dec.where = where(ins)
    c_read = dec.reader(ins.operands[2 - f.operand], t)
    w = dec.writer(ins.operands[0], t)
    sign = _SIGN[t]
    neg_p, neg_c = f.product_sign < 0, f.addend_sign < 0
    key, pftz = prod.key, bool(prod.mods.get("ftz"))
    if key == "mul":
        def factors(ctx):
            return preads[0](ctx), preads[1](ctx)
    elif key == "rcp.approx":
        def factors(ctx):
            return approx.rcp_factors(preads[0](ctx))
    else:
        full = key == "div.full"

        def factors(ctx):
            return approx.div_factors(preads[0](ctx), preads[1](ctx), full=full, ftz=pftz)

    def run(ctx, mask):
        a, b = factors(ctx)
        c = c_read(ctx)
        if neg_p:
            a = a ^ sign
        if neg_c:
            c = c ^ sign
        w(ctx, fma(a, b, c), mask)
    ins.exec = run
    ins.info["contracted"] = (prod.line, prod.text)
