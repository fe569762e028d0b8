"""The ``tcgen05`` family (Blackwell tensor cores and Tensor Memory): legality and execution.

:func:`check` decides whether ptxas 13.5 accepts a tcgen05 statement on a target at a PTX ISA
version, with the rules read from its verdicts (``tests/data/ptxas_truth_tcgen05.jsonl.gz``,
built by ``tools/ptxas_truth_tcgen05.py``); :data:`OPS` runs the statements on the machine:
Tensor Memory per CTA (:class:`TensorMemory`), alloc/dealloc/relinquish_alloc_permit, mma from
shared-memory descriptors or TMEM, commit, ld/st with wait, fence, cp and shift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import ARCHS
from warpsim.facts.tcgen05 import (
    ALLOC_COLUMNS, CP_SHAPES, LDST_SHAPES, TMEM_COLUMNS, TMEM_LANES)
from warpsim.facts.tcgen05 import (
    ABS_LBO_ONLY, SF_DATAPATH, TMEM_HOLDER_SHIFT, scale_factor_cells)
from warpsim.ptx.optable import OpSpec
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


# ============================================================================================
# Execution: Tensor Memory and the tcgen05 operations
# ============================================================================================


class Tcgen05Error(PtxError):
    """A Tensor Memory misuse found while running (a sanitizer finding of kind ``tmem``):
    access outside every allocation or after dealloc, another warp's lane quarter, a
    ``tcgen05.ld`` result read before ``tcgen05.wait::ld``, a bad dealloc, an allocation that
    can never be satisfied, or columns still allocated at exit (:func:`leaks`)."""

    finding_kind = "tmem"


class TensorMemory:
    """The Tensor Memory of every CTA of a batch: ``data`` (*batch, 128 lanes, 512 columns) of
    32-bit cells, the columns each CTA holds (``allocs``: per CTA {first column: count}) and
    whether it gave up its allocation permit.  First-fit, aligned to the allocation size
    (the hardware's placement policy is not documented; programs use only the address
    tcgen05.alloc writes)."""

    def __init__(self, batch: tuple[int, ...]) -> None:
        self.batch = tuple(batch)
        self.data = np.zeros(self.batch + (TMEM_LANES, TMEM_COLUMNS), np.uint32)
        n = int(np.prod(self.batch, dtype=np.int64))
        self.allocs: list[dict[int, int]] = [{} for _ in range(n)]
        self.relinquished = np.zeros(n, bool)
        self.commits = np.zeros(n, np.int64)  # tcgen05.commit arrivals made
        # mma results in flight (sanitizer): the mma that last wrote each cell (0: none), the
        # mmas each (CTA row, warp) issued and has not committed, the mmas each barrier phase
        # (row, offset, parity at the arrive) will report, and those still in flight
        self.tracking = False
        self.writer: np.ndarray | None = None
        self.op_text: dict[int, str] = {}
        self.uncommitted: dict[tuple[int, int], list[int]] = {}
        self.on_phase: dict[tuple[int, int, int], list[int]] = {}
        self.inflight: set[int] = set()

    # -- mma results in flight until a wait observes their commit's phase (sanitizer) -----
    def issued(self, cta: int, warp: int, rows, lanes, cols, text: str, where: str) -> None:
        """An mma of (CTA row ``cta``, ``warp``) wrote cells (rows, lanes, cols): in flight."""
        if not self.tracking:
            return
        if self.writer is None:
            self.writer = np.zeros(self.data.shape, np.int32)
        op = len(self.op_text) + 1
        self.op_text[op] = f"{where}: {text}"
        self.writer[rows, lanes, cols] = op
        self.inflight.add(op)
        self.uncommitted.setdefault((cta, warp), []).append(op)

    def committed(self, cta: int, warp: int, barriers) -> None:
        """tcgen05.commit by (cta, warp): its mmas complete with the phases ``barriers``
        ((row, offset, parity before the arrive) each) that they arrive on."""
        ops = self.uncommitted.pop((cta, warp), [])
        if ops:
            for key in barriers:
                self.on_phase.setdefault(key, []).extend(ops)

    def observed(self, rows, offs, parities) -> None:
        """A wait saw the phase of parity p of barrier (row, offset) complete."""
        if not self.on_phase:
            return
        keys = np.unique(np.stack([np.asarray(x, np.int64).reshape(-1)
                                   for x in (rows, offs, parities)], 1), axis=0)
        for key in map(tuple, keys.tolist()):
            for op in self.on_phase.pop(key, ()):
                self.inflight.discard(op)

    def check_complete(self, cta: int, lanes, cols, where: str) -> None:
        """A tcgen05.ld of cells whose mma no wait has yet seen complete: a finding."""
        if self.writer is None or not self.inflight:
            return
        ids = np.unique(self.writer[cta, lanes, cols])
        bad = [int(i) for i in ids if int(i) in self.inflight]
        if bad:
            raise Tcgen05Error(
                f"{where}: tcgen05.ld reads Tensor Memory that an mma ({self.op_text[bad[0]]}) is still "
                "writing: no thread has yet seen the mbarrier phase its tcgen05.commit arrives on "
                "complete (wait on that mbarrier before reading the result)")

    def allocated(self, cta: int) -> np.ndarray:
        """Boolean (512,) of the columns CTA ``cta`` (flat index) holds."""
        cols = np.zeros(TMEM_COLUMNS, bool)
        for c, n in self.allocs[cta].items():
            cols[c:c + n] = True
        return cols

    def alloc(self, cta: int, ncols: int, where: str) -> int:
        if ncols not in ALLOC_COLUMNS:
            raise Tcgen05Error(f"{where}: tcgen05.alloc of {ncols} columns; legal: "
                               f"{', '.join(map(str, ALLOC_COLUMNS))}")
        if self.relinquished[cta]:
            raise Tcgen05Error(f"{where}: tcgen05.alloc after tcgen05.relinquish_alloc_permit")
        used = self.allocated(cta)
        for c in range(0, TMEM_COLUMNS, ncols):
            if not used[c:c + ncols].any():
                self.allocs[cta][c] = ncols
                return c
        raise Tcgen05Error(f"{where}: tcgen05.alloc of {ncols} columns blocks forever: this CTA "
                           f"already holds {int(used.sum())} of {TMEM_COLUMNS} columns")

    def dealloc(self, cta: int, col: int, lane: int, ncols: int, where: str) -> None:
        if lane != 0 or self.allocs[cta].get(col) != ncols:
            held = ", ".join(f"columns {c}..{c + n - 1}" for c, n in sorted(self.allocs[cta].items()))
            raise Tcgen05Error(f"{where}: tcgen05.dealloc of {ncols} columns at lane {lane}, "
                               f"column {col} frees no allocation (held: {held or 'none'})")
        del self.allocs[cta][col]

    def check_access(self, cta: int, lanes: np.ndarray, cols: np.ndarray, where: str) -> None:
        """Every (lane, column) inside TMEM and inside an allocation of this CTA."""
        if (lanes >= TMEM_LANES).any() or (cols >= TMEM_COLUMNS).any() or (lanes < 0).any():
            raise Tcgen05Error(f"{where}: Tensor Memory access outside {TMEM_LANES} lanes x "
                               f"{TMEM_COLUMNS} columns (lane up to {int(lanes.max())}, column up "
                               f"to {int(cols.max())})")
        ok = self.allocated(cta)[cols]
        if not ok.all():
            bad = int(np.asarray(cols)[~ok].ravel()[0])
            raise Tcgen05Error(f"{where}: Tensor Memory column {bad} is not allocated by this CTA "
                               "(use outside the allocation, or after tcgen05.dealloc)")


def leaks(tmem: TensorMemory) -> list[tuple[int, int, int]]:
    """(CTA index in the batch, first column, count) of every allocation still held: at kernel
    exit each is a ``tmem`` finding (all Tensor Memory must be freed before a CTA exits)."""
    return [(i, c, n) for i, a in enumerate(tmem.allocs) for c, n in sorted(a.items())]


def _block(ctx):
    from warpsim.ptx.cluster import block
    return block(ctx, "tcgen05")


def tmem_of(ctx) -> TensorMemory:
    """The TensorMemory of the CTAs of ``ctx``'s batch (one per shared-memory row, shared by
    the warps of the batch), kept with the batch's :class:`~warpsim.ptx.cluster.Block`."""
    tm = ctx.spaces.get("tmem")
    if tm is None:
        blk = _block(ctx)
        tm = getattr(blk, "tcgen05_tmem", None)
        if tm is None:
            tm = blk.tcgen05_tmem = TensorMemory((_smem_data(ctx).shape[0],))
            tm.tracking = bool(getattr(blk, "checking", True))
            if tm.tracking:
                blk.on_phase_observed = tm.observed  # called by the mbarrier waits
        ctx.spaces["tmem"] = tm
    return tm


def _smem_data(ctx) -> np.ndarray:
    """(rows, bytes) shared memory of the batch's CTAs."""
    d = _block(ctx).smem.data
    return d.reshape(-1, d.shape[-1])


def _rows(ctx) -> np.ndarray:
    """Shared-memory (and TMEM) row of each CTA of ``ctx``'s batch, flat."""
    return np.asarray(_block(ctx).rows(ctx)).reshape(-1)


def _full(ctx, mask) -> np.ndarray:
    return np.ones(ctx.shape, bool) if mask is None else np.broadcast_to(mask, ctx.shape)


def _warp_in_cta(ctx) -> int:
    info = getattr(ctx, "launch_info", None)
    return int(info[0]) if info is not None else 0


def _flat_batch(ctx) -> int:
    return int(np.prod(ctx.batch, dtype=np.int64))


def _uniform(vals: np.ndarray, mask: np.ndarray, what: str, where: str) -> np.ndarray:
    """(nb,) per-warp value of a warp-uniform operand (the first active lane's); the active
    lanes must agree."""
    v = np.broadcast_to(vals, mask.shape).reshape(-1, 32)
    m = mask.reshape(-1, 32)
    first = np.argmax(m, axis=1)
    pick = v[np.arange(v.shape[0]), first]
    if ((v != pick[:, None]) & m).any():
        raise PtxError(f"{where}: {what} differs between the lanes of a warp (it must be uniform)")
    return pick


class _LdWatched(dict):
    """A register file that flags uses of tcgen05.ld destinations before tcgen05.wait::ld.

    ``pending``: name -> the tcgen05.ld text, for registers loaded and not yet waited for.  A
    plain register copy (``mov``: the very array written again) passes the pending state on, as
    ptxas treats such copies (nvcc emits one after every tcgen05.ld of CuTe's copy atoms); any
    other use is a finding, raised when the using instruction writes its result (or at the next
    register access)."""

    __slots__ = ("pending", "ids", "reads")

    def __init__(self, regs):
        super().__init__(regs)
        self.pending: dict = {}
        self.ids: dict = {}  # id of a pending register's array -> its name
        self.reads: list = []  # pending registers read and not yet passed on by a copy

    def _flush(self):
        if self.reads:
            name = self.reads[0]
            self.reads = []
            raise Tcgen05Error(f"register {name} is used before tcgen05.wait::ld: the tcgen05.ld "
                               f"that loads it ({self.pending.get(name, '?')}) is asynchronous")

    def get(self, name, default=None):
        self._flush()
        v = dict.get(self, name, default)
        if name in self.pending:
            self.reads.append(name)
        return v

    def __setitem__(self, name, value):
        src = self.ids.get(id(value))
        if src is not None and self.reads and self.reads[-1] == src:
            self.reads.pop()  # a copy: the destination is pending too
            self.pending[name] = self.pending[src]
            self.ids[id(value)] = src
        self._flush()
        if src is None and name in self.pending:
            del self.pending[name]  # overwritten by a value of its own
        dict.__setitem__(self, name, value)

    def load(self, names, text):
        """tcgen05.ld wrote ``names`` (their arrays are in the file)."""
        self._flush()
        for n in names:
            self.pending[n] = text
            self.ids[id(dict.get(self, n))] = n

    def release(self):
        """tcgen05.wait::ld: every pending register holds its value."""
        self._flush()
        self.pending.clear()
        self.ids.clear()


def _watch(ctx) -> _LdWatched | None:
    if not getattr(_block(ctx), "checking", True):
        return None  # a launch without the sanitizer (check=False)
    if isinstance(ctx.regs, _LdWatched):
        return ctx.regs
    if type(ctx.regs) is dict:
        ctx.regs = _LdWatched(ctx.regs)
        return ctx.regs
    return None  # another watcher (wgmma) owns the register file: no ld/wait check


def _opspec(key: str, compile_fn, aligned: bool, doc: str) -> OpSpec:
    return OpSpec(key, (), None, 0, ndst=0, compile=compile_fn, aligned=aligned, doc=doc)


def _checked(ins, dec) -> Tcgen05Statement:
    arch = None if dec.arch in ("auto", "exact", None) else dec.arch
    return check(ins.text, arch, width=dec.reg_width)


def _compile_alloc(ins, dec):
    st = _checked(ins, dec)
    where = dec.where
    ops = st.operands
    if st.op == "alloc":
        dst = dec.address(ops[0])
    else:
        taddr = dec.reader(ops[0], "b32")
    ncols = dec.reader(ops[1], "b32")

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        rows = _rows(ctx)
        n = _uniform(ncols(ctx), mask, "the column count", where)
        if st.op == "alloc":
            a = _uniform(dst(ctx), mask, "the destination address", where)
            out = np.zeros(mask.reshape(-1, 32).shape[0], np.uint32)
            for b in np.flatnonzero(mask.reshape(-1, 32).any(axis=1)):
                out[b] = tm.alloc(int(rows[b]), int(n[b]), where)  # lane 0, the first column
            first = np.zeros_like(mask)
            first.reshape(-1, 32)[np.arange(first.reshape(-1, 32).shape[0]),
                                  np.argmax(mask.reshape(-1, 32), axis=1)] = True
            first &= mask
            data = np.broadcast_to(out.reshape(ctx.batch + (1,)), ctx.shape)
            addr = np.broadcast_to(a.reshape(ctx.batch + (1,)), ctx.shape)
            ctx.space("shared", where).store(addr, data.astype("<u4").view(np.uint8).reshape(ctx.shape + (4,)),
                                             first, where, 4)
        else:
            t = _uniform(taddr(ctx), mask, "the TMEM address", where)
            for b in np.flatnonzero(mask.reshape(-1, 32).any(axis=1)):
                tm.dealloc(int(rows[b]), int(t[b]) & 0xFFFF, int(t[b]) >> 16, int(n[b]), where)
    return run


def _compile_relinquish(ins, dec):
    _checked(ins, dec)

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        tm.relinquished[_rows(ctx)[mask.reshape(-1, 32).any(axis=1)]] = True
    return run


def _compile_nop(ins, dec):
    st = _checked(ins, dec)
    where = dec.where

    def run(ctx, mask):
        mask = _full(ctx, mask)
        if st.op == "wait" and st.quals["what"] == "ld":
            if isinstance(ctx.regs, _LdWatched):
                ctx.regs.release()
        # wait::st and the fences order asynchronous work that this model completes at issue
    run.where = where
    return run


def _ldst_map(shape: str, num: int, split: int) -> tuple[np.ndarray, np.ndarray]:
    """(32, regs) lane and column offsets of every thread's registers for ``shape``.``xnum``
    (unpacked: one 32-bit column per register).  [CuTe copy_traits_sm100 DstLayouts]"""
    t = np.arange(32)[:, None]
    sh = LDST_SHAPES[shape]
    if shape == "32x32b":
        lane, col, step = t + 0 * np.arange(1), 0 * t + np.zeros(1, int), 1
    elif shape == "16x64b":
        lane, col, step = 8 * (t & 1) + (t >> 2), (t >> 1) & 1, 2
    elif shape == "16x128b":
        j = np.arange(2)[None, :]
        lane, col, step = (t >> 2) + 8 * j, (t & 3) + 0 * j, 4
    elif shape == "16x256b":
        j = np.arange(4)[None, :]
        lane, col, step = (t >> 2) + 8 * (j >> 1), 2 * (t & 3) + (j & 1), 8
    else:  # 16x32bx2: threads 16..31 reach the same lanes at the half-split column offset
        lane, col, step = t & 15, np.where(t >= 16, split, 0), 1
    lane = np.broadcast_to(lane, (32, sh.regs))
    col = np.broadcast_to(col, (32, sh.regs))
    reps = np.arange(num)
    lanes = np.concatenate([lane] * num, axis=1)
    cols = np.concatenate([col + step * r for r in reps], axis=1)
    return lanes, cols


def _tmem_base(ctx, taddr, mask, where, lanes_needed: np.ndarray, shape_lanes: int):
    """Per warp (nb,) lane and column of a uniform TMEM address, with the lane-quarter rule."""
    t = _uniform(taddr(ctx), mask, "the TMEM address", where).astype(np.int64)
    lane0, col0 = t >> 16, t & 0xFFFF
    q = _warp_in_cta(ctx) % 4
    lo, hi = 32 * q, 32 * q + 32
    active = mask.reshape(-1, 32).any(axis=1)
    bad = active & ((lane0 < lo) | (lane0 + lanes_needed.max() >= hi))
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        raise Tcgen05Error(f"{where}: warp {_warp_in_cta(ctx)} reaches only TMEM lanes {lo}..{hi - 1} "
                           f"(its lane quarter); this access starts at lane {int(lane0[b])} and "
                           f"spans {shape_lanes} lanes")
    return lane0, col0, active


def _compile_ldst(ins, dec):
    st = _checked(ins, dec)
    where = dec.where
    q = st.quals
    shape, num, pack = q["shape"], q["num"], "pack" in q
    ops = st.operands
    split = 0
    if shape == "16x32bx2":
        split = int((ops[2] if st.op == "ld" else ops[1]).value)
    vec, aop = (ops[0], ops[1]) if st.op == "ld" else (ops[-1], ops[0])
    taddr = dec.address(aop)
    lanes, cols = _ldst_map(shape, num, split)
    if pack:  # each register: two 16-bit values from adjacent columns (low half of each)
        cols = np.stack([2 * cols, 2 * cols + 1], -1)  # [INF] the column space doubles
    nl = LDST_SHAPES[shape].lanes
    if st.op == "ld":
        writers = [dec.writer(x, "b32") for x in vec.items]
        names = [x.name for x in vec.items]
    else:
        readers = [dec.reader(x, "b32") for x in vec.items]

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        lane0, col0, active = _tmem_base(ctx, taddr, mask, where, lanes, nl)
        nb = lane0.shape[0]
        L = lane0[:, None, None] + lanes[None]  # (nb, 32, regs)
        C = col0[:, None, None, None] + (cols if pack else cols[..., None])[None]  # (nb,32,regs,1|2)
        data = tm.data
        rows = _rows(ctx)
        for b in np.flatnonzero(active):
            tm.check_access(int(rows[b]), L[b], C[b], where)
            if st.op == "ld":
                tm.check_complete(int(rows[b]), L[b], C[b], where)
        bi = rows[:, None, None, None]
        Lc = np.clip(L, 0, TMEM_LANES - 1)[..., None]
        Cc = np.clip(C, 0, TMEM_COLUMNS - 1)
        if st.op == "ld":
            cells = data[bi, Lc, Cc]  # (nb, 32, regs, 1|2)
            words = (cells[..., 0] & 0xFFFF) | (cells[..., 1] << 16) if pack else cells[..., 0]
            words = words.reshape(ctx.shape + (words.shape[-1],))
            w = _watch(ctx)
            for i, wr in enumerate(writers):
                if wr is not None:
                    wr(ctx, np.ascontiguousarray(words[..., i], dtype=np.uint32), mask)
            if w is not None:
                w.load(names, st.text)
        else:
            regs = np.stack([np.broadcast_to(r(ctx), ctx.shape) for r in readers], -1)
            regs = regs.reshape(nb, 32, -1).astype(np.uint32)
            m = (mask.reshape(nb, 32) & active[:, None])[..., None]
            if pack:
                vals = np.stack([regs & 0xFFFF, regs >> 16], -1)
            else:
                vals = regs[..., None]
            sel = np.broadcast_to(m[..., None], vals.shape)
            bsel = np.broadcast_to(bi, vals.shape)[sel]
            data[bsel, np.broadcast_to(Lc, vals.shape)[sel], Cc[sel]] = vals[sel]
    return run


_ELEM_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
              "e2m3": 6, "e3m2": 6, "e2m1": 4}


def d_map(m: int, n: int, cta_group: int = 1, ws: bool = False):
    """(peer, lane, column) offsets of every element (m, n) of D, each (M, N): which CTA of the
    pair (0: the even one), which TMEM lane and which 32-bit column from the D address.
    [CuTe ``tmem_frg_1sm`` / ``tmem_frg_2sm`` (Interleaved) / ``tmem_frg_ws`` atoms; ISA data-path
    layouts; that the even CTA holds the first half of M follows CuTe's CLayout]"""
    r = np.arange(m)[:, None] + 0 * np.arange(n)[None, :]
    c = np.arange(n)[None, :] + 0 * r
    ml = m // cta_group  # rows held by each CTA
    peer, rl = r // ml, r % ml
    if ml == 128:
        return peer, rl, c
    if ml == 64 and cta_group == 1 and not ws:  # half data path: 16 lanes of each quarter
        return peer, 32 * (rl // 16) + rl % 16, c
    if ml in (64, 32) and (ws or cta_group == 2):  # N split over 128 / ml lane groups
        g = 128 // ml
        return peer, rl + ml * (c // (n // g)), c % (n // g)
    raise PtxError(f"tcgen05.mma with M={m}, cta_group::{cta_group}{' .ws' if ws else ''} has no "
                   "Tensor Memory layout")


def _d_lanes(m: int, ws: bool) -> np.ndarray:
    """TMEM lane offset of each row of D, cta_group::1, N-independent layouts only."""
    return d_map(m, 1, 1, ws)[1][:, 0]


def _a_tmem_map(m: int, cta_group: int, ws: bool):
    """(peer, lane) of each row of A when A is in Tensor Memory.  [CuTe ``FrgTypeA``:
    tmem_frg_1sm NonInterleaved, tmem_frg_2sm Duplicated (M=128: the 64 rows of each CTA in
    lanes 0..63, duplicated at 64..127); INF that the data path reads its own lane]"""
    ml = m // cta_group
    r = np.arange(m)
    if ml == 128 or (ml == 64 and cta_group == 2):
        return r // ml, r % ml
    if ml == 64 and not ws:
        return r // ml, _d_lanes(64, False)
    raise PtxError(f"tcgen05.mma with A in Tensor Memory and M={m}"
                   f"{' .ws' if ws else ''} is not modelled")


def _unpack16(raw: np.ndarray, bits: int) -> np.ndarray:
    """(..., 16) bytes of one packed 16-element chunk -> (..., 16) element codes: element i at
    bits [bits*i, bits*i + bits) little-endian, the rest of the 16 bytes padding.  [ISA
    .b6x16_p32 / .b4x16_p64; the element order as warpsim's ldmatrix decompression]"""
    b = np.unpackbits(raw.astype(np.uint8), axis=-1, bitorder="little")[..., :16 * bits]
    b = b.reshape(raw.shape[:-1] + (16, bits))
    return np.packbits(b, axis=-1, bitorder="little")[..., 0]


def _smem_tile(data: np.ndarray, desc_word: int, rows: int, k: int, ebits: int, major: str,
               where: str, what: str, packing: str = "") -> np.ndarray:
    """Element codes (rows, k) an sm_100 descriptor names in one CTA's shared memory bytes.

    ``packing`` for 4/6-bit types: 'padded' (kind::f8f6f4 / mxf8f6f4: 16 elements per 16-byte
    chunk, 8 or 4 bytes of padding), 'packed' (kind::mxf4*: two e2m1 per byte)."""
    from warpsim.facts.swizzle import swizzle
    from warpsim.tensorcore.desc import linear_addresses
    from warpsim.tensorcore.tcgen05 import decode_smem_desc

    d = decode_smem_desc(desc_word)
    if ebits < 8 and major != "K":
        raise PtxError(f"{where}: {what} of {ebits}-bit elements must be K-major")
    if ebits < 8:  # address the bytes that hold them as an 8-bit tile
        kb = k // 2 if packing == "packed" else k
        codes = _smem_tile(data, desc_word, rows, kb, 8, "K", where, what)
        if packing == "packed":
            lo, hi = codes & 0xF, codes >> 4
            return np.stack([lo, hi], -1).reshape(rows, k)
        raw = codes.astype(np.uint8).reshape(rows, k // 16, 16)
        return _unpack16(raw, ebits).reshape(rows, k).astype(np.uint64)
    esz = ebits // 8
    if d.lbo_mode:  # LBO is the absolute address of the next K buffer (48-byte K tiles)
        got = dict(layout=d.layout, major=major, base_offset=d.base_offset)
        if got != dict(ABS_LBO_ONLY):
            raise PtxError(f"{where}: the {what} descriptor uses the absolute-LBO mode (bit 52) with "
                           f"{', '.join(f'{k_}={v_}' for k_, v_ in got.items())}; the PTX ISA allows it "
                           "only for K-major operands in the 128B swizzle with base offset 0")
        # [ISA "Absolute address mode for K dimension being 48B": the K data is split into two
        # chunks, each inside its aligned 128-byte row, LBO holding the second chunk's address;
        # CuTe's SM103 mma_unpack sets LBO to the next K block's start]: the bytes of a row past
        # the end of its 128-byte swizzle row continue at the same row of the buffer at LBO, from
        # its K byte 0 [INF: the row and swizzle of the second chunk are the first's]
        mn = np.arange(rows)[:, None]
        k0 = d.start % 128
        pos = k0 + (np.arange(k) * esz)[None, :]
        row = (mn % 8) * 128 + (mn // 8) * d.sbo
        lin = np.where(pos < 128, d.start - k0 + row + pos, d.lbo + row + pos - 128)
        addr = swizzle(lin, "128B")
    elif d.layout == "128B_base32B":
        if major != "MN":
            raise PtxError(f"{where}: the {what} descriptor's 128B/32B-atom swizzle is for MN-major "
                           "operands only (CuTe make_umma_desc)")
        # [CuTe] ((32 B-units x 8, n), (4, k)) : ((1, LBO), (128 B, SBO)), then Swizzle<2,5,2>
        per = 128 // esz
        mn = np.arange(rows)[:, None]
        kk = np.arange(k)[None, :]
        lin = d.start + (mn % per) * esz + (mn // per) * d.lbo + (kk % 4) * 128 + (kk // 4) * d.sbo
        addr = _swizzle_base32b(lin)
    else:
        lin = linear_addresses(d.start, d.lbo, d.sbo, d.layout, rows=rows, k=k, elem_bits=ebits,
                               major=major)
        addr = swizzle(lin, d.layout, d.base_offset if d.layout != "none" else 0)
    addr = np.asarray(addr).astype(np.int64)
    if (addr < 0).any() or (addr + esz > data.shape[-1]).any():
        raise Tcgen05Error(f"{where}: the {what} descriptor (start {d.start:#x}, LBO {d.lbo:#x}, "
                           f"SBO {d.sbo:#x}) reaches outside the {data.shape[-1]} bytes of shared memory")
    out = np.zeros(addr.shape, np.uint64)
    for i in range(esz):
        out |= data[addr + i].astype(np.uint64) << np.uint64(8 * i)
    return out


def _swizzle_base32b(lin: np.ndarray) -> np.ndarray:
    """The 128-byte swizzle with 32-byte atoms (descriptor layout 1): the 32-byte granule index
    (address bits 6:5) XORed with bits 8:7.  [CuTe ``Swizzle<2,5,2>``, Layout_MN_SW128_32B_Atom]"""
    a = np.asarray(lin, np.int64)
    return a ^ (((a >> 7) & 3) << 5)


def _peers(rows: np.ndarray, b: int, cta_group: int, blk, where: str) -> list[int]:
    """The TMEM/shared rows an mma of CTA row ``rows[b]`` works on: itself, or (cta_group::2)
    the even then the odd CTA of its pair (cluster ranks differing in bit 0).  [ISA]"""
    r = int(rows[b])
    if cta_group == 1:
        return [r]
    if blk.size < 2 or blk.size % 2:
        raise PtxError(f"{where}: .cta_group::2 needs a cluster of an even number of CTAs (a CTA pair); "
                       f"the cluster has {blk.size}")
    base = r - r % blk.size
    even = base + ((r - base) & ~1)
    return [even, even + 1]


def _sparse_nibbles(tm, tdata, peers, mi, ml: int, taddr: int, d_lane: int, where: str) -> np.ndarray:
    """The metadata nibbles (copies, M, chunks) of a sparse mma, read from each CTA's Tensor
    Memory at ``taddr`` (each CTA of a pair holds its own rows' metadata at the same address, as
    JAX Mosaic GPU's collective sparse test allocates it [INF]).  Layout:
    warpsim.tensorcore.tcgen05.sparse_meta_cells (facts.tcgen05 SPARSE_META_LAYOUTS)."""
    from warpsim.facts.tcgen05 import SPARSE_META_LAYOUTS
    from warpsim.tensorcore.tcgen05 import sparse_meta_cells

    try:
        L, C, B = sparse_meta_cells(mi)
    except PtxError as e:
        raise PtxError(f"{where}: {e}") from None
    lane0 = taddr >> 16
    if SPARSE_META_LAYOUTS[(ml, mi.cta_group, bool(mi.ws))].group_stride == 32 and lane0 % 32 != d_lane % 32:
        # [ISA "Data Path Layout Organization": layouts F and C must use the same lane alignment
        # for A, D and the metadata; the Triton port saw a misaligned-address fault otherwise]
        raise Tcgen05Error(f"{where}: sparse tcgen05.mma M={mi.m} (half data path, layout F): the "
                           f"metadata at lane {lane0} and D at lane {d_lane} must have the same lane "
                           "alignment (0 or 16 within 32 lanes)")
    L, C = lane0 + L, (taddr & 0xFFFF) + C
    rows = []
    for r in peers:
        tm.check_access(r, L, C, where)
        rows.append((tdata[r, L, C] >> B.astype(np.uint32)) & 0xF)
    return np.concatenate(rows, axis=1).astype(np.int64)


def _compile_mma(ins, dec):
    from warpsim.tensorcore import tcgen05 as T

    st = _checked(ins, dec)
    q = st.quals
    where = dec.where
    cg, ws, kind = q["cta_group"], q["ws"], q["kind"]
    block = kind in _BLOCK_KINDS
    sparse = q["sparse"]
    opcode = (f"tcgen05.mma{'.sp' if sparse else ''}{'.ws' if ws else ''}.cta_group::{cg}.kind::{kind}"
              + (".block_scale" + (f".{q['vec']}" if q.get("vec") else "") if block else ""))
    ops = st.operands
    d_addr = dec.address(ops[0])
    a_tmem = q["a_tmem"]
    a_op = dec.address(ops[1]) if a_tmem else dec.reader(ops[1], "b64")
    b_op = dec.reader(ops[2], "b64")
    meta_op = dec.address(ops[3]) if sparse else None
    ops = ops[1:] if sparse else ops
    idesc = dec.reader(ops[3], "b32")
    tail = list(ops[4:])
    sfa_op = sfb_op = None
    if block:
        sfa_op, sfb_op = dec.address(tail[0]), dec.address(tail[1])
        tail = tail[2:]
    lanes_off = None
    if tail and isinstance(tail[0], Vec):
        lanes_off = [dec.reader(x, "b32") for x in tail.pop(0).items]
    en = tail[0]
    enable = (lambda ctx, v=bool(en.value): v) if isinstance(en, Imm) else dec.reader(en, "pred")
    shift = 0
    zcm = None
    if ws and len(tail) > 1:  # the zero-column mask descriptor
        zcm = dec.reader(tail[1], "b64")
    elif len(tail) > 1:
        shift = int(tail[1].value)

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        nb = _flat_batch(ctx)
        sdata = _smem_data(ctx)
        tdata = tm.data
        rows = _rows(ctx)
        blk = _block(ctx)

        def lane_val(r, b, ln):
            return np.broadcast_to(r(ctx), ctx.shape).reshape(nb, 32)[b, ln]

        for b, ln in np.argwhere(mask.reshape(nb, 32)):
            peers = _peers(rows, b, cg, blk, where)
            mi = T.from_idesc(opcode, int(lane_val(idesc, b, ln)))
            m, n, k = mi.shape
            ea, eb = _ELEM_BITS[mi.atype], _ELEM_BITS[mi.btype]
            pk = "packed" if kind in ("mxf4", "mxf4nvf4") else "padded"
            ml, nl = m // cg, n // cg
            P, L, C = d_map(m, n, cg, ws)
            dt = int(lane_val(d_addr, b, ln))
            L, C = (dt >> 16) + L, (dt & 0xFFFF) + C
            R = np.asarray(peers)[P]
            for i, r in enumerate(peers):
                tm.check_access(r, L[P == i], C[P == i], where)
            ka = k // 2 if sparse else k  # stored K of A
            if a_tmem:
                ap, al = _a_tmem_map(m, cg, ws)
                at = int(lane_val(a_op, b, ln))
                if sparse and ml == 64 and cg == 1 and not ws and (at >> 16) % 32 != (dt >> 16) % 32:
                    # [ISA: layouts F and C use one lane alignment for A, D and the metadata]
                    raise Tcgen05Error(f"{where}: sparse tcgen05.mma M=64 (layout F): A at lane "
                                       f"{at >> 16} and D at lane {dt >> 16} must have the same "
                                       "lane alignment (0 or 16 within 32 lanes)")
                kk = np.arange(ka)
                # [ISA] A bytes along K, four per 32-bit cell.  mxf4 / mxf4nvf4: two e2m1 per
                # byte [INF: even k in the low nibble, as in shared memory]; fp6/fp4 of
                # f8f6f4 / mxf8f6f4: one per byte, the code at TMEM_HOLDER_SHIFT [CUTLASS]
                if ea >= 8:
                    kb, sh = kk * ea // 8, 8 * (kk * ea // 8 % 4)
                elif pk == "packed":
                    kb, sh = kk // 2, 8 * (kk // 2 % 4) + 4 * (kk % 2)
                else:
                    kb, sh = kk, 8 * (kk % 4) + TMEM_HOLDER_SHIFT[ea]
                La = (at >> 16) + al[:, None] + 0 * kb[None]
                Ca = (at & 0xFFFF) + kb[None, :] // 4 + 0 * al[:, None]
                Ra = np.asarray(peers)[ap][:, None] + 0 * La
                for i, r in enumerate(peers):
                    tm.check_access(r, La[ap == i], Ca[ap == i], where)
                cells = tdata[Ra, La, Ca].astype(np.uint64)
                a = (cells >> sh[None, :].astype(np.uint64)) & np.uint64((1 << ea) - 1)
            else:
                a = np.concatenate([_smem_tile(sdata[r], int(lane_val(a_op, b, ln)), ml, ka, ea,
                                               "K" if mi.a_major == "k" else "MN", where, "A", pk)
                                    for r in peers])
            zword, zshift = None, 0
            if zcm is not None:  # D column j reads B column j + shift, +0 where masked
                zword = int(lane_val(zcm, b, ln))
                try:
                    zshift = T.zcm_shift(zword, m, mi.max_shift)
                except PtxError as e:
                    raise PtxError(f"{where}: {e}") from None
            bt = np.concatenate([_smem_tile(sdata[r], int(lane_val(b_op, b, ln)), nl + zshift, k,
                                            eb, "K" if mi.b_major == "k" else "MN", where, "B", pk)
                                 for r in peers]).T
            if zword is not None:
                try:
                    bt = T.ws_b_operand(mi, bt, zword)
                except PtxError as e:
                    raise PtxError(f"{where}: {e}") from None
            cells = tdata[R, L, C]
            c = cells & 0xFFFF if mi.dtype == "f16" else cells
            arch = ctx.arch if ctx.arch in ARCHS else "sm_100a"
            en_d = bool(lane_val(enable, b, ln))
            nib = None
            if sparse:
                nib = _sparse_nibbles(tm, tdata, peers, mi, ml, int(lane_val(meta_op, b, ln)),
                                      dt >> 16, where)
                groups = nib.shape[0]  # .ws M<128: copy g serves D's g-th part of N [INF]
                nib = nib[0] if groups == 1 else nib
            if sparse and not block and groups > 1:
                w = n // groups
                sub = replace(mi, n=w)
                d = np.concatenate([T.compute_sparse_codes(
                    sub, a, bt[:, g * w:(g + 1) * w], c[:, g * w:(g + 1) * w], nib[g], arch=arch,
                    enable_input_d=en_d, scale_input_d=shift) for g in range(groups)],
                    axis=1).astype(np.uint32)
            elif sparse and not block:
                d = T.compute_sparse_codes(mi, a, bt, c, nib, arch=arch, enable_input_d=en_d,
                                           scale_input_d=shift).astype(np.uint32)
            elif not block:
                d = T.compute_codes(mi, a, bt, c, arch=arch, enable_input_d=en_d,
                                    scale_input_d=shift).astype(np.uint32)
            else:  # per (CTA, lane quarter) of D: the elements that quarter computes, with
                # that quarter's copy of the scales (facts.tcgen05.scale_factor_cells)
                v = mi.scale_vec
                dp = SF_DATAPATH[ml]
                sa_t, sb_t = int(lane_val(sfa_op, b, ln)), int(lane_val(sfb_op, b, ln))
                d = np.zeros((m, n), np.uint32)
                quarter = (L - (dt >> 16)) // 32
                for i, r in enumerate(peers):
                    for qu in range(4):
                        E = (P == i) & (quarter == qu)
                        rows, cols = np.flatnonzero(E.any(1)), np.flatnonzero(E.any(0))
                        if not rows.size:
                            continue
                        la, ca, ba = scale_factor_cells("A", dp, rows % ml, v, mi.a_scale_id, qu)
                        lb, cb, bb = scale_factor_cells("B", dp, cols, v, mi.b_scale_id, qu, n)
                        la, ca = (sa_t >> 16) + la, (sa_t & 0xFFFF) + ca
                        lb, cb = (sb_t >> 16) + lb, (sb_t & 0xFFFF) + cb
                        tm.check_access(r, la, ca, where)
                        tm.check_access(r, lb, cb, where)
                        sfa = (tdata[r, la, ca] >> (8 * ba).astype(np.uint32)) & 0xFF
                        sfb = ((tdata[r, lb, cb] >> (8 * bb).astype(np.uint32)) & 0xFF).T
                        sub = replace(mi, m=rows.size, n=cols.size)  # this quarter's block
                        blk_c = c[np.ix_(rows, cols)]
                        if sparse:
                            d[np.ix_(rows, cols)] = T.compute_sparse_codes(
                                sub, a[rows], bt[:, cols], blk_c, nib[rows], arch=arch, sa=sfa,
                                sb=sfb, enable_input_d=en_d).astype(np.uint32)
                        else:
                            d[np.ix_(rows, cols)] = T.compute_codes(
                                sub, a[rows], bt[:, cols], blk_c, arch=arch, sa=sfa, sb=sfb,
                                enable_input_d=en_d).astype(np.uint32)
            keep = np.ones(L.shape, bool)
            if lanes_off is not None:
                bits = np.array([int(lane_val(r_, b, ln)) for r_ in lanes_off], np.uint64)
                word = L // 32 + 4 * P  # [INF] cta_group::2: words 4..7 for the odd CTA
                lane_bit = (bits[word % len(bits)] >> (L % 32).astype(np.uint64)) & np.uint64(1)
                keep = lane_bit == 0  # [INF] bit i of the mask: TMEM lane i is not written
            tdata[R[keep], L[keep], C[keep]] = d[keep]
            tm.issued(int(rows[b]), _warp_in_cta(ctx), R[keep], L[keep], C[keep], st.text, where)
    return run


def _compile_commit(ins, dec):
    st = _checked(ins, dec)
    where = dec.where
    mbar = dec.address(st.operands[0])
    multicast = "multicast" in st.quals
    cta_mask = dec.reader(st.operands[1], "b16") if multicast else None
    space = "cluster" if "space" in st.quals else None  # no state space: a generic address

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        np.add.at(tm.commits, _rows(ctx), mask.reshape(_flat_batch(ctx), 32).sum(axis=1))
        addr = mbar(ctx)
        # every tcgen05 operation completed at issue: the arrive-one happens now
        from warpsim.ptx.cluster import RANK_SHIFT
        from warpsim.ptx.ops.mbarrier import barrier_rows
        own = _rows(ctx)
        warp = _warp_in_cta(ctx)
        keys: dict[int, list] = {}  # per issuing CTA row: the barrier phases it arrives on

        def arrive(a, m, sp):
            blk, rows, offs, mm = barrier_rows(ctx, a, m, sp, where)
            par = blk.mbar.parity(rows, offs, where, "tcgen05.commit")
            issuer = np.broadcast_to(own.reshape(ctx.batch + (1,)), ctx.shape)[mm]
            for i, r, o, p in zip(issuer.tolist(), rows.tolist(), offs.tolist(), par.tolist()):
                keys.setdefault(i, []).append((r, o, p))
            blk.mbar.update(rows, offs, arrive=1, where=where, what="tcgen05.commit")

        if not multicast:
            arrive(addr, mask, space)
        else:
            # one arrive on the barrier at the same offset in every CTA of ctaMask (cluster ranks)
            bits = np.broadcast_to(np.asarray(cta_mask(ctx)), ctx.shape).astype(np.int64)
            off = np.asarray(addr, np.uint64) & np.uint64((1 << RANK_SHIFT) - 1)
            for r in range(16):
                m = mask & ((bits >> r) & 1).astype(bool)
                if m.any():
                    arrive((np.uint64(r + 1) << np.uint64(RANK_SHIFT)) | off, m, "cluster")
        for i, ks in keys.items():
            tm.committed(i, warp, ks)
    return run


#: tcgen05.cp multicast: lane quarters receiving each 32-row group of the source  [CuTe
#: Copy_Traits of SM100_UTCCP_2x64dp128bitlw0213 / lw0123 / 4x32dp128bit (copy_traits_sm100.hpp):
#: .warpx2::02_13 -> rows 0-63 to lanes 0-63 and again 64-127 (rows 0-31 to quarters 0 and 2);
#: ::01_23 -> rows 0-31 to lanes 0-63, 32-63 to 64-127; .warpx4 -> rows 0-31 to every quarter]
_CP_QUARTERS: Mapping[str, tuple[tuple[int, ...], ...]] = MappingProxyType({
    "": ((0,), (1,), (2,), (3,)), "warpx2::02_13": ((0, 2), (1, 3)),
    "warpx2::01_23": ((0, 1), (2, 3)), "warpx4": ((0, 1, 2, 3),)})


def cp_map(shape: str, warp: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(source row, TMEM lane offset) pairs a tcgen05.cp of ``shape`` with multicast ``warp``
    writes (each source row to one lane per receiving quarter)."""
    nlanes = CP_SHAPES[shape][0]
    if nlanes < 32:
        return np.arange(nlanes), np.arange(nlanes)
    src, lane = [], []
    for g, quarters in enumerate(_CP_QUARTERS[warp]):
        if 32 * g >= nlanes:
            break
        for qq in quarters:
            src.append(np.arange(32 * g, 32 * g + 32))
            lane.append(np.arange(32) + 32 * qq)
    return np.concatenate(src), np.concatenate(lane)


def _compile_cp(ins, dec):
    st = _checked(ins, dec)
    q = st.quals
    where = dec.where
    nlanes, bits, _ = CP_SHAPES[q["shape"]]
    src_rows, dst_lanes = cp_map(q["shape"], q.get("warp", ""))
    unpack = {"b6x16_p32": 6, "b4x16_p64": 4}.get(q.get("src", ""), 0)
    cg = int(q["cta_group"][-1])
    taddr = dec.address(st.operands[0])
    sdesc = dec.reader(st.operands[1], "b64")

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        nb = _flat_batch(ctx)
        sdata = _smem_data(ctx)
        tdata = tm.data
        rows = _rows(ctx)
        blk = _block(ctx)
        for b, ln in np.argwhere(mask.reshape(nb, 32)):
            t = int(np.broadcast_to(taddr(ctx), ctx.shape).reshape(nb, 32)[b, ln])
            w = int(np.broadcast_to(sdesc(ctx), ctx.shape).reshape(nb, 32)[b, ln])
            for r in _peers(rows, b, cg, blk, where):  # cta_group::2: each CTA of the pair (TVM's
                # tcgen05.cp notes; CUTLASS's 2-CTA M=128 DSL example relies on it)
                # [INF] the source is a K-major tile of nlanes rows x bits/8 bytes (canonical layout)
                tile = _smem_tile(sdata[r], w, nlanes, bits // 8, 8, "K", where, "source")
                if unpack:  # [ISA] each 16-byte chunk of packed 4/6-bit values -> 16 bytes, one
                    # value per byte; [CUTLASS] the code at TMEM_HOLDER_SHIFT in its byte
                    tile = _unpack16(tile.astype(np.uint8).reshape(nlanes, -1, 16), unpack)
                    tile = tile.reshape(nlanes, bits // 8) << np.uint64(TMEM_HOLDER_SHIFT[unpack])
                tile = tile.astype(np.uint32)[src_rows]
                words = tile[:, 0::4] | tile[:, 1::4] << 8 | tile[:, 2::4] << 16 | tile[:, 3::4] << 24
                L = (t >> 16) + dst_lanes[:, None] + 0 * np.arange(bits // 32)[None]
                C = (t & 0xFFFF) + np.arange(bits // 32)[None, :] + 0 * L
                tm.check_access(r, L, C, where)
                tdata[r, L, C] = words
    return run


def _compile_shift(ins, dec):
    st = _checked(ins, dec)
    where = dec.where
    taddr = dec.address(st.operands[0])
    cg = int(st.quals["cta_group"][-1])

    def run(ctx, mask):
        mask = _full(ctx, mask)
        tm = tmem_of(ctx)
        nb = _flat_batch(ctx)
        tdata = tm.data
        rows = _rows(ctx)
        blk = _block(ctx)
        for b, ln in np.argwhere(mask.reshape(nb, 32)):
            t = int(np.broadcast_to(taddr(ctx), ctx.shape).reshape(nb, 32)[b, ln])
            l0, c0 = t >> 16, t & 0xFFFF
            if l0 % 32:
                raise Tcgen05Error(f"{where}: tcgen05.shift needs a lane aligned to 32; got {l0}")
            for r in _peers(rows, b, cg, blk, where):  # [INF] cta_group::2: both CTAs of the pair
                cols = np.arange(c0, c0 + 8)  # [INF] one 32-byte row per lane, moved down one lane
                lanes = np.arange(l0, TMEM_LANES)[:, None] + 0 * cols
                tm.check_access(r, lanes, cols + 0 * lanes, where)
                tdata[r, l0 + 1:, c0:c0 + 8] = tdata[r, l0:-1, c0:c0 + 8].copy()
    return run


OPS: dict[str, OpSpec] = {
    "tcgen05.alloc": _opspec("tcgen05.alloc", _compile_alloc, True,
                             "allocate Tensor Memory columns; the address goes to shared memory"),
    "tcgen05.dealloc": _opspec("tcgen05.dealloc", _compile_alloc, True, "free Tensor Memory columns"),
    "tcgen05.relinquish_alloc_permit": _opspec("tcgen05.relinquish_alloc_permit", _compile_relinquish,
                                               True, "give up the right to allocate"),
    "tcgen05.mma": _opspec("tcgen05.mma", _compile_mma, False,
                           "one-thread MMA into Tensor Memory (A from shared memory or TMEM)"),
    "tcgen05.commit": _opspec("tcgen05.commit", _compile_commit, False,
                              "arrive on an mbarrier when prior tcgen05 work completes"),
    "tcgen05.ld": _opspec("tcgen05.ld", _compile_ldst, True, "Tensor Memory -> registers"),
    "tcgen05.st": _opspec("tcgen05.st", _compile_ldst, True, "registers -> Tensor Memory"),
    "tcgen05.wait::ld": _opspec("tcgen05.wait::ld", _compile_nop, True, "wait for tcgen05.ld"),
    "tcgen05.wait::st": _opspec("tcgen05.wait::st", _compile_nop, True, "wait for tcgen05.st"),
    "tcgen05.fence::before_thread_sync": _opspec("tcgen05.fence::before_thread_sync", _compile_nop,
                                                 False, "order tcgen05 work before a sync"),
    "tcgen05.fence::after_thread_sync": _opspec("tcgen05.fence::after_thread_sync", _compile_nop,
                                                False, "order tcgen05 work after a sync"),
    "tcgen05.cp": _opspec("tcgen05.cp", _compile_cp, False, "shared memory -> Tensor Memory"),
    "tcgen05.shift": _opspec("tcgen05.shift", _compile_shift, False, "shift TMEM rows down a lane"),
}
