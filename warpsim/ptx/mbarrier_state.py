"""The mbarrier phase machine, kept in the 8 shared-memory bytes of each barrier object.

A barrier's 64-bit word holds (layout read off H100/H200 ``mbarrier.arrive`` states and words,
docs/hopper.md; each count stored negated)::

    bit 63      phase parity
    bits 62:43  pending arrivals of the current phase, as -pending mod 2^20
    bits 41:21  tx-count, as -(bytes still expected) mod 2^21 (positive when bytes landed
                before their expect_tx)
    bits 20:1   expected arrivals (the next phase's reload), as -expected mod 2^20

A phase completes when its pending count and tx-count are both zero: the parity flips and the
pending count reloads from the expected count.  The state an arrive returns is the word
before the arrive with its low 32 bits cleared.

:class:`MBarriers` applies operations to a batch of barriers at once (one CTA's shared memory
per batch element), keeps an out-of-band flag per 8-byte word (initialised or not) to report
use without init and re-init of a live barrier, and counts phase completions (``epoch``) so a
scheduler knows when a parked waiter may proceed.  Blackwell's ``tcgen05.commit`` arrives
through :meth:`MBarriers.arrive` as well.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import PtxError

__all__ = ["MBarriers", "MBarrierError", "encode_word", "decode_word", "MAX_COUNT", "TX_LIMIT", "rows_view"]

MAX_COUNT = (1 << 20) - 1
TX_LIMIT = (1 << 20) - 1
_M20, _M21 = np.int64((1 << 20) - 1), np.int64((1 << 21) - 1)


class MBarrierError(PtxError):
    """A misuse of an mbarrier object (use without init, re-init while live, tx-count or
    arrival-count out of range); the sanitizer reports it as an ``mbarrier`` finding."""

    finding_kind = "mbarrier"


def encode_word(phase, pending, tx, expected) -> np.ndarray:
    """The 64-bit words of barriers with the given fields (arrays of int64)."""
    phase, pending, tx, expected = (np.asarray(x, np.int64) for x in (phase, pending, tx, expected))
    w = ((phase & 1).astype(np.uint64) << np.uint64(63)) \
        | ((-pending & _M20).astype(np.uint64) << np.uint64(43)) \
        | ((tx & _M21).astype(np.uint64) << np.uint64(21)) \
        | ((-expected & _M20).astype(np.uint64) << np.uint64(1))
    return w


def decode_word(w):
    """(phase parity, pending, tx-count, expected) of words ``w`` (int64 arrays); the tx-count
    is signed: negative while bytes are still expected."""
    w = np.asarray(w, np.uint64)
    phase = (w >> np.uint64(63)).astype(np.int64)
    pending = (-((w >> np.uint64(43)).astype(np.int64) & _M20)) & _M20
    tx = ((w >> np.uint64(21)).astype(np.int64) & _M21)
    tx = np.where(tx >= (1 << 20), tx - (1 << 21), tx)
    expected = (-((w >> np.uint64(1)).astype(np.int64) & _M20)) & _M20
    return phase, pending, tx, expected


def rows_view(smem) -> np.ndarray:
    """``smem``'s bytes as (CTA rows, bytes), sharing its memory."""
    v = smem.data.reshape(int(np.prod(smem.data.shape[:-1], dtype=np.int64)), smem.size)
    if v.size and not np.shares_memory(v, smem.data):
        raise PtxError("mbarriers and async copies need contiguous shared memory")
    return v


class MBarriers:
    """The mbarrier objects in one batch of CTAs' shared memory (a
    :class:`~warpsim.ptx.memory.FlatMemory` with one copy per batch element)."""

    def __init__(self, smem) -> None:
        self.smem = smem
        self.data = rows_view(smem)  # one row per CTA (a view)
        self.live = np.zeros((self.data.shape[0], smem.size // 8 + 1), bool)
        self.epoch = 0  # phase completions (and inits/invals) so far

    # -- words ----------------------------------------------------------------------------
    def _index(self, b, off, where: str):
        off = np.asarray(off, np.int64)
        bad = (off % 8 != 0) | (off < 0) | (off + 8 > self.smem.size)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MBarrierError(f"{where}: mbarrier address {int(off[i]):#x} is not an 8-byte aligned shared "
                                f"address inside the CTA's {self.smem.size} bytes").at(address=int(off[i]))
        return np.asarray(b, np.intp), (off // 8).astype(np.intp)

    def read(self, b, off, where: str = "") -> np.ndarray:
        bi, wi = self._index(b, off, where)
        raw = self.data[bi[:, None], (wi * 8)[:, None] + np.arange(8)]
        return np.ascontiguousarray(raw).view(np.uint64)[:, 0]

    def _write(self, bi, wi, words) -> None:
        self.data[bi[:, None], (wi * 8)[:, None] + np.arange(8)] = \
            np.ascontiguousarray(words.astype(np.uint64))[:, None].view(np.uint8)

    def _need_live(self, bi, wi, where, what):
        ok = self.live[bi, wi]
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise MBarrierError(f"{where}: {what} on shared address {int(wi[i]) * 8:#x}, which holds no "
                                "initialised mbarrier (mbarrier.init it first; after mbarrier.inval it is "
                                "dead)").at(address=int(wi[i]) * 8)

    # -- operations (b: batch element of each op, off: shared::cta offset) ---------------------
    def init(self, b, off, count, where: str = "") -> None:
        bi, wi = self._index(b, off, where)
        count = np.broadcast_to(np.asarray(count, np.int64), bi.shape)
        bad = (count < 1) | (count > MAX_COUNT)
        if bad.any():
            raise MBarrierError(f"{where}: mbarrier.init count {int(count[bad][0])} is outside 1..{MAX_COUNT}")
        if self.live[bi, wi].any():
            i = int(np.flatnonzero(self.live[bi, wi])[0])
            raise MBarrierError(f"{where}: mbarrier.init on the live mbarrier at shared address "
                                f"{int(wi[i]) * 8:#x} (re-initialising a barrier in use is undefined; "
                                "mbarrier.inval it first)").at(address=int(wi[i]) * 8)
        self._write(bi, wi, encode_word(0, count, 0, count))
        self.live[bi, wi] = True
        self.epoch += 1

    def inval(self, b, off, where: str = "") -> None:
        bi, wi = self._index(b, off, where)
        self._need_live(bi, wi, where, "mbarrier.inval")
        self.live[bi, wi] = False
        self.epoch += 1

    def _groups(self, bi, wi):
        key = bi.astype(np.int64) * (1 << 32) + wi
        uk, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return uk, bi[first], wi[first], inv.reshape(-1)

    def update(self, b, off, *, arrive=0, expect=0, complete=0, drop=0, no_complete=False,
               where: str = "", what: str = "mbarrier.arrive") -> np.ndarray:
        """Apply to each op (ops on the same barrier add up): ``expect`` bytes to expect
        (expect_tx) and ``complete`` bytes landed (complete_tx), then ``drop`` off the expected
        count, then ``arrive`` arrivals; complete phases.  Returns each op's state (the word
        before, low 32 bits cleared)."""
        bi, wi = self._index(b, off, where)
        n = bi.size
        arrive, drop = (np.broadcast_to(np.asarray(x, np.int64), (n,)) for x in (arrive, drop))
        tx = np.broadcast_to(np.asarray(complete, np.int64) - np.asarray(expect, np.int64), (n,))
        self._need_live(bi, wi, where, what)
        uk, gb, gw, inv = self._groups(bi, wi)
        words = self.read(gb, gw * 8)
        state = (words & np.uint64(0xFFFFFFFF00000000))[inv]
        phase, pending, txc, expected = decode_word(words)
        g = len(uk)
        A = np.bincount(inv, arrive, g).astype(np.int64)
        T = np.bincount(inv, tx, g).astype(np.int64)
        D = np.bincount(inv, drop, g).astype(np.int64)
        txc = txc + T
        if (np.abs(txc) > TX_LIMIT).any():
            i = int(np.flatnonzero(np.abs(txc) > TX_LIMIT)[0])
            raise MBarrierError(f"{where}: the tx-count of the mbarrier at shared address {int(gw[i]) * 8:#x} "
                                f"would be {-int(txc[i])} pending bytes, outside -{TX_LIMIT}..{TX_LIMIT} "
                                "(tx-count underflow or overflow)").at(address=int(gw[i]) * 8)
        expected = expected - D
        if (expected < 0).any():
            i = int(np.flatnonzero(expected < 0)[0])
            raise MBarrierError(f"{where}: arrive_drop below an expected count of zero on the mbarrier at "
                                f"shared address {int(gw[i]) * 8:#x}").at(address=int(gw[i]) * 8)
        done = np.zeros(g, np.int64)
        while True:
            over = A > pending
            if over.any() and ((txc[over] != 0) | (expected[over] == 0)).any():
                i = int(np.flatnonzero(over & ((txc != 0) | (expected == 0)))[0])
                raise MBarrierError(f"{where}: {int(A[i])} arrivals on the mbarrier at shared address "
                                    f"{int(gw[i]) * 8:#x}, whose current phase expects only {int(pending[i])} more"
                                    ).at(address=int(gw[i]) * 8)
            take = np.minimum(A, pending)
            pending = pending - take
            A = A - take
            comp = (pending == 0) & (txc == 0)
            if no_complete and comp.any():
                i = int(np.flatnonzero(comp)[0])
                raise MBarrierError(f"{where}: a .noComplete arrive completed the phase of the mbarrier at "
                                    f"shared address {int(gw[i]) * 8:#x} (undefined behaviour)").at(
                                        address=int(gw[i]) * 8)
            if not comp.any():
                break
            phase = np.where(comp, phase + 1, phase)
            pending = np.where(comp, expected, pending)
            done += comp
            if not (A > 0).any():
                break
        self._write(gb, gw, encode_word(phase, pending, txc, expected))
        if done.any():
            self.epoch += 1
        return state

    # -- queries --------------------------------------------------------------------------
    def parity(self, b, off, where: str = "", what: str = "mbarrier.test_wait") -> np.ndarray:
        """Current phase parity of each barrier (0/1, int64)."""
        bi, wi = self._index(b, off, where)
        self._need_live(bi, wi, where, what)
        return decode_word(self.read(bi, wi * 8))[0]

    def describe(self, b, off) -> str:
        ph, pend, tx, exp = (int(x[0]) for x in decode_word(self.read(np.array([b]), np.array([off]))))
        live = bool(self.live[b, off // 8])
        if not live:
            return f"mbarrier at shared {off:#x}: not initialised"
        return (f"mbarrier at shared {off:#x}: phase parity {ph}, {pend} of {exp} arrivals pending, "
                f"tx-count {tx} ({-tx if tx < 0 else 0} bytes still expected)")
