"""warpsim.tensorcore.desc: the sm_90 wgmma shared-memory matrix descriptor."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from warpsim.tensorcore.desc import (Descriptor, DescriptorError, decode_descriptor, encode,
                                     linear_addresses, operand_addresses)


def test_bit_fields():
    w = encode(0x1230, 0x40, 0x400, "128B")
    assert w == (0x123 | (0x4 << 16) | (0x40 << 32) | (1 << 62))
    assert decode_descriptor(w) == Descriptor(0x1230, 0x40, 0x400, 0, "128B")
    assert (encode(0, 0, 0, "64B") >> 62, encode(0, 0, 0, "32B") >> 62, encode(0, 0, 0) >> 62) == (2, 3, 0)
    # PTX worked examples: K-major no-swizzle tf32 LBO = 64*4 B -> 16, SBO = 32*4 B -> 8
    w = encode(0, 64 * 4, 32 * 4)
    assert (w >> 16) & 0x3FFF == 16 and (w >> 32) & 0x3FFF == 8


@given(st.integers(0, 2**14 - 1), st.integers(0, 2**14 - 1), st.integers(0, 2**14 - 1),
       st.sampled_from(["none", "32B", "64B", "128B"]))
def test_round_trip(s, l, b, sw):
    d = Descriptor(s * 16, l * 16, b * 16, 0, sw)
    assert decode_descriptor(d.word) == d


def test_k_major_none_restated():
    # f16, 16 rows x 16 k: core matrices of 8 rows x 16 B; LBO between the two K halves
    a = operand_addresses(encode(1024, 256, 128), rows=16, k=16, elem_bits=16)
    for r in range(16):
        for k in range(16):
            assert a[r, k] == 1024 + (r % 8) * 16 + (r // 8) * 128 + (k * 2) % 16 + (k * 2 // 16) * 256


def test_k_major_128b_and_k_advance():
    # bf16 tile of 64 rows x 64 k stored K-major with 128B swizzle from 0x2000 (8-row groups 1024 B
    # apart); a descriptor whose start advanced by 32 B addresses k 16..31 of the same tile
    full = np.arange(64 * 64).reshape(64, 64)
    base = operand_addresses(encode(0x2000, 16, 1024, "128B"), rows=64, k=64, elem_bits=16)
    assert len(set(base.ravel().tolist())) == 64 * 64
    for step in range(4):
        adv = operand_addresses(encode(0x2000 + 32 * step, 16, 1024, "128B"), rows=64, k=16, elem_bits=16)
        assert np.array_equal(adv, base[:, 16 * step:16 * step + 16])
    assert full.size  # the tile has every element once
    # row r's 16-byte chunk c sits at chunk c ^ (r % 8)
    assert base[3, 0] == 0x2000 + 3 * 128 + ((0 ^ 3) * 16)


def test_mn_major_swizzled_restated():
    lin = linear_addresses(0, 512, 2048, "64B", rows=64, k=16, elem_bits=16, major="MN")
    assert lin[31, 7] == 31 * 2 + 7 * 64 and lin[32, 0] == 512 and lin[0, 8] == 2048


def test_malformed_descriptors():
    with pytest.raises(DescriptorError, match="reserved") as e:
        operand_addresses(encode(0, 16, 16) | (1 << 47), rows=8, k=8, elem_bits=16, operand="b")
    assert e.value.field == "reserved" and e.value.operand == "b"
    with pytest.raises(DescriptorError, match="outside") as e:
        operand_addresses(encode(0xFF00, 16, 1024, "128B"), rows=64, k=16, elem_bits=16, operand="a",
                          smem_bytes=0x10000)
    assert e.value.field == "address" and e.value.value >= 0x10000
    with pytest.raises(DescriptorError, match="multiple of 16"):
        encode(8, 0, 0)


def test_base_offset_shifts_the_line_phase():
    """Measured (H200 probes, docs/validation.md): chunk ^= ((addr >> 7) - base_offset) % (S/16)."""
    a = operand_addresses(encode(128, 16, 1024, "128B", base_offset=1), rows=8, k=8, elem_bits=16)
    # a pattern starting one line in, with base offset 1, reads like an aligned one shifted by 128
    b = operand_addresses(encode(0, 16, 1024, "128B"), rows=8, k=8, elem_bits=16)
    assert np.array_equal(a, b + 128)
    c = operand_addresses(encode(0, 16, 1024, "128B", base_offset=3), rows=8, k=8, elem_bits=16)
    assert c[0, 0] == ((0 - 3) % 8) * 16 and c[3, 0] == 3 * 128
    # no swizzle: ignored
    assert np.array_equal(operand_addresses(encode(0, 128, 256, "none", base_offset=5), rows=8, k=8, elem_bits=16),
                          operand_addresses(encode(0, 128, 256), rows=8, k=8, elem_bits=16))
