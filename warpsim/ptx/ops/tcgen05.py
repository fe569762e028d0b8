"""The ``tcgen05`` family (Blackwell tensor cores and Tensor Memory): legality and execution.

:func:`check` decides whether ptxas 13.5 accepts a tcgen05 statement on a target at a PTX ISA
version, with the rules read from its verdicts (``tests/data/ptxas_truth_tcgen05.jsonl.gz``,
built by ``tools/ptxas_truth_tcgen05.py``); :data:`OPS` runs the statements on the machine:
Tensor Memory per CTA (:class:`TensorMemory`), alloc/dealloc/relinquish_alloc_permit, mma from
shared-memory descriptors or TMEM, commit, ld/st with wait, fence, cp and shift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS
from warpsim.facts.tcgen05 import (
    ALLOC_COLUMNS, CP_SHAPES, LDST_SHAPES, TMEM_COLUMNS, TMEM_LANES)
from warpsim.ptx.parser import Addr, Imm, Reg, Vec, parse_statement

# --------------------------------------------------------------------------------------------
# Targets  [ptxas 13.5, tests/data/ptxas_truth_tcgen05.jsonl.gz]
# --------------------------------------------------------------------------------------------

#: every tcgen05 statement ptxas accepts at all is accepted on these
ALL = frozenset({"sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_107a", "sm_107f", "sm_110a",
                 "sm_110f"})
#: the arch-specific ('a') targets only: tcgen05.shift, sparse block-scaled mma
A_ONLY = frozenset({"sm_100a", "sm_103a", "sm_107a", "sm_110a"})
#: kind::i8
I8 = frozenset({"sm_100a", "sm_110a"})
#: the scale-input-d operand (kind::f16 / tf32): not on sm_110
SCALE_D = ALL - {"sm_110a", "sm_110f"}

_KINDS = ("f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4")
_BLOCK_KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")
#: legal scale-vector spellings per block-scaled kind ('' = none written)
_SCALE_VECS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "mxf8f6f4": ("", "scale_vec::1X", "block32"),
    "mxf4": ("", "scale_vec::2X", "block32"),
    "mxf4nvf4": ("scale_vec::2X", "scale_vec::4X", "block16", "block32"),
})
_COLLECTOR_USES = ("fill", "use", "lastuse", "discard")


@dataclass(frozen=True)
class Tcgen05Statement:
    """A checked tcgen05 statement: operation, its qualifiers and operands."""

    op: str  # alloc, dealloc, relinquish_alloc_permit, mma, commit, ld, st, wait, fence, cp, shift
    quals: Mapping[str, object]
    operands: tuple
    text: str
    targets: frozenset = ALL


def _width(name: str) -> int | None:
    """Register width by PTX naming convention (None: unknown, unchecked)."""
    m = re.match(r"%(rd|fd|rs|r|f|h|p)\d*$", name)
    if not m:
        return None
    return {"rd": 64, "fd": 64, "rs": 16, "h": 16, "r": 32, "f": 32, "p": 1}[m.group(1)]


class _Ctx:
    def __init__(self, text: str, width: Callable[[str], int | None]) -> None:
        self.text, self.width = text, width

    def fail(self, why: str) -> PtxError:
        return PtxError(f"'{self.text}': {why}")

    def reg(self, o, bits: tuple[int, ...], what: str) -> None:
        if not isinstance(o, Reg):
            raise self.fail(f"{what} must be a register")
        w = self.width(o.name)
        if w is not None and w not in bits:
            raise self.fail(f"{what} must be a {'/'.join(map(str, bits))}-bit register; "
                            f"{o.name} is {w}-bit")

    def reg_or_imm(self, o, bits, what) -> None:
        if isinstance(o, Imm):
            if o.kind != "int":
                raise self.fail(f"{what} must be an integer")
            return
        self.reg(o, bits, what)

    def addr(self, o, bits: tuple[int, ...], what: str) -> None:
        if not isinstance(o, Addr) or o.base is None:
            raise self.fail(f"{what} must be a [register] address")
        w = self.width(o.base)
        if w is not None and w not in bits:
            raise self.fail(f"{what}: {o.base} is {w}-bit; the address must be "
                            f"{'/'.join(map(str, bits))}-bit")

    def pred(self, o, what) -> None:
        if isinstance(o, Imm) and o.kind == "int":
            return  # ptxas takes a constant too
        if not isinstance(o, Reg):
            raise self.fail(f"{what} must be a predicate")
        w = self.width(o.name)
        if w is not None and w != 1:
            raise self.fail(f"{what} must be a predicate; {o.name} is not")

    def count(self, ops, n, what) -> None:
        if len(ops) not in ((n,) if isinstance(n, int) else n):
            raise self.fail(f"{what} takes {n} operands; got {len(ops)}")


def _split_quals(words: list[str], c: _Ctx, groups: Mapping[str, tuple]) -> dict:
    """Each word into its group (at most once each); unknown words are errors."""
    out: dict = {}
    for w in words:
        g = next((g for g, toks in groups.items() if (toks(w) if callable(toks) else w in toks)),
                 None)
        if g is None:
            raise c.fail(f"qualifier .{w} is not legal here")
        if g in out:
            raise c.fail(f"two .{g} qualifiers (.{out[g]} and .{w})")
        out[g] = w
    return out


def _cta_group(q: dict, c: _Ctx) -> int:
    if "cta_group" not in q:
        raise c.fail(".cta_group::1 or .cta_group::2 is required")
    return int(q["cta_group"][-1])


_CG = ("cta_group::1", "cta_group::2")
_SYNC = {"sync": ("sync",), "aligned": ("aligned",)}


def _need(q: dict, c: _Ctx, *names: str) -> None:
    for n in names:
        if n not in q:
            raise c.fail(f".{n} is required")


def check(text: str, arch: str | None = None, ptx_version: tuple[int, int] | None = None, *,
          width: Callable[[str], int | None] | None = None) -> Tcgen05Statement:
    """Check one tcgen05 statement (with or without ';') as ptxas 13.5 does; returns it
    decoded, or raises PtxError naming what is wrong.  ``arch`` None accepts any target
    that has the statement; ``width(name)`` gives register widths (default: naming convention)."""
    st = parse_statement(text.strip().rstrip(";").strip())
    c = _Ctx(st.text, width or _width)
    if st.error:
        raise PtxError(st.error)
    words = st.opcode.split(".")
    if words[0] != "tcgen05" or len(words) < 2:
        raise c.fail("not a tcgen05 statement")
    head, rest = words[1], words[2:]
    fn = _CHECKS.get(head.split("::")[0])
    if fn is None:
        raise c.fail(f"unknown tcgen05 operation .{head}")
    op, quals, targets = fn(head, rest, list(st.operands), c)
    stmt = Tcgen05Statement(op, MappingProxyType(quals), st.operands, st.text, frozenset(targets))
    if arch is not None:
        a = ARCHS.get(arch)
        if a is None:
            raise PtxError(f"unknown architecture {arch!r}")
        if ptx_version is not None and ptx_version < a.since:
            raise c.fail(f".target {arch} needs PTX ISA {a.since[0]}.{a.since[1]}")
        if arch not in stmt.targets:
            raise c.fail(f"not supported on .target {arch}; targets: "
                         + ", ".join(sorted(stmt.targets)))
    return stmt


def _alloc(head, rest, ops, c):
    q = _split_quals(rest, c, {"cta_group": _CG, **_SYNC, "space": ("shared::cta",),
                               "type": ("b32",)})
    _cta_group(q, c)
    _need(q, c, "sync", "aligned", "type")
    if head == "alloc":
        c.count(ops, 2, "tcgen05.alloc")
        c.addr(ops[0], (32, 64), "the destination (shared memory)")
    else:
        if "space" in q:
            raise c.fail("dealloc takes no state space")
        c.count(ops, 2, "tcgen05.dealloc")
        c.reg(ops[0], (32,), "the TMEM address")
    n = ops[1]
    c.reg_or_imm(n, (32,), "the column count")
    if isinstance(n, Imm):
        v = int(n.value)
        if v <= 0 or v % 32 or v > TMEM_COLUMNS or v & (v - 1):
            raise c.fail(f"column count {v} must be a power of two in [32..512]")
    return head, q, ALL


def _relinquish(head, rest, ops, c):
    q = _split_quals(rest, c, {"cta_group": _CG, **_SYNC})
    _cta_group(q, c)
    _need(q, c, "sync", "aligned")
    c.count(ops, 0, "tcgen05.relinquish_alloc_permit")
    return head, q, ALL


def _fence(head, rest, ops, c):
    if head not in ("fence::before_thread_sync", "fence::after_thread_sync") or rest:
        raise c.fail("tcgen05.fence::before_thread_sync or ::after_thread_sync, nothing more")
    c.count(ops, 0, "tcgen05.fence")
    return "fence", {"order": head.split("::")[1]}, ALL


def _wait(head, rest, ops, c):
    if head not in ("wait::ld", "wait::st"):
        raise c.fail("tcgen05.wait::ld or tcgen05.wait::st")
    q = _split_quals(rest, c, _SYNC)
    _need(q, c, "sync", "aligned")
    c.count(ops, 0, "tcgen05.wait")
    return "wait", {**q, "what": head.split("::")[1]}, ALL


def _shift(head, rest, ops, c):
    q = _split_quals(rest, c, {"cta_group": _CG, "dir": ("down",)})
    _cta_group(q, c)
    _need(q, c, "dir")
    c.count(ops, 1, "tcgen05.shift")
    c.addr(ops[0], (32,), "the TMEM address")
    return head, q, A_ONLY


def _commit(head, rest, ops, c):
    q = _split_quals(rest, c, {"cta_group": _CG, "mbar": ("mbarrier::arrive::one",),
                               "space": ("shared::cluster",), "multicast": ("multicast::cluster",),
                               "type": ("b64",)})
    _cta_group(q, c)
    _need(q, c, "mbar", "type")
    c.count(ops, 2 if "multicast" in q else 1, "tcgen05.commit")
    c.addr(ops[0], (32, 64), "the mbarrier")
    if "multicast" in q:
        c.reg_or_imm(ops[1], (16,), "the CTA mask")
    return head, q, ALL


def _cp(head, rest, ops, c):
    q = _split_quals(rest, c, {"cta_group": _CG, "shape": tuple(CP_SHAPES),
                               "warp": ("warpx2::02_13", "warpx2::01_23", "warpx4"),
                               "dst": ("b8x16",), "src": ("b6x16_p32", "b4x16_p64")})
    _cta_group(q, c)
    _need(q, c, "shape")
    legal = tuple(x.lstrip(".") for x in CP_SHAPES[q["shape"]][2])
    if q.get("warp", "") not in legal:
        raise c.fail(f"shape .{q['shape']} takes " + (" or ".join(f".{x}" for x in legal if x)
                                                      or "no .warpx qualifier"))
    if ("dst" in q) != ("src" in q):
        raise c.fail("decompression is .b8x16.b6x16_p32 or .b8x16.b4x16_p64")
    c.count(ops, 2, "tcgen05.cp")
    c.addr(ops[0], (32,), "the TMEM address")
    c.reg(ops[1], (64,), "the shared-memory descriptor")
    return head, q, ALL


def _ldst(head, rest, ops, c):
    shapes = tuple(LDST_SHAPES)
    pk = "pack::16b" if head == "ld" else "unpack::16b"
    q = _split_quals(rest, c, {**_SYNC, "shape": shapes,
                               "num": lambda w: re.fullmatch(r"x\d+", w) is not None,
                               "pack": (pk,), "type": ("b32",)})
    _need(q, c, "sync", "aligned", "shape", "num", "type")
    sh = LDST_SHAPES[q["shape"]]
    num = int(q["num"][1:])
    if num not in (1, 2, 4, 8, 16, 32, 64, 128):
        raise c.fail(f"qualifier .{q['num']} is not legal (.x1 ... .x128, powers of two)")
    if num > sh.max_num:
        raise c.fail(f".{q['num']} is not legal with .{sh.name} (at most .x{sh.max_num})")
    split = sh.name == "16x32bx2"
    c.count(ops, 3 if split else 2, f"tcgen05.{head}.{sh.name}")
    vec, addr = (ops[0], ops[1]) if head == "ld" else (ops[-1], ops[0])
    c.addr(addr, (32,), "the TMEM address")
    if split:
        imm = ops[2] if head == "ld" else ops[1]
        if not isinstance(imm, Imm) or imm.kind != "int":
            raise c.fail("the half-split offset must be an integer constant")
    if not isinstance(vec, Vec):
        raise c.fail("the registers must be a {...} vector")
    n = sh.regs * num
    if len(vec.items) != n:
        raise c.fail(f".{sh.name}.x{num} moves {n} registers per thread; got {len(vec.items)}")
    for x in vec.items:
        c.reg(x, (32,), "each vector element")
    return head, {**q, "num": num}, ALL


def _mma(head, rest, ops, c):
    words = list(rest)
    sparse = ws = False
    if words and words[0] in ("sp", "ws"):
        first = words.pop(0)
        sparse, ws = first == "sp", first == "ws"
    groups = {"cta_group": _CG, "kind": tuple(f"kind::{k}" for k in _KINDS),
              "block_scale": ("block_scale",),
              "vec": ("scale_vec::1X", "scale_vec::2X", "scale_vec::4X", "block16", "block32"),
              "ashift": ("ashift",)}
    if not sparse:
        groups["sp"] = ("sp",)
    if ws:
        groups["collector"] = tuple(f"collector::b{i}::{u}" for i in range(4) for u in _COLLECTOR_USES)
    else:
        groups["collector"] = tuple(f"collector::a::{u}" for u in _COLLECTOR_USES)
    q = _split_quals(words, c, groups)
    sparse = sparse or "sp" in q
    cg = _cta_group(q, c)
    if "kind" not in q:
        raise c.fail(".kind is required")
    kind = q["kind"][6:]
    block = kind in _BLOCK_KINDS
    if block != ("block_scale" in q):
        raise c.fail(f".kind::{kind} {'needs' if block else 'cannot take'} .block_scale")
    if "vec" in q and not block:
        raise c.fail(f".{q['vec']} needs .block_scale")
    if block and q.get("vec", "") not in _SCALE_VECS[kind]:
        raise c.fail(f".kind::{kind} takes a scale vector of "
                     + ", ".join(f".{v}" if v else "none" for v in _SCALE_VECS[kind]))
    if ws and block:
        raise c.fail(".ws has no block-scaled kinds")
    if ws and cg != 1:
        raise c.fail(".ws is for cta_group::1 only")
    targets = set(I8 if kind == "i8" else ALL)
    if block and (q.get("vec", "").startswith("scale_vec") or
                  (sparse and kind in ("mxf4", "mxf4nvf4"))):
        targets &= A_ONLY  # the .scale_vec::NX spellings, sparse mxf4*: 'a' targets only
    # operands: [d], a, b, {[meta]}, idesc, ...
    c.addr(ops[0] if ops else None, (32,), "D (a TMEM address)")
    if len(ops) < 5:
        raise c.fail("operands: [d-tmem], a-desc | [a-tmem], b-desc, idesc, ...")
    a = ops[1]
    a_tmem = isinstance(a, Addr)
    if a_tmem:
        c.addr(a, (32,), "A in TMEM")
    else:
        c.reg(a, (64,), "the A descriptor")
    if "ashift" in q and not a_tmem:
        raise c.fail(".ashift needs A in Tensor Memory")
    c.reg(ops[2], (64,), "the B descriptor")
    i = 3
    if sparse:
        c.addr(ops[3], (32,), "the sparsity metadata (TMEM)")
        i = 4
    c.reg_or_imm(ops[i], (32,), "the instruction descriptor")
    tail = ops[i + 1:]
    if block:
        c.count(tail, 3, "the block-scale operands ([scale-A], [scale-B], enable-input-d)")
        c.addr(tail[0], (32,), "scale A (TMEM)")
        c.addr(tail[1], (32,), "scale B (TMEM)")
        c.pred(tail[2], "enable-input-d")
    elif ws:
        c.count(tail, (1, 2), ".ws operands (enable-input-d {, zero-column-mask-desc})")
        c.pred(tail[0], "enable-input-d")
        if len(tail) == 2:
            c.reg(tail[1], (64,), "the zero-column mask descriptor")
    else:
        if tail and isinstance(tail[0], Vec):
            lanes = 4 if cg == 1 else 8
            if len(tail[0].items) != lanes:
                raise c.fail(f"disable-output-lane has {lanes} registers with cta_group::{cg}")
            for x in tail[0].items:
                c.reg(x, (32,), "each disable-output-lane element")
            tail = tail[1:]
            if sparse and kind == "i8" and len(tail) == 2:
                raise c.fail("sparse kind::i8 takes disable-output-lane or scale-input-d, "
                             "not both")
        if not tail or len(tail) > 2:
            raise c.fail("enable-input-d (a predicate), then optionally scale-input-d")
        c.pred(tail[0], "enable-input-d")
        if len(tail) == 2:
            s = tail[1]
            if not isinstance(s, Imm) or s.kind != "int":
                raise c.fail("scale-input-d must be an integer constant")
            if kind not in ("f16", "tf32", "i8"):
                raise c.fail(f"scale-input-d is for .kind::f16 and .kind::tf32; not .kind::{kind}")
            if kind != "i8":
                if not 0 <= int(s.value) <= 15:
                    raise c.fail(f"scale-input-d {s.value} is out of range [0..15]")
                targets &= SCALE_D
    quals = dict(q, kind=kind, cta_group=cg, sparse=sparse, ws=ws, a_tmem=a_tmem)
    return "mma", quals, targets


_CHECKS: Mapping[str, Callable] = MappingProxyType({
    "alloc": _alloc, "dealloc": _alloc, "relinquish_alloc_permit": _relinquish, "fence": _fence,
    "wait": _wait, "shift": _shift, "commit": _commit, "cp": _cp, "ld": _ldst, "st": _ldst,
    "mma": _mma,
})
