"""The warpsim command line, run as `python -m warpsim` in a subprocess."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import warpsim
from warpsim.tools.golden import read_golden

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SHORT = "m16n8k16.row.col.f32.f16.f16.f32"


def run(*args, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("WARPSIM_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "warpsim", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def bad(p, rc=2):
    assert p.returncode == rc, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("warpsim: error: "), p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def test_help_teaches_every_command():
    p = run("--help")
    assert p.returncode == 0
    for cmd in ("decode", "layout", "run", "check-packing", "demo"):
        assert cmd in p.stdout
        assert f"warpsim {cmd}" in p.stdout  # an example per command
    for cmd in ("decode", "layout", "run", "check-packing", "demo"):
        h = run(cmd, "--help")
        assert h.returncode == 0 and "example" in h.stdout, cmd


def test_decode():
    p = run("decode", SHORT)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert F16 in out
    assert "4 x .b32" in out and "bits 0-15, 16-31" in out
    assert "sm_80" in out and "sm_90" in out and "sm_75" not in out.split("legal on")[1]


def test_decode_arch_not_legal():
    msg = bad(run("decode", SHORT, "--arch", "sm_75"))
    assert "sm_75" in msg


def test_layout_text_and_queries():
    p = run("layout", SHORT, "--operand", "a")
    assert p.returncode == 0 and "T5:a2" in p.stdout and "r1:16-31" in p.stdout
    q = run("layout", SHORT, "--operand", "a", "--element", 9, 3)
    assert "A[9][3] is a3 of lane 5: register 1, bits 16-31" in q.stdout
    r = run("layout", SHORT, "--operand", "a", "--lane", 5, "--register", 1)
    assert "A[9][2]" in r.stdout and "A[9][3]" in r.stdout


def test_layout_files(tmp_path):
    p = run("layout", SHORT, "--operand", "b", "--out", tmp_path / "b.svg")
    assert p.returncode == 0, p.stderr
    ET.parse(tmp_path / "b.svg")
    p = run("layout", SHORT, "--operand", "c", "--format", "csv")
    assert len(list(csv.reader(io.StringIO(p.stdout)))) == 1 + 128
    p = run("layout", SHORT, "--operand", "a", "--out", tmp_path / "a.md")
    assert (tmp_path / "a.md").read_text().startswith("**")


def test_run_npz_json_h_and_reproducible(tmp_path):
    for name in ("g1.npz", "g2.npz", "g.json", "g.h"):
        p = run("run", SHORT, "--seed", 4, "--batch", 2, "--out", tmp_path / name)
        assert p.returncode == 0, p.stderr
        assert "wrote" in p.stdout
    assert (tmp_path / "g1.npz").read_bytes() == (tmp_path / "g2.npz").read_bytes()
    a, b = read_golden(tmp_path / "g1.npz"), read_golden(tmp_path / "g.json")
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k]
    assert a["instruction"] == F16 and a["arch"] == "sm_90" and a["seed"] == 4
    d = warpsim.mma(F16, a["a_regs"], a["b_regs"], a["c_regs"], arch="sm_90")
    np.testing.assert_array_equal(d, a["d_regs"])
    h = (tmp_path / "g.h").read_text()
    assert f'#define G_INSTRUCTION "{F16}"' in h and "static const uint32_t g_a_regs[2][32][4]" in h


def test_run_progress_bar(tmp_path):
    p = run("run", SHORT, "--batch", 2100, "--out", tmp_path / "big.npz")
    assert p.returncode == 0, p.stderr
    assert "100%" in p.stderr and "2100/2100" in p.stderr


def test_run_picks_a_legal_arch(tmp_path):
    mx = "m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
    p = run("run", mx, "--out", tmp_path / "mx.npz")
    assert p.returncode == 0, p.stderr
    assert read_golden(tmp_path / "mx.npz")["arch"] == "sm_120a"


def test_check_packing(tmp_path):
    A = np.arange(256.0).reshape(16, 16)
    np.save(tmp_path / "m.npy", A)
    np.save(tmp_path / "ok.npy", warpsim.pack(F16, "a", A))
    np.save(tmp_path / "t.npy", warpsim.pack(F16, "a", A.T))
    w = warpsim.pack(F16, "a", A)
    np.save(tmp_path / "r.npy", w[:, [1, 0, 2, 3]])
    p = run("check-packing", SHORT, "--operand", "a", tmp_path / "ok.npy", tmp_path / "m.npy")
    assert p.returncode == 0 and p.stdout.startswith("OK")
    p = run("check-packing", SHORT, "--operand", "a", tmp_path / "t.npy", tmp_path / "m.npy")
    assert p.returncode == 1 and "transposed" in p.stdout
    assert "lane 0 register 0 bits 16-31 holds A[1][0]; the layout puts A[0][1] there" in p.stdout
    p = run("check-packing", SHORT, "--operand", "a", tmp_path / "r.npy", tmp_path / "m.npy")
    assert p.returncode == 1 and "registers 0 and 1 are swapped" in p.stdout


def test_demo():
    p = run("demo")
    assert p.returncode == 0, p.stderr
    assert "T0:a0" in p.stdout and "lane 0:" in p.stdout
    assert "sm_90 against the exact answer" in p.stdout
    assert "ulp" in p.stdout or "bit-identical" in p.stdout


@pytest.mark.parametrize("args", [
    ["decode", "m16n8k17.row.col.f32.f16.f16.f32"],
    ["decode", "not an instruction"],
    ["decode", SHORT, "--arch", "sm_99"],
    ["layout", SHORT, "--operand", "e"],
    ["layout", SHORT, "--operand", "a", "--element", 16, 0],
    ["layout", SHORT, "--operand", "a", "--lane", 1, "--register", 7],
    ["layout", SHORT, "--operand", "scale_a"],
    ["layout", SHORT],  # --operand missing (argparse)
    ["layout", SHORT, "--operand", "a", "--out", "/nonexistent-dir/x.svg"],
    ["run", SHORT, "--out", "x.txt"],
    ["run", SHORT, "--batch", 0, "--out", "x.npz"],
    ["run", "m16n8k16.row.col.s32.s8.s8.s32", "--dist", "normal", "--out", "x.npz"],
    ["check-packing", SHORT, "--operand", "a", "missing.npy", "missing.npy"],
    ["check-packing", SHORT, "--operand", "scale_a", "missing.npy", "missing.npy"],
    ["demo", "--instr", "m16n8k16.row.col.f32.f16.f16.f16"],
    ["frobnicate"],
])
def test_bad_input_one_line_exit_2(args, tmp_path):
    bad(run(*args, cwd=tmp_path))


def test_bad_files(tmp_path):
    (tmp_path / "junk.npy").write_text("not numpy")
    np.save(tmp_path / "m.npy", np.arange(256.0).reshape(16, 16))
    np.save(tmp_path / "wrong.npy", np.zeros((16, 16), np.uint32))
    np.savez(tmp_path / "z.npz", x=np.zeros(3))
    for regs in ("junk.npy", "wrong.npy", "z.npz"):
        bad(run("check-packing", SHORT, "--operand", "a", tmp_path / regs, tmp_path / "m.npy"))
    np.save(tmp_path / "r.npy", np.zeros((32, 4), np.uint32))
    np.save(tmp_path / "m8.npy", np.zeros((8, 16)))
    bad(run("check-packing", SHORT, "--operand", "a", tmp_path / "r.npy", tmp_path / "m8.npy"))


SPARSE = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"


def test_run_sparse_writes_metadata_selector_and_the_logical_a(tmp_path):
    for name in ("s.npz", "s.json", "s.h"):
        p = run("run", SPARSE, "--selector", 1, "--seed", 2, "--batch", 2, "--out", tmp_path / name)
        assert p.returncode == 0, p.stderr
        assert "selector 1" in p.stdout
    g, j = read_golden(tmp_path / "s.npz"), read_golden(tmp_path / "s.json")
    for k in g:
        if isinstance(g[k], np.ndarray):
            np.testing.assert_array_equal(g[k], j[k])
    assert int(g["selector"]) == 1 and g["e_regs"].shape == (2, 32) and g["a"].shape == (2, 16, 16)
    # selector 1: threads 2 and 3 of each group of four supply the metadata, the others give 0;
    # .sp::ordered_metadata nibbles hold two increasing 2-bit indices idx0 < idx1
    e = g["e_regs"].astype(np.int64)
    nib = (e[..., None] >> (4 * np.arange(8))) & 0xF
    supply = np.arange(32) % 4 >= 2
    assert (nib[:, ~supply] == 0).all()
    assert ((nib[:, supply] & 3) < (nib[:, supply] >> 2)).all()
    # the logical A keeps 2 of every 4 columns, holding the compressed values in order
    A, a = g["a_sparse"], g["a"]
    assert A.shape == (2, 16, 32) and ((A.reshape(2, 16, 8, 4) != 0).sum(-1) <= 2).all()
    for w in range(2):
        for r in range(16):
            np.testing.assert_array_equal(A[w, r][A[w, r] != 0], a[w, r][a[w, r] != 0])
    ref = np.einsum("wmk,wkn->wmn", A, g["b"]) + g["c"]
    np.testing.assert_allclose(g["d"], ref, rtol=1e-5, atol=1e-3)
    d = warpsim.mma(SPARSE, g["a_regs"], g["b_regs"], g["c_regs"], arch="sm_90", metadata=g["e_regs"],
                    selector=1)
    np.testing.assert_array_equal(d, g["d_regs"])
    h = (tmp_path / "s.h").read_text()
    assert "#define S_SELECTOR 1" in h and "static const uint32_t s_e_regs[2][32]" in h


def test_run_and_demo_refuse_a_wrong_selector(tmp_path):
    assert "is not sparse" in bad(run("run", SHORT, "--selector", 1, "--out", tmp_path / "x.npz"))
    assert "selector 2 is undefined" in bad(run("run", SPARSE, "--selector", 2, "--out", tmp_path / "x.npz"))
    assert "is not sparse" in bad(run("demo", "--selector", 0))
    assert not (tmp_path / "x.npz").exists()


def test_demo_sparse():
    p = run("demo", "--instr", SPARSE, "--selector", 1, "--seed", 5)
    assert p.returncode == 0, p.stderr
    assert "metadata e (sparsity selector 1; 16 lanes supply it: 2, 3, 6, 7, ...)" in p.stdout
    assert "the logical A (16 x 32, 2 of every 4 columns kept), row 0:" in p.stdout
    assert "sm_90 against the exact answer" in p.stdout


def test_decode_takes_c_string_literals_pasted_from_source():
    from warpsim.tools.cli import from_c_literal

    pasted = ('"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "\n'
              '  "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\\n"')
    assert from_c_literal(pasted) == (F16 + " {%asm0,%asm1,%asm2,%asm3}, {%asm4,%asm5,%asm6,%asm7}, "
                                      "{%asm8,%asm9}, {%asm10,%asm11,%asm12,%asm13}")
    assert from_c_literal('"mov.u32 %0, %%laneid;"') == "mov.u32 %asm0, %laneid"
    assert from_c_literal(F16) == F16  # not a literal: as given
    p = run("decode", pasted)
    assert p.returncode == 0 and "form         f16" in p.stdout
    assert "f16" in bad(run("decode", '"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " x'))


def test_decode_describes_other_ptx_instructions():
    p = run("decode", "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1,%r2,%r3,%r4}, [%r5]")
    assert p.returncode == 0 and "PTX instruction 'ldmatrix' (family matrix)" in p.stdout
    p = run("decode", '"cvt.rn.f16x2.f32 %0, %1, %2;"')
    assert p.returncode == 0 and "'cvt' (family convert)" in p.stdout and ".f16x2" in p.stdout
    assert ".x5" in bad(run("decode", "ldmatrix.sync.aligned.m8n8.x5.shared.b16 {%r1}, [%r5]"))
