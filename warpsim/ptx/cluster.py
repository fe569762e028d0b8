"""Shared memory seen by a cluster: ``shared::cluster`` addresses, the per-batch state the
asynchronous instructions share (mbarriers, the async-proxy image), and where each CTA sits.

A launch runs CTAs in batches; one :class:`~warpsim.ptx.memory.FlatMemory` holds the shared
memory of every CTA of the batch (one row each).  A warp's :class:`~warpsim.ptx.machine.Context`
covers batch rows ``base .. base + len(batch)``: all of them when CTAs run vectorised, one when
each CTA of a cluster runs its own warps.  The CTAs of one cluster are consecutive rows, so
cluster rank r of the cluster holding row i is row ``i - i % size + r``.

``shared::cluster`` addresses (what ``mapa`` returns): ``(rank + 1) << 24 | offset``; a plain
``shared::cta`` offset (below 2^24) is the executing CTA's own memory, as the PTX ISA requires.
The hardware's encoding is not public (mapa values are never compared with the H100's).

Async proxy: :class:`Block` keeps, per CTA, the shared-memory image as of the last
``fence.proxy.async`` (async-proxy writes update it too).  An async-proxy read of bytes that
differ from that image read generic-proxy writes no proxy fence ordered: a finding.
"""

from __future__ import annotations

import numpy as np

from warpsim.errors import MemoryAccessError, PtxError
from warpsim.ptx.mbarrier_state import MBarriers, rows_view
from warpsim.ptx.memory import SHARED_WINDOW, AddressSpace

__all__ = ["RANK_SHIFT", "ClusterShared", "Block", "block", "cluster_space", "AsyncProxyError"]

RANK_SHIFT = 24
_OFF_MASK = (1 << RANK_SHIFT) - 1


class AsyncProxyError(PtxError):
    """Shared memory written through the generic proxy and read by the async proxy (TMA store,
    bulk copy, wgmma) with no ``fence.proxy.async`` between; an ``async-proxy`` finding."""

    finding_kind = "async-proxy"


class Block:
    """What the warps of one batch of CTAs share beyond plain memory (see the module doc)."""

    def __init__(self, smem, cluster_size: int = 1, nclusters_dims=None) -> None:
        self.smem = smem  # FlatMemory, one row per CTA of the batch
        self.data = rows_view(smem)  # (CTA rows, bytes): a view
        self.size = int(cluster_size)
        self.mbar = MBarriers(smem)
        self.fenced = self.data.copy()  # async-proxy view of shared memory (per CTA)
        self.exited = np.zeros(self.data.shape[0], bool)  # CTAs whose warps have all exited
        self.checking = True  # report async-proxy hazards (the launcher's sanitizer runs)

    def rows(self, ctx) -> np.ndarray:
        """Batch row of each element of ``ctx``'s batch."""
        base = getattr(ctx, "cta_base", 0)
        return base + np.arange(int(np.prod(ctx.batch, dtype=np.int64)), dtype=np.intp).reshape(ctx.batch)

    def resolve(self, ctx, addr, where: str, *, cluster: bool, mask=None):
        """(row, offset) of shared addresses ``addr`` ((*batch, 32)); ``cluster``: the
        addresses are shared::cluster ones (else shared::cta offsets); ``mask``: the lanes
        whose addresses count (others may hold anything)."""
        rows = np.broadcast_to(self.rows(ctx)[..., None], addr.shape)
        a = np.asarray(addr, np.uint64)
        if not cluster:
            return rows, a.astype(np.int64)
        rank = (a >> np.uint64(RANK_SHIFT)).astype(np.int64) - 1
        off = (a & np.uint64(_OFF_MASK)).astype(np.int64)
        bad = rank >= self.size
        if mask is not None:
            bad &= mask
            rank = np.where(mask, rank, -1)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise MemoryAccessError(f"{where}: shared::cluster address {int(a[i]):#x} names CTA rank "
                                    f"{int(rank[i])} of a cluster of {self.size}").at(
                address=int(a[i]), space="shared::cluster", reason="outside")
        tgt = np.where(rank < 0, rows, rows - rows % self.size + rank)
        return tgt, off

    # -- async proxy ----------------------------------------------------------------------
    def fence(self, rows) -> None:
        rows = np.unique(np.asarray(rows).reshape(-1))
        self.fenced[rows] = self.data[rows]

    def async_wrote(self, rows, offs, bar=None, where: str = "") -> None:
        """Async-proxy writes (TMA/bulk loads) at (rows, byte offsets): the image follows.
        ``bar``: (row, shared offset) of the mbarrier the copy completes on (the sanitizer's
        hook records which phase publishes the bytes)."""
        self.fenced[rows, offs] = self.data[rows, offs]

    def check_async_read(self, rows, offs, where: str) -> None:
        """An async-proxy read of bytes (rows, offs): generic writes not fenced are a finding."""
        if not self.checking:
            return
        rows, offs = np.asarray(rows), np.asarray(offs)
        stale = self.data[rows, offs] != self.fenced[rows, offs]
        if stale.any():
            i = np.flatnonzero(stale.reshape(-1))[0]
            o = int(offs.reshape(-1)[i])
            raise AsyncProxyError(
                f"{where}: the async proxy reads shared byte {o:#x}, written by ordinary (generic-proxy) "
                "stores with no fence.proxy.async.shared::cta between the writes and this read (the "
                "TMA/wgmma may read stale data)").at(address=o, space="shared")


class ClusterShared(AddressSpace):
    """The ``shared::cluster`` state space of a :class:`Block`: rank in bits 27:24."""

    name = "shared::cluster"
    window = SHARED_WINDOW
    per = "all"

    def __init__(self, blk: Block, ctx) -> None:
        self.blk = blk
        self.size = (blk.size + 1) << RANK_SHIFT
        self.ctx = ctx

    def _flat(self, addr, nbytes, mask, where, align):
        self._check_align(addr, mask, nbytes, align, where)
        rows, off = self.blk.resolve(self.ctx, addr, where, cluster=True, mask=mask)
        size = self.blk.smem.size
        bad = (off + nbytes > size)
        if mask is not None:
            bad &= mask
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise MemoryAccessError(f"{where}: {nbytes} bytes at shared::cluster address {int(addr[i]):#x} "
                                    f"are outside the CTA's {size} bytes of shared memory").at(
                address=int(addr[i]), space="shared::cluster", reason="outside", nbytes=nbytes)
        gone = self.blk.exited[rows]
        if mask is not None:
            gone &= mask
        if gone.any():
            i = tuple(np.argwhere(gone)[0])
            raise MemoryAccessError(f"{where}: shared::cluster address {int(addr[i]):#x} is in a CTA of the "
                                    "cluster that has exited (end the kernel with a cluster barrier)").at(
                address=int(addr[i]), space="shared::cluster", reason="outside", nbytes=nbytes)
        if mask is not None:
            rows, off = np.where(mask, rows, rows.reshape(-1)[0]), np.where(mask, off, 0)
        return (rows * size + off)[..., None] + np.arange(nbytes)

    def load(self, addr, nbytes, mask, where="", align=None):
        idx = self._flat(addr, nbytes, mask, where, align)
        return self.blk.data.reshape(-1)[idx]

    def store(self, addr, data, mask, where="", align=None):
        idx = self._flat(addr, data.shape[-1], mask, where, align)
        flat = self.blk.data.reshape(-1)
        if mask is None:
            flat[idx] = data
        else:
            flat[idx[mask]] = data[mask]


def block(ctx, where: str = "") -> Block:
    """The :class:`Block` of ``ctx`` (made on first use for a run without a launcher: one CTA
    per batch element, clusters of one)."""
    blk = getattr(ctx, "block", None)
    if blk is None:
        sp = ctx.space("shared", where)
        sp = getattr(sp, "inner", sp)
        blk = getattr(sp, "_block", None)
        if blk is None:
            blk = Block(sp)
            sp._block = blk
        ctx.block = blk
    return blk


def cluster_space(ctx, where: str = "") -> ClusterShared:
    """``ctx``'s shared::cluster state space (made on first use)."""
    sp = ctx.spaces.get("shared::cluster")
    if sp is None:
        sp = ctx.spaces["shared::cluster"] = ClusterShared(block(ctx, where), ctx)
    return sp
