"""warpsim/validation/device_parts.py, the part runner the device harnesses share, on the CPU with
fake parts; and what each harness hands it (the same parts, timeouts and keys as the loops it
replaced)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from warpsim.validation import device_parts
from warpsim.validation.device_parts import TIMEOUT_RC, run_parts

FAKE = """
import sys, time
what = sys.argv[1]
if what == "fail":
    sys.exit("a fault in this part")
if what == "slow":
    time.sleep(30)
"""  # an "ok" part exits 0 at once; its .npz is written beforehand (no NumPy import: fast)


def test_parts_merge_and_failures_lose_only_themselves(tmp_path, capsys):
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    out = str(tmp_path / "out.npz")
    parts = [(name, [str(fake), what, str(tmp_path / f"p{name}.npz")], str(tmp_path / f"p{name}.npz"))
             for name, what in [(0, "ok"), (1, "fail"), (2, "slow"), (3, "ok")]]
    for i in (0, 3):
        np.savez(parts[i][2], a=np.arange(3) + i, device=np.array(["H100"]))
    log = run_parts(parts, out, timeout=1.5, log_tail=5,
                    key=lambda i, k: k if k == "device" else f"{i}/{k}")
    assert [log[i]["rc"] for i in range(4)] == [0, 1, TIMEOUT_RC, 0]
    assert log[1]["stderr"] == "part\n" and log[2]["stderr"] == "meout"  # the last 5 characters
    with np.load(out) as z:
        assert sorted(z.files) == ["0/a", "3/a", "device", "log"]
        np.testing.assert_array_equal(z["3/a"], np.arange(3) + 3)
        assert json.loads(z["log"][0]) == {str(i): log[i] for i in range(4)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.py", "out.npz"]  # parts removed
    printed = capsys.readouterr().out.splitlines()
    assert printed[1] == "1 1 a fault in this part | " and printed[2] == f"2 {TIMEOUT_RC} timeout"


def _handed(monkeypatch, main, argv) -> tuple[list, dict]:
    seen = {}

    def fake_run_parts(parts, path, **kw):
        seen["parts"], seen["path"], seen["kw"] = list(parts), path, kw
    monkeypatch.setitem(sys.modules, "device_parts",
                        types.SimpleNamespace(run_parts=fake_run_parts))
    assert main(argv) == 0
    assert seen["path"] == argv[-1]
    return seen["parts"], seen["kw"]


def test_hopper_async_harness_hands_over_its_sections(monkeypatch):
    from warpsim.validation import hopper_async_device as H
    parts, kw = _handed(monkeypatch, H.main, ["k.cubin", "out.npz"])
    assert kw == {"print_tail": 200}  # no timeout, as before
    assert [p[0] for p in parts] == H.sections() and "multicast" in H.sections()
    name, argv, part = parts[-1]
    assert part == f"out.npz.{name.replace(':', '_')}.npz"
    assert argv == [H.__file__, "--section", name, "k.cubin", part]


def test_hopper_im2col_harness_hands_over_its_sections(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(device_parts.__file__).parent))
    import hopper_im2col_device as H
    parts, kw = _handed(monkeypatch, H.main, ["c.cubin", "o.npz"])
    assert kw == {"timeout": 30}
    assert [p[0] for p in parts] == H.sections()
    name, argv, part = parts[1]
    assert name == "im2col:0" and part == "o.npz.im2col_0.npz"
    assert argv[1:] == ["--section", name, "c.cubin", part] and Path(argv[0]).is_absolute()
    parts, _ = _handed(monkeypatch, H.main, ["--only", "sweep,inter:1", "c.cubin", "o.npz"])
    assert [p[0] for p in parts] == ["sweep", "inter:1"]


def test_launch_harness_hands_over_its_cases(monkeypatch, tmp_path):
    from warpsim.validation import launch_device as H
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{}, {}, {}]))
    parts, kw = _handed(monkeypatch, H.main, [str(cases), "in.npz", "g.npz"])
    assert (kw["timeout"], kw["log_tail"]) == (90, 800)
    assert kw["key"](2, "device") == "device" and kw["key"](2, "buf") == "2/buf"
    assert parts[2] == (2, [H.__file__, "--case", "2", str(cases), "in.npz", "g.npz.2.npz"],
                        "g.npz.2.npz")
    assert len(parts) == 3


def test_device_parts_is_standalone():
    # it is copied to a GPU machine without warpsim: nothing but the standard library and NumPy
    src = Path(device_parts.__file__).read_text()
    assert "warpsim" not in "".join(ln for ln in src.splitlines() if ln.startswith(("import", "from")))
