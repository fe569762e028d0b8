"""warpsim.facts.swizzle: the shared-memory swizzle address functions."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from warpsim.errors import PtxError
from warpsim.facts.swizzle import DESCRIPTOR_CODES, MODES, atom, mode, swizzle, unswizzle


def _reference(addr: int, span: int) -> int:
    # restated: 16-byte chunk index inside the 128-byte line XOR (line index mod span/16)
    if span == 16:
        return addr
    line, chunk, byte = addr // 128, (addr // 16) % 8, addr % 16
    return line * 128 + ((chunk ^ (line % (span // 16))) * 16) + byte


@pytest.mark.parametrize("name", list(MODES))
def test_matches_restated_formula(name):
    a = np.arange(0, 4096)
    want = np.array([_reference(int(x), MODES[name].span) for x in a])
    assert np.array_equal(swizzle(a, name), want)


@given(st.lists(st.integers(0, 2**24), min_size=1, max_size=50), st.sampled_from(list(MODES)))
def test_involution_and_bijection_per_repeat(addrs, name):
    a = np.array(addrs)
    s = swizzle(a, name)
    assert np.array_equal(unswizzle(s, name), a)
    rep = MODES[name].repeat
    assert np.array_equal(s // rep, a // rep)  # stays inside its repeat block
    assert np.array_equal(s % 16, a % 16)  # bytes of a 16-byte chunk stay together


def test_repeats_and_codes():
    assert [MODES[m].repeat for m in ("32B", "64B", "128B")] == [256, 512, 1024]
    assert DESCRIPTOR_CODES == {0: "none", 1: "128B", 2: "64B", 3: "32B"}
    assert mode(128).name == "128B" and mode("swizzle_64b").name == "64B" and mode("interleave").name == "none"
    with pytest.raises(PtxError, match="unknown swizzle"):
        mode("256B")


def test_atom_pictures():
    a = atom("128B", 8, 16)  # 16-byte chunks: row r holds chunk j ^ r
    assert np.array_equal(a % 8, np.arange(8)[None, :] ^ np.arange(8)[:, None])
    b = atom("32B", 8, 16)  # rows 4..7 (the second 128-byte line) swap their two chunks
    assert b[:4].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]] and b[4].tolist() == [9, 8]
    assert not a.flags.writeable
    # every element lands exactly once
    for m in MODES:
        x = atom(m, 8, 2)
        assert sorted(x.ravel().tolist()) == list(range(x.size))


def test_input_not_mutated():
    a = np.arange(300, dtype=np.int64)
    c = a.copy()
    swizzle(a, "none")[0] = 99
    swizzle(a, "128B")
    assert np.array_equal(a, c)
