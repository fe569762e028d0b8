"""Errors carry their facts as attributes; the message says what is wrong and str() renders where."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import warpsim
from warpsim.errors import MemoryAccessError, PtxError, QUOTE_LIMIT, RegisterError


def test_location_is_rendered_from_the_attributes():
    e = PtxError("operand b must be a vector").at(instruction="mma.sync.x %r1", line=7)
    assert str(e) == "line 7: mma.sync.x %r1: operand b must be a vector"
    e = PtxError("'add.u32 %r1' takes 3 operands").at(instruction="add.u32 %r1", line=3)
    assert str(e) == "line 3: 'add.u32 %r1' takes 3 operands"  # the text is not repeated
    assert str(PtxError("plain")) == "plain"


def test_warp_and_cta_follow_the_reason():
    e = MemoryAccessError("lane 3 accesses global address 0x10").at(warp=(1,), lanes=(3,))
    assert str(e).endswith("[warp 1]")
    e.at(cta=(2, 0, 0), warp=(0,))
    assert str(e).endswith("[warp 0 of CTA (2, 0, 0)]") and e.lanes == (3,)


def test_long_statements_are_quoted_shortened():
    text = "add.u32 " + ", ".join(f"%r{i}" for i in range(2000))
    e = PtxError(f"'{text}' is refused").at(instruction=text, line=1)
    assert len(str(e)) < QUOTE_LIMIT + 100 and "characters)" in str(e)


def test_register_error_is_not_quoted_like_a_key_error():
    assert str(RegisterError("register %r9 has not been written")) == \
        "register %r9 has not been written"


def test_errors_pickle_with_their_attributes():
    e = MemoryAccessError("lane 3 accesses global address 0x10").at(
        warp=(1,), lanes=(3,), address=0x10, space="global", reason="outside", nbytes=4)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is MemoryAccessError and str(back) == str(e)
    assert (back.warp, back.lanes, back.address, back.reason, back.nbytes) == \
        ((1,), (3,), 0x10, "outside", 4)


def test_a_runtime_error_names_its_statement_by_attribute():
    w = warpsim.Warp()
    w["%r1"] = np.full(32, 6, np.uint32)
    with pytest.raises(warpsim.WarpsimError) as ei:
        w.run(".reg .b32 %r<4>;\nld.shared.u32 %r2, [%r1];", shared=64)
    e = ei.value
    assert e.line == 2 and e.instruction == "ld.shared.u32 %r2, [%r1]"
    assert str(e).startswith("line 2: ld.shared.u32 %r2, [%r1]: lane 0 ")
