"""Instructions newer than the kernel's target or its module's .version are refused as ptxas
refuses them (verdicts of ptxas 13.0, recorded below; the live check runs where ptxas is)."""

import shutil
import subprocess

import numpy as np
import pytest

import warpsim
from warpsim.errors import TargetError
from warpsim.ptx.parser import parse_body
from warpsim.ptx.program import Program

BODY = ("{{ .reg .b32 %r<5>; .reg .b64 %rd<3>; ld.param.u64 %rd1, [p]; ld.global.u32 %r2, [%rd1];"
        " mov.u32 %r3, 1; mov.u32 %r4, 2; {s} st.global.u32 [%rd1], %r1; ret; }}")

#: (target, .version, statement, ptxas 13.0 accepts it)
CASES = [
    ("sm_80", "8.0", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};", False),
    ("sm_90", "8.0", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};", True),
    ("sm_75", "7.0", "redux.sync.add.u32 %r1, %r2, 0xffffffff;", False),
    ("sm_80", "7.0", "redux.sync.add.u32 %r1, %r2, 0xffffffff;", True),
    ("sm_75", "5.0", "fns.b32 %r1, %r2, %r3, %r4;", False),
    ("sm_75", "6.3", "fns.b32 %r1, %r2, %r3, %r4;", True),
    ("sm_75", "6.3", "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [%r2];", False),
    ("sm_75", "6.5", "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [%r2];", True),
    ("sm_75", "7.7", "movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;", False),
    ("sm_75", "7.8", "movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;", True),
]


def _ptx(target, version, s):
    return (f".version {version}\n.target {target}\n.address_size 64\n"
            f".visible .entry k(.param .u64 p)\n" + BODY.format(s=s) + "\n")


@pytest.mark.parametrize("target, version, stmt, ok", CASES)
def test_module_refuses_what_ptxas_refuses(target, version, stmt, ok):
    m = warpsim.Module(_ptx(target, version, stmt))
    buf = np.zeros(4, np.uint32)
    if ok:
        try:
            m.launch("k", 1, 32, [buf], arch=target, check=False)
        except TargetError as e:  # pragma: no cover - the failure message
            pytest.fail(f"refused what ptxas accepts: {e}")
        except warpsim.errors.WarpsimError:
            pass  # a run-time fault of the toy kernel (e.g. an address) is not the point
        return
    with pytest.raises(TargetError) as ei:
        m.launch("k", 1, 32, [buf], arch=target, check=False)
    e = ei.value
    assert e.arch == target and e.opcode and e.min_ptx is not None
    assert e.version == tuple(int(x) for x in version.split("."))
    assert (int(target[3:]) < e.min_sm) or (e.version < e.min_ptx)
    assert np.all(buf == 0)


def test_target_floor_without_a_module_version():
    """Warp-level bodies carry no .version: only the target is checked."""
    decl = ".reg .b32 %r<5>;\n"
    with pytest.raises(TargetError) as ei:
        Program(parse_body(decl + "match.any.sync.b32 %r1, %r2, 0xffffffff;"), "sm_60")
    assert (ei.value.min_sm, ei.value.arch, ei.value.version) == (70, "sm_60", None)
    Program(parse_body(decl + "match.any.sync.b32 %r1, %r2, 0xffffffff;"), "sm_70")
    Program(parse_body(decl + "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};"), "sm_90a")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_recorded_verdicts_are_ptxas_verdicts(tmp_path):
    for target, version, stmt, ok in CASES:
        f = tmp_path / "v.ptx"
        f.write_text(_ptx(target, version, stmt))
        r = subprocess.run(["ptxas", f"-arch={target}", str(f), "-o", str(tmp_path / "v.cubin")],
                           capture_output=True, text=True)
        assert (r.returncode == 0) == ok, (target, version, stmt, r.stderr)
