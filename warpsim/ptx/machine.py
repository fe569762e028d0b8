"""What instructions run on: a batch of warps' registers, memories and special registers
(:class:`Context`), and the resumable SIMT execution state of one warp batch (:class:`WarpState`).

SIMT control.  Every warp of the batch follows the same program counter; which lanes execute
is a boolean mask ``(*batch, 32)`` (``None`` when all lanes of all warps are active, the fast
path).  A divergent branch splits the mask and pushes one frame per path on a reconvergence
stack; each frame runs until its lanes reach the branch's immediate post-dominator, where
they merge back.  Since PTX behaves per lane as if run alone, and a warp none of whose lanes
takes a path simply has no lane active on it, one program counter for the whole batch yields,
lane by lane, what each warp computes on its own; the taken path runs first, as on NVIDIA
hardware (and a warp's ``.sync.aligned`` instructions see exactly its lanes on that path).

Running is resumable: :func:`run` executes until every lane has exited or a barrier
(``bar.sync``/``barrier.sync``) is reached, and returns; calling it again continues.  A launcher
runs several warps of a CTA by keeping one :class:`Context` (registers) and one
:class:`WarpState` per warp, sharing the memory objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warpsim._util import allocator
from warpsim.errors import DivergenceError, PtxError, StepLimitError, WarpsimError, first_lanes

__all__ = ["Context", "Frame", "WarpState", "run", "SPECIAL_REGISTERS"]

_LANE = np.arange(32, dtype=np.uint32)
_LANEMASKS = {
    "%lanemask_eq": (np.uint32(1) << _LANE).astype(np.uint32),
    "%lanemask_lt": ((np.uint64(1) << _LANE.astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
    "%lanemask_le": ((np.uint64(2) << _LANE.astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
    "%lanemask_gt": (~((np.uint64(2) << _LANE.astype(np.uint64)) - np.uint64(1))).astype(np.uint32),
    "%lanemask_ge": (~((np.uint64(1) << _LANE.astype(np.uint64)) - np.uint64(1))).astype(np.uint32),
}
_XYZ = ("x", "y", "z")
#: Special registers the interpreter knows (all 32-bit).
SPECIAL_REGISTERS = (
    ("%laneid", "%warpid", "%nwarpid", "%warpsize")
    + tuple(f"%{r}.{c}" for r in ("tid", "ntid", "ctaid", "nctaid") for c in _XYZ)
    + tuple(_LANEMASKS)
    + tuple(f"%{r}.{c}" for r in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid") for c in _XYZ)
    + ("%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster")
)


class _Specials(dict):
    """Special register name -> (*batch, 32) uint32 view, made on first read (most bodies read
    one or two of the twenty-odd)."""

    def __init__(self, raw: dict, shape: tuple, given: dict) -> None:
        super().__init__(given)
        self._raw, self._shape = raw, shape

    def __missing__(self, name):
        v = np.broadcast_to(np.asarray(self._raw[name], np.uint32), self._shape)
        self[name] = v
        return v


#: special registers of one warp per CTA, as a Context starts (the launcher passes its own)
_DEFAULT_SPECIALS = {
    "%laneid": _LANE, "%tid.x": _LANE, "%tid.y": 0, "%tid.z": 0, "%ntid.x": 32, "%ntid.y": 1,
    "%ntid.z": 1, "%ctaid.x": 0, "%ctaid.y": 0, "%ctaid.z": 0, "%nctaid.x": 1, "%nctaid.y": 1,
    "%nctaid.z": 1, "%warpid": 0, "%nwarpid": 1, "%warpsize": 32, **_LANEMASKS,
    "%cluster_ctarank": 0, "%cluster_nctarank": 1, "%is_explicit_cluster": 0,
    **{f"%cluster_ctaid.{c}": 0 for c in _XYZ}, **{f"%cluster_nctaid.{c}": 1 for c in _XYZ}}


def _broadcasts(shape: tuple, to: tuple) -> bool:
    """Whether an array of ``shape`` broadcasts to ``to`` (NumPy's rule, without NumPy)."""
    if len(shape) > len(to):
        return False
    return all(a == 1 or a == b for a, b in zip(reversed(shape), reversed(to)))


class Context:
    """Registers, memories and special registers of a batch of warps.

    ``regs``: name -> (*batch, 32) array of the register's width (shared with :class:`Warp`).
    ``spaces``: state-space name -> :class:`~warpsim.ptx.memory.AddressSpace`.
    ``specials``: special register name -> array broadcastable to (*batch, 32) (defaults: one
    warp per CTA: ``%tid.x`` = lane, ``%ntid.x`` = 32, the rest 0 / 1).
    """

    def __init__(self, regs: dict, batch: tuple[int, ...], arch: str = "sm_90",
                 spaces: dict | None = None, specials: dict | None = None) -> None:
        self.regs = regs
        #: what reading a register no instruction wrote does: False raises RegisterError (the
        #: Warp API); a kernel launch without the sanitizer sets True and such a read gives 0 (the
        #: GPU gives whatever the register held; with the sanitizer on, registers start poisoned
        #: and a use of one is a finding)
        self.unwritten_reads_zero = False
        self.batch = tuple(batch)
        self.shape = self.batch + (32,)
        self.arch = arch
        self.spaces = dict(spaces or {})
        sp = dict(_DEFAULT_SPECIALS)
        given_sp = specials or {}
        for c in _XYZ:  # no explicit cluster: every CTA is a cluster of one
            sp[f"%clusterid.{c}"] = given_sp.get(f"%ctaid.{c}", 0)
            sp[f"%nclusterid.{c}"] = given_sp.get(f"%nctaid.{c}", 1)
        for k, v in given_sp.items():
            if k not in sp:
                raise PtxError(f"unknown special register {k}; known: {', '.join(SPECIAL_REGISTERS)}")
            if v.__class__ is not int and not _broadcasts(
                    v.shape if v.__class__ is np.ndarray else np.shape(v), self.shape):
                raise ValueError(f"special register {k}: values of shape {np.shape(v)} do not "
                                 f"broadcast to the batch's {self.shape}")
            sp[k] = v
        # made on first read (a launch passes some thirty; a body reads a few)
        self.specials = _Specials(sp, self.shape, {})
        self.async_groups = 0  # cp.async groups committed (copies complete at issue)
        self.executed = 0  # instructions executed (one per instruction, not per lane)
        #: instance-level hook ``f(ctx, state, instr, pc) -> bool`` called before each
        #: instruction (its guard not yet applied); True pauses the run there (status
        #: 'paused'; calling :func:`run` again executes that instruction).  None: no hook.
        self.on_instruction = None

    def space(self, name: str, where: str = ""):
        try:
            return self.spaces[name]
        except KeyError:
            if name == "shared::cluster" and "shared" in self.spaces:
                from warpsim.ptx.cluster import cluster_space
                return cluster_space(self, where)
            raise PtxError(f"{where}: no .{name} memory is attached to this run"
                           + ("; pass shared=... to Warp.run" if name == "shared" else "")) from None


@dataclass
class Frame:
    """One entry of the reconvergence stack: lanes ``mask`` run from ``pc`` until ``rpc``."""
    pc: int
    rpc: int
    mask: np.ndarray | None


@dataclass
class WarpState:
    """Execution state of a warp batch: the reconvergence stack (top = running) and status.

    ``status``: 'ready', 'barrier' (stopped after a barrier instruction; ``barrier`` holds
    ``(instruction, mask)``), 'paused' (a :attr:`Context.on_instruction` hook asked to stop
    before the instruction at ``pc``) or 'exited'.
    """
    stack: list = field(default_factory=list)
    status: str = "ready"
    barrier: tuple | None = None

    @classmethod
    def start(cls, n_instructions: int, mask: np.ndarray | None = None) -> "WarpState":
        return cls([Frame(0, n_instructions, mask)])

    @property
    def pc(self) -> int | None:
        return self.stack[-1].pc if self.stack else None


def _and(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def locate(e: WarpsimError, ins) -> WarpsimError:
    """``e`` with the statement it came from as its location, unless it already has one."""
    if e.instruction is None:
        e.at(instruction=ins.text, line=ins.line or None)
    return e


def run(program, ctx: Context, state: WarpState, max_steps: int | None = None) -> WarpState:
    """Execute ``program`` on ``ctx`` from ``state`` until exit or a barrier; returns ``state``.

    ``max_steps``: at most this many instructions run in this call; the next one raises a
    :class:`~warpsim.errors.StepLimitError` (the program may not terminate).

    Errors from an instruction are re-raised with its line and text prepended.
    """
    allocator.for_batch(int(np.prod(ctx.batch, dtype=np.int64)))
    instrs = program.instrs
    n = len(instrs)
    stack = state.stack
    state.barrier = None
    steps = 0
    ins = None
    hook = ctx.on_instruction
    resume = state.status == "paused"  # the hook already saw the instruction at pc
    state.status = "ready"
    errstate = np.errstate(all="ignore")  # Inf, NaN and overflow are results, not errors
    errstate.__enter__()
    try:
        while stack:
            fr = stack[-1]
            pc = fr.pc
            if pc >= n:  # falling off the end: those lanes return
                _exit(stack, fr, fr.mask, pc)
                continue
            if pc == fr.rpc:
                stack.pop()
                continue
            ins = instrs[pc]
            if max_steps is not None and steps >= max_steps:
                err = StepLimitError(f"stopped after {ctx.executed + steps} instructions (max_steps); "
                                     f"the program may not terminate (next: {ins.text})")
                err.steps = ctx.executed + steps
                raise err
            if hook is not None:
                if resume:
                    resume = False
                elif hook(ctx, state, ins, pc):
                    state.status = "paused"
                    ctx.executed += steps
                    return state
            mask = fr.mask
            if ins.guard is not None:
                g = ctx.regs.get(ins.guard[0])
                if g is None or g.dtype != np.bool_:
                    raise _guard_error(ctx, ins)
                g = ~g if ins.guard[1] else g
                mask = g if mask is None else (mask & g)
            kind = ins.kind
            grp = ins.group
            if grp is not None and hook is None and (max_steps is None or steps + grp[0] <= max_steps):
                # a run of instructions that one call executes (program.fuse_runs): no guard,
                # no branch target inside, so they share this mask and this frame
                if mask is not None and not mask.all():
                    if ins.aligned:
                        _check_aligned(ins, mask)
                    if mask.any():
                        grp[1](ctx, mask)
                else:
                    grp[1](ctx, None)
                fr.pc = pc + grp[0]
                steps += grp[0]
                continue
            if kind == 0:
                if mask is not None and not mask.all():
                    if ins.aligned:
                        _check_aligned(ins, mask)
                    if mask.any():
                        ins.exec(ctx, mask)
                else:
                    ins.exec(ctx, None)
                fr.pc = pc + 1
            elif kind == 1:  # bra
                _branch(ins, fr, mask, stack, pc)
            elif kind == 2:  # exit / ret
                _exit(stack, fr, mask, pc)
            else:  # barrier: stop after it
                if mask is not None and not mask.all():
                    if ins.aligned:
                        _check_aligned(ins, mask)
                fr.pc = pc + 1
                if mask is None or mask.any():
                    ins.exec(ctx, mask)
                    state.status = "barrier"
                    state.barrier = (ins, mask)
                    ctx.executed += steps + 1
                    return state
            steps += 1
    except WarpsimError as e:
        ctx.executed += steps
        if ins is None:
            raise
        raise locate(e, ins) from None
    finally:
        errstate.__exit__(None, None, None)
    ctx.executed += steps
    state.status = "exited"
    return state


def _guard_error(ctx, ins):
    from warpsim.errors import RegisterError
    name = ins.guard[0]
    if name not in ctx.regs:
        return RegisterError(f"guard predicate {name} has not been written")
    return PtxError(f"guard {name} must be a predicate (1-bit) register")


def lanes_text(m: np.ndarray) -> str:
    """'lanes 0-3, 7' style description of the first warp where ``m`` is set (which warp that
    is goes in the error's ``warp`` attribute: :func:`warpsim.errors.first_lanes`)."""
    where = first_lanes(m)
    lanes = where["lanes"]
    runs, start = [], None
    for i, l in enumerate(lanes):
        if start is None:
            start = l
        if i + 1 == len(lanes) or lanes[i + 1] != l + 1:
            runs.append(f"{start}" if start == l else f"{start}-{l}")
            start = None
    return f"lanes {', '.join(runs)}"


def _check_aligned(ins, mask: np.ndarray) -> None:
    """A .sync.aligned instruction must run on all 32 lanes of a warp or on none."""
    anyw = mask.any(axis=-1, keepdims=True)
    partial = anyw & ~mask.all(axis=-1, keepdims=True)
    if partial.any():
        miss = ~mask & anyw & partial
        have = mask & partial
        raise DivergenceError(f"{ins.text} is warp-synchronous (.aligned) but was reached by a partial "
                              f"warp: {lanes_text(have)} active, {lanes_text(miss)} not (divergent "
                              "control flow or a lane-varying guard)").at(**first_lanes(have))


def _branch(ins, fr: Frame, taken, stack, pc: int) -> None:
    target = ins.target
    if ins.guard is None:
        fr.pc = target
        return
    full = fr.mask
    if full is None:
        nt = ~taken
    else:
        nt = full & ~taken
    any_t = bool(taken.any())
    any_n = bool(nt.any())
    if ins.uniform and any_t and any_n:
        per_warp = taken.any(axis=-1) & nt.any(axis=-1)
        if per_warp.any():
            raise DivergenceError(f"bra.uni is not uniform: {lanes_text(taken & per_warp[..., None])} "
                                  "branch, the others of the warp do not"
                                  ).at(**first_lanes(taken & per_warp[..., None]))
    if not any_n:
        fr.pc = target
        return
    if not any_t:
        fr.pc = pc + 1
        return
    r = ins.rpc
    fr.pc = r
    if pc + 1 != r:
        stack.append(Frame(pc + 1, r, nt))
    if target != r:
        stack.append(Frame(target, r, taken))


def _exit(stack, fr: Frame, mask, pc: int) -> None:
    if mask is None or (fr.mask is None and mask.all()):
        gone = None
    else:
        gone = mask
    if gone is None:
        stack.clear()
        return
    if fr.mask is not None and (fr.mask & ~gone).sum() == 0:
        pass
    keep = ~gone
    for f in stack:
        f.mask = keep if f.mask is None else (f.mask & keep)
    stack[:] = [f for f in stack if f.mask.any()]
    if stack and stack[-1] is fr:
        fr.pc = pc + 1
