"""Tests of the GPU validation harness (warpsim.validation) that need no GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from warpsim.facts.isa import iter_instructions
from warpsim.validation import inputs as vin
from warpsim.validation.collect import plan
from warpsim.validation.compare import compare_words
from warpsim.validation.kernels import (
    asm_string, constraint, kernel_name, kernel_source, module_source, parse_sass)

SM90 = list(iter_instructions("sm_90"))
BY_TEXT = {i.text: i for i in SM90}
FIXTURES = Path(__file__).parent / "data" / "h100"


def ins(text: str):
    return BY_TEXT["mma.sync.aligned." + text]


# ---------------------------------------------------------------- generators: determinism


@pytest.mark.parametrize("text,dist,expect", [
    ("m16n8k16.row.col.f32.f16.f16.f32", "normal",
     {"a": [0xC4413486, 0x3C6B3F88], "b": [0x453DC7B3, 0xBB3735FA], "c": [0x40945D98, 0xC0FAEFDC]}),
    ("m16n8k8.row.col.f64.f64.f64.f64", "special",
     {"a": [0xFFE59AA6C9E0F2B1, 0xFFF0A87155928069], "b": [0x7FF59E3A217638F2, 0x401463D4F8376FDF],
      "c": [0x3FE01B46189E3B0B, 0x8010000000000000]}),
    ("m16n8k32.row.col.satfinite.s32.s8.u8.s32", "uniform-bits",
     {"a": [0xFD6B3FFD, 0x7A210628], "b": [0xA9056C29, 0x75517614], "c": [0x4732D366, 0x57B6392F]}),
])
def test_known_words(text, dist, expect):
    """Fixed seed -> fixed words, on every platform (warp 1, lane 5, registers 0-1)."""
    x = vin.make_inputs(ins(text), dist, 2, 1)
    for op, words in expect.items():
        assert [int(v) for v in x[op][1, 5, :2]] == words


def test_deterministic_and_prefix_stable():
    i = ins("m16n8k32.row.col.f32.e4m3.e5m2.f32")
    a = vin.make_inputs(i, "wide", 8, 7)
    b = vin.make_inputs(i, "wide", 8, 7)
    small = vin.make_inputs(i, "wide", 3, 7)
    other = vin.make_inputs(i, "wide", 8, 8)
    for op in "abc":
        assert np.array_equal(a[op], b[op])
        assert np.array_equal(a[op][:3], small[op])
        assert not np.array_equal(a[op], other[op])


def test_distinct_per_dist_and_operand():
    i = ins("m16n8k16.row.col.f32.bf16.bf16.f32")
    x = vin.make_inputs(i, "uniform-bits", 4, 1)
    y = vin.make_inputs(i, "normal", 4, 1)
    assert not np.array_equal(x["a"], y["a"])
    assert not np.array_equal(x["a"][..., :2], x["c"][..., :2])


@pytest.mark.parametrize("instr", SM90, ids=lambda i: i.text[17:])
def test_shapes_and_dtypes(instr):
    for dist in vin.distributions_for(instr):
        x = vin.make_inputs(instr, dist, 2, 3)
        for op in "abc":
            assert x[op].shape == (2, 32, instr.regs[op])
            assert x[op].dtype == (np.uint64 if instr.register_bits(op) == 64 else np.uint32)


def test_distributions_apply():
    assert vin.distributions_for(ins("m16n8k16.row.col.f32.f16.f16.f32")) == vin.FLOAT_DISTS
    assert vin.distributions_for(ins("m16n8k32.row.col.s32.s4.u4.s32")) == ("uniform-bits", "special")
    with pytest.raises(ValueError):
        vin.make_inputs(ins("m16n8k32.row.col.s32.s4.u4.s32"), "normal", 1, 1)


# ---------------------------------------------------------------- generators: bit patterns


def _f16(instr, op, dist, n=64):
    codes = vin.element_codes(instr, op, dist, n, 1).ravel()
    return codes & 0x7C00, codes & 0x3FF, codes


def test_special_f16_has_every_class():
    i = ins("m16n8k16.row.col.f16.f16.f16.f16")
    e, f, codes = _f16(i, "a", "special")
    assert np.any((e == 0x7C00) & (f == 0))                      # Inf
    assert np.any((e == 0x7C00) & (f & 0x200 != 0))              # quiet NaN
    assert np.any((e == 0x7C00) & (f != 0) & (f & 0x200 == 0))   # signalling NaN
    assert np.any(codes == 0x0000) and np.any(codes == 0x8000)   # +-0
    assert np.any((codes & 0x7FFF) == 0x7BFF)                    # max finite
    assert np.any((codes & 0x7FFF) == 0x0400)                    # min normal
    assert np.any((codes & 0x7FFF) == 0x0001)                    # min subnormal
    nan_payloads = set((codes[(e == 0x7C00) & (f != 0)] & 0x1FF).tolist())
    assert len(nan_payloads) > 10                                 # random payloads


def test_normal_and_narrow_exponents():
    i = ins("m16n8k16.row.col.f32.f16.f16.f32")
    e, _, _ = _f16(i, "a", "normal")
    assert set(np.unique(e >> 10).tolist()) == set(range(12, 19))  # bias 15 +- 3
    e, _, _ = _f16(i, "a", "narrow")
    assert set(np.unique(e >> 10).tolist()) == {14, 15, 16}
    c = vin.element_codes(i, "c", "narrow", 64, 1).ravel()
    assert set(np.unique((c >> 23) & 0xFF).tolist()) == set(range(126, 131))


def test_wide_no_inf_nan_and_subnormals():
    for text, fmt in (("m16n8k16.row.col.f32.f16.f16.f32", "f16"),
                      ("m16n8k32.row.col.f32.e4m3.e5m2.f32", "e4m3")):
        i = ins(text)
        F = vin.FLOAT_FORMATS[fmt]
        codes = vin.element_codes(i, "a", "wide", 64, 1).ravel()
        exp = (codes >> F.mbits) & ((1 << F.ebits) - 1)
        frac = codes & ((1 << F.mbits) - 1)
        if F.nan_style == "fn":
            assert not np.any((exp == 15) & (frac == 7))
            assert np.any(exp == 15)
        else:
            assert not np.any(exp == (1 << F.ebits) - 1)
        assert np.any((exp == 0) & (frac != 0))
        assert len(np.unique(exp)) == F.max_finite_field + 1


def test_e4m3_special_uses_only_nan_code():
    i = ins("m16n8k32.row.col.f32.e4m3.e4m3.f32")
    codes = vin.element_codes(i, "a", "special", 64, 1).ravel()
    assert np.any((codes & 0x7F) == 0x7F)      # the NaN
    assert np.any((codes & 0x7F) == 0x7E)      # max finite 448


def test_tf32_low_bits_sometimes_random():
    i = ins("m16n8k8.row.col.f32.tf32.tf32.f32")
    for dist in ("normal", "special"):
        codes = vin.element_codes(i, "a", dist, 16, 1).ravel()
        low = codes & 0x1FFF
        assert 0.3 < np.mean(low != 0) < 0.7
    codes = vin.element_codes(i, "a", "special", 64, 1).ravel()
    nan = ((codes >> 23) & 0xFF == 0xFF) & ((codes >> 13) & 0x3FF != 0)
    assert np.any(nan & ((codes >> 22) & 1 == 0))   # signalling NaN visible in the tf32 bits


def test_f64_special():
    i = ins("m16n8k8.row.col.f64.f64.f64.f64")
    c = vin.element_codes(i, "a", "special", 32, 1).ravel()
    e, f = (c >> 52) & 0x7FF, c & ((1 << 52) - 1)
    assert np.any((e == 0x7FF) & (f == 0)) and np.any((e == 0x7FF) & (f != 0))
    assert np.any((e == 0) & (f == 1))


def test_integer_special_extremes():
    i = ins("m16n8k32.row.col.satfinite.s32.s8.u8.s32")
    a = vin.element_codes(i, "a", "special", 16, 1).ravel()
    b = vin.element_codes(i, "b", "special", 16, 1).ravel()
    assert {0x80, 0x7F, 0xFF, 0x00}.issubset(set(a.tolist()))
    assert {0x00, 0xFF}.issubset(set(b.tolist()))
    c = vin.element_codes(i, "c", "special", 16, 1).ravel().astype(np.int64)
    c = np.where(c >= 2**31, c - 2**32, c)
    assert np.any(c > 2**31 - 2**19) and np.any(c < -(2**31) + 2**19)
    i4 = ins("m16n8k64.row.col.s32.s4.s4.s32")
    a4 = vin.element_codes(i4, "a", "special", 16, 1).ravel()
    assert {0x8, 0x7, 0xF, 0x0}.issubset(set(a4.tolist()))


def test_b1_special_register_modes():
    i = ins("m16n8k256.row.col.s32.b1.b1.s32.xor.popc")
    w = vin.make_inputs(i, "special", 16, 1)["a"].ravel()
    assert np.any(w == 0) and np.any(w == 0xFFFFFFFF)


def test_pack_unpack_roundtrip_and_fp4_container():
    rng_codes = vin.element_codes(ins("m16n8k32.row.col.f32.e5m2.e5m2.f32"), "a", "uniform-bits", 2, 1)
    words = vin.pack(rng_codes, 8, 32)
    assert np.array_equal(vin.unpack(words, 8, 32), rng_codes)
    codes = np.array([[0x1, 0x2, 0xF, 0x8]], dtype=np.uint64)
    assert int(vin.pack(codes, 8, 32, shift=2)[0]) == 0x203C0804
    f8f6f4 = next(i for i in iter_instructions("sm_120a") if i.kind == "f8f6f4" and i.atype == "e2m1")
    assert vin.container_shift(f8f6f4, "a") == 2 and vin.container_shift(f8f6f4, "c") == 0
    x = vin.make_inputs(f8f6f4, "uniform-bits", 2, 1)
    assert not np.any(x["a"] & np.uint32(0xC3C3C3C3))   # e2m1 only in bits 5:2 of each byte


# ---------------------------------------------------------------- kernel source


@pytest.mark.parametrize("instr", SM90, ids=lambda i: i.text[17:])
def test_kernel_asm_matches_registers(instr):
    src = kernel_source(instr)
    asm = asm_string(instr)
    assert asm.startswith(instr.text + " ")
    groups = re.findall(r"\{([^}]*)\}", asm)
    assert [len(g.split(",")) for g in groups] == [instr.regs[o] for o in "dabc"]
    nums = [int(n) for n in re.findall(r"%(\d+)", asm)]
    assert nums == list(range(sum(instr.regs.values())))
    outs = re.findall(r'"=([rfd])"\(d\d+\)', src)
    assert outs == [constraint(instr, "d")] * instr.regs["d"]
    for op in "abc":
        ins_ = re.findall(r'"([rfd])"\(' + op + r"\d+\)", src)
        assert ins_ == [constraint(instr, op)] * instr.regs[op]
    assert f"void __launch_bounds__(128) {kernel_name(instr)}(" in src


def test_constraints():
    assert constraint(ins("m16n8k16.row.col.f32.f16.f16.f32"), "c") == "f"
    assert constraint(ins("m16n8k16.row.col.f32.f16.f16.f32"), "a") == "r"
    assert constraint(ins("m16n8k8.row.col.f32.tf32.tf32.f32"), "a") == "r"
    assert constraint(ins("m16n8k8.row.col.f64.f64.f64.f64"), "b") == "d"
    assert constraint(ins("m16n8k16.row.col.f16.f16.f16.f16"), "d") == "r"


def test_module_names_unique():
    names = [kernel_name(i) for i in SM90]
    assert len(set(names)) == len(names)
    src = module_source(SM90)
    assert src.count('extern "C" __global__') == len(SM90)


def test_parse_sass():
    text = """
	code for sm_90a
		Function : k_x
	.headerflags	@"EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;          /* 0x00000a00ff017b82 */
                                                                   /* 0x000fe20000000800 */
        /*0010*/                   HMMA.16816.F32 R4, R8, R12, R4 ;  /* 0x000000000c04723c */
                                                                   /* 0x000fe20000001804 */
"""
    assert parse_sass(text) == {"k_x": ["/*0000*/ LDC R1, c[0x0][0x28] ;", "/*0010*/ HMMA.16816.F32 R4, R8, R12, R4 ;"]}


def test_plan_respects_file_cap():
    entries = plan(SM90, seed=1, max_file_mb=15.0)
    sizes: dict[str, int] = {}
    for e in entries:
        sizes[e["file"]] = sizes.get(e["file"], 0) + int(np.prod(e["d_shape"])) * (8 if e["d_dtype"] == "uint64" else 4)
    assert max(sizes.values()) <= 15 * 2**20
    assert len({(e["instr"], e["dist"]) for e in entries}) == len(entries)


def test_compare_words_reports_first_mismatch():
    i = ins("m16n8k16.row.col.f32.f16.f16.f32")
    hw = np.zeros((2, 32, 4), np.uint32)
    sim = hw.copy()
    sim[1, 3, 2] = 0x7FC00000
    hw[1, 3, 2] = 0x7FFFFFFF
    r = compare_words(i, hw, sim)
    assert r["mismatches"] == 1 and r["nan_payload_only"] == 1
    assert (r["first"]["warp"], r["first"]["lane"], r["first"]["reg"]) == (1, 3, 2)


# ---------------------------------------------------------------- fixtures (real H100 words)


def _manifest():
    return json.loads((FIXTURES / "manifest.json").read_text())


def test_fixture_manifest_consistent():
    man = _manifest()
    assert man["arch"] == "sm_90" and "H100" in man["device"]["gpu"]
    data = np.load(FIXTURES / "d_00.npz")
    for e in man["entries"]:
        assert e["instr"] in BY_TEXT
        arr = data[e["key"]]
        assert list(arr.shape) == e["d_shape"] and str(arr.dtype) == e["d_dtype"]


def _simulator():
    try:
        from warpsim.tensorcore.execute import mma
    except ImportError:
        pytest.skip("warpsim.tensorcore.execute is not available")
    return mma


def test_check_runs_on_fixtures(tmp_path):
    _simulator()
    from warpsim.validation.compare import check

    rep = check(FIXTURES, tmp_path, log=lambda *a: None)
    assert rep["summary"]["runs"] == len(_manifest()["entries"])
    assert (tmp_path / "report.md").exists() and (tmp_path / "report.json").exists()


#: every sm_90 form: the simulator must reproduce the committed H100 words bit for bit,
#: NaN payloads included (f64)
EXACT_FORMS = ("f16-m8n8k4", "f16", "tf32", "bf16", "fp8", "f64", "int8", "int4", "b1")


def test_fixture_covers_every_sm90_form():
    from warpsim.facts.isa import iter_instructions

    forms = {e["form"] for e in _manifest()["entries"]}
    assert forms == {i.form for i in iter_instructions("sm_90")} == set(EXACT_FORMS)


@pytest.mark.parametrize("form", EXACT_FORMS)
def test_fixture_exact(form, tmp_path):
    _simulator()
    from warpsim.validation.compare import check

    man = _manifest()
    texts = sorted({e["instr"] for e in man["entries"] if e["form"] == form})
    rep = check(FIXTURES, None, only=texts, log=lambda *a: None)
    bad = [r for r in rep["rows"] if r["mismatches"]]
    assert not bad, bad[:3]


@pytest.mark.parametrize("args", [
    ["check", "--data", "/nonexistent/warpsim-data"],
    ["collect", "--arch", "sm_90", "--out", "OUT", "--only", "m16n8k8.row.col.f32.tf32",
     "--nvcc", "/nonexistent/nvcc"],
])
def test_cli_environment_errors_are_one_line(args, tmp_path):
    import subprocess
    import sys

    args = [str(tmp_path / "o") if x == "OUT" else x for x in args]
    r = subprocess.run([sys.executable, "-m", "warpsim.validation", *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("python -m warpsim.validation: error:")


def test_cli_failing_cuobjdump_is_one_line(tmp_path):
    # cuobjdump without nvdisasm exits non-zero: one line naming the tool, exit status 2
    import shutil
    import subprocess
    import sys

    if not (shutil.which("nvcc") and shutil.which("ptxas")):
        pytest.skip("needs nvcc and ptxas")
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\necho 'cuobjdump info    : nvdisasm not found' >&2\nexit 255\n")
    fake.chmod(0o755)
    r = subprocess.run([sys.executable, "-m", "warpsim.validation", "collect", "--out", str(tmp_path / "o"),
                        "--only", "m16n8k8.row.col.f32.tf32", "--no-gpu", "--cuobjdump", str(fake)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "failed with exit status 255" in lines[0] and "nvdisasm" in lines[0]


def test_cli_help_explains_every_option():
    import subprocess
    import sys

    for cmd in ("collect", "check", "run", "subset"):
        r = subprocess.run([sys.executable, "-m", "warpsim.validation", cmd, "--help"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0
        opts = [ln.split()[0] for ln in r.stdout.splitlines() if ln.startswith("  --")]
        bare = [ln for ln in r.stdout.splitlines() if ln.startswith("  --") and len(ln.split()) <= 2]
        assert opts and not bare, (cmd, bare)
