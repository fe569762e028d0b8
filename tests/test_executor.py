"""Launches spread over executors (warpsim.kernel.executor): the same bits, findings and
trace as one process, whatever the executor and the number of workers; kernels whose CTAs
communicate run in one process with a warning naming why."""

from __future__ import annotations

import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.kernel.executor import SerialLaunchWarning, communication, parts
from warpsim.kernel.launch import cached_module
from warpsim.validation.kernel_suite import CASES

HERE = Path(__file__).parent / "kernels"
SANITIZER = (HERE / "sanitizer" / "sanitizer_cases.ptx").read_text()
_rng = np.random.default_rng(0)
_A = (_rng.integers(0, 2 ** 16, 192).astype(np.uint32) * 0x10001) & 0x3C003C00
ATOMICS = (HERE / "handwritten" / "atomics.ptx").read_text()


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2) as ex:
        yield ex


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


def _gemm(n=128):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    C = rng.standard_normal((n, n)).astype(np.float32)  # the kernel overwrites C
    return (HERE / "gemm_f16.ptx").read_text(), "gemm_f16_f32", (n // 64, n // 64), 128, [A, B, C, n, n, n]


def test_parts_cover_the_grid_in_whole_batches():
    assert parts(10, 4, 2) == [range(0, 4), range(4, 10)]
    assert parts(10, 4, 8) == [range(0, 4), range(4, 8), range(8, 10)]
    assert parts(5, 1, 2) == [range(0, 2), range(2, 5)]
    assert parts(1, 64, 16) == [range(0, 1)]
    for ncta, b, w in [(100, 7, 3), (64, 64, 2), (65, 8, 5)]:
        ps = parts(ncta, b, w)
        assert [i for r in ps for i in r] == list(range(ncta))
        assert all(r.start % b == 0 for r in ps) and len(ps) <= w


def test_gemm_same_bits_for_every_executor_and_worker_count(pool):
    text, name, grid, block, args = _gemm()
    ref = warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1)
    for ex, w in [(pool, 2), (pool, 3), (ThreadPoolExecutor(3), None), (None, 1)]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1,
                                 executor=ex, workers=w)
        _same(ref, got)
    assert not np.array_equal(ref[2], args[2])  # the kernel did write C
    # default batches (all 4 CTAs in one batch: one part)
    _same(ref, warpsim.launch(text, name, grid, block, args, check=False, executor=pool))


def test_checked_launch_spreads_and_a_clean_kernel_stays_clean(pool):
    text, name, grid, block, args = _gemm()
    ref = warpsim.launch(text, name, grid, block, args, cta_batch=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no SerialLaunchWarning: check=True spreads too
        got = warpsim.launch(text, name, grid, block, args, cta_batch=1, executor=pool)
    _same(ref, got)


@pytest.mark.parametrize("name", ["row_softmax", "int8_gemm", "bf16_guarded", "marlin_w4a16",
                                  "fp8_quant_mma", "dmma_f64"])
def test_suite_kernels_same_bits_spread(pool, name):
    """Every suite kernel gives one process's bits, checked or not; those with global
    atomics (row_softmax's counter, marlin's split-K lock) run in one process and say so."""
    case = CASES[name]
    text = case.ptx_path.read_text()
    args = case.args()
    ref = warpsim.Module(text).launch(case.kernel, case.grid, case.block, args, case.shared_bytes,
                                      check=False, cta_batch=1)
    serial = name in ("row_softmax", "marlin_w4a16")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = warpsim.Module(text).launch(case.kernel, case.grid, case.block, args, case.shared_bytes,
                                          check=False, cta_batch=1, executor=pool)
    assert [type(x.message) for x in w] == ([SerialLaunchWarning] if serial else [])
    _same(ref, got)
    # checked: clean spread as in one process, the same bits
    ref = warpsim.Module(text).launch(case.kernel, case.grid, case.block, args, case.shared_bytes,
                                      cta_batch=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = warpsim.Module(text).launch(case.kernel, case.grid, case.block, args, case.shared_bytes,
                                          cta_batch=1, executor=pool)
    assert [type(x.message) for x in w] == ([SerialLaunchWarning] if serial else [])
    _same(ref, got)


def test_own_process_pool_from_workers():
    text, name, grid, block, args = _gemm()
    ref = warpsim.launch(text, name, grid, block, args, check=False, cta_batch=2)
    _same(ref, warpsim.launch(text, name, grid, block, args, check=False, cta_batch=2, workers=2))
    _same(ref, warpsim.launch(text, name, grid, block, args, check=False, cta_batch=2,
                              executor="process", workers=2))


def test_default_workers_are_the_cores_this_process_may_use(monkeypatch):
    """``taskset -c 0,1`` on a 16-core machine: pools of 2 by default, not 16."""
    import os

    import warpsim.kernel.executor as ex
    from warpsim._util.cores import usable_cores

    monkeypatch.setattr(os, "process_cpu_count", lambda: 3, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5, 9}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert usable_cores() == 3
    monkeypatch.delattr(os, "process_cpu_count", raising=False)  # Python < 3.13: the affinity
    assert usable_cores() == 3
    made = []

    class Pool(ProcessPoolExecutor):
        def __init__(self, max_workers):
            made.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(ex, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(ex, "usable_cores", lambda: 2)
    text, name, grid, block, args = _gemm()
    ref = warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1)
    _same(ref, warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1, executor="process"))
    assert made == [2]


def test_a_part_loads_global_memory_the_fast_way(monkeypatch):
    """A spread part's tracked global memory tracks stores only: its ld.global and cp.async
    reads take the plain gather (as one process's do), never the checked per-byte way (which
    cost a 2048^3 GEMM's parts 20% more CPU than one process)."""
    from warpsim.kernel.launch import run_part
    from warpsim.ptx.memory import GlobalMemory, TrackedGlobal

    calls = []

    def load(self, *a, **k):
        calls.append(a[1])
        return GlobalMemory.load(self, *a, **k)

    monkeypatch.setattr(TrackedGlobal, "load", load)
    text, name, grid, block, args = _gemm()
    job = {"text": text, "name": name, "grid": grid + (1,), "block": (block, 1, 1), "args": args,
           "shared_bytes": 0, "arch": "sm_90", "cta_batch": None, "max_steps": 10 ** 6, "check": False,
           "max_total_steps": 10 ** 9, "timeout_s": None, "trace": None}
    out = run_part(job, 1, 3)
    assert calls == []
    ref = warpsim.launch(text, name, grid, block, args, check=False)[2].reshape(-1).view(np.uint8)
    packed, vals = out["diffs"][2]
    written = np.unpackbits(packed, count=ref.size).view(bool)
    assert written.sum() == 2 * 64 * 64 * 4  # CTAs 1 and 2 wrote their tiles of C
    assert vals.tobytes() == ref[written].tobytes()


_FMA = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<6>;
    .reg .f32 %f<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mad.lo.s32 %r3, %r1, 32, %r2;
    mul.wide.u32 %rd3, %r3, 16;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd2];
    mul.f32 %f5, %f1, %f2;
    add.f32 %f5, %f5, %f3;
    st.global.f32 [%rd2+12], %f5;
    ret;
}"""


@pytest.mark.parametrize("contract", [True, False])
def test_spread_keeps_the_modules_contraction(pool, contract):
    """Module(text, contract=False) spread over workers runs mul + add as written there too."""
    rng = np.random.default_rng(5)
    x = (1 + rng.random((128, 4)) / 7).astype(np.float32)
    x[:, 2] = -(x[:, 0] * x[:, 1])  # fused: the product's rounding error; unfused: 0
    m = warpsim.Module(_FMA, contract=contract)
    ref = m.launch("k", 4, 32, [x], check=False)[0]
    assert (ref[:, 3] != 0).any() == contract
    for ex in (pool, None):
        _same((ref,), m.launch("k", 4, 32, [x], check=False, cta_batch=1, executor=ex, workers=2))
    # the launch's own pool: the module is kept (forked workers start with it decoded)
    assert cached_module(_FMA, contract) is m and cached_module(_FMA, not contract) is not m


def _findings(fn):
    with pytest.raises(warpsim.SanitizerError) as ei:
        fn()
    return [str(f) for f in ei.value.findings], ei.value.outputs


@pytest.mark.parametrize("name,grid,block,make", [
    ("oob", 3, 64, lambda: [np.arange(40, dtype=np.float32), np.zeros(40, np.float32), np.int32(40), np.int32(0)]),
    ("deadlock", 2, 64, lambda: [np.zeros(64, np.float32), np.int32(0)]),
    ("divergent_mma", 3, 32, lambda: [_A, np.zeros(128, np.float32), np.int32(0)]),
])
def test_errors_that_stop_a_launch_as_in_one_process(pool, name, grid, block, make):
    """check=False still stops at out-of-bounds accesses, deadlocks, divergent .sync: the
    first part that stopped (in CTA order) raises what one process raises."""
    one, outs1 = _findings(lambda: warpsim.launch(SANITIZER, name, grid, block, make(), cta_batch=1,
                                                  check=False))
    for ex in (pool, ThreadPoolExecutor(2)):
        got, outs2 = _findings(lambda: warpsim.launch(SANITIZER, name, grid, block, make(),
                                                      cta_batch=1, executor=ex, check=False))
        assert got == one and outs1 is None and outs2 is None


def _checked(fn):
    """(findings as tuples, message, outputs, stdout) of a checked launch; None when clean."""
    try:
        fn()
    except warpsim.SanitizerError as e:
        return ([(f.kind, f.line, f.cta, f.warp, f.lanes, f.address, f.nbytes, f.message, f.source)
                 for f in e.findings], str(e), e.outputs, e.stdout)
    return None


def _planted():
    import test_debugging
    import test_sanitizer

    out = [(test_sanitizer.PTX, name, grid[0], block[0], make)
           for name, (grid, block, make, *_) in sorted(test_sanitizer.CASES.items())]
    out += [(test_debugging.PLANTED, name, grid, block, make)
            for name, (grid, block, make) in sorted(test_debugging.CASES.items())]
    return out


@pytest.mark.parametrize("case", _planted(), ids=lambda c: c[1])
def test_sanitizer_findings_as_in_one_process(pool, case):
    """The planted bugs over 3 CTAs cut into 2 parts: the same findings (kind, line, CTA,
    warp, lanes, address, bytes, message, CUDA source), message, outputs and printf."""
    text, name, grid, block, make = case
    one = _checked(lambda: warpsim.launch(text, name, 3 * grid, block, make(0), cta_batch=1))
    serial = communication(cached_module(text).program(name).program) is not None  # an atomic: stays serial
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        two = _checked(lambda: warpsim.launch(text, name, 3 * grid, block, make(0), cta_batch=1,
                                              executor=pool))
    assert [type(x.message) for x in w] == ([SerialLaunchWarning] if serial else [])
    assert one is not None and two is not None
    assert one[0] == two[0] and one[1] == two[1] and one[3] == two[3]
    assert (one[2] is None) == (two[2] is None)
    if one[2] is not None:
        _same(one[2], two[2])


def test_cross_cta_race_split_over_two_parts():
    """race_global's two CTAs write the same bytes; with a worker each, the race is found by
    the parent's check over both parts' global access logs, as one process finds it."""
    make = lambda: [np.arange(64, dtype=np.float32), np.zeros(64, np.float32), np.int32(0)]  # noqa: E731
    assert parts(2, 1, 2) == [range(0, 1), range(1, 2)]
    one = _checked(lambda: warpsim.launch(SANITIZER, "race_global", 2, 32, make(), cta_batch=1))
    two = _checked(lambda: warpsim.launch(SANITIZER, "race_global", 2, 32, make(), cta_batch=1,
                                          workers=2))
    assert one is not None and one[0] == two[0] and one[1] == two[1]
    assert any(f[0] == "race" and "between CTAs" in f[7] for f in two[0])
    # one part holding the whole grid: the race is counted once (the parent's check only)
    one = _checked(lambda: warpsim.launch(SANITIZER, "race_global", 2, 32, make()))
    assert one[0] == _checked(lambda: warpsim.launch(SANITIZER, "race_global", 2, 32, make(), workers=1))[0]
    fixed = [np.arange(64, dtype=np.float32), np.zeros(64, np.float32), np.int32(1)]
    ref = warpsim.launch(SANITIZER, "race_global", 2, 32, fixed, cta_batch=1)
    _same(ref, warpsim.launch(SANITIZER, "race_global", 2, 32, fixed, cta_batch=1, workers=2))


def test_trace_records_as_in_one_process(pool):
    text, name, grid, block, args = _gemm()
    sel = dict(threads=[((0, 0), 5), ((1, 1), 33)], lines=(40, 60))
    t1, t2 = warpsim.Trace(**sel), warpsim.Trace(**sel)
    warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1, trace=t1)
    warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1, trace=t2, executor=pool)
    assert t1.records and t2.records == t1.records
    assert {r.cta for r in t2.records} == {(0, 0, 0), (1, 1, 0)}


def test_atomics_run_in_one_process_with_a_warning(pool):
    args = [np.array([0, 0, 0, 0, 0, 0x7FFFFFFF, 0xFFFFFFFF, 0, 0], np.uint32), np.zeros(2, np.uint64),
            np.zeros(2, np.float32), np.zeros(1, np.float64), np.zeros(128 * 8, np.uint32),
            np.zeros(2, np.uint32)]
    ref = warpsim.launch(ATOMICS, "atomics", 2, 64, args, cta_batch=1, check=False)
    with pytest.warns(SerialLaunchWarning) as w:
        got = warpsim.launch(ATOMICS, "atomics", 2, 64, args, cta_batch=1, executor=pool, check=False)
    _same(ref, got)
    warn = w[0].message
    assert warn.line is not None and "atom" in warn.instruction and "atom" in warn.reason
    assert f"line {warn.line}" in str(warn)


def _kernel(body: str, params: str = ".param .u64 p") -> str:
    return f""".version 8.0
.target sm_90
.address_size 64
.visible .entry k({params})
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
{body}
    ret;
}}"""


@pytest.mark.parametrize("body,reason", [
    ("SPIN:\n    ld.volatile.global.u32 %r1, [%rd2];\n    setp.eq.u32 %p1, %r1, 0;\n    @%p1 bra SPIN;",
     "watches"),
    ("SPIN:\n    ld.acquire.gpu.global.u32 %r1, [%rd2];\n    setp.eq.u32 %p1, %r1, 0;\n    @%p1 bra SPIN;",
     "watches"),
    ("    ld.relaxed.sys.u32 %r1, [%rd1];", "watches"),
    ("    red.global.add.u32 [%rd2], 1;", "red on global"),
    ("    atom.add.u32 %r1, [%rd1], 1;", "atom on generic"),
    ("    mov.u32 %r1, %cluster_ctarank;", "cluster"),
    ("    barrier.cluster.arrive;\n    barrier.cluster.wait;", "cluster"),
])
def test_communicating_kernels_are_named(body, reason):
    from warpsim.errors import PtxError

    try:
        prog = cached_module(_kernel(body)).program("k").program
    except PtxError as e:  # an instruction this build does not decode yet
        pytest.skip(str(e))
    why = communication(prog)
    assert why is not None and reason in why[0], why
    assert why[1] is not None and why[2]


@pytest.mark.parametrize("body", [
    "    ld.global.u32 %r1, [%rd2];\n    st.global.u32 [%rd2], %r1;",
    "    ld.relaxed.cta.shared.u32 %r1, [%r2];",
    "    atom.shared.add.u32 %r1, [%r2], 1;",
    "    ld.global.nc.u32 %r1, [%rd2];",
])
def test_independent_ctas_are_not_flagged(body):
    text = _kernel("    mov.u32 %r2, 0;\n" + body)
    assert communication(cached_module(text).program("k").program) is None


def test_no_warning_for_an_independent_kernel(pool):
    text, name, grid, block, args = _gemm()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warpsim.launch(text, name, grid, block, args, check=False, executor=pool)


def test_bad_executor_and_workers_are_refused():
    text, name, grid, block, args = _gemm(64)
    with pytest.raises(TypeError, match="workers"):
        warpsim.launch(text, name, grid, block, args, workers=0, check=False)
    with pytest.raises(TypeError, match="executor"):
        warpsim.launch(text, name, grid, block, args, executor=object(), check=False)


def test_progress_reports_ctas_on_stderr(pool, capsys):
    text, name, grid, block, args = _gemm()
    warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1, progress=True)
    err = capsys.readouterr().err
    assert "4/4 CTAs" in err and err.endswith("\n")
    warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1, progress=True, executor=pool)
    assert "4/4 CTAs" in capsys.readouterr().err


def test_module_text_is_parsed_once():
    text, *_ = _gemm()
    assert cached_module(text) is cached_module(text)
    assert cached_module(text + "\n") is not cached_module(text)


def test_dask_local_cluster_same_bits():
    distributed = pytest.importorskip("distributed")
    text, name, grid, block, args = _gemm()
    ref = warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        got = warpsim.launch(text, name, grid, block, args, check=False, cta_batch=1,
                             executor=client.get_executor())
    _same(ref, got)


def test_launch_memory_is_bounded_by_the_ctas_in_flight():
    """Peak memory of a launch: its buffers (one simulated copy; the outputs are views of it)
    plus the working set of one CTA batch, whatever the number of batches."""
    import tracemalloc

    text, name, _, block, args = _gemm(512)
    m = cached_module(text)
    m.program(name)
    buffers = sum(a.nbytes for a in args if isinstance(a, np.ndarray))
    peaks = {}
    for rows in (1, 4):
        tracemalloc.start()
        outs = m.launch(name, (8, rows), block, args, check=False, cta_batch=8)
        peaks[rows] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert not np.array_equal(outs[2][:64 * rows], args[2][:64 * rows])
        assert np.array_equal(outs[2][64 * rows:], args[2][64 * rows:])
        assert outs[0] is not args[0] and np.array_equal(outs[0], args[0])
    assert peaks[4] < peaks[1] * 1.1 + (1 << 20), peaks
    assert peaks[4] < 2 * buffers + (16 << 20), (peaks, buffers)


def test_global_memory_reserve_places_buffers_without_copies():
    from warpsim.ptx.memory import GlobalMemory

    g = GlobalMemory()
    g.reserve(4096)
    room = g._room
    a = g.alloc(np.arange(10, dtype=np.uint32))
    b = g.alloc(nbytes=100)
    assert g._room is room and g.data.base is room
    assert b > a and g.view(a, np.uint32, 10).tolist() == list(range(10))
    g.alloc(nbytes=10_000)  # past the room: grows, keeps what was there
    assert g.view(a, np.uint32, 10).tolist() == list(range(10)) and g.data.size > 10_000


def test_device_printf_as_in_one_process(pool):
    path = Path(__file__).parent / "data" / "real" / "cuda" / "printf_cases_sm_80.ptx"
    if not path.exists():
        pytest.skip("no printf kernel in this build")
    m = warpsim.Module(path.read_text())
    one = m.launch("divergent", 4, 8, [np.zeros(8, np.int32)], cta_batch=1, check=False)
    two = m.launch("divergent", 4, 8, [np.zeros(8, np.int32)], cta_batch=1, executor=pool, check=False)
    assert one.stdout and two.stdout == one.stdout and two.printf == one.printf
    _same(one, two)


def test_outputs_are_views_that_never_alias():
    text, name, grid, block, args = _gemm(64)
    A = args[0]
    outs = warpsim.launch(text, name, (1, 1), block, [A, A, *args[2:]], check=False)
    assert not np.shares_memory(outs[0], outs[1]) and not np.shares_memory(outs[0], A)
    assert np.array_equal(outs[0], A) and np.array_equal(outs[1], A)
    assert not np.shares_memory(outs[0], outs[2])
