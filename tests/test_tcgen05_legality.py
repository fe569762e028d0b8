"""tcgen05 legality: warpsim's check agrees with every stored ptxas 13.5 verdict.

tests/data/ptxas_truth_tcgen05.jsonl.gz (tools/ptxas_truth_tcgen05.py) holds ptxas 13.5's
verdict on every generated tcgen05 statement, at PTX ISA 9.0 and 9.5, on the Blackwell
datacenter targets and on sm_90a and sm_120a/sm_121a (which refuse all of tcgen05).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from warpsim.errors import PtxError
from warpsim.ptx.ops import tcgen05 as T

TABLE = Path(__file__).parent / "data" / "ptxas_truth_tcgen05.jsonl.gz"


def _rows():
    with gzip.open(TABLE, "rt") as fh:
        meta = json.loads(fh.readline())["meta"]
        return meta, [json.loads(line) for line in fh]


META, ROWS = _rows()


def _verdict(s, target, version):
    try:
        T.check(s, target, version)
        return True, ""
    except PtxError as e:
        return False, str(e)


def test_table_shape():
    assert META["rows"] == len(ROWS) > 1500
    assert set(META["targets"]) >= {"sm_90a", "sm_100a", "sm_100f", "sm_103a", "sm_110a", "sm_120a"}
    assert "13.5" in META["ptxas"]
    cats = {r["cat"] for r in ROWS}
    assert {"mma", "mma-block-scale", "ld", "st", "alloc", "commit", "cp", "shift"} <= cats


@pytest.mark.parametrize("version", ["9.0", "9.5"])
def test_agrees_with_ptxas(version):
    v = tuple(int(x) for x in version.split("."))
    bad = []
    for r in ROWS:
        for t in META["targets"]:
            want = t in r["ok"][version]
            got, why = _verdict(r["s"], t, v)
            if got != want:
                bad.append(f"{t} @{version}: ptxas {'accepts' if want else 'rejects'} "
                           f"({r['err'].get(version, '')[:80]}), warpsim {why[:100] or 'accepts'}: {r['s']}")
    assert not bad, f"{len(bad)} disagreements:\n" + "\n".join(bad[:30])


def test_refused_off_blackwell():
    s = "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;"
    for t in ("sm_90a", "sm_100", "sm_120a", "sm_121a"):
        with pytest.raises(PtxError, match="not supported on .target"):
            T.check(s, t)
    assert T.check(s, "sm_100a").op == "alloc"


def test_messages_name_the_problem():
    with pytest.raises(PtxError, match="power of two"):
        T.check("tcgen05.alloc.cta_group::1.sync.aligned.b32 [%r1], 48;")
    with pytest.raises(PtxError, match="moves 4 registers"):
        T.check("tcgen05.ld.sync.aligned.16x256b.x1.b32 {%r1, %r2}, [%r3];")
    with pytest.raises(PtxError, match="block_scale"):
        T.check("tcgen05.mma.cta_group::1.kind::mxf4 [%r2], %rd1, %rd2, %r4, %p1;")
