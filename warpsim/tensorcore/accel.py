"""Optional compiled kernel for the mma engine: register words in, D's register words out.

The NumPy engine (:mod:`warpsim.tensorcore.engine`, :mod:`warpsim.tensorcore.numerics`) is the
reference; this module runs the same arithmetic one warp at a time in C (``_accel.c``, shipped
with the package) for the common dense forms: f16/bf16/tf32/fp8/fp6/fp4 operands with f32 or
f16 D (the fused truncated steps of every model, the lowered fp8 sequence of sm_90/sm_100a)
and the 4/8-bit integer forms; :mod:`warpsim.tensorcore.accel_extra` adds the f64 and the
block-scaled forms (``_accel_extra.c``, built into the same library).  Everything else, and
every machine without a C compiler, stays on NumPy.  Results are identical bit for bit (tests/test_accel.py).

The C file is compiled on first use with the system compiler (``$CC`` or ``cc``; ``-O3
-march=native``, no fast-math, no FP contraction) into a cache directory (``$WARPSIM_CACHE_DIR``,
else ``$XDG_CACHE_HOME/warpsim``, else ``~/.cache/warpsim``), keyed by the source, the compiler
command and the CPU's feature flags; never at install time.  ``WARPSIM_ACCEL=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading

import numpy as np

from warpsim.facts import formats
from warpsim.facts.isa import Instruction

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_accel.c")
#: Every C file of the library: _accel.c, and _accel_extra.c (f64 and block-scaled forms,
#: :mod:`warpsim.tensorcore.accel_extra`).
_SRCS = (_SRC, os.path.join(os.path.dirname(_SRC), "_accel_extra.c"))
_FLAGS = ["-O3", "-march=native", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-std=c99"]
_lock = threading.Lock()
_lib = None
_tried = False
#: Why the accelerator is not in use (None while it is, or before the first try).
reason: str | None = None


class _Operand(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("s_reg", ctypes.c_int64), ("s_lane", ctypes.c_int64),
                ("s_warp", ctypes.c_int64), ("reg", ctypes.c_void_p), ("lane", ctypes.c_void_p),
                ("shift", ctypes.c_void_p), ("nelem", ctypes.c_int32), ("mask", ctypes.c_int32),
                ("kind", ctypes.c_int32), ("ebits", ctypes.c_int32), ("mbits", ctypes.c_int32),
                ("bias", ctypes.c_int32), ("inf_nan", ctypes.c_int32), ("is_signed", ctypes.c_int32),
                ("bits", ctypes.c_int32), ("table", ctypes.c_void_p), ("emin", ctypes.c_int32),
                ("nregs", ctypes.c_int32), ("epr", ctypes.c_int32), ("slot", ctypes.c_void_p)]


class _Model(ctypes.Structure):
    _fields_ = [("M", ctypes.c_int32), ("N", ctypes.c_int32), ("K", ctypes.c_int32),
                ("ngroups", ctypes.c_int32), ("gstart", ctypes.c_void_p), ("gk", ctypes.c_void_p),
                ("first_c", ctypes.c_int32), ("emin_c", ctypes.c_int32), ("emin_out", ctypes.c_int32),
                ("F", ctypes.c_int32), ("e_zero", ctypes.c_int32), ("out", ctypes.c_int32),
                ("rounding", ctypes.c_int32), ("frac_bits", ctypes.c_int32),
                ("final_add", ctypes.c_int32), ("satfinite", ctypes.c_int32)]


class _Dest(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("s_reg", ctypes.c_int64), ("s_lane", ctypes.c_int64),
                ("s_warp", ctypes.c_int64), ("reg", ctypes.c_void_p), ("lane", ctypes.c_void_p),
                ("shift", ctypes.c_void_p), ("nregs", ctypes.c_int32), ("out", ctypes.c_int32)]


def cache_dir() -> str:
    """Where compiled kernels are kept."""
    d = os.environ.get("WARPSIM_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "warpsim")
    return d


def _cpu_key() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return "".join(line for line in f if line.startswith(("flags", "model name", "Features")))[:20000]
    except OSError:
        import platform
        return platform.processor() + platform.machine()


def _build(source: str | tuple = _SRCS, stem: str = "warpsim_accel", deps: tuple = ()) -> ctypes.CDLL:
    """Compile ``source`` (a C file, or several into one library; default: this module's
    ``_SRCS``), cached by source, the headers ``deps`` they include, compiler, flags and CPU,
    and load it; also used by :mod:`warpsim.ptx.sfu_accel` for its own C files."""
    cc = shlex.split(os.environ.get("CC", "cc"))
    sources = (source,) if isinstance(source, str) else tuple(source)
    src = b""
    for path in sources + tuple(deps):
        with open(path, "rb") as f:
            src += f.read()
    key = hashlib.sha256(src + repr((cc, _FLAGS, _cpu_key(), sys.platform)).encode()).hexdigest()[:20]
    name = f"{stem}_{key}.so"
    for d in (cache_dir(), os.path.join(tempfile.gettempdir(), f"warpsim-{os.getuid() if hasattr(os, 'getuid') else 0}")):
        path = os.path.join(d, name)
        if os.path.exists(path):
            return ctypes.CDLL(path)
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=d)
            os.close(fd)
        except OSError:
            continue
        try:
            subprocess.run(cc + _FLAGS + ["-o", tmp, *sources, "-lm"], check=True, capture_output=True,
                           timeout=120)
            os.replace(tmp, path)  # atomic: concurrent builders agree
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return ctypes.CDLL(path)
    raise OSError("no writable cache directory")


def load(build, setup) -> tuple[ctypes.CDLL | None, str | None]:
    """``(library, None)`` from ``build()`` then ``setup(library)``, or ``(None, why not)``: turned
    off by ``WARPSIM_ACCEL=0``, a big-endian host, or a build or symbol that failed."""
    if os.environ.get("WARPSIM_ACCEL", "1").strip().lower() in ("0", "off", "no", "false"):
        return None, "turned off by WARPSIM_ACCEL=0"
    if sys.byteorder != "little":
        return None, "big-endian host"
    try:
        lib = build()
        setup(lib)
        return lib, None
    except (OSError, subprocess.SubprocessError, AttributeError) as exc:
        return None, f"not built: {exc}"


def _setup(lib: ctypes.CDLL) -> None:
    for fn in (lib.warpsim_float_mma, lib.warpsim_int_mma):
        fn.argtypes = [ctypes.POINTER(_Operand)] * 3 + [ctypes.POINTER(_Dest), ctypes.POINTER(_Model),
                                                       ctypes.c_int64]
        fn.restype = ctypes.c_int


def library() -> ctypes.CDLL | None:
    """The compiled kernel library, or None (see :data:`reason`)."""
    global _lib, _tried, reason
    if _tried:
        return _lib
    with _lock:
        if not _tried:
            _lib, reason = load(_build, _setup)
            _tried = True
    return _lib


def available() -> bool:
    """Whether the compiled kernel can be used here."""
    return library() is not None


# --------------------------------------------------------------------------------------------
# Plans: per instruction and target, the tables the C kernel reads
# --------------------------------------------------------------------------------------------

_IEEE_LIKE = {"f16", "bf16", "e5m2", "e4m3", "e3m2", "e2m3", "e2m1"}


def _i32(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.int32))


def point(structs, arrays, layout: str, dtype) -> int:
    """Set each operand struct's ``base`` and element strides ``s_warp``/``s_lane``/``s_reg`` from
    its array of register words in ``layout`` ('warp-first' (n, 32, regs) or 'batch-last'
    (regs, 32, n)); returns n, the warps of the last array (D)."""
    warp_first = layout == "warp-first"
    for s, x in zip(structs, arrays):
        assert x.dtype == dtype
        s.base = x.ctypes.data
        strides = (v // x.itemsize for v in x.strides)
        if warp_first:
            s.s_warp, s.s_lane, s.s_reg = strides
        else:
            s.s_reg, s.s_lane, s.s_warp = strides
    return arrays[-1].shape[0] if warp_first else arrays[-1].shape[-1]


class _Plan:
    """ctypes structures for one instruction on one target; arrays kept alive here."""

    def __init__(self, ins: Instruction, model, params: dict):
        from warpsim.tensorcore.packing import batch_last_codec

        self.ins = ins
        self.keep = []
        self.ops = {}
        for op in "abc":
            codec = batch_last_codec(ins, op)
            self.ops[op] = self._operand(ins, op, codec, params)
        codec = batch_last_codec(ins, "d")
        reg, lane = np.divmod(codec.row.astype(np.int64), 32)
        arrs = [_i32(reg), _i32(lane), _i32(codec.shift.astype(np.int64))]
        self.keep += arrs
        self.dest = dict(reg=arrs[0].ctypes.data, lane=arrs[1].ctypes.data, shift=arrs[2].ctypes.data,
                         nregs=ins.regs["d"], out={"f32": 0, "f16": 1, "s32": 2}[ins.dtype])
        params.pop("emin_a", None)
        params.pop("emin_b", None)
        gstart, gk = params.pop("groups")
        gstart, gk = _i32(gstart), _i32(gk)
        self.keep += [gstart, gk]
        self.model = _Model(M=ins.m, N=ins.n, K=ins.k, ngroups=len(gstart) - 1, gstart=gstart.ctypes.data,
                            gk=gk.ctypes.data, **params)
        self.fn = library().warpsim_int_mma if ins.dtype == "s32" else library().warpsim_float_mma

    def _operand(self, ins, op, codec, params):
        reg, lane = np.divmod(codec.row.astype(np.int64), 32)
        arrs = [_i32(reg), _i32(lane), _i32(codec.shift.astype(np.int64))]
        self.keep += arrs
        t = ins.type_of(op)
        f = formats.get_format(t)
        kw = dict(reg=arrs[0].ctypes.data, lane=arrs[1].ctypes.data, shift=arrs[2].ctypes.data,
                  nelem=int(codec.row.size), mask=ctypes.c_int32(codec.mask & 0xFFFFFFFF).value,
                  emin=params.get("emin_" + op, 0), table=None, nregs=codec.nregs, epr=codec.epr,
                  slot=None)
        sw = 32 // codec.epr
        if (32 % codec.epr == 0 and codec.reg_dtype == np.uint32
                and (codec.shift.astype(np.int64) == codec.slot.astype(np.int64) * sw).all()):
            # elements sit at slot boundaries: decode every slot of a warp's words in order
            slot = _i32((lane * codec.nregs + reg) * codec.epr + codec.slot.astype(np.int64))
            self.keep.append(slot)
            kw["slot"] = slot.ctypes.data
        if f.kind in ("int", "uint"):
            kw.update(kind=4, is_signed=int(f.kind == "int"), bits=f.bits)
        elif t == "f32":
            kw.update(kind=2)
        elif t == "tf32":
            kw.update(kind=3)
        elif t in _IEEE_LIKE and f.bits <= 16:
            if f.bits <= 8:
                table = np.ascontiguousarray(formats._table(f), dtype=np.float64)
                self.keep.append(table)
                kw.update(kind=0, table=table.ctypes.data, ebits=f.exp_bits, mbits=f.man_bits)  # bits: fp8 decoders
            else:
                kw.update(kind=1, ebits=f.exp_bits, mbits=f.man_bits, bias=f.bias,
                          inf_nan=1 if f.has_inf else (2 if f.has_nan else 0))
        else:
            raise NotImplementedError(t)
        return kw

    def _structs(self):
        """This thread's ctypes structures (tables filled in; bases and strides set per call)."""
        local = self.__dict__.setdefault("_local", threading.local())
        st = getattr(local, "st", None)
        if st is None:
            st = local.st = ([_Operand(base=None, s_reg=0, s_lane=0, s_warp=0, **self.ops[op]) for op in "abc"]
                             + [_Dest(base=None, s_reg=0, s_lane=0, s_warp=0, **self.dest)])
            local.refs = [ctypes.byref(x) for x in st] + [ctypes.byref(self.model)]
        return st, local.refs

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray, layout: str) -> np.ndarray:
        """a, b, c register words and ``out`` (D's words) in ``layout`` 'warp-first' (n, 32,
        regs) or 'batch-last' (regs, 32, n); any strides (element strides, uint32)."""
        st, refs = self._structs()
        n = point(st, (a, b, c, out), layout, np.uint32)
        rc = self.fn(*refs, n)
        if rc == -2:
            raise MemoryError("the compiled mma kernel could not allocate its permutation plans")
        if rc:
            raise AssertionError("accelerator refused a plan it accepted")
        return out


def supports(ins: Instruction, arch: str) -> bool:
    """Whether the compiled kernel runs ``ins`` on target ``arch`` (and it is available)."""
    if arch == "exact" or ins.sparse or ins.block_scale or ins.quadpair or ins.n != 8:
        return False
    if ins.atype in ("f64", "b1") or ins.dtype not in ("f32", "f16", "s32"):
        return False
    if ins.m * ins.k > 1024:  # MAXE in _accel.c
        return False
    for op in "abc":
        if ins.register_bits(op) != 32:
            return False
    return available()


_PLANS: dict = {}


def plan(ins: Instruction, arch: str) -> _Plan:
    """The compiled kernel for ``ins`` on ``arch`` (check :func:`supports` first)."""
    key = (ins, arch)
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = _Plan(ins, *_params(ins, arch))
    return p


def _params(ins: Instruction, arch: str):
    from warpsim.tensorcore import numerics

    model = numerics.model_for(arch)
    if ins.dtype == "s32":
        return model, dict(groups=([0, 0], []), satfinite=int(bool(ins.satfinite)), first_c=1, emin_c=0,
                           emin_out=0, F=0, e_zero=0, out=2, rounding=0, frac_bits=-1, final_add=0)
    p = numerics.step_plan(ins, model)
    groups = [np.arange(ins.k)[g] for g in p.pop("groups")]
    gstart = np.cumsum([0] + [len(g) for g in groups])
    gk = np.concatenate([np.asarray(g, np.int64) for g in groups]) if groups else np.zeros(0)
    return model, dict(groups=(gstart, gk), satfinite=0, first_c=int(p["first_c"]), emin_c=p["emin_c"],
                       emin_out=p["emin_out"], F=p["F"], e_zero=p["e_zero"],
                       out={"f32": 0, "f16": 1}[p["out"]], rounding={"rn": 0, "rz": 1}[p["rounding"]],
                       frac_bits=-1 if p["frac_bits"] is None else p["frac_bits"],
                       final_add=int(p["final_add"]), emin_a=p["emin_a"], emin_b=p["emin_b"])
