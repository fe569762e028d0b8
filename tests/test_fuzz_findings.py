"""Regression tests for what the fuzz suite (tests/test_fuzz.py) found in the entry points that
joined it after issue 13: sparse mma.sp, gemm, instructions, the PTX interpreter, the CLI.

Each test states the failing input the fuzzer drew and what went wrong on main before the fix.
"""

from __future__ import annotations

import numpy as np
import pytest

import warpsim
from warpsim.tensorcore import sparse

SP16 = "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP64 = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.u8.s32"


@pytest.mark.parametrize("get", [lambda: sparse.metadata_layout(SP64, 0),
                                 lambda: warpsim.layout(SP16, "e", selector=2)])
def test_cached_metadata_map_cannot_be_made_writable(get):
    """``metadata_layout(SP64, 0)`` handed out the cached array itself, read-only by a flag its
    owner could clear: ``setflags(write=True)`` then a write poisoned every later call."""
    lay = get()
    want = lay.copy()
    with pytest.raises(ValueError):
        lay.setflags(write=True)
    with pytest.raises(ValueError):
        lay[0, 0, 0] = 99
    assert np.array_equal(get(), want)


@pytest.mark.parametrize("call", [
    lambda A, meta: sparse.compress(SP16, A),
    lambda A, meta: sparse.expand(SP16, A[:, :8], meta),
    lambda A, meta: sparse.explain_metadata(SP16, meta, A),
], ids=["compress", "expand", "explain_metadata"])
@pytest.mark.parametrize("dtype", [complex, str, object])
def test_sparse_helpers_refuse_values_that_are_not_real_numbers(call, dtype):
    """``explain_metadata(SP16, meta, A.astype(complex))`` dropped the imaginary parts with a
    NumPy ComplexWarning; string and object matrices were read, or reported as not 2:4 sparse
    (``"0.0" != 0``).  Values must be real numbers: TypeError naming the argument."""
    A = np.zeros((16, 16))
    A[:, ::4] = 1.5
    meta = sparse.compress(SP16, A)[1]
    with pytest.raises(TypeError, match=r"(A|values) must hold real numbers"):
        call(A.astype(dtype), meta)


@pytest.mark.parametrize("words", [np.full(32, 0x44444444, np.float64), np.full(32, -1, np.int64),
                                   np.full(32, 2**40, np.uint64)], ids=["float", "negative", "wide"])
def test_sparse_helpers_refuse_metadata_words_out_of_range_or_not_integers(words):
    """``expand`` / ``explain_metadata`` / ``check_metadata`` cast metadata with ``astype(int64)``:
    float words were truncated, -1 and 2**40 read as their low 32 bits."""
    values = np.ones((16, 8))
    for call in (lambda: sparse.expand(SP16, values, words), lambda: sparse.check_metadata(SP16, words, 0),
                 lambda: sparse.explain_metadata(SP16, words, np.zeros((16, 16)))):
        with pytest.raises((TypeError, ValueError), match="metadata words"):
            call()


@pytest.mark.parametrize("sel", [True, 1.0, np.array(1), "1"])
def test_sparsity_selector_of_the_wrong_type_is_a_type_error(sel):
    """A bool, float, array or string selector raised PtxError (a ValueError); like the block-scale
    selectors it is a TypeError that says selectors are integers."""
    with pytest.raises(TypeError, match="sparsity selector must be an integer"):
        sparse.compress(SP16, np.zeros((16, 16)), selector=sel)
    with pytest.raises(TypeError, match="sparsity selector must be an integer"):
        warpsim.layout(SP16, "e", selector=sel)


@pytest.mark.parametrize("kw", [{"shape": (16.5, 8, 16)}, {"shape": ("16", "8", "16")}, {"shape": (True, 8, 16)}])
def test_instructions_shape_must_be_integers(kw):
    """``instructions(shape=(16.5, 8, 16))`` listed the m16n8k16 forms (``int(16.5)``)."""
    with pytest.raises(TypeError, match="tuple of integers"):
        warpsim.instructions(**kw)
    assert len(warpsim.instructions(shape=(np.int64(16), 8, 16))) == len(warpsim.instructions(shape="m16n8k16"))


@pytest.mark.parametrize("shape", ["m\u0661\u0666n8k16", "m\uff11\uff16n8k16", "m016n08k016"])
def test_instructions_shape_text_is_read_as_ptxas_reads_it(shape):
    """Unicode digits and leading zeros gave m16n8k16 (the decoder refuses them since issue 13)."""
    from warpsim.errors import PtxError

    with pytest.raises(PtxError, match="is not of the form"):
        warpsim.instructions(shape=shape)


@pytest.mark.parametrize("name", ["arch", "type", "kind", "form"])
def test_instructions_filters_of_the_wrong_type(name):
    """``instructions(arch=['sm_90'])`` raised Python's "unhashable type: 'list'"."""
    with pytest.raises(TypeError, match=f"{name} must be a string"):
        warpsim.instructions(**{name: ["sm_90"]})


def test_infinite_loop_through_a_barrier_stops_at_the_step_budget():
    """``Warp().run("L: bar.sync 0; bra L;", max_steps=1000)`` never returned: each barrier
    restarted the interpreter's step count, so the budget never ran out."""
    from warpsim.errors import WarpsimError

    with pytest.raises(WarpsimError, match=r"stopped after 1000 instructions \(max_steps\)"):
        warpsim.Warp().run("L: bar.sync 0; bra L;", max_steps=1000)
    w = warpsim.Warp()
    assert w.run(".reg .b32 %r<2>; bar.sync 0; mov.u32 %r1, 1; bar.sync 0;", max_steps=3) == 3
    with pytest.raises(WarpsimError, match="stopped after 2 instructions"):
        w.run(".reg .b32 %r<2>; bar.sync 0; mov.u32 %r1, 1; bar.sync 0;", max_steps=2)


def test_infinite_loop_stops_at_the_default_budget():
    """The default budget (one million instructions, documented on Warp.run) ends a plain
    infinite loop in well under a few seconds; it was ten million (~20 s a warp)."""
    from warpsim.errors import WarpsimError
    from warpsim.kernel.warp import MAX_STEPS

    assert MAX_STEPS == 1_000_000 and "max_steps" in warpsim.Warp.run.__doc__
    with pytest.raises(WarpsimError, match=f"stopped after {MAX_STEPS} instructions"):
        warpsim.Warp().run("L: bra L;")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None, "10"])
def test_max_steps_must_be_a_positive_integer(bad):
    """``max_steps=None`` ran without any budget; 1.5 and "10" failed inside the interpreter."""
    with pytest.raises((TypeError, ValueError), match="max_steps must be a positive integer"):
        warpsim.Warp().run("L: bra L;", max_steps=bad)


@pytest.mark.parametrize("text", ["mov.u32 %r1, " + "9" * 5000 + ";", "mov.u32 %r1, 0x" + "f" * 4000 + ";",
                                  "mov.u32 %r1, 0b" + "1" * 20000 + ";"], ids=["dec", "hex", "bin"])
def test_huge_integer_literal_is_a_ptx_error(text):
    """A 5,000-digit immediate raised Python's "Exceeds the limit (4300 digits) for integer
    string conversion"; warpsim's message names the literal (cut short) and 64 bits."""
    from warpsim.errors import PtxError

    with pytest.raises(PtxError, match=r"integer literal \S+ \.\.\. \S+ \(\d+ characters\) does not fit 64 bits") as e:
        warpsim.Warp().run(text)
    assert len(str(e.value)) < 400 or "does not fit" in str(e.value)[-40:]


@pytest.mark.parametrize("lit", ["1\u0661", "\uff11\uff16", "1.\u0665"])
def test_unicode_digits_are_not_ptx_literals(lit):
    """``mov.u32 %r1, 1\u0661`` moved 11 (int() reads Arabic-Indic and fullwidth digits)."""
    from warpsim.ptx.parser import parse_immediate

    assert parse_immediate(lit) is None
    w = warpsim.Warp()
    with pytest.raises((ValueError, TypeError)):
        w.execute(f"mov.u32 %r1, {lit};")
    assert "%r1" not in w


def test_a_long_statement_is_parsed_in_linear_time():
    """An 80,000-operand statement took minutes to reject: the statement splitter re-joined its
    buffer for every character (20,000 operands: 27 s).  Now well under a second."""
    import time

    from warpsim.errors import PtxError

    text = "add.u32 %r1, " + ", ".join(["%r2"] * 80_000) + ";"
    t0 = time.process_time()
    with pytest.raises(PtxError, match="add takes 2 source operands, got 80000"):
        warpsim.Warp().run(text)
    assert time.process_time() - t0 < 3.0


def test_gemm_refuses_a_sparse_instruction_clearly():
    """``gemm(A (16x128), B, instr=<mma.sp m16n8k128 u4>)`` failed inside pack with "operand 'a':
    expected a matrix of shape (..., 16, 64), got (1, 1, 16, 128)", about a shape the caller never
    passed; a non-callable ``progress`` failed after the first k-step with "'int' object is not
    callable"."""
    from warpsim.errors import PtxError

    text = "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.s4.s32"
    with pytest.raises(PtxError, match="gemm runs dense mma.sync instructions; .* is sparse"):
        warpsim.gemm(np.zeros((16, 128)), np.zeros((128, 8)), instr=text)
    with pytest.raises(TypeError, match="progress must be a callable"):
        warpsim.gemm(np.zeros((16, 16)), np.zeros((16, 8)), instr="mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                     progress=5)


def test_launch_loop_through_a_barrier_stops_at_the_step_budget():
    """``launch(<k: L: bar.sync 0; bra L;>, "k", 1, 64, [], max_steps=1000)`` never returned: each
    barrier restarted the warp's step count."""
    text = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nL: bar.sync 0; bra L;\n}\n"
    with pytest.raises(warpsim.SanitizerError, match=r"stopped after 1000 instructions \(max_steps\)"):
        warpsim.launch(text, "k", 1, 64, [], max_steps=1000, check=False)
    for bad in (None, 1.5, True, 0):
        with pytest.raises(TypeError, match="max_steps must be a positive integer"):
            warpsim.launch(text, "k", 1, 64, [], max_steps=bad)


def _specials() -> str:
    import ast
    from pathlib import Path

    src = (Path(__file__).parent / "test_launch.py").read_text()
    return next(n.value.value for n in ast.parse(src).body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SPECIALS")


@pytest.mark.parametrize("grid,block", [(2**40, 32), ((1, 65536), 32), (1, (1, 1, 65)), (1, 2000)])
def test_launch_refuses_dimensions_beyond_cuda_limits(grid, block):
    """``launch(..., grid=2**40)`` was accepted and never returned (it listed every CTA first)."""
    from warpsim.errors import WarpsimError

    with pytest.raises(WarpsimError, match="at most"):
        warpsim.launch(_specials(), "ids", grid, block, [np.zeros((64, 4), np.uint32), np.uint32(3), 0.5])


def test_launch_of_a_huge_legal_grid_starts_at_once():
    """A legal but huge grid (2**31-1 x 65535 x 65535) built a list of every CTA id before running
    the first: it never started.  Now the first batch runs, and here its out-of-bounds store
    stops the launch at once."""
    import time

    t0 = time.process_time()
    with pytest.raises(warpsim.SanitizerError, match="out-of-bounds"):
        warpsim.launch(_specials(), "ids", (2**31 - 1, 65535, 65535), 32,
                       [np.zeros((64, 4), np.uint32), np.uint32(3), 0.5], check=False)
    assert time.process_time() - t0 < 5


def test_expand_of_an_empty_batch():
    """``expand(SP16, zeros((0, 16, 8)), words (0, 32))`` raised NumPy's "cannot reshape array of
    size 0 into shape (0,16,newaxis)"; an empty batch gives an empty (0, 16, 16)."""
    meta = np.full((0, 32), 0x44444444, np.uint32)
    assert sparse.expand(SP16, np.zeros((0, 16, 8)), meta).shape == (0, 16, 16)


@pytest.mark.parametrize("text", [["mov.u32 %r1, 1;"], b"mov.u32 %r1, 1;", None])
def test_run_and_compile_take_text(text):
    """``Warp().run(['mov.u32 %r1, 1;'])`` raised "unhashable type: 'list'" from the compile cache."""
    with pytest.raises(TypeError, match="compile takes PTX text"):
        warpsim.Warp().run(text)


@pytest.mark.parametrize("kw,body", [({"shared": 2**62}, ""), ({"shared": -1}, ""),
                                     ({"shared": np.zeros(300_000, np.uint8)}, ""),
                                     ({}, ".shared .b8 big[999999999999];")])
def test_shared_memory_beyond_what_a_cta_can_have_is_refused(kw, body):
    """``Warp().run(text, shared=2**62)`` raised NumPy's "Unable to allocate 4.00 EiB"; ``shared=-1``
    was silently taken as 'the body's size'.  At most 228 KiB (MAX_SHARED_BYTES), as for launch."""
    from warpsim.errors import ShapeError
    from warpsim.ptx.memory import MAX_SHARED_BYTES

    with pytest.raises(ShapeError, match=str(MAX_SHARED_BYTES)):
        warpsim.Warp().run(body + " mov.u32 %r1, 1;", **kw)
    text = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n"
    with pytest.raises(ValueError, match="shared_bytes must be an int from 0 to"):
        warpsim.launch(text, "k", 1, 32, [], shared_bytes=2**40)
