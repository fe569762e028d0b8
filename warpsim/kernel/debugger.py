"""A stepping debugger for kernel launches: breakpoints at ``file.cu:LINE`` or a PTX line
(optionally for one CTA or thread), stepping by instruction or source line, typed register
and memory inspection, the active mask and reconvergence stack, watchpoints.

:meth:`warpsim.Module.debug` returns a :class:`Debugger`; drive it from Python
(``break_at``, ``run``/``cont``, ``step``/``next``/``stepi``, ``read``/``print``, ``memory``,
``lanes``, ``stack``, ``thread``/``block``, ``watch``) or through :class:`Repl`, a small
command line with cuda-gdb's command names (``warpsim launch --debug``; testable with a list
of commands and a StringIO).

How it runs: the launch runs in a thread of its own, through the launcher's own scheduler
(batches of CTAs, warp 0 until a barrier, then warp 1, ...; clusters, mbarriers and all); a
hook on each warp's :class:`~warpsim.ptx.machine.Context` is called before every instruction
and, where a breakpoint, step or watchpoint says so, hands a :class:`Stop` to the caller and
waits for the next command.  Warp *w* of every CTA of a batch runs as one batch, so a step
moves warp *w* of all the batch's CTAs.  The sanitizer does not run under the debugger.
"""

from __future__ import annotations

import queue
import re
import sys
import threading
from dataclasses import dataclass

import numpy as np

from warpsim.errors import WarpsimError
from warpsim.kernel.trace import format_value
from warpsim.ptx.machine import SPECIAL_REGISTERS

__all__ = ["Debugger", "DebuggerError", "Repl", "Stop"]


class DebuggerError(WarpsimError):
    """A debugger command that cannot be done (unknown register, thread outside the block,
    nothing to continue, ...)."""


@dataclass(frozen=True)
class Stop:
    """Why and where the run stopped: ``reason`` ('breakpoint', 'step', 'watchpoint',
    'exited', 'error': a finding that stops a launch, in ``detail``), the warp (in the CTA), the PTX line and text of the next instruction, its
    source location, and a detail message."""

    reason: str
    warp: int | None = None
    line: int | None = None
    text: str | None = None
    source: str | None = None
    detail: str = ""

    def __str__(self) -> str:
        if self.reason == "exited":
            return "the kernel exited" + (f" ({self.detail})" if self.detail else "")
        if self.reason == "error":
            return f"the kernel stopped with an error: {self.detail}"
        src = f"{self.source}, " if self.source else ""
        d = f" [{self.detail}]" if self.detail else ""
        return f"{self.reason} at {src}PTX line {self.line}: {self.text} (warp {self.warp}){d}"


@dataclass
class Breakpoint:
    number: int
    ptx_line: int | None = None
    file: str | None = None
    line: int | None = None
    cta: tuple | None = None
    thread: tuple | None = None

    def __str__(self) -> str:
        where = f"PTX line {self.ptx_line}" if self.ptx_line is not None else f"{self.file or ''}:{self.line}"
        cond = []
        if self.cta is not None:
            cond.append(f"block {self.cta}")
        if self.thread is not None:
            cond.append(f"thread {self.thread}")
        return f"#{self.number} {where}" + (f" if {' and '.join(cond)}" if cond else "")


def _dim(v) -> tuple:
    if isinstance(v, (int, np.integer)):
        return (int(v), 0, 0)
    v = tuple(int(x) for x in v)
    return v + (0,) * (3 - len(v))


_VIEW = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "u8": np.uint8, "s8": np.int8,
         "u16": np.uint16, "s16": np.int16, "u32": np.uint32, "s32": np.int32, "u64": np.uint64,
         "s64": np.int64, "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64}


class _Watching:
    """An address space that tells the debugger about stores (watchpoints); ``rows``: the CTAs
    of the context it belongs to."""

    def __init__(self, inner, dbg: "Debugger", name: str, rows) -> None:
        self.inner, self._dbg, self._name, self._rows = inner, dbg, name, rows

    def __getattr__(self, k):
        return getattr(self.inner, k)

    def load(self, addr, nbytes, mask, where="", align=None):
        return self.inner.load(addr, nbytes, mask, where, align)

    def store(self, addr, data, mask, where="", align=None):
        self.inner.store(addr, data, mask, where, align)
        if self._dbg.watches:
            self._dbg._stored(self, addr, data.shape[-1], mask, where)


class _Abort(BaseException):
    """Unwinds the launch thread of a debugger that is restarted or closed."""


class Debugger:
    """Drive one launch step by step (see the module docstring)."""

    def __init__(self, module, name: str, runner, prog) -> None:
        """Made by :meth:`warpsim.Module.debug` (``runner``: the launch; ``prog``: its decoded
        program)."""
        self.module, self.name = module, name
        self.prog = prog
        self.P = prog.program
        self.source = getattr(self.P, "source", None)
        self.runner = runner
        self.breakpoints: list[Breakpoint] = []
        self.watches: list[tuple] = []  # (space, address, nbytes)
        self._bp_counter = 0
        self.focus_cta = (0, 0, 0)
        self.focus_tid = (0, 0, 0)
        self._mode = None  # None (continue), ('stepi', entry), ('step'|'next', entry, line, depth, frames)
        self._last: dict = {}  # entry -> (breakpoint number, line) it last stopped at
        self._watch_hit = None
        self._thread = None
        self._running = False
        self.last_stop: Stop | None = None
        self.outputs = None
        self.entries: list = []  # the scheduler's warp entries of the running batch
        self.batch: list = []

    # -- breakpoints -------------------------------------------------------------------------
    def break_at(self, where, *, cta=None, thread=None) -> Breakpoint:
        """A breakpoint at ``'file.cu:LINE'`` (or ``':LINE'``: any file) or an int PTX line,
        stopping only in CTA ``cta`` / for thread ``thread`` (tid) when given."""
        self._bp_counter += 1
        if isinstance(where, (int, np.integer)):
            if not any(ins.line == int(where) for ins in self.P.instrs):
                raise DebuggerError(f"PTX line {where} holds no instruction of {self.name}")
            bp = Breakpoint(self._bp_counter, ptx_line=int(where))
        else:
            m = re.fullmatch(r"(.*):(\d+)", str(where).strip())
            if m is None:
                raise DebuggerError(f"breakpoint {where!r}: give FILE:LINE or a PTX line number")
            f, ln = m.group(1), int(m.group(2))
            if self.source is None or not any(self.source.matches_any(i.loc, f, ln) for i in self.P.instrs):
                raise DebuggerError(f"no instruction of {self.name} comes from {f}:{ln}"
                                    + ("" if self.source and any(i.loc for i in self.P.instrs)
                                       else " (the PTX has no .loc: compile with nvcc -lineinfo)"))
            bp = Breakpoint(self._bp_counter, file=f, line=ln)
        bp.cta = None if cta is None else _dim(cta)
        bp.thread = None if thread is None else _dim(thread)
        if bp.thread is not None:
            self._linear(bp.thread)
        self.breakpoints.append(bp)
        return bp

    def delete(self, number: int | None = None) -> None:
        """Delete breakpoint ``number`` (all of them when None)."""
        self.breakpoints = [b for b in self.breakpoints if number is not None and b.number != number]

    def watch(self, address: int, nbytes: int = 4, space: str = "global") -> None:
        """Stop after the first instruction that writes any of ``nbytes`` bytes at ``address``
        of ``space`` ('global': absolute address; 'shared': offset in the CTA's shared memory)."""
        if space not in ("global", "shared"):
            raise DebuggerError(f"watch: space must be global or shared, got {space!r}")
        self.watches.append((space, int(address), int(nbytes)))

    # -- running -------------------------------------------------------------------------------
    def run(self) -> Stop:
        """Start (or restart) the launch; runs to the first stop."""
        self.close()
        self._stops: queue.Queue = queue.Queue()
        self._go: queue.Queue = queue.Queue()
        self._mode, self._last, self._watch_hit, self.outputs = None, {}, None, None
        self.runner.on_warps = self._capture
        self._running = True
        self._thread = threading.Thread(target=self._main, name="warpsim-debugger", daemon=True)
        self._thread.start()
        return self._next()

    def close(self) -> None:
        """Stop a launch in progress (its thread unwinds)."""
        if self._thread is not None and self._running:
            self._go.put("abort")
            self._thread.join()
        self._running = False

    def cont(self) -> Stop:
        """Continue to the next breakpoint or watchpoint, or the end."""
        self._need_running()
        self._mode = None
        return self._resume()

    def stepi(self) -> Stop:
        """Run one instruction of the focus warp (the same warp of every CTA run with it)."""
        self._need_running()
        self._mode = ("stepi", self._focus_entry())
        return self._resume()

    def step(self) -> Stop:
        """Run the focus warp to the next source line (into inlined functions)."""
        return self._line_step("step")

    def next(self) -> Stop:
        """Run the focus warp to the next source line at this inline depth or above."""
        return self._line_step("next")

    def _line_step(self, how) -> Stop:
        self._need_running()
        i = self._focus_entry()
        ins = self._next_instr(i)
        loc = ins.loc if ins is not None else None
        if not loc:
            self._mode = ("stepi", i)
        else:
            self._mode = (how, i, (loc[0][0], loc[0][1]), len(loc), tuple(f[:2] for f in loc))
        return self._resume()

    def _need_running(self) -> None:
        if not self._running:
            raise DebuggerError("the kernel is not running: use run first")

    def _main(self) -> None:
        """The launch thread: the launcher's own scheduler, paused by the hooks."""
        from warpsim.kernel.sanitizer import SanitizerError

        try:
            outs, _ = self.runner.run(poison=None)
            self.outputs = outs
            self._stops.put(Stop("exited"))
        except _Abort:
            pass
        except SanitizerError as e:
            f = e.with_sources(self.P).findings[0]
            self._stops.put(Stop("error", f.warp, f.line, f.instruction, f.source, str(f)))
        except Exception as e:  # an error of the kernel or the launcher ends the run
            self._stops.put(Stop("error", detail=f"{type(e).__name__}: {e}"))

    def _next(self) -> Stop:
        stop = self._stops.get()
        if stop.reason in ("exited", "error"):
            self._running = False
            self._thread.join()
        self.last_stop = stop
        return stop

    def _resume(self) -> Stop:
        self._go.put("go")
        return self._next()

    def _capture(self, entries, batch) -> None:
        """Launch thread, before a batch is scheduled: hook every warp context."""
        self.entries, self.batch = entries, [tuple(int(x) for x in c) for c in batch]
        if self.focus_cta not in self.batch:
            self.focus_cta = self.batch[0]
        for i, e in enumerate(entries):
            ctx = e[0]
            ctx.on_instruction = self._hook_for(i)
            rows = self._rows(i)
            for name in ("global", "shared"):
                sp = ctx.spaces.get(name)
                if sp is not None and not isinstance(sp, _Watching):
                    ctx.spaces[name] = _Watching(sp, self, name, rows)

    def _rows(self, i) -> list:
        e = self.entries[i]
        return [tuple(int(x) for x in c) for c in e[7]] if len(e) > 7 else self.batch

    def _warp_of(self, i) -> int:
        e = self.entries[i]
        return e[6] if len(e) > 6 else i

    # -- the hook (launch thread) ----------------------------------------------------------------
    def _hook_for(self, i: int):
        def hook(ctx, state, ins, pc) -> bool:
            stop = self._decide(i, state, ins)
            if stop is not None:
                self._stops.put(stop)
                if self._go.get() == "abort":
                    raise _Abort()
            return False
        return hook

    def _stop(self, reason, i, ins, detail="") -> Stop:
        src = self.source.describe(ins.loc) if self.source is not None else None
        return Stop(reason, self._warp_of(i), ins.line, ins.text, src, detail)

    def _decide(self, i, state, ins) -> Stop | None:
        if self._watch_hit is not None:
            hit, self._watch_hit = self._watch_hit, None
            return self._stop("watchpoint", i, ins, hit)
        mode = self._mode
        if mode is not None and mode[1] == i:
            if mode[0] == "stepi":
                return self._stop("step", i, ins)
            loc = ins.loc
            if loc:
                here = (loc[0][0], loc[0][1])
                if mode[0] == "step" and here != mode[2]:
                    return self._stop("step", i, ins)
                if mode[0] == "next":
                    frames = tuple(f[:2] for f in loc)
                    d0 = mode[3]  # stop back at the starting inline depth (or above) on another line
                    if len(frames) < d0 or frames[len(frames) - d0] != mode[4][0]:
                        return self._stop("step", i, ins)
        hit_any = False
        for bp in self.breakpoints:
            if self._hits(bp, i, state, ins):
                hit_any = True
                key = (bp.number, self._line_key(bp, ins))
                if self._last.get(i) == key:
                    continue  # still on the line it stopped at
                self._last[i] = key
                return self._stop("breakpoint", i, ins, str(bp))
        if not hit_any:
            self._last.pop(i, None)
        return None

    def _line_key(self, bp, ins):
        return ins.line if bp.ptx_line is not None else (ins.loc[0][:2] if ins.loc else ins.line)

    def _hits(self, bp, i, state, ins) -> bool:
        if bp.ptx_line is not None:
            if ins.line != bp.ptx_line:
                return False
        elif self.source is None or not self.source.matches_any(ins.loc, bp.file, bp.line):
            return False
        if bp.cta is None and bp.thread is None:
            return True
        active = self._active(state)
        w = self._warp_of(i)
        for b, cta in enumerate(self._rows(i)):
            if bp.cta is not None and cta != bp.cta:
                continue
            if bp.thread is None:
                if active is None or active[b].any():
                    return True
                continue
            warp, lane = self._linear(bp.thread)
            if warp == w and (active is None or active[b, lane]):
                return True
        return False

    @staticmethod
    def _active(state):
        """Lanes of the running path, (CTAs, 32) booleans, or None (all)."""
        return state.stack[-1].mask if state.stack else None

    def _stored(self, space, addr, nbytes, mask, where) -> None:
        for sp, a0, n in self.watches:
            if sp != space._name:
                continue
            lo = addr.astype(np.uint64)
            hit = (lo < np.uint64(a0 + n)) & (lo + np.uint64(nbytes) > np.uint64(a0))
            if mask is not None:
                hit &= mask
            if hit.any():
                b, lane = (int(x) for x in np.argwhere(hit)[0])
                cta = space._rows[b] if b < len(space._rows) else None
                self._watch_hit = (f"{sp} {a0:#x} written by {where} (block {cta}, lane {lane}): "
                                   f"now {self._peek(space, a0, n, b)}")

    @staticmethod
    def _peek(space, a0, n, b) -> str:
        if space._name == "global":
            from warpsim.ptx.memory import GLOBAL_BASE
            raw = space.data[a0 - GLOBAL_BASE:a0 - GLOBAL_BASE + n]
        else:
            raw = space.data[b, a0:a0 + n]
        return " ".join(f"{x:02x}" for x in raw)

    # -- inspection ------------------------------------------------------------------------------
    def _linear(self, tid) -> tuple[int, int]:
        bx, by, _ = self.runner.block
        t = _dim(tid)
        if any(a >= b for a, b in zip(t, self.runner.block)):
            raise DebuggerError(f"thread {t} is outside the block {self.runner.block}")
        lin = t[0] + t[1] * bx + t[2] * bx * by
        return lin // 32, lin % 32

    def _focus_warp(self) -> int:
        return self._linear(self.focus_tid)[0]

    def _locate(self, w: int, cta=None) -> tuple[int, int]:
        """(entry index, row) of warp ``w`` of CTA ``cta`` (default: the focus CTA)."""
        if not self.entries:
            raise DebuggerError("the kernel is not running: use run first")
        cta = self.focus_cta if cta is None else _dim(cta)
        for i in range(len(self.entries)):
            rows = self._rows(i)
            if self._warp_of(i) == w and cta in rows:
                return i, rows.index(cta)
        raise DebuggerError(f"block {cta} is not running (running: {self.batch})")

    def _focus_entry(self) -> int:
        return self._locate(self._focus_warp())[0]

    def thread(self, tid=None, cta=None) -> tuple:
        """Switch the focus to thread ``tid`` (int or tuple) and/or CTA ``cta``; returns
        (cta, tid)."""
        if cta is not None:
            c = _dim(cta)
            if any(a >= b for a, b in zip(c, self.runner.grid)):
                raise DebuggerError(f"block {c} is outside the grid {self.runner.grid}")
            self.focus_cta = c
        if tid is not None:
            self._linear(tid)
            self.focus_tid = _dim(tid)
        return self.focus_cta, self.focus_tid

    block = thread

    def _next_instr(self, i):
        st = self.entries[i][1]
        if not st.stack:
            return None
        pc = st.stack[-1].pc
        return self.P.instrs[pc] if pc < len(self.P.instrs) else None

    def read(self, reg: str, thread=None, cta=None):
        """The raw value of register ``reg`` (an int, or bool for predicates) of a thread
        (default: the focus thread of the focus CTA)."""
        w, lane = self._linear(thread if thread is not None else self.focus_tid)
        i, b = self._locate(w, cta)
        ctx = self.entries[i][0]
        name = reg if reg.startswith("%") else "%" + reg.lstrip("$")
        if name in SPECIAL_REGISTERS:
            return int(np.broadcast_to(ctx.specials[name], ctx.shape)[b, lane])
        r = dict.get(ctx.regs, name)  # not a program read (wgmma watches those)
        if r is None:
            name = reg.lstrip("$")
            r = dict.get(ctx.regs, name)
        if r is None:
            if self.P.body.reg_type(name) is None and self.P.body.reg_type("%" + name.lstrip("%")) is None:
                raise DebuggerError(f"no register {reg} in {self.name}")
            raise DebuggerError(f"register {reg} has not been written yet")
        v = r[b, lane]
        return bool(v) if r.dtype == np.bool_ else int(v)

    def print(self, reg: str, fmt: str | None = None, thread=None) -> str:
        """Register ``reg`` of a thread as text, typed: the declared type, or ``fmt`` ('f32',
        'f16x2', 'bf16x2', 'x', 'u32', 's32', ...)."""
        v = self.read(reg, thread)
        name = reg if reg.startswith("%") else "%" + reg.lstrip("$")
        t = self.P.body.reg_type(name) or self.P.body.reg_type(reg.lstrip("$"))
        if fmt in ("f16x2", "bf16x2"):
            import ml_dtypes
            dt = np.float16 if fmt == "f16x2" else ml_dtypes.bfloat16
            lo, hi = np.array([v & 0xFFFF, v >> 16 & 0xFFFF], np.uint16).view(dt)
            return f"({float(lo)!r}, {float(hi)!r})"
        if fmt == "x":
            return f"{int(v):#x}"
        if fmt is not None and fmt not in _VIEW:
            raise DebuggerError(f"print/{fmt}: unknown format (f32, f16, f64, f16x2, bf16x2, x, u32, s32, ...)")
        return format_value(v, fmt or t)

    def lanes(self, warp: int | None = None, cta=None) -> np.ndarray:
        """Active mask (32 booleans) of warp ``warp`` (default: the focus thread's) of a CTA:
        the lanes of the running path that have not exited."""
        w = self._focus_warp() if warp is None else warp
        i, b = self._locate(w, cta)
        st = self.entries[i][1]
        if not st.stack:
            return np.zeros(32, bool)
        m = st.stack[-1].mask
        valid = np.arange(32) + 32 * w < self.runner.nthreads
        return (np.ones(32, bool) if m is None else m[b].copy()) & valid

    def stack(self, warp: int | None = None) -> list[dict]:
        """The reconvergence stack of a warp, top (running) first: pc's PTX line, the line
        where the lanes reconverge, and the lanes of the focus CTA."""
        w = self._focus_warp() if warp is None else warp
        i, b = self._locate(w)
        out = []
        n = len(self.P.instrs)
        for fr in reversed(self.entries[i][1].stack):
            line = self.P.instrs[fr.pc].line if fr.pc < n else None
            rline = self.P.instrs[fr.rpc].line if fr.rpc < n else None
            lanes = np.flatnonzero(np.ones(32, bool) if fr.mask is None else fr.mask[b])
            out.append({"line": line, "reconverge": rline, "lanes": tuple(int(x) for x in lanes)})
        return out

    def memory(self, space: str, address: int, dtype="f32", count: int = 1) -> np.ndarray:
        """``count`` elements of ``dtype`` (a PTX type name or NumPy dtype) at ``address`` of
        ``space``: 'global' (absolute address) or 'shared' (offset, in the focus CTA)."""
        dt = np.dtype(_VIEW.get(dtype, dtype)) if isinstance(dtype, str) else np.dtype(dtype)
        n = dt.itemsize * count
        i, b = self._locate(self._focus_warp())
        ctx = self.entries[i][0]
        if space == "global":
            from warpsim.ptx.memory import GLOBAL_BASE
            data = ctx.spaces["global"].data
            o = address - GLOBAL_BASE
            if o < 0 or o + n > data.size:
                raise DebuggerError(f"global {address:#x}..+{n} is outside global memory")
            raw = data[o:o + n]
        elif space == "shared":
            data = ctx.spaces["shared"].data
            if address < 0 or address + n > data.shape[-1]:
                raise DebuggerError(f"shared {address:#x}..+{n} is outside the CTA's "
                                    f"{data.shape[-1]} bytes of shared memory")
            raw = data[b, address:address + n]
        else:
            raise DebuggerError(f"memory space must be global or shared, got {space!r}")
        return raw.copy().view(dt)

    def symbol(self, name: str) -> tuple[str, int]:
        """(space, address) of a variable or a kernel argument's buffer (``argN``)."""
        m = re.fullmatch(r"arg(\d+)", name)
        if m and int(m.group(1)) in getattr(self.runner, "buffer_addresses", {}):
            return "global", self.runner.buffer_addresses[int(m.group(1))]
        sym = self.P.symbols.get(name)
        if sym is None:
            raise DebuggerError(f"no variable {name} (variables: {', '.join(self.P.symbols)})")
        return sym

    def where(self) -> str:
        s = self.last_stop
        return str(s) if s is not None else "not running"


# ------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------
REPL_HELP = """\
commands (cuda-gdb's names):
  break FILE:LINE | break LINE (PTX) [if block X,Y,Z] [if thread X,Y,Z]   delete [N]
  run | continue (c) | step (s: next source line) | next (n) | stepi (si: one instruction)
  print[/FMT] REG   (FMT: f32 f16 f64 f16x2 bf16x2 x u32 s32 ...; REG: %f1 or $f1)
  x/Nf32 ADDRESS | x/Nu32 shared OFFSET | x/Nf32 VARIABLE|argN   (typed memory)
  info lanes | info stack | info breakpoints | where
  cuda thread N | cuda thread X,Y,Z | cuda block X,Y,Z
  watch ADDRESS | watch shared OFFSET [NBYTES]
  help | quit"""


class Repl:
    """A small cuda-gdb-like command line over a :class:`Debugger`; ``run_commands`` takes
    a list of lines (tests), ``loop`` reads ``stdin`` (a terminal or a StringIO)."""

    def __init__(self, dbg: Debugger, out=None) -> None:
        self.dbg = dbg
        self.out = out if out is not None else sys.stdout

    def say(self, text) -> None:
        self.out.write(f"{text}\n")

    def run_commands(self, lines) -> None:
        for ln in lines:
            if self.command(ln) == "quit":
                return

    def loop(self, stdin=None) -> None:
        stdin = stdin if stdin is not None else sys.stdin
        interactive = getattr(stdin, "isatty", lambda: False)()
        while True:
            if interactive:
                self.out.write("(warpsim) ")
                self.out.flush()
            ln = stdin.readline()
            if not ln:
                return
            if self.command(ln) == "quit":
                return

    def command(self, line: str):
        line = line.strip()
        if not line or line.startswith("#"):
            return None
        self.say(f"(warpsim) {line}")
        try:
            return self._command(line)
        except (WarpsimError, ValueError) as e:
            self.say(f"error: {e}")
        return None

    def _command(self, line: str):
        d = self.dbg
        word, _, rest = line.partition(" ")
        word, _, fmt = word.partition("/")
        rest = rest.strip()
        if word in ("quit", "q", "exit"):
            return "quit"
        if word in ("help", "h"):
            self.say(REPL_HELP)
        elif word in ("break", "b"):
            where, cta, thread = rest, None, None
            for kw, val in re.findall(r"\bif\s+(block|thread)\s+([\d,() ]+?)(?=\s+if\b|$)", rest):
                if kw == "block":
                    cta = tuple(int(x) for x in re.findall(r"\d+", val))
                else:
                    thread = tuple(int(x) for x in re.findall(r"\d+", val))
            where = re.split(r"\s+if\s+", rest)[0].strip()
            bp = d.break_at(int(where) if where.isdigit() else where, cta=cta, thread=thread)
            self.say(f"Breakpoint {bp}")
        elif word == "delete":
            d.delete(int(rest) if rest else None)
        elif word in ("run", "r"):
            self.say(d.run())
        elif word in ("continue", "c"):
            self.say(d.cont())
        elif word in ("step", "s"):
            self.say(d.step())
        elif word in ("next", "n"):
            self.say(d.next())
        elif word in ("stepi", "si"):
            self.say(d.stepi())
        elif word in ("print", "p"):
            if not rest:
                raise DebuggerError("print needs a register: print $f1")
            cta, tid = d.focus_cta, d.focus_tid
            self.say(f"{rest} = {d.print(rest, fmt or None)}   (block {cta} thread {tid})")
        elif word == "x":
            m = re.fullmatch(r"(\d*)([a-z]+\d+)?", fmt or "")
            if m is None:
                raise DebuggerError(f"x/{fmt}: give a count and a type such as x/8f32")
            count = int(m.group(1) or 1)
            t = m.group(2) or "u32"
            if t not in _VIEW:
                raise DebuggerError(f"x/{fmt}: unknown type {t} (one of {', '.join(_VIEW)})")
            parts = rest.split()
            if len(parts) == 2 and parts[0] == "shared":
                space, addr = "shared", int(parts[1], 0)
            elif len(parts) == 1 and re.fullmatch(r"0[xX][0-9a-fA-F]+|\d+", parts[0]):
                space, addr = "global", int(parts[0], 0)
            elif len(parts) == 1:
                space, addr = d.symbol(parts[0])
            else:
                raise DebuggerError("x needs an address: x/4f32 0x7f0000000000, x/4f32 shared 0x0 or x/4f32 arg2")
            vals = d.memory(space, addr, t, count)
            self.say(f"{space} {addr:#x}: " + " ".join(format_value(int(v) if t[0] != "f" else
                                                                    int(np.array(v).view(f"u{v.itemsize}")), t)
                                                       for v in vals))
        elif word == "info":
            what = rest.split()[0] if rest else ""
            if what == "lanes":
                m = d.lanes()
                self.say(f"active lanes of warp {d._focus_warp()} (block {d.focus_cta}): "
                         f"{_mask_text(m)}  mask {int(np.packbits(m[::-1]).view('>u4')[0]):#010x}")
            elif what == "stack":
                for i, fr in enumerate(d.stack()):
                    rc = f"PTX line {fr['reconverge']}" if fr['reconverge'] is not None else "the end"
                    self.say(f"#{i} PTX line {fr['line']} -> reconverge at {rc}: "
                             f"lanes {_mask_text(np.isin(np.arange(32), fr['lanes']))}")
            elif what in ("breakpoints", "break", "b"):
                for bp in d.breakpoints:
                    self.say(str(bp))
            else:
                raise DebuggerError("info lanes | info stack | info breakpoints")
        elif word == "where":
            self.say(d.where())
        elif word == "cuda":
            sub, _, val = rest.partition(" ")
            nums = tuple(int(x) for x in re.findall(r"\d+", val))
            if sub == "thread":
                c, t = d.thread(nums if len(nums) > 1 else nums[0]) if nums else d.thread()
            elif sub == "block":
                c, t = d.thread(cta=nums) if nums else d.thread()
            else:
                raise DebuggerError("cuda thread N | cuda block X,Y,Z")
            self.say(f"focus: block {c} thread {t}")
        elif word == "watch":
            parts = rest.split()
            if parts and parts[0] == "shared":
                d.watch(int(parts[1], 0), int(parts[2], 0) if len(parts) > 2 else 4, "shared")
            else:
                d.watch(int(parts[0], 0), int(parts[1], 0) if len(parts) > 1 else 4, "global")
            self.say(f"Watchpoint on {rest}")
        else:
            raise DebuggerError(f"unknown command {word!r} (help lists them)")
        return None


def _mask_text(m) -> str:
    from warpsim.kernel.sanitizer import _ranges

    idx = np.flatnonzero(m)
    return _ranges(idx) if idx.size else "none"


def run_repl(dbg: Debugger, commands=None, stdin=None, out=None) -> None:
    """Drive ``dbg`` with ``commands`` (a list of lines) or lines read from ``stdin``."""
    r = Repl(dbg, out)
    if commands is not None:
        r.run_commands(commands)
    else:
        r.loop(stdin)

