"""Debugging at the source (issue 25): .file/.loc source locations, the planted-bug kernels of
every sanitizer class (each finding names the right .cu line; each fixed twin is clean),
grouped reports, the debugger (Python and REPL) and the CLI options."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import warpsim
from warpsim.kernel.debugger import DebuggerError, run_repl
from warpsim.kernel.source import SourceMap, demangle, demangle_basic
from warpsim.kernel.trace import TraceError
from warpsim.tools.cli import main

KERNELS = Path(__file__).parent / "kernels"
PLANTED_CU = (KERNELS / "sanitizer" / "planted.cu").read_text().split("\n")
PLANTED = (KERNELS / "sanitizer" / "planted.ptx").read_text()


def bug_line(kernel: str) -> tuple[int, str]:
    """(line, kind) of the BUG(kind) comment in ``kernel``'s body of planted.cu."""
    start = next(i for i, ln in enumerate(PLANTED_CU) if f"void {kernel}(" in ln)
    for i in range(start, len(PLANTED_CU)):
        m = re.search(r"BUG\(([\w-]+)\)", PLANTED_CU[i])
        if m:
            return i + 1, m.group(1)
    raise AssertionError(kernel)


def _f4():
    return np.arange(128, dtype=np.float32).reshape(32, 4)


CASES = {
    "shared_overrun": (1, 32, lambda f: [np.arange(32, dtype=np.float32), np.zeros(32, np.float32), np.int32(f)]),
    "const_overrun": (1, 32, lambda f: [np.zeros(32, np.float32), np.int32(f)]),
    "global_var_overrun": (1, 32, lambda f: [np.arange(32, dtype=np.float32), np.zeros(32, np.float32), np.int32(f)]),
    "warp_race": (1, 32, lambda f: [np.arange(32, dtype=np.int32), np.zeros(32, np.int32), np.int32(f)]),
    "cp_async_early_read": (1, 32, lambda f: [_f4(), np.zeros((32, 4), np.float32), np.int32(f)]),
    "cp_async_source_write": (1, 32, lambda f: [_f4(), np.zeros((32, 4), np.float32), np.int32(f)]),
    "uninit_absorbed": (1, 32, lambda f: [np.zeros(32, np.float32), np.int32(f)]),
    "uninit_branch": (1, 32, lambda f: [np.zeros(32, np.int32), np.int32(f)]),
    "barrier_divergence": (1, 64, lambda f: [np.arange(64, dtype=np.float32), np.zeros(64, np.float32), np.int32(f)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_planted_bug_names_its_cuda_line(name):
    grid, block, make = CASES[name]
    line, kind = bug_line(name)
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PLANTED, name, grid, block, make(0))
    found = [f for f in ei.value.findings if f.kind == kind]
    assert found, str(ei.value)
    f = found[0]
    assert f.source is not None and f.source.startswith(f"planted.cu:{line} (in function {name}"), str(f)
    assert f"planted.cu:{line}" in str(ei.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_twin_is_clean(name):
    grid, block, make = CASES[name]
    warpsim.launch(PLANTED, name, grid, block, make(1))


def test_uninitialised_float_absorbed_by_rounding_is_still_reported():
    """1e30 + s[32] rounds to 1e30 for nearly every fill: shadow state, not values, finds it."""
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PLANTED, "uninit_absorbed", 1, 32, CASES["uninit_absorbed"][2](0))
    (f,) = ei.value.findings
    assert f.lanes == (31,) and f.nbytes == 4 and "output argument 0, element byte 124" in f.message
    assert (ei.value.outputs[0] == np.float32(1e30)).all()


def test_cp_async_data_is_not_visible_before_the_wait():
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PLANTED, "cp_async_early_read", 1, 32, CASES["cp_async_early_read"][2](0))
    assert (ei.value.outputs[1] == 0).all()  # the read saw the old (zero) shared bytes
    (o,) = [x for x in warpsim.launch(PLANTED, "cp_async_early_read", 1, 32,
                                      CASES["cp_async_early_read"][2](1))[1:]]
    assert (o == np.roll(_f4(), -1, axis=0)).all()
    # without the sanitizer copies land at issue (a legal order): same program, no findings
    o2 = warpsim.launch(PLANTED, "cp_async_early_read", 1, 32, CASES["cp_async_early_read"][2](0), check=False)[1]
    assert (o2 == np.roll(_f4(), -1, axis=0)).all()


def test_barrier_divergence_names_the_warps():
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PLANTED, "barrier_divergence", 1, 64, CASES["barrier_divergence"][2](0))
    (f,) = [x for x in ei.value.findings if x.kind == "barrier-divergence"]
    assert f"warps [0] at planted.cu:{bug_line('barrier_divergence')[0]} (PTX line" in f.message and "warps [1] exited without reaching it" in f.message


def test_static_shared_overrun_names_the_variable():
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(PLANTED, "shared_overrun", 1, 32, CASES["shared_overrun"][2](0))
    (f,) = [x for x in ei.value.findings if x.kind == "out-of-bounds"]
    assert f.lanes == (31,) and "_ZZ14shared_overrunE1a" in f.message and "next variable" in f.message


def test_intra_warp_race_rule_for_one_instruction():
    """One instruction storing one address from many lanes is not a race; two instructions
    of different lanes without __syncwarp are."""
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<6>; .reg .b64 %rd<3>;
  .shared .align 4 .b32 s[32];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  st.shared.u32 [s], %r1;
  SYNC
  ld.shared.u32 %r2, [s];
  mul.wide.u32 %rd2, %r1, 4; add.u64 %rd2, %rd1, %rd2;
  st.global.u32 [%rd2], %r2;
  ret;
}"""
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(ptx.replace("SYNC", ""), "k", 1, 32, [np.zeros(32, np.uint32)])
    (f,) = ei.value.findings
    assert f.kind == "race" and "within warp 0" in f.message and f.line == 10
    (o,) = warpsim.launch(ptx.replace("SYNC", "bar.warp.sync -1;"), "k", 1, 32, [np.zeros(32, np.uint32)])
    assert (o == 31).all()  # the highest lane's value landed


# ------------------------------------------------------------------------------------------
# source locations
# ------------------------------------------------------------------------------------------
LOC_PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 p)
{
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<4>;
\t.loc\t1 5 3
\tld.param.u64 %rd1, [p];


\t.loc\t1 7 3


\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd2, %r1, 8;
\tadd.s64 %rd3, %rd1, %rd2;
\tst.global.u32 [%rd3], %r1;
\tret;
}
\t.file\t1 "/tmp/k.cu"
"""


def test_ptx_lines_stay_right_after_loc_and_blank_lines():
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(LOC_PTX, "k", 1, 32, [np.zeros(32, np.uint32)])
    f = ei.value.findings[0]
    assert f.line == 19 and LOC_PTX.split("\n")[18].strip() == "st.global.u32 [%rd3], %r1;"
    assert f.source == "k.cu:7 (in function k)"
    assert "k.cu:7 (in function k), PTX line 19: st.global.u32" in str(ei.value)


def test_inline_chain_and_demangled_names():
    m = warpsim.Module((KERNELS / "debug" / "gemm_f16_lineinfo.ptx").read_text())
    P = m.program("gemm_f16_f32").program
    mma = next(i for i in P.instrs if i.opcode.startswith("mma"))
    assert P.source.describe(mma.loc) == (
        "common.cuh:32 (in function mma_f16_16816(float (&) [4], unsigned int const (&) [4], "
        "unsigned int, unsigned int), inlined from gemm_f16.cu:67 in gemm_f16_f32)")
    deep = [i for i in P.instrs if i.loc and len(i.loc) == 4]
    assert deep and "inlined from gemm_f16.cu:40 in gemm_f16_f32)" in P.source.describe(deep[0].loc)


@pytest.mark.parametrize("mangled,plain", [
    ("_Z3swzii", "swz(int, int)"),
    ("_Z9smem_addrPKv", "smem_addr(void const*)"),
    ("_ZN2ns3fooEPfS0_", "ns::foo(float*, float*)"),
    ("_Z11cp_async_16jPKv", "cp_async_16(unsigned int, void const*)"),
    ("kernel", "kernel"),
    ("_ZZ5weirdE1s", "_ZZ5weirdE1s"),  # not covered: left mangled
])
def test_small_demangler(mangled, plain):
    assert demangle_basic(mangled) == plain


def test_demangle_uses_cxxfilt_when_present(monkeypatch):
    import warpsim.kernel.source as src
    monkeypatch.setattr(src, "_cxxfilt", lambda: None)
    assert demangle(["_Z3swzii"]) == {"_Z3swzii": "swz(int, int)"}
    assert SourceMap({1: "a/b.cu"}, {"$L": "_Z1fv"}, "k").describe(((1, 3, 0, "$L"), (1, 9, 2, None))) == \
        "b.cu:3 (in function f(), inlined from b.cu:9 in k)"


# ------------------------------------------------------------------------------------------
# reports
# ------------------------------------------------------------------------------------------
def test_findings_are_grouped_with_counts_and_never_cut_silently():
    from warpsim.kernel.sanitizer import Finding, SanitizerError

    fs = [Finding("race", "k", f"st.shared.u32 [%r{i}], %r1", 10 + i, (i % 3, 0, 0), i % 2, (i,), 4 * i, "m",
                  nbytes=4) for i in range(30)]
    e = SanitizerError("k", fs + fs[:1])
    assert len(e.groups) == 30 and e.groups[0].counts() == {"findings": 2, "ctas": 1, "warps": 1,
                                                           "lanes": 1, "bytes": 8}
    assert "... 10 more group(s) (10 finding(s))" in str(e)
    rep = e.report()
    assert rep["findings"] == 31 and len(rep["groups"]) == 30 and rep["groups"][0]["first"]["line"] == 10
    json.dumps(rep)


def test_one_race_is_one_group_across_ctas():
    ptx = (KERNELS / "sanitizer" / "sanitizer_cases.ptx").read_text()
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(ptx, "race_shared", 4, 64, [np.arange(64, dtype=np.int32), np.zeros(64, np.int32),
                                                   np.int32(0)])
    g = [g for g in ei.value.groups if g.kind == "race" and "shared-memory" in g.first.message]
    assert len(g) == 1 and g[0].counts()["ctas"] == 4


# ------------------------------------------------------------------------------------------
# debugger
# ------------------------------------------------------------------------------------------
def _gemm():
    m = warpsim.Module((KERNELS / "debug" / "gemm_f16_lineinfo.ptx").read_text())
    rng = np.random.default_rng(0)
    A = rng.standard_normal((64, 32)).astype(np.float16)
    B = rng.standard_normal((64, 32)).astype(np.float16)
    return m, A, B, [A, B, np.zeros((64, 64), np.float32), 64, 64, 32]


def test_debugger_walkthrough_from_the_docs():
    """docs/launch.md: break at the mma's source line, print lane 5's accumulator as a float
    and an A fragment register as f16 pairs, step over the mma, print D."""
    m, A, B, args = _gemm()
    out = io.StringIO()
    run_repl(m.debug("gemm_f16_f32", (1, 1), 128, args),
             ["break gemm_f16.cu:67", "run", "cuda thread 5", "print $f304", "print/f16x2 $r129",
              "stepi", "print $f304", "delete", "continue"], out=out)
    text = out.getvalue()
    assert "breakpoint at common.cuh:32 (in function mma_f16_16816" in text
    assert "inlined from gemm_f16.cu:67 in gemm_f16_f32), PTX line 388: mma.sync" in text
    vals = re.findall(r"\$f304 = (\S+) \(", text)
    assert vals[0] == "0.0"
    # lane 5 = (group 1, thread 1): D[0] is row 1, column 2 of A[:, :16] @ B[:, :16].T
    want = np.dot(A[1, :16].astype(np.float64), B[2, :16].astype(np.float64))
    assert abs(float(vals[1]) - want) < 1e-5
    pair = re.search(r"\$r129 = \(([^,]+), ([^)]+)\)", text)
    # a[0] of lane 5: A rows g=1, columns 2t, 2t+1 = 2, 3
    assert (float(pair.group(1)), float(pair.group(2))) == (float(A[1, 2]), float(A[1, 3]))
    assert text.rstrip().endswith("the kernel exited")


def test_debugger_api_conditional_break_lanes_stack_watch():
    m, A, B, args = _gemm()
    d = m.debug("gemm_f16_f32", (1, 1), 128, args)
    with pytest.raises(DebuggerError, match="no instruction"):
        d.break_at("gemm_f16.cu:5")
    with pytest.raises(DebuggerError, match="not running"):
        d.stepi()
    d.break_at("gemm_f16.cu:77", thread=(64, 0, 0))  # the C store, warp 2 only
    s = d.run()
    assert s.reason == "breakpoint" and s.warp == 2 and "gemm_f16.cu:77" in s.source
    assert d.lanes(2).all() and d.stack(2)[0]["lanes"] == tuple(range(32))
    d.thread(64)
    assert isinstance(d.read("%f304"), int) and d.print("$f304").endswith(")")
    with pytest.raises(DebuggerError, match="no register"):
        d.read("%nope")
    with pytest.raises(DebuggerError, match="outside the block"):
        d.thread(200)
    d.delete()
    c = d.runner.buffer_addresses[2]
    d.watch(c + 4 * (32 * 64 + 0), 4)  # C[32, 0]: written by warp 2 (rows 32..63)
    s = d.cont()
    assert s.reason == "watchpoint" and "written by" in s.detail
    assert d.cont().reason == "exited"
    want = A.astype(np.float64) @ B.astype(np.float64).T
    assert np.abs(d.outputs[2] - want).max() < 1e-3


def test_debugger_step_by_source_line_and_memory():
    m, A, B, args = _gemm()
    d = m.debug("gemm_f16_f32", (1, 1), 128, args)
    d.break_at("gemm_f16.cu:48")  # __syncthreads after the first wait
    d.run()
    d.delete()  # (else the other warps stop at it too)
    s = d.step()
    assert s.reason == "step" and s.source and not s.source.startswith("gemm_f16.cu:48 ")
    a = d.memory("global", d.runner.buffer_addresses[0], "f16", 4)
    assert (a == A.reshape(-1)[:4]).all()
    sA = d.memory("shared", 0, "b32", 4)
    assert sA.dtype == np.uint32 and sA.size == 4


# ------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------
def test_cli_new_arrays_report_and_exit_status(tmp_path, capsys):
    ptx = str(KERNELS / "sanitizer" / "planted.ptx")
    rep = tmp_path / "r.json"
    rc = main(["launch", ptx, "--kernel", "uninit_absorbed", "--block", "32", "--arg", "zeros:float32:32",
               "--arg", "0", "--out", str(tmp_path), "--report", str(rep)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "planted.cu:78" in err or "planted.cu:" in err
    r = json.loads(rep.read_text())
    assert r["status"] == 1 and r["groups"][0]["kind"] == "uninitialised"
    assert (tmp_path / "arg0.npy").exists()
    rc = main(["launch", ptx, "--kernel", "warp_race", "--block", "32", "--arg", "arange:int32:32",
               "--arg", "zeros:int32:32", "--arg", "1", "--out", str(tmp_path / "o2"), "--report", str(rep)])
    assert rc == 0 and json.loads(rep.read_text())["findings"] == 0
    assert not (tmp_path / "o2" / "arg0.npy").exists()  # the input, unchanged, is not written
    assert (np.load(tmp_path / "o2" / "arg1.npy") == np.roll(np.arange(32), -1)).all()


@pytest.mark.parametrize("argv,msg", [
    (["--arg", "zeros:float99:4"], "unknown dtype"),
    (["--arg", "zeros:float32:0"], "positive integers"),
    (["--arg", "ones:float32"], "neither a .npy file nor a number"),
    (["--arg", "zeros:float32:32", "--arg", "0", "--trace", "3:0"], "outside the grid"),
    (["--arg", "zeros:float32:32", "--arg", "0", "--trace", "0:40"], "outside the block"),
    (["--arg", "zeros:float32:32", "--arg", "0", "--trace", "0:1", "--trace-regs", "%zz9"], "not declared"),
    (["--arg", "zeros:float32:32", "--arg", "0", "--trace", "0:1", "--trace-lines", "1-2"], "hold no instruction"),
    (["--arg", "zeros:float32:32", "--arg", "0", "--max-steps", "3"], "max_steps"),
])
def test_cli_errors_name_the_option(argv, msg, tmp_path, capsys):
    args = argv if len(argv) > 2 else argv + ["--arg", "0"]
    rc = main(["launch", str(KERNELS / "sanitizer" / "planted.ptx"), "--kernel", "uninit_absorbed",
               "--block", "32", "--out", str(tmp_path), *args])
    assert rc in (1, 2)
    assert msg in capsys.readouterr().err


def test_cli_typed_trace(tmp_path, capsys):
    rc = main(["launch", str(KERNELS / "sanitizer" / "planted.ptx"), "--kernel", "uninit_absorbed",
               "--block", "32", "--arg", "zeros:float32:32", "--arg", "1", "--out", str(tmp_path),
               "--trace", "0:3", "--trace-regs", "%f1,%r1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert re.search(r"%f1=\d+\.\d+ \(0x[0-9a-f]+\)", out) and "%r1=0x3" in out and "[planted.cu:" in out


def test_cli_debug_commands(tmp_path, capsys):
    cmds = tmp_path / "cmds.txt"
    cmds.write_text("break planted.cu:78\nrun\ncuda thread 31\ninfo lanes\nstepi\nprint $f3\nquit\n")
    rc = main(["launch", str(KERNELS / "sanitizer" / "planted.ptx"), "--kernel", "uninit_absorbed",
               "--block", "32", "--arg", "zeros:float32:32", "--arg", "1", "--debug-commands", str(cmds)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "breakpoint at planted.cu:78 (in function uninit_absorbed)" in out
    assert "active lanes of warp 0 (block (0, 0, 0)): 0-31  mask 0xffffffff" in out
    assert "$f3 = 0.0 (0x0)" in out  # s[32], zeroed by the fixed twin


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on the PATH")
def test_cli_cu_input_has_lineinfo_and_keeps_the_ptx(tmp_path, capsys):
    rc = main(["launch", str(KERNELS / "sanitizer" / "planted.cu"), "--kernel", "warp_race", "--block", "32",
               "--arg", "arange:int32:32", "--arg", "zeros:int32:32", "--arg", "0",
               "--out", str(tmp_path), "--keep-ptx", str(tmp_path / "ptx")])
    assert rc == 1
    assert (tmp_path / "ptx" / "planted.ptx").exists()
    assert f"planted.cu:{bug_line('warp_race')[0]} (in function warp_race)" in capsys.readouterr().err


def test_machine_hook_pauses_and_resumes():
    from warpsim.ptx.machine import Context, WarpState, run
    from warpsim.ptx.program import compile_body

    P = compile_body("mov.u32 %r1, 1; add.u32 %r1, %r1, 1; add.u32 %r1, %r1, 1;", "sm_90")
    ctx = Context({}, (1,))
    seen = []
    ctx.on_instruction = lambda c, s, ins, pc: (seen.append(pc), pc == 1)[1]
    st = run(P, ctx, WarpState.start(len(P)))
    assert st.status == "paused" and st.pc == 1 and int(ctx.regs["%r1"][0, 0]) == 1
    st = run(P, ctx, st)
    assert st.status == "exited" and int(ctx.regs["%r1"][0, 0]) == 3 and seen == [0, 1, 2]


def test_cli_debug_reads_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("break 457\nrun\ncuda thread 31\nprint/x $r2\n"
                                                 "x/2f32 shared 0x0\ninfo stack\nbogus\ncontinue\n"))
    rc = main(["launch", str(KERNELS / "sanitizer" / "planted.ptx"), "--kernel", "uninit_absorbed",
               "--block", "32", "--arg", "zeros:float32:32", "--arg", "1", "--debug"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "breakpoint at planted.cu:78 (in function uninit_absorbed), PTX line 457" in out
    assert "shared 0x0: 0.0 (0x0) 0.5 (0x3f000000)" in out
    assert "#0 PTX line 457 -> reconverge at the end: lanes 0-31" in out
    assert "error: unknown command 'bogus'" in out and "the kernel exited" in out


def test_decode_errors_name_the_source_line():
    bad = LOC_PTX.replace("mul.wide.u32 %rd2, %r1, 8;", "frobnicate.u32 %rd2, %r1, 8;")
    with pytest.raises(warpsim.PtxError, match=r"^k\.cu:7 \(in function k\), PTX line 17: "):
        warpsim.Module(bad).launch("k", 1, 32, [np.zeros(64, np.uint32)])


def test_debugger_reports_an_error_that_stops_the_kernel():
    d = warpsim.Module(LOC_PTX).debug("k", 1, 32, [np.zeros(32, np.uint32)])
    s = d.run()
    assert s.reason == "error" and "[out-of-bounds]" in s.detail and "k.cu:7" in s.detail
    with pytest.raises(DebuggerError, match="not running"):
        d.cont()


def test_debugger_conditional_on_a_block_of_several():
    ptx = (KERNELS / "sanitizer" / "sanitizer_cases.ptx").read_text()
    line = next(i + 1 for i, ln in enumerate(ptx.split("\n")) if "st.global.f32" in ln
                and i > ptx.split("\n").index(next(x for x in ptx.split("\n") if ".entry race_global(")))
    d = warpsim.Module(ptx).debug("race_global", 3, 32, [np.arange(96, dtype=np.float32),
                                                        np.zeros(96, np.float32), np.int32(1)])
    d.break_at(line, cta=(2, 0, 0))
    s = d.run()
    assert s.reason == "breakpoint" and s.line == line
    d.thread(7, cta=(2, 0, 0))
    assert d.read("%ctaid.x") == 2 and d.read("%tid.x") == 7
    with pytest.raises(DebuggerError, match="outside the grid"):
        d.thread(cta=(3, 0, 0))
    assert d.cont().reason == "exited"
    assert (d.outputs[1] == 2 * np.arange(96)).all()


def test_debugger_in_a_cluster_and_a_shared_watchpoint():
    """CTAs of a cluster run apart (one context per CTA): the focus CTA picks the context."""
    from test_hopper_sanitizer import kernel

    src = kernel("""
 ld.param.u64 %rd1, [out];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, %cluster_ctarank;
 mov.u32 %r3, smem;
 shl.b32 %r4, %r1, 2;
 add.u32 %r5, %r3, %r4;
 mad.lo.u32 %r6, %r2, 1000, %r1;
 st.shared.u32 [%r5], %r6;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 mov.u32 %r7, %ctaid.x;
 mad.lo.u32 %r8, %r7, 32, %r1;
 mul.wide.u32 %rd2, %r8, 4;
 add.u64 %rd3, %rd1, %rd2;
 st.global.u32 [%rd3], %r6;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;""")
    d = warpsim.Module(src).debug("k", 4, 32, [np.zeros(128, np.uint32)], arch="sm_90a", cluster=2)
    d.thread(cta=(1, 0, 0))
    d.watch(4 * 7, 4, space="shared")  # thread 7's word of a CTA's shared memory
    s = d.run()
    assert s.reason == "watchpoint" and "st.shared.u32" in s.detail
    assert "(block (0, 0, 0), lane 7)" in s.detail  # CTA 0 of the cluster runs first
    s = d.cont()
    assert s.reason == "watchpoint" and "(block (1, 0, 0), lane 7)" in s.detail
    out = io.StringIO()
    run_repl(d, ["cuda block 1,0,0", "cuda thread 7", "print $r6", "x/1u32 shared 0x1c"], out=out)
    text = out.getvalue()
    assert "focus: block (1, 0, 0) thread (7, 0, 0)" in text
    assert "$r6 = 0x3ef" in text and "shared 0x1c: 1007" in text  # rank 1: 1000 + 7
    d.watches.clear()
    assert d.cont().reason == "exited"
    assert (d.outputs[0].reshape(4, 32) == (np.arange(4)[:, None] % 2) * 1000 + np.arange(32)).all()


@pytest.mark.parametrize("name", ["race_shared", "race_global", "oob", "ldsm_misaligned", "divergent_mma",
                                  "uninit_shared", "deadlock"])
def test_sanitizer_cases_name_their_cuda_line(name):
    """tests/kernels/sanitizer/sanitizer_cases.cu (built with -lineinfo): the finding of each
    planted bug names the line marked BUG(kind), directly or as the call site it is inlined at."""
    import test_sanitizer as ts

    src = (KERNELS / "sanitizer" / "sanitizer_cases.cu").read_text().split("\n")
    start = next(i for i, ln in enumerate(src) if f"void {name}(" in ln)
    line, kind = next((i + 1, re.search(r"BUG\(([\w-]+)\)", src[i]).group(1))
                      for i in range(start, len(src)) if "BUG(" in src[i])
    grid, block, make, *_ = ts.CASES[name]
    with pytest.raises(warpsim.SanitizerError) as ei:
        warpsim.launch(ts.PTX, name, grid, block, make(0))
    f = next(x for x in ei.value.findings if x.kind == kind)
    assert re.search(rf"(^|from )sanitizer_cases\.cu:{line} ", f.source or ""), str(f)
