"""Run whole kernels: a PTX module, a grid of CTAs of several warps, global memory.

:class:`Module` parses a module as ``nvcc -ptx`` writes it; :meth:`Module.launch` runs one of
its kernels over a grid and returns the contents of every array argument afterwards.

How a launch runs.  Array arguments are copied into a simulated global memory at real 64-bit
addresses (:class:`~warpsim.ptx.memory.GlobalMemory`) and passed by pointer; scalars become
parameter bytes of the declared type (:mod:`warpsim.kernel.args`).  CTAs run in batches
(``cta_batch``, default up to 64): warp *w* of every CTA of a batch is one vectorized warp
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

``executor=`` / ``workers=`` spread the CTA batches over processes or machines with the same
results (:mod:`warpsim.kernel.executor`); :func:`launch` parses and decodes a module once per
PTX text (:func:`cached_module`).  Memory: the buffers once (the outputs are views of the
simulated global memory) plus one CTA batch's registers and shared memory.

The sanitizer (``check=True``, the default) raises :class:`SanitizerError` listing
:class:`Finding` s (see :mod:`warpsim.kernel.sanitizer`); the outputs are on the exception.
``check=False`` skips the race and uninitialised-value checks (which run the launch twice and
record every access: several times slower); errors that stop execution (out-of-bounds or
misaligned access, divergent ``.sync.aligned``, invalid sparse metadata, barrier deadlock) raise
in both modes, naming kernel, instruction, CTA, warp, lane, address.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from warpsim._util.progress import Progress
from warpsim.errors import PtxError, WarpsimError, quote
from warpsim.kernel.args import is_buffer, marshal
from warpsim.kernel.printf import LaunchResult, ordered
from warpsim.ptx.link import lower
from warpsim.ptx.module import Function, Module as _ParsedModule, Param, parse_module
from warpsim.kernel.sanitizer import Finding, SanitizerError, Trace, finding_from_error, unravel

__all__ = ["Kernel", "Module", "launch"]

_DEFAULT_BATCH = 64
_POISON = (0x00, 0xA5)  # fill bytes of uninitialised registers/shared/local in the two check runs


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

    def __init__(self, ptx_text: str) -> None:
        from warpsim.kernel.cuda import looks_like_cuda
        if looks_like_cuda(ptx_text):
            raise PtxError("this is CUDA source: use Module.from_cu(source, arch=...) to compile "
                           "it with nvcc first")
        self.text = ptx_text
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
            raise PtxError(f"no kernel named {name!r} in this module; kernels: "
                           f"{', '.join(self.parsed.entries) or 'none'}")
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
        key = (name, int(shared_bytes), arch)
        if key not in self._programs:
            self._programs[key] = self._decode(name, shared_bytes, arch)
        prog = self._programs[key]
        if not fresh:
            return prog
        P = copy.copy(prog.program)
        P.instrs = [copy.copy(ins) for ins in P.instrs]
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
        _check_opcodes(body)
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
        P = Program(body, arch, symbols=syms)
        total_shared = max(P.shared_bytes, dyn + int(shared_bytes)) if externs else P.shared_bytes
        return _Prog(P, fn, consts, const_size, global_vars, total_shared)

    # -- launching ---------------------------------------------------------------------------
    def launch(self, name: str, grid, block, args: Sequence[Any], shared_bytes: int = 0,
               arch: str = "sm_90", *, check: bool = True, trace: Trace | None = None,
               cta_batch: int | None = None, progress: bool = False,
               max_steps: int = 50_000_000, executor=None,
               workers: int | None = None) -> tuple[np.ndarray, ...]:
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
        through a barrier, would never finish).  ``executor``/``workers``: spread the CTAs over
        processes or machines (:mod:`warpsim.kernel.executor`): ``executor`` any
        :class:`concurrent.futures.Executor` (or ``"process"`` for a process pool of
        ``workers``, default all cores); same results as one process.
        """
        if isinstance(max_steps, (bool, np.bool_)) or not isinstance(max_steps, (int, np.integer)) \
                or max_steps < 1:
            raise TypeError(f"max_steps must be a positive integer, got {max_steps!r}")
        if not isinstance(args, (list, tuple)):
            raise TypeError(f"args must be a list or tuple of arguments, got {type(args).__name__}")
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
        # validate arguments before any work (marshal raises on a mismatch)
        marshal(fn, args, lambda i, a: 0)
        runner = _Launch(self, fn, g3, b3, list(args), int(shared_bytes), arch, trace,
                         cta_batch, progress)
        runner.max_steps = max_steps
        if executor is not None or workers is not None:
            from warpsim.kernel.executor import spread

            return spread(self, runner, check, executor, workers, run_part=run_part, fallback=_run_here)
        return _run_here(runner, check)


def _run_here(runner: "_Launch", check: bool) -> tuple[np.ndarray, ...]:
    """Run a launch in this process (with the sanitizer's two runs when ``check``)."""
    name = runner.fn.name
    try:
        if not check:
            outs = runner.run(poison=None)[0]
            return LaunchResult(outs, ordered(runner.printf_sink))
        from warpsim.kernel.sanitizer import Digests

        d1 = Digests()
        outs, rec = runner.run(poison=_POISON[0], record=True, digests=d1)
        printed = ordered(runner.printf_sink)
        findings = list(rec.findings)
        d2 = Digests(reference=d1)
        outs2, rec2 = runner.run(poison=_POISON[1], record=True, trace_off=True, digests=d2)
        findings += rec2.uninitialised(outs, outs2, runner, d2.first)
        if findings:
            raise SanitizerError(name, findings, outs)
        return LaunchResult(outs, printed)
    except WarpsimError as e:
        # what the kernel printed before it stopped (an assert, a fault), as on the GPU
        e.printf = ordered(getattr(runner, "printf_sink", []))
        e.stdout = "".join(r.text for r in e.printf)
        raise


def run_part(job: dict, start: int, stop: int) -> dict:
    """Run CTAs ``start``..``stop``-1 of the launch ``job`` (see :func:`spread`); returns the
    bytes they stored (:mod:`warpsim.kernel.executor`) and, with ``check``, the sanitizer's records.  Runs in a worker."""
    from warpsim.kernel.executor import TrackedGlobal, instr_ref
    from warpsim.kernel.sanitizer import Digests

    m = cached_module(job["text"])
    fn = m._entry(job["name"])
    trace = Trace(**job["trace"]) if job["trace"] is not None else None
    runner = _Launch(m, fn, job["grid"], job["block"], job["args"], job["shared_bytes"],
                     job["arch"], trace, job["cta_batch"], False)
    runner.max_steps = job["max_steps"]
    ctas = range(start, stop)
    out: dict = {"error": None, "trace": None}
    try:
        if not job["check"]:
            g = TrackedGlobal()
            runner.run(poison=None, ctas=ctas, gmem=g)
            out["printf"] = list(runner.printf_sink)
            out["diffs"] = g.diffs(runner.buffer_addresses, job["args"])
        else:
            d1, ga = Digests(), TrackedGlobal()
            _, rec = runner.run(poison=_POISON[0], record=True, digests=d1, ctas=ctas, gmem=ga)
            out["printf"] = list(runner.printf_sink)
            d2, gb = Digests(reference=d1), TrackedGlobal()
            _, rec2 = runner.run(poison=_POISON[1], record=True, trace_off=True, digests=d2,
                                 ctas=ctas, gmem=gb)
            out["diffs"] = ga.diffs(runner.buffer_addresses, job["args"])
            out["diffs2"] = gb.diffs(runner.buffer_addresses, job["args"])
            out["findings"], out["sites"] = list(rec.findings), list(rec.sites)
            out["keys"] = [(k[0], rec.sites[k[1]], rec.sites[k[2]], k[3]) for k in rec.keys]
            out["cross"] = np.concatenate(rec.cross) if rec.cross else np.zeros((0, 4), np.uint64)
            out["sites2"] = list(rec2.sites)
            out["stores2"] = np.concatenate(rec2.stores) if rec2.stores else np.zeros((0, 5), np.uint64)
            out["first"] = instr_ref(d2.first)
    except SanitizerError as e:  # rebuilt in the parent (its constructor does not pickle)
        out["error"] = (e.kernel, e.findings)
        out["printf"] = list(getattr(runner, "printf_sink", []))
    out["addresses"] = getattr(runner, "buffer_addresses", None)
    if trace is not None:
        out["trace"] = trace.records
    return out


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
        self.nthreads = block[0] * block[1] * block[2]
        self.nwarps = (self.nthreads + 31) // 32
        self.ncta = grid[0] * grid[1] * grid[2]

    # -- memories ----------------------------------------------------------------------------
    def _memories(self, prog: _Prog, gmem):
        from warpsim.ptx.memory import FlatMemory

        sizes = [v.nbytes for v in prog.global_vars] + [np.asarray(a).nbytes for a in self.args
                                                         if is_buffer(a)]
        gmem.reserve(sum(n + 1024 for n in sizes))  # room for all: no copy while placing them
        for v, addr in zip(prog.global_vars, _alloc_globals(gmem, prog.global_vars)):
            assert prog.program.symbols[v.name] == ("global", addr)
        buffers = {}
        for i, a in enumerate(self.args):
            if is_buffer(a):
                buffers[i] = gmem.alloc(np.ascontiguousarray(a))
        raw = marshal(self.fn, self.args, lambda i, a: buffers[i])
        pbytes = bytearray(max(1, self.fn.param_bytes))
        for p, b in zip(self.fn.params, raw):
            pbytes[p.offset:p.offset + len(b)] = b
        param = FlatMemory("param", len(pbytes), per="all", readonly=True,
                           data=np.frombuffer(bytes(pbytes), np.uint8).copy())
        cbytes = np.zeros(max(1, prog.const_size), np.uint8)
        for off, v in prog.consts:
            if v.init:
                cbytes[off:off + len(v.init)] = np.frombuffer(v.init, np.uint8)
        const = FlatMemory("const", cbytes.size, per="all", readonly=True, data=cbytes)
        return buffers, param, const

    def batch_size(self, cta_batch: int | None = None) -> int:
        """CTAs simulated together (``cta_batch``, or the default for this block size)."""
        cta_batch = self.cta_batch if cta_batch is None else cta_batch
        return cta_batch or min(self.ncta, _DEFAULT_BATCH, max(1, 4096 // max(1, self.nthreads) * 8))

    def run(self, poison: int | None, record: bool = False, trace_off: bool = False, digests=None,
            ctas: range | None = None, gmem=None):
        """Run CTAs ``ctas`` (linear ids; default the whole grid) on global memory ``gmem``
        (default a fresh :class:`GlobalMemory`); returns (outputs, recorder).  A part of the
        grid leaves the cross-CTA race check (``Recorder.finish``) to the caller."""
        try:
            return self._run(poison, record, self.cta_batch, trace_off, digests, ctas, gmem)
        except _Split:
            if digests is not None:
                digests.__init__(digests.reference)
            return self._run(poison, record, 1, trace_off, digests, ctas,
                             None if gmem is None else type(gmem)())

    def _run(self, poison, record, cta_batch, trace_off, digests=None, ctas=None, gmem=None):
        from warpsim.ptx.memory import GlobalMemory
        from warpsim.kernel.sanitizer import Recorder

        traced = self.trace is not None and not trace_off
        prog = self.module.program(self.fn.name, self.shared_bytes, self.arch,
                                   fresh=traced or digests is not None)
        if traced:
            self.trace._attach(prog.program, self)
        if digests is not None:
            digests.attach(prog.program)
        gmem = GlobalMemory() if gmem is None else gmem
        self.printf_sink = []  # device printf records of this run (ops/calls.py)
        buffers, param, const = self._memories(prog, gmem)
        self.buffer_addresses = buffers
        rec = Recorder(self.fn.name, self, enabled=record)
        gspace = rec.wrap(gmem, "global")
        nb_max = self.batch_size(cta_batch)
        whole = ctas is None or (ctas.start == 0 and ctas.stop >= self.ncta)
        ctas = range(self.ncta) if ctas is None else ctas
        bar = Progress(len(ctas)) if self.progress else None
        for start in range(ctas.start, ctas.stop, nb_max):  # CTA ids per batch (x fastest)
            batch = [unravel(i, self.grid) for i in range(start, min(ctas.stop, start + nb_max))]
            rec.begin_batch(start, batch)
            self._run_batch(prog, batch, gspace, param, const, poison, rec, len(batch) > 1)
            rec.end_batch()
            if bar is not None:
                bar.update(len(batch))
        if whole:
            rec.finish()
        # views of the simulated memory (no copy): it goes when the outputs go
        outs = tuple(_view(gmem, buffers[i], a) for i, a in enumerate(self.args) if is_buffer(a))
        return outs, rec

    def _run_batch(self, prog: _Prog, batch, gspace, param, const, poison, rec, batched: bool):
        from warpsim.ptx.machine import Context, WarpState, run
        from warpsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW, FlatMemory

        P = prog.program
        nb = len(batch)
        smem = FlatMemory("shared", prog.shared_bytes, (nb,), per="warp", window=SHARED_WINDOW)
        if poison is not None:
            smem.data[...] = poison
        sspace = rec.wrap(smem, "shared")
        cta = np.array(batch, np.uint32)  # (nb, 3)
        lane = np.arange(32, dtype=np.uint32)
        bx, by, bz = self.block
        warps = []
        for w in range(self.nwarps):
            t = w * 32 + lane
            valid = t < self.nthreads
            tx, ty, tz = unravel(t, self.block)
            specials = {
                "%tid.x": tx, "%tid.y": ty, "%tid.z": tz,
                "%ntid.x": bx, "%ntid.y": by, "%ntid.z": bz,
                "%ctaid.x": cta[:, 0:1], "%ctaid.y": cta[:, 1:2], "%ctaid.z": cta[:, 2:3],
                "%nctaid.x": self.grid[0], "%nctaid.y": self.grid[1], "%nctaid.z": self.grid[2],
                "%warpid": w, "%nwarpid": self.nwarps,
            }
            spaces = {"global": gspace, "shared": sspace, "param": param, "const": const}
            if P.local_bytes:
                lmem = FlatMemory("local", P.local_bytes, (nb,), per="lane", window=LOCAL_WINDOW)
                if poison is not None:
                    lmem.data[...] = poison
                spaces["local"] = lmem
            regs = _poisoned_registers(P, (nb, 32), poison) if poison is not None else {}
            ctx = Context(regs, (nb,), self.arch, spaces, specials)
            ctx.launch_info = (w, batch)
            ctx.printf_sink = self.printf_sink
            mask = None if valid.all() else np.broadcast_to(valid, (nb, 32)).copy()
            warps.append([ctx, WarpState.start(len(P), mask), "ready", None])
        self._schedule(P, warps, rec, batch, batched, run)

    def _schedule(self, P, warps, rec, batch, batched, run) -> None:
        arrived: dict[int, list] = {}  # barrier id -> [(warp, expected threads or None, instr)]
        while True:
            for w, entry in enumerate(warps):
                ctx, state, status, _ = entry
                if status != "ready":
                    continue
                rec.actor = w
                try:
                    # the budget spans the warp's whole run (a loop through a barrier ends too)
                    run(P, ctx, state, self.max_steps - ctx.executed)
                except WarpsimError as e:
                    raise finding_from_error(e, self, batch, w, rec) from None
                if state.status == "exited":
                    entry[2] = "exited"
                    continue
                ins, mask = state.barrier
                if batched:
                    _check_batch_barrier(state, mask)
                bid = _uniform(ins.info["id"](ctx), ins)
                cnt = ins.info.get("count")
                count = None if cnt is None else _uniform(cnt(ctx), ins)
                arrived.setdefault(bid, []).append((w, count, ins))
                if ins.info.get("op") == "arrive":
                    continue
                entry[2] = "waiting"
                entry[3] = (bid, ins)
            live = [e for e in warps if e[2] != "exited"]
            if not live:
                return
            released = False
            for bid, arr in list(arrived.items()):
                counts = {c for _, c, _ in arr if c is not None}
                need = max(counts) // 32 if counts else len(live)
                if len({w for w, _, _ in arr}) >= need:
                    for w, _, _ in arr:
                        if warps[w][2] == "waiting" and warps[w][3][0] == bid:
                            warps[w][2] = "ready"
                            warps[w][3] = None
                    del arrived[bid]
                    released = True
                    rec.barrier()
            if not any(e[2] == "ready" for e in warps):
                if not released:
                    raise _deadlock(self, batch, warps, arrived)


def _view(gmem, address: int, a: np.ndarray) -> np.ndarray:
    """Argument ``a``'s buffer at ``address`` of ``gmem``, as an array like ``a`` (a view)."""
    from warpsim.ptx.memory import GLOBAL_BASE

    o = address - GLOBAL_BASE
    return gmem.data[o:o + a.nbytes].view(a.dtype).reshape(a.shape)


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
    waiting = [(w, e[3]) for w, e in enumerate(warps) if e[2] == "waiting"]
    exited = [w for w, e in enumerate(warps) if e[2] == "exited"]
    w0, (bid, ins) = waiting[0]
    others = sorted({(b, i.line, i.text) for _, (b, i) in waiting})
    msg = (f"barrier deadlock: warps {[w for w, _ in waiting]} wait at "
           + "; ".join(f"barrier {b} (line {ln}: {tx})" for b, ln, tx in others)
           + (f"; warps {exited} have exited" if exited else "")
           + "; the barrier never completes")
    f = Finding("deadlock", launch.fn.name, ins.text, ins.line, tuple(int(x) for x in batch[0]), w0,
                None, None, msg)
    return SanitizerError(launch.fn.name, [f], None)


def _poisoned_registers(P, shape, poison: int) -> dict:
    """Every declared register filled with ``poison`` bytes (predicates: poison & 1)."""
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
    for name, t in body.regs.items():
        fill(name, t)
    for prefix, (t, n) in body.reg_ranges.items():
        for i in range(n):
            fill(f"{prefix}{i}", t)
    return regs


_MODULES: "dict[str, Module]" = {}
_MODULES_KEPT = 16


def cached_module(ptx_text: str) -> Module:
    """The :class:`Module` of ``ptx_text``, parsed once per process (the last
    ``_MODULES_KEPT`` texts are kept, with their decoded kernels)."""
    m = _MODULES.pop(ptx_text, None)
    if m is None:
        m = Module(ptx_text)
        while len(_MODULES) >= _MODULES_KEPT:
            del _MODULES[next(iter(_MODULES))]
    _MODULES[ptx_text] = m  # most recently used last
    return m


def launch(ptx_text: str, name: str, grid, block, args: Sequence[Any], shared_bytes: int = 0,
           arch: str = "sm_90", **kw) -> tuple[np.ndarray, ...]:
    """One-call form of ``Module(ptx_text).launch(name, grid, block, args, ...)``; the module
    is parsed and its kernels decoded once per PTX text (:func:`cached_module`)."""
    return cached_module(ptx_text).launch(name, grid, block, args, shared_bytes, arch, **kw)
