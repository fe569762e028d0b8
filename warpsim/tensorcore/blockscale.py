"""Block scaling (.kind::mxf8f6f4, .kind::mxf4, .kind::mxf4nvf4): which lane and byte of the
scale metadata words feed each row of A and each column of B.

Facts (PTX ISA, "Block Scaling for mma.sync"): scale_A is M x V and scale_B is V x N, where V is
the scale_vec size (1, 2 or 4); K splits into V equal chunks, chunk j of row m of A is scaled by
scale_A[m, j] and chunk j of column n of B by scale_B[j, n].

- scale_A: within each quad (lanes 4g..4g+3) one thread pair supplies the values: thread-id-a 0
  picks lanes 4g and 4g+1, 1 picks 4g+2 and 4g+3.  The first lane of the pair holds row g, the
  second row g + 8.
- scale_B: in each quad the lane 4g + thread-id-b supplies column g.
- Bytes: with V = 1 the byte byte-id holds the single value; with V = 2 bytes byte-id and
  byte-id + 1 hold chunks 0 and 1 (byte-id 0 or 2); with V = 4 bytes 0..3 hold chunks 0..3
  (byte-id must be 0).
"""

from __future__ import annotations

from functools import lru_cache
import numpy as np

from warpsim.errors import PtxError
from warpsim.facts.isa import SELECTORS, Instruction
from warpsim._util.frozen import readonly




def selector(value: object, name: str) -> int:
    """``value`` as an int if it is an integer (Python or NumPy), else TypeError.

    Selectors are immediates in PTX: bools, floats, arrays and lists are refused, not rounded.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"selector {name} must be an integer (Python int or NumPy integer), not "
                        f"{type(value).__name__}: got {value!r}")
    return int(value)


def check_selectors(instr: Instruction, byte_id_a: int, thread_id_a: int, byte_id_b: int,
                    thread_id_b: int) -> tuple[int, int, int, int]:
    """The four selectors as ints; TypeError for non-integers, PtxError for values the PTX ISA
    leaves undefined."""
    byte_id_a, thread_id_a, byte_id_b, thread_id_b = (
        selector(v, n) for v, n in ((byte_id_a, "byte_id_a"), (thread_id_a, "thread_id_a"),
                                    (byte_id_b, "byte_id_b"), (thread_id_b, "thread_id_b")))
    if not instr.block_scale:
        if (byte_id_a, thread_id_a, byte_id_b, thread_id_b) != (0, 0, 0, 0):
            raise PtxError(f"{instr.text} has no .block_scale: scale selectors must be left at 0")
        return 0, 0, 0, 0
    v = instr.scale_vec
    bytes_ok, ta_ok, tb_ok = SELECTORS[v]
    for name, val, ok in (("byte-id-a", byte_id_a, bytes_ok), ("thread-id-a", thread_id_a, ta_ok),
                          ("byte-id-b", byte_id_b, bytes_ok), ("thread-id-b", thread_id_b, tb_ok)):
        if val not in ok:
            raise PtxError(
                f"{name} = {val!r} is undefined for .scale_vec::{v}X; legal values: "
                + ", ".join(map(str, ok)))
    return byte_id_a, thread_id_a, byte_id_b, thread_id_b


def scale_layout(instr: Instruction, operand: str, byte_id: int = 0, thread_id: int = 0) -> np.ndarray:
    """(lane, byte) feeding each scale element (cached; read-only for good).

    operand 'scale_a': int array (M, V, 2), entry [m, j] = (lane, byte) of scale_A[m, j].
    operand 'scale_b': int array (V, N, 2), entry [j, n] = (lane, byte) of scale_B[j, n].
    ``byte_id`` and ``thread_id`` are integers (Python or NumPy; not bool or float).
    """
    if not isinstance(instr, Instruction):
        raise TypeError(f"scale_layout takes a decoded Instruction, got {type(instr).__name__}")
    if not isinstance(operand, str):
        raise PtxError(f"unknown scale operand {operand!r}; expected 'scale_a' or 'scale_b'")
    return _scale_layout(instr, operand, selector(byte_id, "byte_id"),
                         selector(thread_id, "thread_id"))


@lru_cache(maxsize=None)
def _scale_layout(instr: Instruction, operand: str, byte_id: int, thread_id: int) -> np.ndarray:
    if not instr.block_scale:
        raise PtxError(f"{instr.text} has no .block_scale, so no {operand!r} operand; "
                       "its operands are 'a', 'b', 'c', 'd'")
    v = instr.scale_vec
    if operand == "scale_a":
        check_selectors(instr, byte_id, thread_id, 0, 0)
        m = np.arange(instr.m)
        lane = 4 * (m % 8) + 2 * thread_id + m // 8
        out = np.empty((instr.m, v, 2), np.int64)
        out[..., 0] = lane[:, None]
        out[..., 1] = byte_id + np.arange(v)[None, :]
    elif operand == "scale_b":
        check_selectors(instr, 0, 0, byte_id, thread_id)
        n = np.arange(instr.n)
        out = np.empty((v, instr.n, 2), np.int64)
        out[..., 0] = (4 * n + thread_id)[None, :]
        out[..., 1] = (byte_id + np.arange(v))[:, None]
    else:
        raise PtxError(f"unknown scale operand {operand!r}; expected 'scale_a' or 'scale_b'")
    return readonly(out)


def gather_scales(instr: Instruction, words: np.ndarray, operand: str, byte_id: int,
                  thread_id: int) -> np.ndarray:
    """Scale codes from metadata words (..., 32): (..., M, V) for scale_a, (..., V, N) for scale_b."""
    lay = scale_layout(instr, operand, byte_id, thread_id)
    w = words[..., lay[..., 0]]
    return ((w >> (8 * lay[..., 1]).astype(w.dtype)) & 0xFF).astype(np.uint8)


def scatter_scales(instr: Instruction, codes: np.ndarray, operand: str, byte_id: int = 0,
                   thread_id: int = 0) -> np.ndarray:
    """Metadata words (..., 32) uint32 holding scale codes (..., M, V) or (..., V, N)."""
    lay = scale_layout(instr, operand, byte_id, thread_id)
    codes = np.asarray(codes, np.uint32)
    batch = codes.shape[:-2]
    words = np.zeros(batch + (32,), np.uint32)
    lanes = lay[..., 0].reshape(-1)
    shifts = (8 * lay[..., 1]).reshape(-1).astype(np.uint32)
    vals = codes.reshape(batch + (-1,)) << shifts
    for i in range(lanes.size):  # at most 16 x 4 entries: a loop over table entries, not data
        words[..., lanes[i]] |= vals[..., i]
    return words


def expand(instr: Instruction, sa: np.ndarray, sb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale values broadcast to A's (..., M, K) and B's (..., K, N) element positions."""
    v = instr.scale_vec
    chunk = instr.k // v
    return np.repeat(sa, chunk, axis=-1), np.repeat(sb, chunk, axis=-2)
