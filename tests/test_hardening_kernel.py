"""Regression tests for issue 24 (kernel-level hardening): hostile PTX, arguments and launches
get a clear error (a ValueError/TypeError subclass) in bounded time and memory.  Cases that
could hang or blow up run in a child process with a time and memory limit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warpsim

from warpsim.errors import FileTypeError, MemoryAccessError, PtxError, WarpsimError
from warpsim.facts import limits
from warpsim.kernel.launch import Module, launch

ROOT = Path(__file__).resolve().parents[1]

K = """.version 8.0
.target sm_90
.address_size 64
DECLS
.visible .entry k(.param .u64 p)
{
 .reg .b32 %r<4>; .reg .b64 %rd<4>;
 BODY
 ld.param.u64 %rd1, [p];
 cvta.to.global.u64 %rd1, %rd1;
 ld.global.u32 %r1, [%rd1];
 add.u32 %r1, %r1, 1;
 st.global.u32 [%rd1], %r1;
 ret;
}
"""


def kernel(decls: str = "", body: str = "", **replace) -> str:
    text = K.replace("DECLS", decls).replace("BODY", body)
    for old, new in replace.items():
        old = old.replace("_", " ")
        assert old in text, old
        text = text.replace(old, new)
    return text


def run1(text: str, args=None, **kw):
    return launch(text, "k", 1, 1, [np.arange(4, dtype=np.uint32)] if args is None else args, **kw)


def child(code: str, timeout: float = 60, mem_mb: int = 2000) -> subprocess.CompletedProcess:
    """Run ``code`` in a child Python with a time limit and an address-space limit."""
    pre = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({mem_mb << 20}, {mem_mb << 20}))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


# ---- 1. silent wrong results ----------------------------------------------------------------

@pytest.mark.parametrize("bad,err", [(-1, WarpsimError), (0, WarpsimError), (1.5, TypeError),
                                     (True, TypeError), ("2", TypeError)])
def test_cta_batch_is_range_checked(bad, err):
    with pytest.raises(err, match="cta_batch"):
        run1(kernel(), cta_batch=bad)
    with pytest.raises(err, match="cta_batch"):
        Module(kernel()).debug("k", 1, 1, [np.zeros(4, np.uint32)], cta_batch=bad)


def test_big_endian_buffers_keep_their_values_and_dtype():
    a = np.arange(4, dtype=">u4")
    before = a.copy()
    out = run1(kernel(), [a])[0]
    assert out.dtype == np.dtype(">u4")
    np.testing.assert_array_equal(out, [1, 1, 2, 3])
    np.testing.assert_array_equal(a, before)  # input untouched


def test_64_bit_register_in_a_32_bit_operand_is_refused():
    with pytest.raises(PtxError, match=r"%rd3 is a 64-bit register"):
        run1(kernel(**{"add.u32 %r1, %r1, 1": "add.u32 %r2, %rd3, 1"}))


def test_duplicate_parameter_names_are_refused():
    with pytest.raises(PtxError, match="parameter p is declared twice"):
        Module(kernel(**{"(.param .u64 p)": "(.param .u64 p, .param .u64 p)"}))


@pytest.mark.parametrize("decl", [".reg .b32 %r<4>;", ".reg .b32 %x; .reg .b32 %x;"])
def test_registers_declared_twice_are_refused(decl):
    with pytest.raises(PtxError, match="declared twice"):
        run1(kernel(body=decl))


def test_register_outside_its_declared_range_is_refused():
    with pytest.raises(PtxError, match=r"%r9 is outside its declaration %r<4>"):
        run1(kernel(**{"add.u32 %r1, %r1, 1": "add.u32 %r9, %r1, 1"}))


@pytest.mark.parametrize("eol", ["\r", "\r\n"])
def test_cr_and_crlf_line_endings(eol):
    out = run1(kernel().replace("\n", eol))[0]
    np.testing.assert_array_equal(out, [1, 1, 2, 3])


@pytest.mark.parametrize("decl,match", [
    (".global .f32 g = 1e400;", "overflows .f32"),
    (".global .f64 g = 1e400;", "overflows .f64"),
    (".global .f32 g = 1e39;", "overflows .f32"),
    (".global .f32 g = nan;", "not a number"),
    (".global .f32 g = inf;", "not a number"),
    (".global .u32 g[2] = {};", "empty initialiser"),
    (".global .align 3 .u32 g;", "power of two"),
    (".global .align 0 .u32 g;", "power of two"),
    (".global .align -4 .u32 g;", ".align needs a byte count"),
    (".const .u8 g[70000];", "65536 bytes of constant memory"),
    (".const .u8 g[40000];\n.const .u8 h[40000];", "65536 bytes of constant memory"),
])
def test_module_variable_declarations_ptxas_refuses(decl, match):
    with pytest.raises(PtxError, match=match):
        Module(kernel(decl))


def test_legal_initialisers_and_alignments_still_load():
    Module(kernel(".global .f32 a = 1.5;\n.global .align 16 .u32 b[2] = {1, 2};\n.const .u8 c[65536];"))


def test_first_global_variable_honours_its_alignment():
    text = kernel(".global .align 4096 .u32 g;\n.global .align 4096 .u32 h;",
                  **{"ld.global.u32 %r1, [%rd1];\n add.u32 %r1, %r1, 1;\n st.global.u32 [%rd1], %r1;":
                     "mov.u64 %rd2, g;\n st.global.u64 [%rd1], %rd2;\n mov.u64 %rd2, h;\n"
                     " st.global.u64 [%rd1+8], %rd2;"})
    out = run1(text, [np.zeros(2, np.uint64)])[0]
    assert [int(x) % 4096 for x in out] == [0, 0]


# ---- 2. exceptions from inside Python/NumPy -------------------------------------------------

def test_generic_load_near_two_to_the_64_is_an_out_of_bounds_finding():
    body = "mov.u64 %rd3, 0xfffffffffffffffc;\n ld.u32 %r3, [%rd3];"
    from warpsim.kernel.sanitizer import SanitizerError

    with pytest.raises(SanitizerError) as e:
        run1(kernel(body=body))
    f = e.value.findings[0]
    assert f.kind == "out-of-bounds" and f.address == 0xfffffffffffffffc
    from warpsim.ptx.memory import GlobalMemory

    g = GlobalMemory()
    g.alloc(np.zeros(4, np.uint8))
    with pytest.raises(MemoryAccessError) as e2:
        g.load(np.array([0xfffffffffffffffc], np.uint64), 4, None)
    assert e2.value.address == 0xfffffffffffffffc and e2.value.reason == "outside"


@pytest.mark.parametrize("arch", [None, b"sm_90", 90])
def test_arch_of_wrong_type_names_the_argument(arch):
    with pytest.raises(TypeError, match="arch must be a str"):
        run1(kernel(), arch=arch)


def test_object_arrays_are_refused_as_buffers():
    with pytest.raises(TypeError, match=r"args\[0\].*dtype object"):
        run1(kernel(), [np.array([1, 2], dtype=object)])


def test_bare_address_size_and_param_align_are_ptx_errors():
    with pytest.raises(PtxError, match=".address_size"):
        Module(kernel().replace(".address_size 64", ".address_size"))
    with pytest.raises(PtxError, match=".align needs a byte count"):
        Module(kernel(**{"(.param .u64 p)": "(.param .align .u64 p)"}))


# ---- 3. blow-ups from a few bytes -----------------------------------------------------------

def _launch_child(text: str, extra: str = "") -> subprocess.CompletedProcess:
    return child(f"""
        import numpy as np, time
        from warpsim.kernel.launch import launch
        t = time.time()
        try:
            out = launch({text!r}, "k", 1, 1, [np.arange(4, dtype=np.uint32)]{extra})
            print("OK", out[0].tolist())
        except (ValueError, TypeError) as e:
            print("ERR", type(e).__name__, e)
        """)


def test_a_billion_declared_registers_cost_nothing_until_used():
    r = _launch_child(kernel(body=".reg .b32 %big<1000000000>;"))
    assert r.returncode == 0, r.stderr
    assert "OK [1, 1, 2, 3]" in r.stdout


def test_declared_registers_past_the_limit_are_refused():
    with pytest.raises(PtxError, match="registers declared"):
        run1(kernel(body=f".reg .b32 %big<{limits.MAX_DECLARED_REGISTERS}>;"))


def test_local_memory_over_512_kib_per_thread_is_refused():
    with pytest.raises(PtxError, match="524288"):
        run1(kernel(body=".local .u8 l[600000];"))


def test_256_kib_of_untouched_local_memory_runs_in_bounded_memory():
    text = kernel(body=".local .u8 l[262144];")
    r = child(f"""
        import numpy as np
        from warpsim.kernel.launch import launch
        out = launch({text!r}, "k", 4, 256, [np.arange(4, dtype=np.uint32)], check=False)
        print("OK")
        """, mem_mb=1500)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]


# .local is paged: a page exists once stored into; untouched bytes read 0 / are uninitialised
LOCAL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
 .reg .b32 %r<6>; .reg .b64 %rd<4>;
 .local .align 8 .b8 l[SIZE];
 ld.param.u64 %rd1, [p];
 cvta.to.global.u64 %rd1, %rd1;
 mov.u32 %r1, %tid.x;
 mov.u32 %r4, %ctaid.x;
 st.local.u32 [l+FAR], %r1;
 st.local.v2.u32 [l+8], {%r4, %r1};
 ld.local.u32 %r2, [l+FAR];
 ld.local.v2.u32 {%r3, %r5}, [l+8];
 add.u32 %r2, %r2, %r3;
 ld.local.u32 %r3, [l+READ];
 add.u32 %r2, %r2, %r3;
 mov.u32 %r3, %ntid.x;
 mad.lo.u32 %r1, %r4, %r3, %r1;
 mul.wide.u32 %rd2, %r1, 4;
 add.u64 %rd1, %rd1, %rd2;
 st.global.u32 [%rd1], %r2;
 ret;
}
"""


def _local_kernel(size: int, far: int, read: int) -> str:
    return LOCAL.replace("SIZE", str(size)).replace("FAR", str(far)).replace("READ", str(read))


@pytest.mark.parametrize("size,far", [(16, 4), (1000, 996), (262144, 262140), (524288, 300000)])
def test_paged_local_memory_gives_what_was_stored(size, far):
    grid, block = 3, 96
    want = np.arange(block, dtype=np.uint32)[None, :] + np.arange(grid, dtype=np.uint32)[:, None]
    for check in (False, True):
        out = launch(_local_kernel(size, far, far), "k", grid, block, [np.zeros(grid * block, np.uint32)],
                     check=check)[0]
        np.testing.assert_array_equal(out.reshape(grid, block), want + np.arange(block, dtype=np.uint32))


def test_untouched_local_bytes_read_zero_and_are_uninitialised_to_the_sanitizer():
    text = _local_kernel(262144, 4, 200000)  # reads a page no store touched
    out = launch(text, "k", 2, 64, [np.zeros(128, np.uint32)], check=False)[0]
    np.testing.assert_array_equal(out.reshape(2, 64), np.arange(64) + np.arange(2)[:, None])
    with pytest.raises(warpsim.SanitizerError) as ei:
        launch(text, "k", 2, 64, [np.zeros(128, np.uint32)])
    f = ei.value.findings[0]
    assert f.kind == "uninitialised" and "ld.local.u32 %r3, [l+200000]" in f.message
    # the same address stored first: no finding
    launch(_local_kernel(262144, 200000, 200000), "k", 2, 64, [np.zeros(128, np.uint32)])


def test_paged_local_memory_costs_the_bytes_touched():
    """4 CTAs x 256 threads declaring 256 KiB each (256 MiB densely, 1.25 GiB with origins):
    the launch holds a few MiB, checked or not."""
    import tracemalloc

    text = _local_kernel(262144, 262140, 8)
    for check in (False, True):
        tracemalloc.start()
        launch(text, "k", 4, 256, [np.zeros(1024, np.uint32)], check=check)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 16 << 20, (check, peak)


def test_local_memory_out_of_range_is_a_finding_with_its_address():
    text = _local_kernel(4096, 4, 4096)
    for check in (False, True):
        with pytest.raises(warpsim.SanitizerError) as ei:
            launch(text, "k", 1, 32, [np.zeros(32, np.uint32)], check=check)
        f = ei.value.findings[0]
        assert f.kind == "out-of-bounds" and f.address == 4096 and f.lanes == (0,)


@settings(max_examples=int(os.environ.get("WARPSIM_FUZZ_EXAMPLES", "25")), deadline=None, database=None,
          derandomize=True)
@given(size=st.sampled_from([8, 40, 64, 1000, 1024, 1100, 5000]), seed=st.integers(0, 2**32 - 1),
       steps=st.integers(1, 12))
def test_paged_memory_equals_dense_per_lane_memory(size, seed, steps):
    """PagedMemory against FlatMemory(per='lane'): the same bytes, the same errors (lane, address,
    reason), origins as a dense reference; masks, vectors, unaligned and out-of-range lanes."""
    from warpsim.ptx.memory import FlatMemory, PagedMemory

    rng = np.random.default_rng(seed)
    batch = (2,)
    pm, fm = PagedMemory("local", size, batch), FlatMemory("local", size, batch, per="lane")
    pm.track_origins()
    origin = np.full(batch + (32, size), -1, np.int32)
    for _ in range(steps):
        nbytes = int(rng.choice([1, 2, 4, 8, 16]))
        align = int(rng.choice([a for a in (1, 2, 4, 8) if a <= nbytes])) if rng.random() < 0.3 else None
        a = align or nbytes
        hi = max(1, (size + 2 * a) // a)
        addr = (rng.integers(0, hi, batch + (32,)) * a).astype(np.uint64)
        if rng.random() < 0.1:
            addr[rng.integers(0, 2), rng.integers(0, 32)] = np.uint64(2**64 - 4)
        if rng.random() < 0.05:
            addr[0, 0] += np.uint64(1)
        mask = None if rng.random() < 0.4 else rng.random(batch + (32,)) < 0.6
        if rng.random() < 0.5:
            data = rng.integers(0, 256, batch + (32, nbytes), dtype=np.uint8)
            got = [None, None]
            for j, m in enumerate((pm, fm)):
                try:
                    m.store(addr, data, mask, "st", align)
                except MemoryAccessError as e:
                    got[j] = (e.lanes, e.address, e.reason, str(e))
            assert got[0] == got[1]
            if got[0] is None:
                o = rng.integers(0, 100, batch + (32, nbytes), dtype=np.int32)
                pm.set_origins(addr, nbytes, mask, o)
                act = np.ones(batch + (32,), bool) if mask is None else mask
                bi, li = np.nonzero(act)
                for k in range(nbytes):
                    origin[bi, li, addr[bi, li].astype(np.int64) + k] = o[bi, li, k]
        else:
            got = [None, None]
            for j, m in enumerate((pm, fm)):
                try:
                    got[j] = m.load(addr, nbytes, mask, "ld", align)
                except MemoryAccessError as e:
                    got[j] = (e.lanes, e.address, e.reason, str(e))
            if isinstance(got[0], tuple) or isinstance(got[1], tuple):
                assert got[0] == got[1]
                continue
            act = np.ones(batch + (32,), bool) if mask is None else mask
            np.testing.assert_array_equal(got[0][act], got[1][act])
            bi, li = np.nonzero(act)
            want = origin[bi[:, None], li[:, None], addr[bi, li].astype(np.int64)[:, None] + np.arange(nbytes)]
            np.testing.assert_array_equal(pm.origins(addr, nbytes, mask)[act], want)
    np.testing.assert_array_equal(pm.read(np.uint8), fm.data)
    assert pm.allocated_bytes <= 64 * 32 * int(np.prod(batch)) * -(-size // pm.page) * pm.page // 64


def test_a_huge_untouched_global_variable_costs_only_the_pages_touched():
    """Global memory is one host array of all buffers and variables (at most 1 GiB of
    variables), made zeroed by the OS on demand: a 900 MB ``.global`` variable of which a
    kernel touches three words adds a few MiB of resident memory, checked or not."""
    n = 900_000_000
    text = kernel(f".global .align 4 .b8 g[{n}];", body=f"mov.u32 %r3, 7; st.global.u32 [g+{n - 4}], %r3; "
                  f"ld.global.u32 %r2, [g+{n // 2}]; st.global.u32 [g], %r2;")
    r = child(f"""
        import resource
        import numpy as np
        from warpsim.kernel.launch import launch
        rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        launch({kernel()!r}, "k", 1, 1, [np.zeros(4, np.uint32)])  # imports, warm-up
        r0 = rss()
        for check in (False, True):
            out = launch({text!r}, "k", 1, 1, [np.arange(4, dtype=np.uint32)], check=check)[0]
            assert out.tolist() == [1, 1, 2, 3], out
        print(round(rss() - r0))
        """, mem_mb=8000)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) < 64, r.stdout  # MiB (densely: 900)


@pytest.mark.parametrize("decl,match", [
    (".global .u8 g[1000000000000];", "limit of 1073741824 bytes"),
    (".const .u8 g[1000000000000];", "limit of 1073741824 bytes"),
    (".global .align 1099511627776 .u32 g;", "power of two up to"),
])
def test_huge_module_variables_and_alignments_are_refused(decl, match):
    r = _launch_child(kernel(decl))
    assert r.returncode == 0, r.stderr
    assert "ERR PtxError" in r.stdout and match in r.stdout


def _chain(n: int, calls: int) -> str:
    out = [".version 8.0\n.target sm_90\n.address_size 64\n", f".func f{n}()\n{{\n ret;\n}}\n"]
    for i in range(n - 1, -1, -1):
        out.append(f".func f{i}()\n{{\n" + f" call f{i + 1}, ();\n" * calls + " ret;\n}\n")
    out.append(".visible .entry k()\n{\n call f0, ();\n ret;\n}\n")
    return "".join(out)


@pytest.mark.parametrize("n,calls,match", [(26, 2, "copies of called functions"),
                                           (1500, 1, "nested calls")])
def test_call_expansion_is_bounded(n, calls, match):
    code = f"""
        from warpsim.kernel.launch import launch
        try:
            launch({_chain(n, calls)!r}, "k", 1, 1, [])
            print("OK")
        except (ValueError, TypeError) as e:
            print("ERR", type(e).__name__, e)
        """
    r = child(code, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERR PtxError" in r.stdout and match in r.stdout


def test_calls_within_the_limits_still_run():
    launch(_chain(8, 2), "k", 1, 1, [])  # 2^9 - 1 inlined copies


def test_cli_refuses_dev_zero_and_large_files(tmp_path):
    from warpsim.tools.launch_cli import read_module_text

    if os.path.exists("/dev/zero"):
        with pytest.raises(FileTypeError, match="not a regular file") as e:
            read_module_text("/dev/zero")
        assert e.value.path == "/dev/zero"
    big = tmp_path / "big.ptx"
    with open(big, "wb") as f:
        f.truncate(limits.MAX_MODULE_TEXT_BYTES + 1)  # sparse: no disk used
    with pytest.raises(FileTypeError, match="larger than"):
        read_module_text(str(big))
    r = subprocess.run([sys.executable, "-m", "warpsim", "launch", "/dev/zero"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and "not a regular file" in r.stderr


PTRK = kernel(**{"(.param .u64 p)": "(.param .u64 .ptr.global.align 16 p, .param .f32 x)"})


def test_ptr_attributes_written_without_spaces_are_accepted():
    out = launch(PTRK, "k", 1, 1, [np.arange(4, dtype=np.uint32), 1.0])[0]
    np.testing.assert_array_equal(out, [1, 1, 2, 3])


@pytest.mark.parametrize("x", [10**400, 1e39, -1e39, np.float64(1e39)])
def test_float_parameters_out_of_range_are_refused(x):
    with pytest.raises(PtxError, match="does not fit .f32"):
        launch(PTRK, "k", 1, 1, [np.arange(4, dtype=np.uint32), x])


@pytest.mark.parametrize("x,bits", [(np.inf, 0x7F800000), (1.5, 0x3FC00000), (np.float16(2.0), 0x40000000)])
def test_float_parameters_in_range_and_infinities_pass(x, bits):
    from warpsim.kernel.args import scalar_bytes
    from warpsim.ptx.module import parse_module

    p = parse_module(PTRK).functions["k"].params[1]
    assert int.from_bytes(scalar_bytes(p, x, "x"), "little") == bits


@pytest.mark.parametrize("kw,err", [
    (dict(threads="x"), TypeError), (dict(threads=[-1]), TypeError), (dict(threads=[1.5]), TypeError),
    (dict(threads=[(-1, 0)]), WarpsimError), (dict(threads=[(0, (0, -2))]), WarpsimError),
    (dict(threads=[(0, (0, 0, 0, 0))]), TypeError), (dict(regs=5), TypeError), (dict(regs="%r1"), TypeError),
    (dict(lines="a"), TypeError), (dict(lines=[-3]), TypeError), (dict(lines=(5, 2)), WarpsimError),
    (dict(lines=(-1, 2)), WarpsimError), (dict(limit=0), TypeError),
])
def test_trace_options_are_validated(kw, err):
    from warpsim.kernel.trace import Trace

    with pytest.raises(err, match="Trace"):
        Trace(**kw)


def test_trace_argument_must_be_a_trace():
    with pytest.raises(TypeError, match="trace must be a warpsim Trace"):
        run1(kernel(), trace=5)


@pytest.mark.parametrize("n,ok", [(32764 - 8, True), (32764, False), (10**12, False)])
def test_kernel_parameter_bytes_are_bounded(n, ok):
    text = kernel(**{"(.param .u64 p)": f"(.param .u64 p, .param .align 8 .b8 s[{n}])"})
    if ok:
        Module(text)
    else:
        with pytest.raises(PtxError, match="at most 32764"):
            Module(text)


# ---- 4. mutated PTX and arguments through Module/launch, in a child process with limits ------

_FUZZ_CHILD = r'''
import hashlib, json, random, sys
import numpy as np
from warpsim.kernel.launch import Module, launch
from warpsim.kernel.trace import Trace

BASE = json.loads(sys.argv[1])
PIECES = [".reg .b32 %r<4>;", ".reg .b64 %rd<1000000000>;", "add.u32 %r2, %rd3, 1;", "%r9", "\r",
          ".local .u8 l[262144];", ".global .f32 g = 1e400;", ".const .u8 c[70000];", ".align 3",
          ".param .u64 p", "{", "}", ";", "0xfffffffffffffffc", "mov.u64 %rd3, 0xfffffffffffffffc;",
          "ld.u32 %r3, [%rd3];", "bra L;", "L:", ".global .align 1099511627776 .u8 h;", "call f, ();"]
ARGS = [None, -1, 1.5, 10**400, np.arange(4, dtype=">u4"), np.zeros(3, object), b"sm_90", "x"]


def mutate(rng, text):
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        how = rng.randrange(4)
        if how == 0:
            lines.pop(i)
        elif how == 1:
            lines.insert(i, rng.choice(PIECES))
        elif how == 2:
            lines[i] = lines[i] + " " + rng.choice(PIECES)
        else:
            lines.insert(i, lines[rng.randrange(len(lines))])
    return "\n".join(lines)


out = []
for seed in range(int(sys.argv[2])):
    rng = random.Random(seed)
    text = mutate(rng, BASE) if seed % 4 else BASE
    a = np.arange(4, dtype=np.uint32)
    args, kw = [a], {"check": bool(seed % 2), "max_steps": 10_000}
    if seed % 3 == 0:
        which = rng.randrange(4)
        if which == 0:
            args = [rng.choice(ARGS)]
        elif which == 1:
            kw["cta_batch"] = rng.choice(ARGS + [2])
        elif which == 2:
            kw["arch"] = rng.choice(ARGS + ["sm_90"])
        else:
            kw["trace"] = Trace(threads=[(0, 0)])
    before = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    try:
        res = launch(text, "k", 1, 1, args, **kw)
        what = "ok " + hashlib.sha256(b"".join(np.ascontiguousarray(r).tobytes() for r in res)).hexdigest()[:16]
    except (ValueError, TypeError) as e:
        what = f"{type(e).__name__}: {str(e)[:200]}"
    except BaseException as e:
        print(f"FAIL seed {seed}: {type(e).__name__}: {e}", flush=True)
        raise SystemExit(3)
    for x, y in zip(args, before):
        if isinstance(x, np.ndarray) and x.dtype != object and not np.array_equal(x, y):
            print(f"FAIL seed {seed}: input mutated", flush=True)
            raise SystemExit(4)
    out.append(what)
print(hashlib.sha256("\n".join(out).encode()).hexdigest(), len(out), sum(o.startswith("ok") for o in out))
'''


def test_mutated_kernels_and_arguments_in_a_child_process():
    """Mutated PTX (issue 24's hostile pieces inserted, lines dropped or duplicated) and hostile
    arguments through launch: only ValueError/TypeError, inputs unchanged, bounded time and
    memory (a child with limits), the same outcomes in two processes (other hash seeds)."""
    import json

    n = int(os.environ.get("WARPSIM_FUZZ_EXAMPLES", "40"))
    digests = []
    for seed in ("1", "2"):
        pre = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        r = subprocess.run([sys.executable, "-c", pre + _FUZZ_CHILD, json.dumps(kernel()), str(n)],
                           capture_output=True, text=True, timeout=60 + 3 * n, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed))
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        digests.append(r.stdout.split()[0])
        assert int(r.stdout.split()[2]) > 0  # some launches ran
    assert digests[0] == digests[1]


@pytest.mark.parametrize("extra,match", [
    (["--arg", "NPZ"], "is an .npz archive"),
    (["--arg", "OBJ"], "is not a .npy array file"),
    (["--arg", "arange:uint32:4", "--trace", "0:"], "--trace takes CTA:TID"),
    (["--arg", "arange:uint32:4", "--trace", "0:-1"], "--trace takes CTA:TID"),
])
def test_cli_launch_arguments_are_clear_errors(tmp_path, extra, match):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(kernel())
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    np.save(tmp_path / "o.npy", np.zeros(3, object), allow_pickle=True)
    extra = [str(tmp_path / "x.npz") if x == "NPZ" else str(tmp_path / "o.npy") if x == "OBJ" else x
             for x in extra]
    r = subprocess.run([sys.executable, "-m", "warpsim", "launch", str(ptx), "--out", str(tmp_path), *extra],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2, r.stderr
    assert match in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("decl,match", [
    (".shared .u8 s[1000000000000];", "static .shared memory"),
    (".local .u8 l[1000000000000];", ".local memory"),
    (".shared .align 1099511627776 .u8 s[4];", "power of two"),
    (".local .align 3 .u8 l[4];", "power of two"),
])
def test_body_variables_are_bounded(decl, match):
    r = _launch_child(kernel(body=decl))
    assert r.returncode == 0, r.stderr
    assert "ERR PtxError" in r.stdout and match in r.stdout


@pytest.mark.parametrize("arch", [None, b"sm_90"])
def test_module_program_and_debug_name_a_bad_arch(arch):
    m = Module(kernel())
    with pytest.raises(TypeError, match="arch must be a str"):
        m.program("k", 0, arch)
    with pytest.raises(TypeError, match="arch must be a str"):
        m.debug("k", 1, 1, [np.zeros(4, np.uint32)], arch=arch)


@pytest.mark.parametrize("ins", ["mul.lo.u32 %r2, %rd3, 2", "mad.lo.s32 %r2, %r1, 2, %rd3", "and.b32 %r2, %rd3, 1",
                                 "min.u32 %r2, %r1, %rd3"])
def test_64_bit_registers_in_other_32_bit_operands_are_refused(ins):
    with pytest.raises(PtxError, match=r"%rd3 is a 64-bit register"):
        run1(kernel(**{"add.u32 %r1, %r1, 1": ins}))


_WIDTHS = Path(__file__).parent / "data" / "ptxas_operand_widths.json.gz"


def test_operand_widths_agree_with_ptxas():
    """Every register operand of 225 legal statements (arithmetic, bit ops, shifts, compare and
    select, float, cvt, mov, ld/st values and addresses, atom/red, warp ops) replaced by a
    register of each other width: warpsim refuses exactly what ptxas 13.0 refuses, with an
    OperandWidthError naming the operand and register (tools/ptxas_operand_widths.py)."""
    import gzip
    import json

    from warpsim.errors import OperandWidthError
    from warpsim.ptx.parser import parse_body
    from warpsim.ptx.program import Program

    truth = json.load(gzip.open(_WIDTHS, "rt"))
    assert truth["ptxas"] == "13.0"

    def verdict(stmt):
        try:
            Program(parse_body(truth["decl"] + stmt), "sm_90")
            return None
        except PtxError as e:
            return e

    runs = {r["base"]: verdict(r["ptx"]) is None for r in truth["rows"] if r["reg"] is None}
    unsupported = {b for b, ok in runs.items() if not ok}
    assert not unsupported, unsupported  # every base statement decodes (fns, copysign, testp too)
    wrong, checked = [], 0
    for r in truth["rows"]:
        if r["reg"] is None or r["base"] in unsupported:
            continue
        checked += 1
        e = verdict(r["ptx"])
        if (e is None) != r["ok"]:
            wrong.append((r["ptx"], r["ok"], str(e)))
        elif isinstance(e, OperandWidthError):
            # (a vector of mixed widths names one of its registers: {%r1, %h2} has no majority)
            named = e.register == r["now"] and e.width == r["to"] or "vector" in str(e) and e.register in r["ptx"]
            assert named and e.register in str(e), (r, str(e))
    assert checked > 1000 and not wrong, wrong[:10]
    assert 100 < sum(r["ok"] for r in truth["rows"] if r["reg"] is not None) < checked  # both verdicts


@pytest.mark.parametrize("ins,want", [
    # wider registers ptxas accepts: zero-/sign-extended loads, truncated stores
    ("ld.global.v2.u32 {%rd2, %rd3}, [%rd1]; add.u64 %rd2, %rd2, %rd3; cvt.u32.u64 %r1, %rd2;", [1, 1, 2, 3]),
    ("ld.global.s8 %rd2, [%rd1+3]; cvt.u32.u64 %r1, %rd2; add.u32 %r1, %r1, 1;", [1, 1, 2, 3]),
    ("mov.u32 %r2, 0x10007; st.global.u16 [%rd1+8], %r2; ld.global.u32 %r1, [%rd1+8];", [7, 1, 7, 3]),
])
def test_wider_registers_ptxas_accepts_run_as_on_the_gpu(ins, want):
    text = kernel(**{"ld.global.u32 %r1, [%rd1];\n add.u32 %r1, %r1, 1;": ins})
    np.testing.assert_array_equal(run1(text)[0], want)


def test_operand_width_error_names_operand_register_and_line():
    from warpsim.errors import OperandWidthError

    with pytest.raises(OperandWidthError) as e:
        run1(kernel(**{"add.u32 %r1, %r1, 1": "shl.b32 %r1, %r1, %rd3"}))
    assert e.value.operand == 2 and e.value.register == "%rd3" and e.value.width == 64
    assert e.value.expected == 32 and e.value.line == 12 and "line 12" in str(e.value)


def test_wide_forms_still_take_their_64_bit_operand():
    text = kernel(**{"st.global.u32 [%rd1], %r1;": "mad.wide.u32 %rd2, %r1, 4, %rd1;\n mul.wide.u32 %rd3, %r1, 4;\n"
                                                    " st.global.u32 [%rd1], %r1;"})
    np.testing.assert_array_equal(run1(text)[0], [1, 1, 2, 3])


# -- the launch-wide step budget ----------------------------------------------------------------
_RET = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k()
{
 ret;
}
"""


def test_a_grid_of_2_31_ctas_stops_at_the_launch_budget():
    """A grid of 2^31-1 CTAs had no overall budget: it ran for days."""
    r = child(f"""
        from warpsim.errors import StepBudgetError
        from warpsim.kernel.launch import launch
        for check in (False, True):
            try:
                launch({_RET!r}, "k", 2**31 - 1, 32, [], check=check, max_total_steps=50_000)
            except StepBudgetError as e:
                assert e.budget == 50_000 and 0 < e.executed <= 50_000, (e.budget, e.executed)
                assert "max_total_steps=50000" in str(e), str(e)
            else:
                raise AssertionError("no StepBudgetError")
        print("ok")
        """, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_launch_budget_counts_warp_instructions():
    """A launch of exactly its budget runs; one warp instruction less stops it."""
    from warpsim.errors import StepBudgetError

    grid, block = 16, 64  # 16 CTAs x 2 warps x 1 instruction (ret) = 32 warp instructions
    launch(_RET, "k", grid, block, [], max_total_steps=32)
    with pytest.raises(StepBudgetError) as e:
        launch(_RET, "k", grid, block, [], max_total_steps=31)
    assert e.value.budget == 31 and e.value.executed <= 31
    assert isinstance(e.value, WarpsimError)
    import inspect
    for f in (Module.launch, Module.debug):
        assert inspect.signature(f).parameters["max_total_steps"].default == limits.MAX_LAUNCH_WARP_INSTRUCTIONS


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, None])
def test_launch_budget_must_be_a_positive_integer(bad):
    with pytest.raises(TypeError, match="max_total_steps must be a positive integer"):
        launch(_RET, "k", 1, 32, [], max_total_steps=bad)
    with pytest.raises(TypeError, match="max_total_steps must be a positive integer"):
        Module(_RET).debug("k", 1, 32, [], max_total_steps=bad)


def test_per_warp_max_steps_still_names_max_steps():
    """``max_steps`` (per warp batch) keeps its own error, found by the sanitizer."""
    from warpsim.errors import StepBudgetError
    from warpsim.kernel.sanitizer import SanitizerError

    loop = _RET.replace("ret;", "L: bra L;")
    with pytest.raises(SanitizerError, match=r"max_steps") as e:
        launch(loop, "k", 1, 32, [], max_steps=100)
    assert not isinstance(e.value, StepBudgetError)
    with pytest.raises(StepBudgetError):
        launch(loop, "k", 1, 32, [], max_steps=1000, max_total_steps=100)


def test_launch_budget_in_the_debugger():
    from warpsim.errors import StepBudgetError

    stop = Module(_RET).debug("k", 8, 32, [], cta_batch=1, max_total_steps=4).run()
    assert stop.reason == "error" and stop.detail.startswith(StepBudgetError.__name__), stop
    assert Module(_RET).debug("k", 8, 32, [], cta_batch=1, max_total_steps=8).run().reason == "exited"


def test_launch_budget_over_executor_parts():
    """Each part runs under the whole budget; the parts' total is checked after them."""
    from concurrent.futures import ThreadPoolExecutor

    from warpsim.errors import StepBudgetError

    with ThreadPoolExecutor(4) as pool:  # 64 CTAs in 4 parts of 16 warp instructions
        launch(_RET, "k", 64, 32, [], check=False, cta_batch=8, executor=pool, workers=4,
               max_total_steps=64)
        with pytest.raises(StepBudgetError) as e:
            launch(_RET, "k", 64, 32, [], check=False, cta_batch=8, executor=pool, workers=4,
                   max_total_steps=40)
        assert e.value.executed == 64 and e.value.budget == 40
        with pytest.raises(StepBudgetError) as e:  # one part alone is over it
            launch(_RET, "k", 64, 32, [], check=False, cta_batch=8, executor=pool, workers=4,
                   max_total_steps=10)
        assert e.value.executed <= 10
        with pytest.raises(StepBudgetError) as e:  # spread with the sanitizer on, too
            launch(_RET, "k", 64, 32, [], cta_batch=8, executor=pool, workers=4, max_total_steps=40)
        assert e.value.executed == 64


# -- the wall-time budget (timeout_s / --timeout) and the default step budget -----------------
_SPIN = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k()
{
 .reg .pred %p;
L:
 setp.eq.u32 %p, 1, 1;
 @%p bra L;
 ret;
}
"""


@pytest.mark.parametrize("text,grid", [(_RET, 2**31 - 1), (_SPIN, 1)])
def test_timeout_stops_a_runaway_launch(text, grid):
    """A grid of 2^31-1 CTAs, and one warp spinning forever (the clock is read inside a warp's
    run too): TimeBudgetError soon after the budget, with its facts."""
    import time

    from warpsim.errors import TimeBudgetError

    for check in (False, True):
        t = time.monotonic()
        with pytest.raises(TimeBudgetError) as e:
            launch(text, "k", grid, 32, [], check=check, timeout_s=0.2)
        took = time.monotonic() - t
        assert e.value.budget == 0.2 and 0.2 <= e.value.elapsed <= took < 5, (e.value.elapsed, took)
        assert e.value.executed > 0 and "timeout_s=0.2" in str(e.value)


def test_timeout_over_executor_parts():
    from concurrent.futures import ThreadPoolExecutor

    from warpsim.errors import TimeBudgetError

    with ThreadPoolExecutor(2) as pool, pytest.raises(TimeBudgetError):
        launch(_RET, "k", 2**31 - 1, 32, [], check=False, executor=pool, workers=2, timeout_s=0.2)
    # a launch well within its budget runs as without one
    out = launch(kernel(), "k", 1, 1, [np.arange(4, dtype=np.uint32)], timeout_s=60)[0]
    assert out.tolist() == [1, 1, 2, 3]


@pytest.mark.parametrize("bad,err", [(0, WarpsimError), (-1.0, WarpsimError), (float("nan"), WarpsimError),
                                     (float("inf"), WarpsimError), ("1", TypeError), (True, TypeError)])
def test_timeout_must_be_a_positive_number(bad, err):
    with pytest.raises(err, match="timeout_s"):
        run1(kernel(), timeout_s=bad)


def test_cli_timeout_and_total_steps(tmp_path, capsys):
    from warpsim.tools.cli import main

    f = tmp_path / "ret.ptx"
    f.write_text(_RET)
    assert main(["launch", str(f), "--grid", "2147483647", "--timeout", "0.2"]) == 2
    assert "timeout_s=0.2" in capsys.readouterr().err
    assert main(["launch", str(f), "--grid", "2147483647", "--max-total-steps", "100"]) == 2
    assert "max_total_steps=100" in capsys.readouterr().err
    assert main(["launch", str(f), "--grid", "4", "--max-total-steps", "4", "--timeout", "60"]) == 0


def test_default_launch_budget_leaves_room_for_the_largest_test_launch(monkeypatch):
    """The default max_total_steps is at least twice what the suite's 4096^3 GEMM runs (warp
    instructions per CTA are linear in K: counted on one CTA at K = 128 and 256, then
    extrapolated to 4,096 CTAs at K = 4096), and stops a trivial runaway grid within minutes
    (at the ~2.5x10^5 warp instructions a second measured here: <= 20 minutes)."""
    from warpsim.kernel import launch as L
    from warpsim.validation.kernel_suite import CASES

    steps = []
    here = L.Module._launch_here

    def counted(self, runner, *a, **k):
        out = here(self, runner, *a, **k)
        steps.append(runner.total_steps)
        return out
    monkeypatch.setattr(L.Module, "_launch_here", counted)
    case = CASES["gemm_f16"]
    m = Module(case.ptx_path.read_text())
    for n in (128, 256):
        a = np.ones((n, n), np.float16)
        m.launch(case.kernel, (1, 1), 128, [a, a, np.zeros((n, n), np.float32), n, n, n], check=False)
    slope = (steps[1] - steps[0]) / 128
    gemm_4096 = 4096 * (steps[0] + slope * (4096 - 128))
    assert 5e7 < gemm_4096 and 2 * gemm_4096 <= limits.MAX_LAUNCH_WARP_INSTRUCTIONS, gemm_4096
    assert limits.MAX_LAUNCH_WARP_INSTRUCTIONS / 2.5e5 <= 20 * 60


# -- labels are visible only within their { } scope ---------------------------------------------
_SCOPED = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
 .reg .pred %p<2>;
 .reg .b32 %r<3>;
 .reg .b64 %rd<2>;
 ld.param.u64 %rd1, [p];
 cvta.to.global.u64 %rd1, %rd1;
 mov.u32 %r1, 0;
 setp.ne.u32 %p1, %r1, 0;
 @%p1 bra TARGET;
 {
 .reg .b32 %t;
 mov.u32 %r2, 1;
INNER:
 mov.u32 %r2, 2;
 }
OUTER:
 st.global.u32 [%rd1], %r2;
 ret;
}
"""
_INTO = _SCOPED.replace("TARGET", "INNER")  # into the inner scope: ptxas refuses it
_OUT_OF = _SCOPED.replace(" mov.u32 %r2, 1;\n", " mov.u32 %r2, 1;\n bra OUTER;\n").replace(
    "TARGET", "OUTER")  # out of a scope and within the outer one: legal
_WITHIN = _SCOPED.replace(" mov.u32 %r2, 1;\n", " bra INNER;\n mov.u32 %r2, 1;\n").replace(
    "TARGET", "OUTER")  # within the inner scope: legal
_SIBLING = _SCOPED.replace("OUTER:\n", " {\n bra INNER;\n }\nOUTER:\n").replace("TARGET", "OUTER")


@pytest.mark.parametrize("text,line", [(_INTO, 13), (_SIBLING, 21)])
def test_branch_into_an_inner_scope_is_refused(text, line):
    """A branch to a label inside a { } scope it is not in was accepted; ptxas 13.0:
    "Unknown symbol 'INNER'"."""
    with pytest.raises(PtxError, match=r"label INNER \(line 17\) is inside a \{ \} scope") as e:
        run1(text, [np.zeros(1, np.uint32)])
    assert e.value.line == line and "bra INNER" in e.value.instruction


@pytest.mark.parametrize("text,want", [(_OUT_OF, 1), (_WITHIN, 2), (_SCOPED.replace("TARGET", "OUTER"), 2)])
def test_branches_within_or_out_of_a_scope_still_run(text, want):
    out, = run1(text, [np.full(1, 7, np.uint32)], check=False)
    assert out[0] == want


def test_branch_into_an_inner_scope_in_a_warp_body_is_refused():
    import warpsim

    body = ".reg .pred %p; .reg .b32 %r<2>; setp.eq.u32 %p, 0, 0; @%p bra IN; {{ {} IN: mov.u32 %r1, 2; }}"
    with pytest.raises(PtxError, match="label IN .* is inside a"):
        warpsim.Warp().run(body.format("mov.u32 %r1, 1;"))
    assert warpsim.Warp().run(".reg .b32 %r<2>; { bra IN; mov.u32 %r1, 1; IN: mov.u32 %r1, 2; }") == 2


@pytest.mark.skipif(not __import__("shutil").which("ptxas"), reason="ptxas not on PATH")
@pytest.mark.parametrize("text,ok", [(_INTO, False), (_SIBLING, False), (_OUT_OF, True), (_WITHIN, True)])
def test_scope_rules_agree_with_ptxas(tmp_path, text, ok):
    src = tmp_path / "k.ptx"
    src.write_text(text)
    r = subprocess.run(["ptxas", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode == 0) == ok, r.stderr
    if not ok:
        assert "Unknown symbol 'INNER'" in r.stderr
