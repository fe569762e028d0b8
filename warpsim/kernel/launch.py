"""Run whole kernels: a PTX module, a grid of CTAs of several warps, global memory.

:class:`Module` parses a module as ``nvcc -ptx`` writes it; :meth:`Module.launch` runs one of
its kernels over a grid and returns the contents of every array argument afterwards.

How a launch runs.  Array arguments are copied into a simulated global memory at real 64-bit
addresses (:class:`~warpsim.ptx.memory.GlobalMemory`) and passed by pointer; scalars become
parameter bytes of the declared type (:mod:`warpsim.kernel.args`).  CTAs run in batches
(``cta_batch``, default up to 256, fewer for large blocks or much shared memory): warp *w* of
every CTA of a batch is one vectorized warp
batch, so CTAs that follow the same path cost one instruction dispatch together; each CTA of
the batch has its own shared memory.  Scheduling is cycle-free and deterministic: warp 0 runs
until it reaches a barrier (or exits), then warp 1, ...; when every warp that has not exited
has arrived (or, with a thread count, that many threads), the barrier opens and the round
starts again.  Warps that exited count as arrived (as on the hardware).  If the CTAs of a
batch reach a barrier on different paths, the launch is redone one CTA at a time.  Kernels
that wait for other CTAs (spin locks on global memory) are not supported: CTAs of different
batches never run concurrently.

Atomics: conflicting lanes of one instruction apply in (CTA of the batch, lane) order; the
instructions in the order the scheduler runs them (see :mod:`warpsim.ptx.ops.atomic`).

The sanitizer (``check=True``, the default) raises :class:`SanitizerError` listing
:class:`Finding` s (see :mod:`warpsim.kernel.sanitizer`); the outputs are on the exception.
``check=False`` skips the checks that instrument the run (races, uninitialised values, static
variable bounds, cp.async in flight, barrier divergence: several times slower); errors that stop execution (out-of-bounds or
misaligned access, divergent ``.sync.aligned``, invalid sparse metadata, barrier deadlock) raise
in both modes, naming kernel, instruction, CTA, warp, lane, address.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from warpsim._util.progress import Progress
from warpsim.errors import PtxError, StepLimitError, TimeBudgetError, WarpsimError, quote
from warpsim.kernel.args import is_buffer, marshal
from warpsim.kernel import guards
from warpsim.facts.limits import MAX_LAUNCH_WARP_INSTRUCTIONS
from warpsim.kernel.printf import LaunchResult, ordered
from warpsim.ptx.link import lower
from warpsim.ptx.module import Function, Module as _ParsedModule, Param, parse_module
from warpsim.kernel.sanitizer import Finding, SanitizerError, Trace, finding_from_error, unravel

__all__ = ["Kernel", "Module", "launch"]

_DEFAULT_BATCH = 256
#: the default batch holds at most this many bytes of shared memory (its CTAs' copies)
_SHARED_BATCH_BYTES = 32 << 20
_POISON = (0x00, 0xA5)  # fill bytes of uninitialised registers/shared/local (the check run uses the
# first; shadow state, not values, says what is uninitialised)


@dataclass(frozen=True)
class Kernel:
    """An entry of a module: its name and parameters (name, PTX type, offset)."""

    name: str
    params: tuple[Param, ...]

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


#: CUDA's limits on each dimension (compute capability 3.0 and later): grid x < 2**31, y and z
#: <= 65535; block x, y <= 1024, z <= 64 (and 1024 threads in all).
_DIM_LIMITS = {"grid": (2**31 - 1, 65535, 65535), "block": (1024, 1024, 64)}


def _dim3(v, what: str) -> tuple[int, int, int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        v = (int(v),)
    if not isinstance(v, (tuple, list)) or not 1 <= len(v) <= 3:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    out = []
    for x in v:
        if not isinstance(x, (int, np.integer)) or isinstance(x, bool):
            raise TypeError(f"{what} must hold ints, got {x!r}")
        if int(x) < 1:
            raise WarpsimError(f"{what} dimensions must be >= 1, got {tuple(v)}")
        limit = _DIM_LIMITS[what][len(out)]
        if int(x) > limit:
            raise WarpsimError(f"{what} dimension {'xyz'[len(out)]} is {int(x)}; CUDA allows at most {limit}")
        out.append(int(x))
    return tuple(out + [1] * (3 - len(out)))  # type: ignore[return-value]


class _Split(Exception):
    """CTAs of one batch reached a barrier on different paths: redo one CTA at a time."""


class Module:
    """A PTX module (text as ``nvcc -ptx`` writes it), ready to launch its kernels."""

    def __init__(self, ptx_text: str, *, contract: bool = True) -> None:
        """``contract``: run the mul + add/sub pairs that ptxas fuses into one FMA as that
        FMA (rounded once), as the GPU does for this PTX (:mod:`warpsim.ptx.contract`, the rule
        of ptxas 13.0/13.5); False: every instruction as written (the PTX ISA's literal
        semantics, what ``ptxas --fmad=false`` gives)."""
        from warpsim.kernel.cuda import looks_like_cuda
        if not isinstance(ptx_text, str):
            hint = " (decode the bytes first: data.decode())" if isinstance(ptx_text, (bytes, bytearray)) \
                else ""
            raise TypeError(f"Module takes the PTX text as a str, got {type(ptx_text).__name__}{hint}")
        name = ptx_text.strip()
        if "\n" not in name and ";" not in name and name.endswith((".ptx", ".cu", ".cuh")):
            how = "Module.from_cu(path)" if name.endswith((".cu", ".cuh")) else "Module(open(path).read())"
            raise PtxError(f"Module takes PTX text, not a file name: {name!r} looks like a path; "
                           f"use {how}")
        if looks_like_cuda(ptx_text):
            raise PtxError("this is CUDA source: use Module.from_cu(source, arch=...) to compile "
                           "it with nvcc first")
        self.text = ptx_text
        self.contract = bool(contract)
        self.parsed: _ParsedModule = parse_module(ptx_text)
        self._programs: dict = {}
        self.names: dict[str, str] = {}  # name expression -> mangled entry (from_cu)

    @classmethod
    def from_cu(cls, source, arch: str = "sm_90", flags: Sequence[str] = (),
                name_expressions: Sequence[str] = ()) -> "Module":
        """Compile CUDA C++ (a ``.cu`` path or source text) with nvcc to PTX and load it.

        See :mod:`warpsim.kernel.cuda`; ``module.names`` maps each name expression
        (``"scale<float>"``) to its mangled kernel name."""
        from warpsim.kernel.cuda import compile_cu
        out = compile_cu(source, arch, flags, name_expressions)
        m = cls(out.ptx)
        m.names = out.names
        return m

    @property
    def kernels(self) -> dict[str, Kernel]:
        """The module's entries: name -> :class:`Kernel` (with its parameter types)."""
        return {n: Kernel(n, f.params) for n, f in self.parsed.entries.items()}

    def _entry(self, name: str) -> Function:
        fn = self.parsed.functions.get(name)
        if fn is None or fn.kind != "entry":
            from warpsim.kernel.source import demangle
            full = demangle(self.parsed.entries)
            shown = [k if full[k] == k else f"{k} ({full[k]})" for k in self.parsed.entries]
            hint = ("; a C++ kernel goes by its mangled name (or by a name expression of "
                    "Module.from_cu: module.names)"
                    if any(full[k].split("(", 1)[0] == name for k in full if full[k] != k) else "")
            raise PtxError(f"no kernel named {name!r} in this module; kernels: "
                           f"{', '.join(shown) or 'none'}{hint}")
        if fn.body is None:
            raise PtxError(f"kernel {name} is declared without a body")
        return fn

    # -- program construction ----------------------------------------------------------------
    def _layout(self, fn: Function):
        """Symbols of module variables and parameters: name -> (space, address)."""
        syms = {}
        const_off = 0
        consts = []
        for v in self.parsed.variables.values():
            if v.space == "const":
                const_off = (const_off + v.align - 1) // v.align * v.align
                syms[v.name] = ("const", const_off)
                consts.append((const_off, v))
                const_off += v.nbytes
        for p in fn.params:
            syms[p.name] = ("param", p.offset)
        return syms, consts, const_off

    def program(self, name: str, shared_bytes: int = 0, arch: str = "sm_90", *, fresh: bool = False):
        """The decoded :class:`~warpsim.ptx.program.Program` of kernel ``name`` (cached);
        ``fresh``: with instructions of its own (the sanitizer and tracer wrap their ``exec``)."""
        guards.check_arch(arch)
        key = (name, int(shared_bytes), arch)
        if key not in self._programs:
            self._programs[key] = self._decode(name, shared_bytes, arch)
        prog = self._programs[key]
        if not fresh:
            return prog
        P = copy.copy(prog.program)
        P.instrs = [copy.copy(ins) for ins in P.instrs]
        for ins in P.instrs:  # their exec gets wrapped one by one: no fused runs
            ins.group = None
        return dataclasses.replace(prog, program=P)

    def _decode(self, name: str, shared_bytes: int, arch: str) -> "_Prog":
        from warpsim.ptx.parser import parse_body
        from warpsim.ptx.program import Program

        fn = self._entry(name)
        text = lower(self.parsed, fn)
        decls = []
        externs = []
        for v in self.parsed.variables.values():
            if v.space != "shared":
                continue
            if v.extern:
                externs.append(v)
            else:
                decls.append(f".shared .align {v.align} .{v.type} {v.name}[{v.count}];")
        lines = text.split("\n")
        if decls:
            lines[0] = " ".join(decls) + " " + lines[0]
        body = parse_body("\n".join(lines))
        guards.check_local(body, name)
        from warpsim.kernel.source import SourceMap, with_source_line
        smap = SourceMap(self.parsed.files, self.parsed.debug_strings, name)
        try:
            _check_opcodes(body)
        except PtxError as e:  # name the CUDA source line too (PTX with .loc)
            raise with_source_line(e, body, smap) from None
        syms, consts, const_size = self._layout(fn)
        global_vars = [v for v in self.parsed.variables.values() if v.space == "global"]
        # module .global variables come first in every launch's global memory, so their
        # addresses (baked into the decoded instructions) are known now
        from warpsim.ptx.memory import GlobalMemory
        for v, addr in zip(global_vars, _alloc_globals(GlobalMemory(), global_vars)):
            syms[v.name] = ("global", addr)
        # dynamic shared memory: every .extern .shared array starts right after the static
        # variables (they alias, as on the GPU) and holds shared_bytes
        static = _static_shared_bytes(body)
        dyn = 0
        for v in externs:
            a = max(v.align, 1)
            dyn = max(dyn, (static + a - 1) // a * a)
        for v in externs:
            syms[v.name] = ("shared", dyn)
        def undeclared(reg: str) -> int:  # a kernel declares every register (ptxas: Unknown symbol)
            raise PtxError(f"{reg} is not declared: no .reg of kernel {name} declares it and no "
                           f"variable or parameter has that name (ptxas: Unknown symbol)")
        try:
            P = Program(body, arch, reg_width=undeclared, symbols=syms, contract=self.contract,
                        version=self.parsed.version)
        except PtxError as e:  # name the CUDA source line too (PTX with .loc)
            raise with_source_line(e, body, smap) from None
        P.source = smap
        total_shared = max(P.shared_bytes, dyn + int(shared_bytes)) if externs else P.shared_bytes
        return _Prog(P, fn, consts, const_size, global_vars, total_shared)

    # -- launching ---------------------------------------------------------------------------
    def launch(self, name: str, grid, block, args: Sequence[Any], shared_bytes: int = 0,
               arch: str = "sm_90", *, check: bool = True, trace: Trace | None = None,
               cta_batch: int | None = None, progress: bool = False,
               max_steps: int = 50_000_000, cluster=None, executor=None,
               workers: int | None = None,
               max_total_steps: int = MAX_LAUNCH_WARP_INSTRUCTIONS,
               timeout_s: float | None = None) -> tuple[np.ndarray, ...]:
        """Run kernel ``name`` over ``grid`` x ``block`` threads; returns one array per array
        argument (its contents after the kernel; the inputs are not modified).

        ``grid``/``block``: int or 1-3-tuple.  ``args``: in parameter order; NumPy arrays
        become global buffers passed by pointer, NumPy scalars and Python numbers scalar
        parameters of the declared type, bytes or a NumPy structured scalar a ``.b8`` array
        parameter.  ``shared_bytes``: dynamic shared memory (``.extern .shared``).
        ``check``: run the sanitizer (raises :class:`SanitizerError` with the findings).
        ``trace``: a :class:`Trace` that collects register values after each instruction.
        ``cta_batch``: CTAs simulated together (memory grows with it).  ``max_steps``: a warp
        batch that runs this many instructions in all (barriers do not reset the count) without
        reaching its end is stopped with an error (a kernel waiting for another CTA, or looping
        through a barrier, would never finish).  ``max_total_steps``: the budget of the whole
        launch in warp instructions (one instruction run by one warp; default
        :data:`~warpsim.facts.limits.MAX_LAUNCH_WARP_INSTRUCTIONS`); the launch stops with
        :class:`~warpsim.errors.StepBudgetError` when it is spent.  ``timeout_s``: a wall-time
        budget in seconds (default None: none), counted from this call; past it the launch
        stops with :class:`~warpsim.errors.TimeBudgetError`.  ``cluster``: the cluster shape (int or 1-3-tuple,
        each dimension dividing the grid's; default: the kernel's ``.reqnctapercluster``, else
        no explicit cluster).  ``args`` may hold :class:`~warpsim.TensorMap` objects (a
        ``__grid_constant__`` CUtensorMap parameter, its tensor placed in global memory and
        returned among the outputs) and raw 128-byte maps.  ``executor``/``workers``: spread
        the CTAs over processes or machines (:mod:`warpsim.kernel.executor`): ``executor`` any
        :class:`concurrent.futures.Executor` (or ``"process"`` for a process pool of
        ``workers``, default all cores); same results and sanitizer findings as one process.
        """
        if isinstance(max_steps, (bool, np.bool_)) or not isinstance(max_steps, (int, np.integer)) \
                or max_steps < 1:
            raise TypeError(f"max_steps must be a positive integer, got {max_steps!r}")
        guards.check_total_steps(max_total_steps)
        guards.check_timeout(timeout_s)
        started = time.monotonic()
        if not isinstance(args, (list, tuple)):
            raise TypeError(f"args must be a list or tuple of arguments, got {type(args).__name__}")
        guards.check_cta_batch(cta_batch)
        guards.check_arch(arch)
        guards.check_array_args(args)
        guards.check_trace(trace)
        fn = self._entry(name)
        g3, b3 = _dim3(grid, "grid"), _dim3(block, "block")
        nthreads = b3[0] * b3[1] * b3[2]
        if nthreads > 1024:
            raise WarpsimError(f"block {b3} has {nthreads} threads; a CTA holds at most 1024")
        from warpsim.ptx.memory import MAX_SHARED_BYTES
        if not isinstance(shared_bytes, (int, np.integer)) or isinstance(shared_bytes, bool) \
                or not 0 <= shared_bytes <= MAX_SHARED_BYTES:
            raise WarpsimError(f"shared_bytes must be an int from 0 to {MAX_SHARED_BYTES} (the most "
                               f"shared memory a CTA can have), got {shared_bytes!r}")
        _check_target(self.parsed.target, arch)
        _check_shared(name, self.parsed.target, arch,
                      self.program(name, shared_bytes, arch).program.shared_bytes, int(shared_bytes))
        cshape, explicit = _cluster_shape(fn, cluster, g3)
        # validate arguments before any work (marshal raises on a mismatch)
        marshal(fn, _raw_args(args, None, fn), lambda i, a: 0)
        runner = _Launch(self, fn, g3, b3, list(args), int(shared_bytes), arch, trace,
                         cta_batch, progress)
        runner.cluster, runner.explicit_cluster = cshape, explicit
        runner.cluster_size = cshape[0] * cshape[1] * cshape[2]
        runner.max_steps = max_steps
        runner.max_total_steps = int(max_total_steps)
        runner.set_timeout(timeout_s, started)
        if executor is not None or workers is not None:
            from warpsim.kernel.executor import spread

            if executor is None or executor == "process":
                keep(self)  # the launch's own pool: forked workers start with this module decoded
            return spread(self, runner, check, executor, workers, run_part=run_part,
                          fallback=lambda r, c: self._launch_here(r, name, c, shared_bytes, arch))
        return self._launch_here(runner, name, check, shared_bytes, arch)

    def _launch_here(self, runner, name: str, check: bool, shared_bytes: int, arch: str):
        """Run a launch in this process; errors carry sources and device printf."""
        try:
            return self._launch(runner, name, check)
        except SanitizerError as e:
            err = e.with_sources(self.program(name, shared_bytes, arch).program)
            _attach_printf(err, runner)
            raise err from e.__cause__
        except WarpsimError as e:
            _attach_printf(e, runner)  # what the kernel printed before it stopped, as on the GPU
            raise

    def _launch(self, runner, name: str, check: bool):
        if not check:
            outs = runner.run(poison=None)[0]
            return LaunchResult(outs, ordered(runner.printf_sink))
        outs, rec = runner.run(poison=_POISON[0], record=True)
        if rec.findings:
            raise SanitizerError(name, rec.findings, outs)
        return LaunchResult(outs, ordered(runner.printf_sink))

    def debug(self, name: str, grid, block, args: Sequence[Any], shared_bytes: int = 0,
              arch: str = "sm_90", *, cta_batch: int | None = None, max_steps: int = 50_000_000,
              cluster=None, max_total_steps: int = MAX_LAUNCH_WARP_INSTRUCTIONS):
        """A :class:`~warpsim.kernel.debugger.Debugger` driving a launch of kernel ``name``
        (arguments as for :meth:`launch`, but no ``timeout_s``: a paused launch is not
        stuck); nothing runs until its ``run()``."""
        from warpsim.kernel.debugger import Debugger

        guards.check_cta_batch(cta_batch)
        guards.check_arch(arch)
        guards.check_array_args(args)
        guards.check_total_steps(max_total_steps)
        fn = self._entry(name)
        g3, b3 = _dim3(grid, "grid"), _dim3(block, "block")
        _check_target(self.parsed.target, arch)
        cshape, explicit = _cluster_shape(fn, cluster, g3)
        marshal(fn, _raw_args(args, None, fn), lambda i, a: 0)
        runner = _Launch(self, fn, g3, b3, list(args), int(shared_bytes), arch, None, cta_batch, False)
        runner.cluster, runner.explicit_cluster = cshape, explicit
        runner.cluster_size = cshape[0] * cshape[1] * cshape[2]
        runner.max_steps = max_steps
        runner.max_total_steps = int(max_total_steps)
        return Debugger(self, name, runner, self.program(name, shared_bytes, arch))


def _attach_printf(e: WarpsimError, runner) -> None:
    """Put the device printf of a launch that stopped on its error (``.printf``, ``.stdout``)."""
    e.printf = ordered(getattr(runner, "printf_sink", []))
    e.stdout = "".join(r.text for r in e.printf)


def _check_target(targets, arch: str) -> None:
    """A module built for a newer target (``.target sm_100a``) does not run on ``arch``."""
    have = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if have is None:
        raise WarpsimError(f"arch must look like sm_90, got {arch!r}")
    for t in targets:
        m = re.fullmatch(r"sm_(\d+)([af]?)", t)
        if m and (int(m.group(1)) > int(have.group(1)) or m.group(2) == "a" and m.group(1) != have.group(1)):
            raise PtxError(f"the module is built for .target {t}; it cannot run on {arch} "
                           f"(pass arch={t!r} to launch)")


#: The most shared memory (static + dynamic) one CTA can have, by SM version: what ptxas 13.0
#: accepts as static .shared for the arch-specific targets (sm_90a ... sm_110a: 0x38c00 bytes =
#: 227 KiB; sm_120a, sm_121a: 0x18c00 = 99 KiB).  Other SM versions: MAX_SHARED_BYTES.
SHARED_PER_CTA = {90: 0x38C00, 100: 0x38C00, 103: 0x38C00, 110: 0x38C00, 120: 0x18C00, 121: 0x18C00}
#: ptxas's limit on static .shared for every target without the 'a' suffix (0xc000 = 48 KiB;
#: more must be dynamic shared memory).
STATIC_SHARED_LIMIT = 0xC000


def _check_shared(kernel: str, targets, arch: str, static: int, dynamic: int) -> None:
    """Refuse a kernel whose static .shared ptxas rejects, or whose static + dynamic shared
    memory is more than a CTA of ``arch`` can have (the launch would fail on the GPU)."""
    from warpsim.ptx.memory import MAX_SHARED_BYTES

    for t in targets or [arch]:
        m = re.fullmatch(r"sm_(\d+)([af]?)", t)
        if m is None:
            continue
        limit = SHARED_PER_CTA.get(int(m.group(1)), STATIC_SHARED_LIMIT) if m.group(2) == "a" \
            else STATIC_SHARED_LIMIT
        if static > limit:
            raise PtxError(f"kernel {kernel} declares {static} bytes of static .shared memory; ptxas "
                           f"accepts at most {limit} for .target {t} (use dynamic shared memory: "
                           ".extern .shared and shared_bytes)")
    per_cta = SHARED_PER_CTA.get(int(re.fullmatch(r"sm_(\d+)[af]?", arch).group(1)), MAX_SHARED_BYTES)
    if static + dynamic > per_cta:
        raise WarpsimError(f"kernel {kernel}: {static} bytes of static .shared plus {dynamic} bytes of "
                           f"dynamic shared memory (shared_bytes) make {static + dynamic}; a CTA on "
                           f"{arch} has at most {per_cta}, so the launch would fail")


def _check_opcodes(body) -> None:
    """Every instruction must be one warpsim runs: PtxError naming it and its line if not."""
    from warpsim.ptx import registry

    for st in body.statements:
        try:
            registry.lookup(st.opcode)
        except PtxError as e:
            raise PtxError(f"line {st.line}: {quote(st.text)}: {e}") from None


def _alloc_globals(gmem, global_vars) -> list[int]:
    """Place module-scope .global variables (initialised or zero) in ``gmem``."""
    return [gmem.alloc(np.frombuffer(v.init, np.uint8) if v.init else None,
                       nbytes=None if v.init else v.nbytes, align=max(256, v.align))
            for v in global_vars]


def _scalar_size(t: str) -> int:
    from warpsim.ptx.module import SCALAR_BYTES
    return SCALAR_BYTES[t]


def _static_shared_bytes(body) -> int:
    """End of the body's static .shared variables, laid out as the Program lays them out."""
    from warpsim.ptx.program import _layout_vars

    return _layout_vars(body, "shared")[1]


@dataclass
class _Prog:
    program: Any
    fn: Function
    consts: list
    const_size: int
    global_vars: list
    shared_bytes: int  # static + dynamic shared memory of one CTA


class _Launch:
    """One launch: memories, CTA batches, the warp scheduler."""

    def __init__(self, module: Module, fn: Function, grid, block, args, shared_bytes, arch, trace,
                 cta_batch, progress) -> None:
        self.module, self.fn, self.grid, self.block = module, fn, grid, block
        self.args, self.shared_bytes, self.arch = args, shared_bytes, arch
        self.trace, self.cta_batch, self.progress = trace, cta_batch, progress
        self.on_warps = None  # f(warps, batch) before each batch is scheduled (the debugger)
        self.max_total_steps = MAX_LAUNCH_WARP_INSTRUCTIONS  # the launch's budget (warp instructions)
        self.total_steps = 0  # warp instructions run so far
        self.timeout_s = self.deadline = None  # wall-time budget (s) and its time.monotonic()
        self.started = 0.0
        self.spread_part = False  # a part of a spread launch (run_part): no cross-CTA check here
        self.cluster, self.cluster_size, self.explicit_cluster = (1, 1, 1), 1, False
        self.nthreads = block[0] * block[1] * block[2]
        self.nwarps = (self.nthreads + 31) // 32
        self.ncta = grid[0] * grid[1] * grid[2]

    def arrays(self) -> list:
        """(argument index, array) of every argument placed in global memory, in order."""
        return [(i, arr) for i, arr in ((i, _array_of(self.fn, i, a)) for i, a in enumerate(self.args))
                if arr is not None]

    # -- memories ----------------------------------------------------------------------------
    def _memories(self, prog: _Prog, gmem):
        from warpsim.ptx.memory import CONST_WINDOW, PARAM_WINDOW, FlatMemory

        sizes = [v.nbytes for v in prog.global_vars] + [np.asarray(a).nbytes for _, a in self.arrays()]
        gmem.reserve(sum(n + 1024 for n in sizes))  # room for all: no copy while placing them
        for v, addr in zip(prog.global_vars, _alloc_globals(gmem, prog.global_vars)):
            assert prog.program.symbols[v.name] == ("global", addr)
        buffers, placed = {}, {}
        for i, a in enumerate(self.args):
            arr = _array_of(self.fn, i, a)
            if arr is not None:
                if id(arr) not in placed:  # one buffer per array, however many maps name it
                    placed[id(arr)] = gmem.alloc(guards.native(arr))
                buffers[i] = placed[id(arr)]
        raw = marshal(self.fn, _raw_args(self.args, buffers, self.fn), lambda i, a: buffers[i])
        pbytes = bytearray(max(1, self.fn.param_bytes))
        for p, b in zip(self.fn.params, raw):
            pbytes[p.offset:p.offset + len(b)] = b
        param = FlatMemory("param", len(pbytes), per="all", readonly=True, window=PARAM_WINDOW,
                           data=np.frombuffer(bytes(pbytes), np.uint8).copy())
        cbytes = np.zeros(max(1, prog.const_size), np.uint8)
        for off, v in prog.consts:
            if v.init:
                cbytes[off:off + len(v.init)] = np.frombuffer(v.init, np.uint8)
        const = FlatMemory("const", cbytes.size, per="all", readonly=True, data=cbytes, window=CONST_WINDOW)
        return buffers, param, const

    def set_timeout(self, timeout_s: float | None, started: float) -> None:
        """The wall-time budget ``timeout_s`` (None: none), counted from ``started``."""
        self.timeout_s, self.started = timeout_s, started
        self.deadline = None if timeout_s is None else started + float(timeout_s)

    def batch_size(self, cta_batch: int | None = None) -> int:
        """CTAs simulated together: ``cta_batch`` or the default for this block size, in whole
        clusters."""
        cta_batch = self.cta_batch if cta_batch is None else cta_batch
        nb_max = cta_batch or min(self.ncta, _DEFAULT_BATCH, max(1, 4096 // max(1, self.nthreads) * 8))
        cs = self.cluster_size
        return max(cs, nb_max // cs * cs)  # whole clusters per batch

    def run(self, poison: int | None, record: bool = False, trace_off: bool = False,
            ctas: range | None = None, gmem=None):
        """Run CTAs ``ctas`` (positions in the launch's CTA order; default the whole grid) on
        global memory ``gmem`` (default a fresh :class:`GlobalMemory`); returns (outputs,
        recorder).  A part of the grid leaves ``Recorder.finish`` to the caller."""
        try:
            return self._run(poison, record, self.cta_batch, trace_off, ctas, gmem)
        except _Split:
            return self._run(poison, record, self.cluster_size, trace_off, ctas,
                             None if gmem is None else type(gmem)())

    def _run(self, poison, record, cta_batch, trace_off, ctas=None, gmem=None):
        from warpsim.ptx.memory import GlobalMemory
        from warpsim.kernel.checks import Recorder

        traced = self.trace is not None and not trace_off
        prog = self.module.program(self.fn.name, self.shared_bytes, self.arch,
                                   fresh=traced or record)
        if traced:
            self.trace._attach(prog.program, self)
        gmem = GlobalMemory() if gmem is None else gmem
        self.printf_sink = []  # device printf records of this run (ops/calls.py)
        buffers, param, const = self._memories(prog, gmem)
        self.buffer_addresses = buffers
        rec = Recorder(self.fn.name, self, enabled=record)
        if record:
            rec.attach(prog)
        const = rec.wrap(const, "const")
        gspace = rec.wrap(gmem, "global")
        nb_max = self.batch_size(cta_batch)
        if not cta_batch:  # the default: bounded by the shared memory its CTAs hold too
            nb_max = min(nb_max, max(1, _SHARED_BATCH_BYTES // max(1, prog.shared_bytes)))
        nb_max = guards.local_batch(nb_max, prog.program.local_bytes, self.nwarps)
        nb_max = max(self.cluster_size, nb_max // self.cluster_size * self.cluster_size)
        order = self.cta_of = _cluster_order(self.grid, self.cluster)
        whole = ctas is None or (ctas.start == 0 and ctas.stop >= self.ncta)
        ctas = range(self.ncta) if ctas is None else ctas
        bar = Progress(len(ctas)) if self.progress else None
        for start in range(ctas.start, ctas.stop, nb_max):  # CTA ids per batch (x fastest, cluster by cluster)
            batch = [order(i) for i in range(start, min(ctas.stop, start + nb_max))]
            rec.begin_batch(start, batch)
            self._run_batch(prog, batch, gspace, param, const, poison, rec, len(batch) > 1)
            rec.end_batch()
            if bar is not None:
                bar.update(len(batch))
        if whole and not self.spread_part:
            rec.finish()
        # views of the simulated memory (no copy): it goes when the outputs go; an array that
        # several arguments name (tensor maps) is one buffer, copied for every later output
        seen: set = set()
        outs = tuple(_view(gmem, buffers[i], arr, seen) for i, arr in self.arrays())
        return outs, rec

    def _run_batch(self, prog: _Prog, batch, gspace, param, const, poison, rec, batched: bool):
        from warpsim.ptx.cluster import Block
        from warpsim.ptx.machine import Context, WarpState, run
        from warpsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW, FlatMemory, PagedMemory

        P = prog.program
        nb = len(batch)
        smem = FlatMemory("shared", prog.shared_bytes, (nb,), per="warp", window=SHARED_WINDOW)
        if poison is not None:
            smem.data[...] = poison
        cs = self.cluster_size
        blk = Block(smem, cs)
        blk.checking = poison is not None
        # CTAs of a cluster wait for each other: each runs its own warps (rows of one CTA);
        # otherwise warp w of every CTA of the batch is one vectorised warp batch
        split = cs > 1
        groups = [(r, r + 1) for r in range(nb)] if split else [(0, nb)]
        cta_all = np.array(batch, np.uint32)  # (nb, 3)
        lane = np.arange(32, dtype=np.uint32)
        bx, by, bz = self.block
        warps = []
        for gi, (r0, r1) in enumerate(groups):
            sub = batch[r0:r1]
            if split:
                view = FlatMemory("shared", prog.shared_bytes, (1,), per="warp", window=SHARED_WINDOW,
                                  data=smem.data[r0:r1])
                sspace = rec.wrap(view, "shared")
            else:
                sspace = rec.wrap(smem, "shared")
            cta = cta_all[r0:r1]
            csh = np.array(self.cluster, np.uint32)
            cl_specials = {
                f"%cluster_ctaid.{c}": cta[:, i:i + 1] % csh[i] for i, c in enumerate("xyz")}
            cl_specials.update({f"%clusterid.{c}": cta[:, i:i + 1] // csh[i] for i, c in enumerate("xyz")})
            cl_specials.update({f"%nclusterid.{c}": self.grid[i] // self.cluster[i] for i, c in enumerate("xyz")})
            cl_specials.update({f"%cluster_nctaid.{c}": self.cluster[i] for i, c in enumerate("xyz")})
            cc = cta % csh
            cl_specials["%cluster_ctarank"] = (cc[:, 0:1] + csh[0] * (cc[:, 1:2] + csh[1] * cc[:, 2:3]))
            cl_specials["%cluster_nctarank"] = cs
            cl_specials["%is_explicit_cluster"] = int(self.explicit_cluster)
            for w in range(self.nwarps):
                t = w * 32 + lane
                valid = t < self.nthreads
                tx, ty, tz = unravel(t, self.block)
                specials = {
                    "%tid.x": tx, "%tid.y": ty, "%tid.z": tz,
                    "%ntid.x": bx, "%ntid.y": by, "%ntid.z": bz,
                    "%ctaid.x": cta[:, 0:1], "%ctaid.y": cta[:, 1:2], "%ctaid.z": cta[:, 2:3],
                    "%nctaid.x": self.grid[0], "%nctaid.y": self.grid[1], "%nctaid.z": self.grid[2],
                    "%warpid": w, "%nwarpid": self.nwarps, **cl_specials,
                }
                spaces = {"global": gspace, "shared": sspace, "param": param, "const": const}
                k = r1 - r0
                if P.local_bytes:  # paged: costs the bytes touched, not those declared
                    lmem = PagedMemory("local", P.local_bytes, (k,), window=LOCAL_WINDOW, fill=poison or 0)
                    spaces["local"] = rec.wrap(lmem, "local")
                regs = _poisoned_registers(P, (k, 32), poison) if poison is not None else {}
                ctx = Context(regs, (k,), self.arch, spaces, specials)
                ctx.unwritten_reads_zero = poison is None  # checked runs start poisoned
                ctx.launch_info = (w, sub)
                ctx.printf_sink = self.printf_sink
                if rec.enabled:
                    ctx.on_instruction = rec.on_instruction
                ctx.block, ctx.cta_base = blk, r0
                ctx.printf_sink = self.printf_sink
                mask = None if valid.all() else np.broadcast_to(valid, (k, 32)).copy()
                warps.append([ctx, WarpState.start(len(P), mask), "ready", None, gi, gi // cs if split else 0,
                              w, sub, r0, None])
        blk.fenced[...] = blk.data
        if self.on_warps is not None:
            self.on_warps(warps, batch)
        self._schedule(P, warps, rec, batch, batched and not split, run)

    def _schedule(self, P, warps, rec, batch, batched, run) -> None:
        # entry: [ctx, state, status, wait info, CTA group, cluster group, warp in CTA, CTAs, row,
        #         last failed mbarrier wait (instruction, epoch, failures at that epoch)]
        arrived: dict = {}  # (CTA group, barrier id) -> [(entry index, expected threads or None, instr)]
        carrived: dict = {}  # cluster group -> set of entry indices arrived at barrier.cluster
        while True:
            for w, entry in enumerate(warps):
                ctx, state, status = entry[0], entry[1], entry[2]
                if status != "ready":
                    continue
                rec.actor = entry[6]
                rec.row_base = entry[8]
                # max_steps spans the warp's whole run (a loop through a barrier ends too);
                # max_total_steps the whole launch, in warp instructions (k warps run together)
                k = int(ctx.batch[0]) if ctx.batch else 1
                own = self.max_steps - ctx.executed
                left = (self.max_total_steps - self.total_steps) // k
                before = ctx.executed
                try:
                    guards.run_timed(self, run, P, ctx, state, min(own, left), k, before)
                except TimeBudgetError:
                    raise
                except StepLimitError as e:
                    if left < own:
                        self.total_steps += (e.steps - before) * k
                        raise guards.budget_error(self.max_total_steps, self.total_steps) from None
                    raise finding_from_error(e, self, entry[7], entry[6], rec) from None
                except WarpsimError as e:
                    raise finding_from_error(e, self, entry[7], entry[6], rec) from None
                self.total_steps += (ctx.executed - before) * k
                if state.status == "exited":
                    entry[2] = "exited"
                    row = entry[8]
                    if all(e[2] == "exited" for e in warps if e[8] == row and e[4] == entry[4]):
                        blk = getattr(ctx, "block", None)
                        if blk is not None and len(warps) > self.nwarps:  # CTAs scheduled apart
                            blk.exited[row] = True
                    continue
                ins, mask = state.barrier
                if batched:
                    _check_batch_barrier(state, mask)
                op = ins.info.get("op")
                if op == "mbarrier":
                    ok_all, rows, offs, blk, _ = ctx.mbar_wait
                    if rows.size < int(np.count_nonzero(mask if mask is not None else np.ones(ctx.shape))):
                        rec.barrier()  # a completed phase orders what came before it
                        continue  # some lane passed: keep running
                    last = entry[9]
                    fails = last[2] + 1 if last is not None and last[1] == blk.mbar.epoch else 1
                    if (last is None or last[0] != id(ins) or last[1] != blk.mbar.epoch) and fails < 64:
                        entry[9] = (id(ins), blk.mbar.epoch, fails)  # a failed test may be no loop
                        continue
                    entry[2] = "mbar"  # failed again with nothing changed: spinning; park it
                    entry[3] = (blk.mbar.epoch, ins, rows, offs, blk)
                    continue
                if op in ("cluster_arrive", "cluster_wait"):
                    cg = entry[5]
                    got = carrived.setdefault(cg, set())
                    if op == "cluster_arrive":
                        if w in got:
                            raise finding_from_error(PtxError(
                                f"line {ins.line}: {ins.text}: a second barrier.cluster.arrive before "
                                "barrier.cluster.wait").at(instruction=ins.text, line=ins.line),
                                self, entry[7], entry[6], rec) from None
                        got.add(w)
                        continue
                    if w not in got:
                        got.add(w)  # wait without arrive: arrive too (the .aligned pair is one step)
                    entry[2] = "cwait"
                    entry[3] = (cg, ins)
                    continue
                bid = _uniform(ins.info["id"](ctx), ins)
                cnt = ins.info.get("count")
                count = None if cnt is None else _uniform(cnt(ctx), ins)
                arrived.setdefault((entry[4], bid), []).append((w, count, ins))
                if ins.info.get("op") == "arrive":
                    continue
                entry[2] = "waiting"
                entry[3] = ((entry[4], bid), ins)
            live = [e for e in warps if e[2] != "exited"]
            if not live:
                _tmem_at_exit(self, batch, warps, rec)
                _setmaxnreg_at_exit(self, batch, warps, rec)
                return
            released = False
            for key, arr in list(arrived.items()):
                counts = {c for _, c, _ in arr if c is not None}
                need = max(counts) // 32 if counts else sum(1 for e in live if e[4] == key[0])
                if len({w for w, _, _ in arr}) >= need:
                    for w, _, _ in arr:
                        if warps[w][2] == "waiting" and warps[w][3][0] == key:
                            warps[w][2] = "ready"
                            warps[w][3] = None
                    del arrived[key]
                    released = True
                    rec.barrier(key, arr, warps)
            for cg, got in list(carrived.items()):
                members = [i for i, e in enumerate(warps) if e[5] == cg]
                if all(i in got or warps[i][2] == "exited" for i in members) and \
                        any(warps[i][2] == "cwait" for i in members):
                    for i in members:
                        if warps[i][2] == "cwait":
                            warps[i][2], warps[i][3] = "ready", None
                    del carrived[cg]
                    released = True
                    rec.barrier()
            for e in warps:
                if e[2] == "mbar" and e[3][4].mbar.epoch != e[3][0]:
                    e[2], e[3] = "ready", None
                    released = True
            if not any(e[2] == "ready" for e in warps):
                if not released:
                    if batched and any(e[2] == "mbar" for e in warps):
                        raise _Split()  # CTAs waiting in lock step on each other's paths: one by one
                    raise _deadlock(self, batch, warps, arrived)


def _tmem_at_exit(launch, batch, warps, rec) -> None:
    """Tensor Memory still allocated when every warp of the CTAs has exited: a ``tmem``
    finding (see :mod:`warpsim.ptx.ops.tcgen05`)."""
    tm = next((e[0].spaces["tmem"] for e in warps if "tmem" in e[0].spaces), None)
    if tm is None:
        return
    from warpsim.ptx.ops.tcgen05 import Tcgen05Error, leaks
    held = leaks(tm)
    if held:
        cta, col, n = held[0]
        e = Tcgen05Error(f"Tensor Memory columns {col}..{col + n - 1} are still allocated when the "
                         "CTA exits: tcgen05.dealloc every allocation before exit").at(warp=(cta,))
        raise finding_from_error(e, launch, batch, 0, rec) from None


def _setmaxnreg_at_exit(launch, batch, warps, rec) -> None:
    """The warps of each warpgroup must have run the same setmaxnreg instructions (per CTA
    group of the schedule): a ``divergent-sync`` finding naming the instruction otherwise."""
    groups: dict = {}
    for e in warps:
        log = getattr(e[0], "setmaxnreg_log", None)
        if log:
            groups.setdefault(e[4], {})
    if not groups:
        return
    from warpsim.ptx.ops.cluster import setmaxnreg_divergence
    for e in warps:
        if e[4] in groups:
            groups[e[4]][e[6]] = getattr(e[0], "setmaxnreg_log", None) or []
    for key, logs in groups.items():
        err = setmaxnreg_divergence(logs)
        if err is not None:
            ent = next(x for x in warps if x[4] == key and x[6] == err.warp[0])
            cta = ent[7] if ent[7] is not None and len(ent[7]) else batch
            row = min(err.cta_row, len(cta) - 1)
            err.at(warp=(row,))
            raise finding_from_error(err, launch, cta, ent[6], rec) from None


def _array_of(fn, i: int, a):
    """The array argument ``i`` places in global memory (a buffer, a TensorMap's tensor), or None."""
    from warpsim.kernel.tensormap import TensorMap

    if isinstance(a, TensorMap):
        return a.tensor
    if is_buffer(a) and not _is_raw_map(fn, i, a):
        return a
    return None


def _is_raw_map(fn, i: int, a) -> bool:
    """A uint8 array of 128 bytes for a 128-byte .b8-array parameter (a CUtensorMap): its bytes,
    by value (other arrays are passed by pointer)."""
    if fn is None or i >= len(fn.params):
        return False
    p = fn.params[i]
    return isinstance(a, np.ndarray) and p.is_array and a.dtype == np.uint8 and a.size == p.nbytes == 128


def _raw_args(args, buffers=None, fn=None) -> list:
    """``args`` with TensorMaps (and raw byte maps) as the parameter bytes they pass."""
    from warpsim.kernel.tensormap import TensorMap

    out = []
    for i, a in enumerate(args):
        if isinstance(a, TensorMap):
            raw = a.param_bytes(None if buffers is None or a.tensor is None else buffers[i])
            p = fn.params[i] if fn is not None and i < len(fn.params) else None
            if p is not None and p.is_array and p.nbytes > 128:  # a struct holding the map first
                raw = raw + bytes(p.nbytes - 128)  # (CuTe's TMA Copy_Atom, 256 bytes)
            out.append(raw)
        elif _is_raw_map(fn, i, a):
            out.append(a.tobytes())
        else:
            out.append(a)
    return out


def _cluster_order(grid, cluster):
    """linear launch index -> CTA id, numbering the CTAs cluster by cluster (x fastest in
    both), so the CTAs of a cluster are consecutive."""
    if cluster == (1, 1, 1):
        return lambda i: unravel(i, grid)
    cs = cluster[0] * cluster[1] * cluster[2]
    ncl = tuple(g // c for g, c in zip(grid, cluster))

    def order(i):
        c = unravel(i // cs, ncl)
        r = unravel(i % cs, cluster)
        return tuple(int(c[k] * cluster[k] + r[k]) for k in range(3))
    return order


def _cluster_shape(fn, cluster, grid) -> tuple[tuple[int, int, int], bool]:
    """(cluster shape, explicit) of a launch: ``cluster`` or the kernel's .reqnctapercluster."""
    req = fn.directives.get("reqnctapercluster")
    if cluster is None and req:
        cluster = tuple(req)
    if cluster is None:
        if "explicitcluster" in fn.directives:
            raise WarpsimError(f"kernel {fn.name} is .explicitcluster: pass cluster=(x, y, z) to launch")
        return (1, 1, 1), False
    c3 = _dim3(cluster, "block")
    if req and tuple(req) + (1,) * (3 - len(req)) != c3:
        raise WarpsimError(f"cluster {c3} differs from kernel {fn.name}'s .reqnctapercluster {tuple(req)}")
    for i, (c, g) in enumerate(zip(c3, grid)):
        if g % c:
            raise WarpsimError(f"cluster dimension {'xyz'[i]} is {c}, which does not divide the grid's {g}")
    n = c3[0] * c3[1] * c3[2]
    if n > 16:
        raise WarpsimError(f"cluster {c3} has {n} CTAs; an sm_90 cluster holds at most 16 (8 portable)")
    return c3, True


def _view(gmem, address: int, a: np.ndarray, seen: set) -> np.ndarray:
    """Argument ``a``'s buffer at ``address`` of ``gmem``, as an array like ``a``: a view the
    first time, a copy for an address already returned (outputs never alias)."""
    from warpsim.ptx.memory import GLOBAL_BASE

    o = address - GLOBAL_BASE
    native = a.dtype.newbyteorder("=")
    v = gmem.data[o:o + a.nbytes].view(native).reshape(a.shape)
    if native != a.dtype:  # a non-native byte order (>u4): the values, in the caller's dtype
        return v.astype(a.dtype)
    if address in seen:
        return v.copy()
    seen.add(address)
    return v


def _uniform(v, ins) -> int:
    vals = np.unique(np.asarray(v))
    if vals.size != 1:
        raise _Split()
    return int(vals[0])


def _check_batch_barrier(state, mask) -> None:
    """The CTAs of a batch must reach a barrier together, else run them one by one."""
    arrived = mask.any(axis=-1) if mask is not None else None
    if arrived is None:
        return
    alive = np.zeros_like(arrived)
    for fr in state.stack:
        alive |= (np.ones_like(mask) if fr.mask is None else fr.mask).any(axis=-1)
    if not np.array_equal(arrived | alive, arrived):
        raise _Split()


def _deadlock(launch, batch, warps, arrived) -> SanitizerError:
    waiting = [(w, e) for w, e in enumerate(warps) if e[2] in ("waiting", "mbar", "cwait")]
    exited = [e[6] for e in warps if e[2] == "exited"]
    w0, e0 = waiting[0]
    parts = []
    for w, e in waiting:
        who = f"warp {e[6]}" + (f" of CTA {tuple(int(x) for x in e[7][0])}" if len(warps) > launch.nwarps else "")
        if e[2] == "mbar":
            _, ins, rows, offs, blk = e[3]
            r, o = int(rows[0]), int(offs[0])
            parts.append(f"{who} waits on an mbarrier phase that never completes (line {ins.line}: {ins.text}; "
                         f"{blk.mbar.describe(r, o)})")
        elif e[2] == "cwait":
            ins = e[3][1]
            parts.append(f"{who} waits at barrier.cluster (line {ins.line}: {ins.text})")
        else:
            (_, b), ins = e[3]
            parts.append(f"{who} waits at barrier {b} (line {ins.line}: {ins.text})")
    kind = "mbarrier deadlock" if any(e[2] == "mbar" for _, e in waiting) else "barrier deadlock"
    msg = (f"{kind}: " + "; ".join(parts[:8]) + (f"; ... ({len(parts)} warps wait)" if len(parts) > 8 else "")
           + (f"; warps {sorted(set(exited))} have exited" if exited else "")
           + "; no warp left running can let them pass")
    ins = e0[3][1]
    f = Finding("deadlock", launch.fn.name, ins.text, ins.line, tuple(int(x) for x in e0[7][0]), e0[6],
                None, None, msg)
    return SanitizerError(launch.fn.name, [f], None)


def _poisoned_registers(P, shape, poison: int) -> dict:
    """Every declared register an instruction names, filled with ``poison`` bytes (predicates:
    poison & 1)."""
    from warpsim.facts.types import DTYPES, TYPE_BITS

    regs = {}
    body = P.body

    def fill(name, t):
        w = TYPE_BITS[t]
        if w == 1:
            regs[name] = np.full(shape, bool(poison & 1))
        else:
            dt = DTYPES[w]
            regs[name] = np.full(shape, int.from_bytes(bytes([poison]) * (w // 8), "little"), dt)
    from warpsim.ptx.usage import used_registers
    for name, t in used_registers(body).items():  # registers named by an instruction only
        fill(name, t)
    return regs


def run_part(job: dict, start: int, stop: int) -> dict:
    """Run CTAs ``start``..``stop``-1 (positions in the launch's CTA order) of the launch
    ``job`` (see :func:`warpsim.kernel.executor.spread`); returns the bytes they stored and the
    device printf records.  Runs in a worker."""
    from warpsim.kernel.executor import TrackedGlobal

    m = cached_module(job["text"], job.get("contract", True))
    fn = m._entry(job["name"])
    trace = Trace(**job["trace"]) if job["trace"] is not None else None
    runner = _Launch(m, fn, job["grid"], job["block"], job["args"], job["shared_bytes"],
                     job["arch"], trace, job["cta_batch"], False)
    runner.max_steps = job["max_steps"]
    runner.max_total_steps = job.get("max_total_steps", MAX_LAUNCH_WARP_INSTRUCTIONS)
    runner.set_timeout(job.get("timeout_s"), time.monotonic())  # each part: the whole budget
    runner.spread_part = True  # the parent checks races between CTAs, over all parts
    out: dict = {"error": None, "trace": None, "checks": None}
    g = TrackedGlobal()
    check = job.get("check", False)
    try:
        _, rec = runner.run(poison=_POISON[0] if check else None, record=check,
                            ctas=range(start, stop), gmem=g)
        if check:  # merged in the parent, which checks races between CTAs over the launch
            out["checks"] = rec.part()
        out["diffs"] = g.diffs(runner.buffer_addresses, [a for _, a in runner.arrays()],
                               [i for i, _ in runner.arrays()])
    except SanitizerError as e:  # rebuilt in the parent (its constructor does not pickle)
        out["error"] = (e.kernel, e.findings)
    out["steps"] = runner.total_steps
    out["printf"] = list(getattr(runner, "printf_sink", []))
    out["addresses"] = getattr(runner, "buffer_addresses", None)
    if trace is not None:
        out["trace"] = trace.records
    return out


_MODULES: "dict[tuple[str, bool], Module]" = {}
_MODULES_KEPT = 16


def cached_module(ptx_text: str, contract: bool = True) -> Module:
    """The :class:`Module` of ``ptx_text`` (and ``contract``), parsed once per process (the
    last ``_MODULES_KEPT`` are kept, with their decoded kernels)."""
    key = (ptx_text, bool(contract))
    m = _MODULES.pop(key, None)
    if m is None:
        m = Module(ptx_text, contract=contract)
    keep(m, key)
    return m


def keep(module: Module, key: "tuple[str, bool] | None" = None) -> None:
    """Keep ``module`` (with the kernels it decoded so far) as :func:`cached_module`'s module
    of its text: processes forked from this one (a spread launch's worker pool) then start
    with it decoded."""
    key = key or (module.text, module.contract)
    _MODULES.pop(key, None)
    while len(_MODULES) >= _MODULES_KEPT:
        del _MODULES[next(iter(_MODULES))]
    _MODULES[key] = module  # most recently used last


def launch(ptx_text: str, name: str, grid, block, args: Sequence[Any], shared_bytes: int = 0,
           arch: str = "sm_90", **kw) -> tuple[np.ndarray, ...]:
    """One-call form of ``Module(ptx_text).launch(name, grid, block, args, ...)``; the module
    is parsed and its kernels decoded once per text (:func:`cached_module`)."""
    return cached_module(ptx_text).launch(name, grid, block, args, shared_bytes, arch, **kw)
