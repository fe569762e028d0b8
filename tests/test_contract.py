"""ptxas's mul + add/sub contraction (warpsim/ptx/contract.py): the pass against the verdicts
ptxas 13.0 and 13.5 gave on the patterns of tools/ptxas_contraction.py (tests/data/
ptxas_contraction.json; live against ptxas + nvdisasm where installed), and the fused numerics."""

from __future__ import annotations

import importlib.util
import json
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import warpsim
from warpsim.ptx.alu import decode_form
from warpsim.ptx.parser import parse_body
from warpsim.ptx.program import Program

ROOT = Path(__file__).parent.parent
TABLE = json.loads((ROOT / "tests/data/ptxas_contraction.json").read_text())


def _tool():
    spec = importlib.util.spec_from_file_location("ptxas_contraction", ROOT / "tools/ptxas_contraction.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T = _tool()


DECLS = (".reg .f32 %f<64>; .reg .f64 %fd<64>; .reg .b16 %h<64>; .reg .b32 %r<64>; .reg .b64 %rd<16>; "
         ".reg .pred %p<8>;\n")


def _fusions(body: str, contract: bool = True) -> list:
    """The contractions of the pattern's body (the kernel's loads left out: they are not
    arithmetic)."""
    return Program(parse_body(DECLS + body), "sm_90a", contract=contract).contractions


def test_the_table_covers_every_case_and_both_ptxas_releases():
    pats = TABLE["patterns"]
    assert set(T.PATTERNS) <= set(pats) and sum(n.startswith("random_") for n in pats) >= 100
    assert {k.split("/")[0] for p in pats.values() for k in p["fused"]} == {"13.0", "13.5"}
    # the rule does not depend on the release or the target (bf16 needs sm_90)
    for name, p in pats.items():
        assert len({v for v in p["fused"].values() if v is not None}) == 1, name
    assert sum(max(v for v in p["fused"].values() if v is not None) for p in pats.values()) > 100


def test_pass_contracts_what_ptxas_contracts():
    """Every pattern (named and random): as many contracted add/sub as ptxas made."""
    bad = {}
    for name, p in sorted(TABLE["patterns"].items()):
        want = next(v for v in p["fused"].values() if v is not None)
        got = len(_fusions(p["body"]))
        if got != want:
            bad[name] = (got, want)
    assert not bad, bad


def test_contract_false_and_warp_run_are_literal():
    body = T.PATTERNS["mul_two_adds"]
    assert len(_fusions(body)) == 2 and _fusions(body, contract=False) == []
    assert len(_module(body, True).program("k", arch="sm_90a").program.contractions) == 2
    assert _module(body, False).program("k", arch="sm_90a").program.contractions == []
    w = warpsim.Warp()
    w.write_float("%f0", np.full(32, 1 + 2.0**-12, np.float32))
    w.write_float("%f1", np.full(32, -1, np.float32))
    w.run(".reg .f32 %f<4>; mul.f32 %f2, %f0, %f0; add.f32 %f3, %f2, %f1;")
    assert w.read_float("%f3")[0] == np.float32(2.0**-11)


@lru_cache(maxsize=None)
def _module(body: str, contract: bool) -> warpsim.Module:
    return warpsim.Module(T.kernel(body, "sm_90a"), contract=contract)


def _run(body: str, inputs: dict, out_dtype=np.float32, n_out: int = 4, contract: bool = True):
    buf = np.zeros(T.IN_BYTES, np.uint8)
    offs = {"f": (0, 4, np.float32), "fd": (32, 8, np.float64), "r": (64, 4, np.uint32), "h": (80, 2, np.uint16)}
    for reg, v in inputs.items():
        kind, idx = reg.rstrip("0123456789"), int(reg[len(reg.rstrip("0123456789")):])
        base, w, dt = offs[kind]
        buf[base + (idx - 1) * w: base + idx * w] = np.array([v], dt).view(np.uint8)
    out = _module(body, contract).launch("k", grid=1, block=1, args=[buf, np.zeros(n_out, out_dtype), np.uint32(0)])
    return out[1]


X = np.float32(1 + 2.0**-12)   # X*X = 1 + 2^-11 + 2^-24: the product's rounding shows


@pytest.mark.parametrize("name, want, literal", [
    ("mul_add", 2.0**-11 + 2.0**-24, 2.0**-11),
    ("sub_mul", -(2.0**-11 + 2.0**-24), -(2.0**-11)),
    ("mul_neg_add", -(2.0**-11 + 2.0**-24), -(2.0**-11)),
    ("mul.rn_add", 2.0**-11, 2.0**-11),
])
def test_fused_result_is_rounded_once(name, want, literal):
    inputs = {"f1": X, "f2": X, "f3": np.float32(-1)}
    if name in ("sub_mul", "mul_neg_add"):
        inputs["f3"] = np.float32(1)
    assert _run(T.PATTERNS[name], inputs)[0] == np.float32(want)
    assert _run(T.PATTERNS[name], inputs, contract=False)[0] == np.float32(literal)


def test_fused_f64_f16x2_and_two_uses():
    x = 1 + 2.0**-27
    got = _run(T.PATTERNS["f64_mul_add"], {"fd1": x, "fd2": x, "fd3": -1.0}, np.float64, 2)
    assert got[0] == 2.0**-26 + 2.0**-54
    h = np.float16(1 + 2.0**-6)  # h*h = 1 + 2^-5 + 2^-12, half an f16 ulp at 1
    pair = int(np.array([h, h], np.float16).view(np.uint32)[0])
    neg1 = int(np.array([-1, -1], np.float16).view(np.uint32)[0])
    got = _run(T.PATTERNS["f16x2_mul_add"], {"r1": pair, "r2": pair, "r3": neg1}, np.uint32, 1)
    assert list(got.view(np.float16)) == [np.float16(2.0**-5 + 2.0**-12)] * 2
    got = _run(T.PATTERNS["mul_two_adds"], {"f1": X, "f2": X, "f3": np.float32(-1), "f4": np.float32(1)})
    assert list(got[:2]) == [np.float32(2.0**-11 + 2.0**-24), np.float32(-(2.0**-11 + 2.0**-24))]


def test_div_full_and_rcp_fuse_their_final_multiply():
    # a / b with b = 3: div.full = a' * RCP(b'), one FFMA with c = -(a / b): the residual
    from warpsim.ptx.ops import approx
    a, b = np.float32(7.0), np.float32(3.0)
    c = -_run(T.PATTERNS["div.full_add"], {"f1": a, "f2": b, "f3": np.float32(0)})[0]
    r, a2 = approx.div_factors(np.array([a]).view(np.uint32), np.array([b]).view(np.uint32), full=True, ftz=False)
    fma, _, mods = decode_form("fma.rn.f32")
    want = fma.fn([r, a2, np.array([c]).view(np.uint32)], type="f32", **mods)
    got = _run(T.PATTERNS["div.full_add"], {"f1": a, "f2": b, "f3": c})
    assert got[:1].view(np.uint32)[0] == want[0]
    lit = _run(T.PATTERNS["div.full_add"], {"f1": a, "f2": b, "f3": c}, contract=False)
    assert lit[0] == 0 and got[0] != 0
    # rcp.approx of |x| > 2^126: s = 0.25, s * RCP(x s) is subnormal when rounded alone
    x = np.float32(2.0**127 * 1.5)
    fused = _run(T.PATTERNS["rcp.approx_add"], {"f2": x, "f3": np.float32(0)})[0]
    s, rr = approx.rcp_factors(np.array([x]).view(np.uint32))
    want = fma.fn([s, rr, np.zeros(1, np.uint32)], type="f32", **mods)
    assert np.float32(fused).view(np.uint32) == want[0]


def test_source_rewritten_before_the_add_stays_literal():
    body = (" mul.f32 %f10, %f1, %f2;\n mov.f32 %f1, %f4;\n add.f32 %f11, %f10, %f3;\n"
            " st.global.f32 [%rd2], %f11;\n st.global.f32 [%rd2+4], %f1;")
    assert _fusions(body) == []
    assert len(_fusions(body.replace("mov.f32 %f1, %f4", "mov.f32 %f9, %f4"))) == 1


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_fused_pair_equals_fma_rn(a, b, c):
    words = np.array([a, b, c], np.uint32)
    got = _run(T.PATTERNS["mul_add"], dict(zip(("f1", "f2", "f3"), words.view(np.float32))))
    fma, _, mods = decode_form("fma.rn.f32")
    want = fma.fn([words[:1], words[1:2], words[2:]], type="f32", **mods)
    assert got[:1].view(np.uint32)[0] == want[0]


def _have_ptxas():
    return shutil.which("ptxas") is not None and T.nvdisasm_path() is not None


@pytest.mark.skipif(not _have_ptxas(), reason="needs ptxas and nvdisasm")
def test_live_ptxas_agrees_on_a_sample():
    names = ["mul_add", "tie_2v2", "fewer_uses_wins", "div.full_two_subs", "uses_in_two_blocks",
             "mul_add_and_store", "f16x2_mul_sub", "rcp.approx_add", "sqrt.approx_add", "random_7"]
    bodies = [TABLE["patterns"][n]["body"] for n in names]
    tools = T.ptxas_paths()
    got = T.verdicts(bodies, "sm_90a", tools[max(tools)], T.nvdisasm_path())
    assert got == [len(_fusions(b)) for b in bodies]


# ----------------------------------------------------------------------------------------------
# against the H100 (tools/contraction_device.py; docs/validation.md)
# ----------------------------------------------------------------------------------------------
HW = np.load(ROOT / "tests/data/h100_contraction.npz")
HW_META = json.loads(bytes(HW["meta"]).decode())
FULL = bool(__import__("os").environ.get("WARPSIM_FULL"))
SAMPLE = ["mul_add", "sub_mul", "two_muls_add", "tie_2v2", "fewer_uses_wins", "mul_add.sat", "f64_mul_two_subs",
          "f16x2_mul_sub", "div.full_two_subs", "rcp.approx_add", "mul_predicated_add", "random_3"]


def _device_tool():
    spec = importlib.util.spec_from_file_location("contraction_device", ROOT / "tools/contraction_device.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_patterns_match_the_h100():
    """The GPU's words (driver JIT 13.0 = ptxas 13.0 = 13.5 cubins) on inputs where a fused and
    an unfused pair differ; the sample in CI, every stored pattern with WARPSIM_FULL=1."""
    D = _device_tool()
    names = HW_META["names"]
    m = warpsim.Module(D.module_text(T, names))
    n = HW_META["threads"]
    x = HW["inputs"].reshape(-1)
    lit = warpsim.Module(m.text, contract=False)
    seen_literal_differ = 0
    for i, name in enumerate(names):
        if not FULL and name not in SAMPLE:
            continue
        args = [x, np.zeros(n * D.OUT_BYTES, np.uint8), np.uint32(7)]
        got = m.launch(f"k{i}", grid=1, block=n, arch="sm_90a", args=args)[1].reshape(n, -1)
        assert (got == HW["outputs"][i]).all(), name
        seen_literal_differ += not (lit.launch(f"k{i}", grid=1, block=n, arch="sm_90a", args=args)[1]
                                    .reshape(n, -1) == HW["outputs"][i]).all()
    assert seen_literal_differ >= (40 if FULL else 8)


def test_triton_layernorm_fresh_inputs_match_the_h100():
    """Triton's layer norm (sm_80 and sm_89 PTX) on fresh inputs, 64 rows: every byte."""
    from warpsim.validation.real_kernels import simulate
    D = _device_tool()
    for c in D.layernorm_cases(HW_META["layernorm_seed"]):
        sim, _ = simulate(dict(c))
        for o, v in sim.items():
            assert np.ascontiguousarray(v).tobytes() == HW[f"{c['name']}/{o}"].tobytes(), (c["name"], o)


def test_real_corpus_kernels_contract_as_ptxas_does():
    """Every kernel of tests/data/real (Triton, nvcc, CuTe): as many contracted add/sub as
    ptxas 13.0/13.5 made (CuTe's half epilogues: 128 per GEMM kernel; Triton's layer norm: 1).
    CuTe's large modules with WARPSIM_FULL=1."""
    import gzip
    import re
    root = ROOT / "tests/data/real"
    corpus = TABLE["corpus"]
    assert len(corpus) >= 29
    total = 0
    for rel, kernels in sorted(corpus.items()):
        if rel.startswith("cute/") and not FULL:
            continue
        p = root / rel
        text = gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()
        arch = re.search(r"\.target\s+(sm_\w+)", text).group(1)
        m = warpsim.Module(text)
        for name, verdicts in kernels.items():
            want = set(verdicts.values())
            assert len(want) == 1, (rel, name, verdicts)
            if name == "uses_malloc":   # refused by name (device malloc)
                continue
            got = len(m.program(name, arch=arch).program.contractions)
            assert got == want.pop(), (rel, name)
            total += got
    assert total >= (3 + 128 * 5 if FULL else 3)
