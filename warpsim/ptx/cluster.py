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

__all__ = ["RANK_SHIFT", "ClusterShared", "Block", "block", "cluster_space", "AsyncProxyError", "AsyncCopyError"]

RANK_SHIFT = 24
_OFF_MASK = (1 << RANK_SHIFT) - 1


class AsyncProxyError(PtxError):
    """Shared memory written through the generic proxy and read by the async proxy (TMA store,
    bulk copy, wgmma) with no ``fence.proxy.async`` between; an ``async-proxy`` finding."""

    finding_kind = "async-proxy"


class AsyncCopyError(PtxError):
    """Memory touched while a bulk/tensor copy that writes or reads it is in flight (a read of
    a destination before the mbarrier wait that observes its phase, a write to a store's source
    before ``cp.async.bulk.wait_group.read``, ...); an ``async-copy`` finding."""

    finding_kind = "async-copy"


class _Copy:
    """One bulk/tensor copy in flight (see :meth:`Block.async_load`, :meth:`Block.async_store`)."""

    __slots__ = ("id", "row", "offs", "data", "reduce", "bar", "where", "gbytes", "store")

    def __init__(self, id_, row, offs, data, reduce, bar, where, gbytes, store):
        self.id, self.row, self.offs, self.data, self.reduce = id_, row, offs, data, reduce
        self.bar, self.where, self.gbytes, self.store = bar, where, gbytes, store


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
        # copies in flight (the sanitizer sets ``defer``: loads land when a wait observes them)
        self.defer = False
        self.report = None  # the sanitizer's hook: report(message, row, address); else errors raise
        self.copies: dict = {}  # id -> _Copy
        self._by_bar: dict = {}  # (row, offset, parity) -> [ids of loads signalling that phase]
        self._next = 1
        self.pend = None  # (rows, bytes) int32: id of the in-flight load writing each byte, 0 none
        self.reading = None  # (rows, bytes) int32: id of the in-flight store reading each byte
        self._gcache = None  # (load sources, their ids, store destinations, their ids), sorted
        # landed loads not yet ordered CTA-wide: the warps whose wait observed them may touch
        # their bytes; others only after a CTA barrier (or a wait of their own)
        self.seen = None  # (rows, bytes) int32: id of the landed copy, 0 none
        self.landed: dict = {}  # id -> (row, offsets, set of observing warps)
        self._landed_by_bar: dict = {}  # (row, offset, parity) -> [ids]
        # happens-before through an mbarrier: landed copies an arriving warp had observed pass
        # to the warps whose wait then sees that barrier's phase complete
        self._relay: dict = {}  # (row, offset) -> set of landed ids
        self._unwaited: set = set()  # offsets of mbarriers whose copies were read in flight (any CTA)
        self.observed = False  # a wait just succeeded (the launcher's next interval end is its)

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

    def async_wrote(self, rows, offs) -> None:
        """Async-proxy writes (TMA/bulk loads) at (rows, byte offsets): the image follows."""
        self.fenced[rows, offs] = self.data[rows, offs]

    def async_issued(self, row, offs) -> None:
        """A load into (row, offs) was issued and is in flight (the sanitizer's hook: the bytes
        count as written, so a read in flight is one ``async-copy`` finding, not also an
        ``uninitialised`` one)."""

    def check_async_chunks(self, ctx, chunks, where: str, warps=()) -> None:
        """An async-proxy read (wgmma's shared-memory operands) of 16-byte chunks: ``chunks``,
        arrays of flat indices ``batch element * chunks per CTA + chunk`` of ``ctx``'s batch,
        on behalf of ``warps`` (each must have observed the landed copies it reads)."""
        if not self.checking or not chunks:
            return
        per = (self.data.shape[1] + 15) // 16
        idx = np.unique(np.concatenate([np.asarray(c, np.int64).reshape(-1) for c in chunks]))
        rows = self.rows(ctx).reshape(-1)[idx // per]
        offs = np.minimum((idx % per)[:, None] * 16 + np.arange(16), self.data.shape[1] - 1)
        rows = np.broadcast_to(rows[:, None], offs.shape)
        self.check_async_read(rows, offs, where)
        for w in warps if self.landed else ():
            self.check_seen(rows, offs, w, False, where)

    def check_async_read(self, rows, offs, where: str) -> None:
        """An async-proxy read of bytes (rows, offs): generic writes not fenced are a finding."""
        if not self.checking:
            return
        rows, offs = np.asarray(rows), np.asarray(offs)
        self.check_generic(rows, offs, False, where)
        stale = self.data[rows, offs] != self.fenced[rows, offs]
        if stale.any():
            i = np.flatnonzero(stale.reshape(-1))[0]
            o = int(offs.reshape(-1)[i])
            raise AsyncProxyError(
                f"{where}: the async proxy reads shared byte {o:#x}, written by ordinary (generic-proxy) "
                "stores with no fence.proxy.async.shared::cta between the writes and this read (the "
                "TMA/wgmma may read stale data)").at(address=o, space="shared")

    # -- copies in flight (sanitizer) -------------------------------------------------------
    def _hazard(self, message: str, row: int, address: int) -> None:
        if self.report is not None:
            self.report(message, int(row), int(address))
            return
        raise AsyncCopyError(message).at(address=int(address), space="shared")

    def _arrays(self) -> None:
        if self.pend is None:
            self.pend = np.zeros(self.data.shape, np.int32)
            self.reading = np.zeros(self.data.shape, np.int32)
            self.seen = np.zeros(self.data.shape, np.int32)

    def _site(self, cid: int) -> str:
        c = self.copies.get(int(cid))
        return c.where if c is not None else "a copy"

    def async_load(self, row: int, offs, data, bar, where: str, *, complete: int, reduce=None,
                   gbytes=None) -> None:
        """An async-proxy write (TMA/bulk load into shared memory) of ``data`` at batch row
        ``row``, byte offsets ``offs``, signalling ``complete`` bytes on the mbarrier ``bar``
        (row, offset).  ``reduce``: old bytes -> new bytes (a reduction), applied when the
        data lands; ``gbytes``: the global bytes it reads.  Unchecked, the bytes land at once;
        under the sanitizer (``defer``) they land when a wait observes the phase."""
        offs = np.asarray(offs, np.int64)
        if not self.defer:
            self.data[row, offs] = data if reduce is None else reduce(self.data[row, offs])
            self.async_wrote(row, offs)
            self.mbar.update(np.array([bar[0]]), np.array([bar[1]]), complete=complete, where=where,
                             what="complete_tx")
            return
        self._arrays()
        # a copy on an mbarrier (at that offset, in any CTA of the batch) whose copies were already
        # reported read in flight (nobody waits on its phases) lands before the next copy into
        # its bytes: the overlap is that bug again, not a second one
        for cid in np.unique(self.pend[row, offs]).tolist():
            c = self.copies.get(cid)
            if cid and c is not None and c.bar[1] in self._unwaited:
                self._by_bar.get(c.bar, []).remove(cid)
                self._land(self.copies.pop(cid))
        for arr, what in ((self.reading, "a bulk store in flight still reads"),
                          (self.pend, "another copy in flight also writes")):
            hit = arr[row, offs]
            if hit.any():
                i = int(np.flatnonzero(hit)[0])
                self._hazard(f"{where}: writes shared byte {int(offs[i]):#x}, which {what} "
                             f"({self._site(hit[i])}): wait for it first", row, offs[i])
        if gbytes is not None and gbytes.size:
            self._global_overlap(gbytes, False, where, row)
        ph = int(self.mbar.parity(np.array([bar[0]]), np.array([bar[1]]), where, "complete_tx")[0])
        self.mbar.update(np.array([bar[0]]), np.array([bar[1]]), complete=complete, where=where,
                         what="complete_tx")
        cid = self._next
        self._next += 1
        self.copies[cid] = _Copy(cid, row, offs, np.array(data, copy=True), reduce,
                                 (int(bar[0]), int(bar[1]), ph), where, gbytes, False)
        self._by_bar.setdefault((int(bar[0]), int(bar[1]), ph), []).append(cid)
        self.pend[row, offs] = cid
        self.async_issued(row, offs)
        if gbytes is not None:
            self._gcache = None

    def observe(self, rows, offs, parity, warp=None) -> None:
        """Waits (by warp ``warp`` of each CTA) that saw the phase of ``parity`` complete on
        barriers (rows, offs): the loads that signalled that phase land, and the warp may touch
        their bytes."""
        self.observed = True
        if not self._by_bar and not self._landed_by_bar and not self._relay:
            return
        for key in {(int(r), int(o), int(p)) for r, o, p in zip(np.ravel(rows), np.ravel(offs),
                                                                 np.ravel(parity))}:
            for cid in self._relay.get(key[:2], ()):
                if cid in self.landed:
                    self.landed[cid][2].add(warp)
            for cid in self._by_bar.pop(key, ()):
                c = self.copies.pop(cid)
                self._land(c)
                if c.row == key[0]:  # (bytes landed in another CTA than the barrier's: not tracked)
                    self.seen[c.row, c.offs] = cid
                    self.landed[cid] = (c.row, c.offs, set(), c.where)
                    self._landed_by_bar.setdefault(key, []).append(cid)
            for cid in self._landed_by_bar.get(key, ()):
                if cid in self.landed:
                    self.landed[cid][2].add(warp)

    def release(self, own, rows, offs, warp) -> None:
        """Warp ``warp`` of CTA rows ``own`` arrived on the mbarriers (rows, offs): the landed
        copies of its CTA it has observed pass to whoever waits on them next (see :meth:`observe`)."""
        if not self.landed:
            return
        for a, r, o in {(int(a), int(r), int(o)) for a, r, o in zip(np.ravel(own), np.ravel(rows), np.ravel(offs))}:
            ids = [cid for cid, (row, _, who, _) in self.landed.items() if row == a and warp in who]
            if ids:
                self._relay.setdefault((r, o), set()).update(ids)

    def order(self) -> None:
        """A CTA-wide barrier: every landed copy is ordered with every warp."""
        if self.landed:
            self.seen[...] = 0
            self.landed.clear()
            self._landed_by_bar.clear()
            self._relay.clear()

    def _land(self, c: _Copy) -> None:
        self.data[c.row, c.offs] = c.data if c.reduce is None else c.reduce(self.data[c.row, c.offs])
        mine = self.pend[c.row, c.offs] == c.id
        self.pend[c.row, c.offs[mine]] = 0
        self.async_wrote(c.row, c.offs)
        if c.gbytes is not None:
            self._gcache = None

    def land_all(self) -> None:
        """Every load in flight lands (the CTAs are done)."""
        for key in list(self._by_bar):
            for cid in self._by_bar.pop(key):
                self._land(self.copies.pop(cid))

    def async_store(self, ctx, row: int, offs, gbytes, where: str) -> None:
        """A bulk/tensor store (shared -> global) issued by warp ``ctx``: under the sanitizer
        its shared source bytes stay being read until ``cp.async.bulk.wait_group.read`` retires
        its bulk group, and its global bytes being written until ``wait_group``."""
        if not self.defer:
            return
        self._arrays()
        cid = self._next
        self._next += 1
        offs = np.asarray(offs, np.int64)
        self.copies[cid] = _Copy(cid, row, offs, None, None, None, where, gbytes, True)
        self.reading[row, offs] = cid
        ctx.__dict__.setdefault("bulk_open", []).append(cid)
        self._gcache = None

    def bulk_commit(self, ctx) -> None:
        d = ctx.__dict__
        if d.get("bulk_open"):
            d.setdefault("bulk_groups", []).append([d["bulk_open"], False])
            d["bulk_open"] = []

    def bulk_wait(self, ctx, n: int, read: bool) -> None:
        """``cp.async.bulk.wait_group(.read) n`` by warp ``ctx``: all but its newest ``n``
        groups have read their sources (and, without .read, written their destinations)."""
        groups = ctx.__dict__.get("bulk_groups")
        if not groups:
            return
        old = groups[:max(0, len(groups) - n)]
        for g in old:
            if not g[1]:
                for cid in g[0]:
                    c = self.copies[cid]
                    mine = self.reading[c.row, c.offs] == cid
                    self.reading[c.row, c.offs[mine]] = 0
                g[1] = True
            if not read:
                for cid in g[0]:
                    self.copies.pop(cid, None)
                self._gcache = None
        if not read:
            del groups[:len(old)]

    def _globals(self):
        """{CTA row: (load sources, their ids, store destinations, their ids)}, bytes sorted."""
        if self._gcache is None:
            parts: dict = {}
            for c in self.copies.values():
                if c.gbytes is not None and c.gbytes.size:
                    p = parts.setdefault(c.row, {False: ([], []), True: ([], [])})[c.store]
                    p[0].append(c.gbytes)
                    p[1].append(np.full(c.gbytes.size, c.id, np.int64))
            self._gcache = {}
            for row, p in parts.items():
                out = []
                for k in (False, True):
                    b = np.concatenate(p[k][0]) if p[k][0] else np.zeros(0, np.uint64)
                    i = np.concatenate(p[k][1]) if p[k][1] else np.zeros(0, np.int64)
                    o = np.argsort(b, kind="stable")
                    out += [b[o], i[o]]
                self._gcache[row] = out
        return self._gcache

    def _global_overlap(self, by, write: bool, where: str, row: int):
        """Bytes ``by`` (uint64) of global memory accessed by the CTA of batch row ``row``:
        reads must not overlap its in-flight stores' destinations; writes neither those nor its
        in-flight loads' sources (other CTAs' accesses are the cross-CTA race check's)."""
        got = self._globals().get(int(row))
        if got is None:
            return
        src, sid, dst, did = got
        checks = [(dst, did, "a bulk/tensor store in flight writes (cp.async.bulk.wait_group first)")]
        if write:
            checks.append((src, sid, "a bulk/tensor load in flight reads (wait on its mbarrier first)"))
        for b, ids, what in checks:
            if not b.size:
                continue
            j = np.clip(np.searchsorted(b, by), 0, b.size - 1)
            hit = b[j] == by
            if hit.any():
                k = int(np.flatnonzero(hit.reshape(-1))[0])
                a = int(by.reshape(-1)[k])
                self._hazard(f"{where}: {'writes' if write else 'reads'} global byte {a:#x}, which {what}: "
                             f"{self._site(ids[j.reshape(-1)[k]])}", row, a)
                return

    def check_seen(self, rows, offs, warp, write: bool, where: str) -> None:
        """An ordinary access by warp ``warp`` to shared bytes a landed copy wrote: the warp
        must have observed the copy's phase itself (or a CTA barrier must order it)."""
        if not self.landed:
            return
        hit = self.seen[rows, offs]
        if not hit.any():
            return
        for i in np.argwhere(hit):
            i = tuple(i)
            got = self.landed.get(int(hit[i]))
            if got is not None and warp not in got[2]:
                self._hazard(f"{where}: {'writes' if write else 'reads'} shared byte {int(offs[i]):#x}, which a copy "
                             f"wrote ({got[3]}) whose mbarrier phase this warp has not observed: another warp's "
                             "wait saw it land; wait on the mbarrier in this warp too, have that warp arrive on an "
                             "mbarrier this warp then waits on, or put a barrier (bar.sync) between", int(rows[i]), int(offs[i]))
                return

    def check_generic(self, rows, offs, write: bool, where: str) -> None:
        """An ordinary access to shared bytes (rows, offs) (same shapes): not of a load's
        destination in flight; a write not of a store's source in flight."""
        if self.pend is None or not self.copies:
            return
        for arr, bad in ((self.pend, True), (self.reading, write)):
            if not bad:
                continue
            hit = arr[rows, offs]
            if hit.any():
                i = tuple(np.argwhere(hit)[0])
                cid = int(hit[i])
                c = self.copies.get(cid)
                if arr is self.pend:
                    if c is not None:
                        self._unwaited.add(c.bar[1])
                    how = (f"a copy in flight writes ({self._site(cid)}) and its mbarrier wait has not "
                           f"observed the phase (parity {c.bar[2] if c else '?'}) yet: "
                           + ("the read sees the old bytes" if not write else "the copy may land after "
                              "this write and overwrite it"))
                else:
                    how = (f"a bulk/tensor store in flight still reads ({self._site(cid)}): wait with "
                           "cp.async.bulk.wait_group.read first")
                self._hazard(f"{where}: {'writes' if write else 'reads'} shared byte {int(offs[i]):#x}, which "
                             + how, int(rows[i]), int(offs[i]))
                return



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
