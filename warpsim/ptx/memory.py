"""State spaces as byte-addressed memory objects, shared by the interpreter and a launcher.

Every space is an :class:`AddressSpace`: ``load(addr, nbytes, mask, where)`` gathers
``nbytes`` bytes per lane at the 64-bit addresses ``addr`` (``(*batch, 32)``) and returns
``(*batch, 32, nbytes)`` uint8; ``store`` scatters them.  Accesses are checked on the active
lanes only: out of range or misaligned (``align`` bytes) raises a :class:`MemoryError_` naming
the instruction, warp, lane and address.  Lanes that store to the same bytes in one
instruction: the highest lane wins (the hardware picks one; PTX leaves which undefined).

* :class:`FlatMemory` - one contiguous range ``[base, base+size)``; ``per`` says who owns a
  copy: ``'all'`` (one array for every warp: .const, .param), ``'warp'`` (one per batch element:
  .shared of one CTA per batch element) or ``'lane'`` (one per lane: .local).
* :class:`PagedMemory` - one range ``[0, size)`` per lane (.local) held in pages allocated at
  the first store to them: its cost follows the bytes touched, not the bytes declared.
* :class:`GlobalMemory` - buffers allocated at real 64-bit addresses with gaps between them;
  an address outside every buffer is an error.

Generic addresses: a space with a ``window`` is mapped into the generic address space at
``window + address`` (``cvta``; generic ``ld``/``st`` pick the space by window).
"""

from __future__ import annotations

import bisect

import numpy as np

from warpsim.errors import MemoryAccessError, WarpsimError
from warpsim.facts.formats import _first_bad

__all__ = ["AddressSpace", "FlatMemory", "GlobalMemory", "MemoryError_", "PagedMemory", "SHARED_WINDOW",
           "TrackedGlobal", "LOCAL_WINDOW", "PARAM_WINDOW", "CONST_WINDOW", "GLOBAL_BASE"]

#: Where the .shared and .local windows sit in the generic address space, and where global
#: buffers start (all far apart, so a generic address names its space unambiguously).
SHARED_WINDOW = 0x0000_1000_0000_0000
#: The most shared memory one CTA can have on any target (228 KiB: sm_90 and sm_100 SMs; a CTA
#: gets at most 227 KiB of it): larger requests are refused rather than allocated.
MAX_SHARED_BYTES = 228 * 1024
LOCAL_WINDOW = 0x0000_2000_0000_0000
#: Generic windows of the kernel parameters (``cvta.param``: a ``__grid_constant__`` argument's
#: address, e.g. a tensor map) and of ``.const``.
PARAM_WINDOW = 0x0000_3000_0000_0000
CONST_WINDOW = 0x0000_3800_0000_0000
GLOBAL_BASE = 0x0000_7F00_0000_0000


#: An access outside a state space, misaligned, or a store to a read-only space (the name
#: this module has always used for :class:`~warpsim.errors.MemoryAccessError`).
MemoryError_ = MemoryAccessError


def _where(idx: tuple, addr, space: str, reason: str, nbytes: int, align: int) -> dict:
    """Location attributes of the access of lane ``idx`` (a batch index + lane)."""
    return dict(warp=tuple(int(i) for i in idx[:-1]), lanes=(int(idx[-1]),), address=int(addr[idx]),
                space=space, reason=reason, nbytes=nbytes, align=align)


def _lane_desc(idx: tuple, batch_ndim: int) -> str:
    return f"lane {int(idx[batch_ndim])}"


class AddressSpace:
    """Base class: a named state space with a generic window (or None)."""

    name: str = "?"
    window: int | None = None
    readonly: bool = False

    def load(self, addr: np.ndarray, nbytes: int, mask: np.ndarray | None, where: str = "",
             align: int | None = None) -> np.ndarray:
        raise NotImplementedError

    def store(self, addr: np.ndarray, data: np.ndarray, mask: np.ndarray | None, where: str = "",
              align: int | None = None) -> None:
        raise NotImplementedError

    def _check_align(self, addr, mask, nbytes, align, where):
        a = align or nbytes
        if a > 1:
            bad = (addr & np.uint64(a - 1)) != 0
            if mask is not None:
                bad &= mask
            if bad.any():
                i = _first_bad(bad)
                raise MemoryError_(
                    f"{where}: {_lane_desc(i, addr.ndim - 1)} accesses {self.name} address "
                    f"{int(addr[i]):#x}, not aligned to {a} bytes"
                ).at(**_where(i, addr, self.name, "misaligned", nbytes, a))


    def _check_bounds(self, addr, off, nbytes, mask, where, align):
        """Raise for the first active lane whose ``nbytes`` at offset ``off`` (``addr`` less the
        space's base) leave the space's ``size`` bytes."""
        bad = off > np.uint64(self.size - nbytes) if self.size >= nbytes else np.ones(addr.shape, bool)
        if mask is not None:
            bad &= mask
        if bad.any():
            i = _first_bad(bad)
            raise MemoryError_(
                f"{where}: {_lane_desc(i, addr.ndim - 1)} accesses {nbytes} bytes at {self.name} "
                f"address {int(addr[i]):#x}, outside [{self.base:#x}, {self.base + self.size:#x})"
            ).at(**_where(i, addr, self.name, "outside", nbytes, align or nbytes))


class FlatMemory(AddressSpace):
    """A contiguous range of ``size`` bytes at ``base`` (see the module docstring)."""

    def __init__(self, name: str, size: int, batch: tuple[int, ...] = (), *, per: str = "warp",
                 base: int = 0, window: int | None = None, readonly: bool = False,
                 data: np.ndarray | None = None) -> None:
        if per not in ("all", "warp", "lane"):
            raise ValueError(f"per must be 'all', 'warp' or 'lane', got {per!r}")
        self.name, self.size, self.base, self.window, self.readonly = name, int(size), int(base), window, readonly
        self.per = per
        self.batch = tuple(batch) if per != "all" else ()
        lead = self.batch + ((32,) if per == "lane" else ())
        self.data = np.zeros(lead + (self.size,), np.uint8) if data is None else data
        self._unit_lead: dict = {}  # width -> first item index of each warp's copy (units)

    # -- helpers for people ----------------------------------------------------------------
    def fill(self, values: object, offset: int = 0, *, per_warp: bool = False) -> None:
        """Write the bytes of ``values`` (a numeric NumPy array, little-endian) at byte
        ``offset``: the same bytes in every copy, or with ``per_warp`` one row of ``values``
        per batch element (leading dimensions = the batch)."""
        arr = np.ascontiguousarray(values)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise TypeError(f"fill takes a numeric NumPy array, got dtype {arr.dtype}")
        if per_warp:
            nb = len(self.batch)
            if arr.shape[:nb] != self.batch or arr.ndim <= nb:
                raise WarpsimError(f"per-warp fill values of shape {arr.shape} must start with "
                                   f"the batch {self.batch}")
            raw = arr.reshape(self.batch + (-1,)).view(np.uint8)
            if self.per == "lane":
                raw = raw[..., None, :]
        else:
            raw = arr.reshape(-1).view(np.uint8)
        n = raw.shape[-1]
        if offset < 0 or offset + n > self.size:
            raise MemoryError_(f"fill of {n} bytes at offset {offset} does not fit {self.name} "
                               f"memory of {self.size} bytes")
        self.data[..., offset:offset + n] = raw

    def read(self, dtype: object = np.uint8, offset: int = 0, count: int | None = None) -> np.ndarray:
        """A copy of the bytes at ``offset`` viewed as ``dtype`` (``count`` elements, default
        to the end): shape ``(*batch, count)``."""
        dt = np.dtype(dtype)
        if count is None:
            count = (self.size - offset) // dt.itemsize
        n = count * dt.itemsize
        if offset < 0 or offset + n > self.size:
            raise MemoryError_(f"read of {n} bytes at offset {offset} is outside {self.name} "
                               f"memory of {self.size} bytes")
        return np.ascontiguousarray(self.data[..., offset:offset + n]).view(dt).copy()

    # -- access from instructions ----------------------------------------------------------
    def _offsets(self, addr, nbytes, mask, where, align):
        """Checked flat byte offsets (into ``data.reshape(-1)``) of each lane's first byte."""
        self._check_align(addr, mask, nbytes, align, where)
        off = addr - np.uint64(self.base) if self.base else addr
        self._check_bounds(addr, off, nbytes, mask, where, align)
        if mask is not None:
            off = np.where(mask, off, np.uint64(0))
        off = off.astype(np.intp)
        if self.per == "all":
            return off
        if addr.shape[:-1] != self.batch:
            raise WarpsimError(f"{where}: register batch {addr.shape[:-1]} does not match the "
                               f"{self.name} memory batch {self.batch}")
        lead = getattr(self, "_lead", None)
        if lead is None:
            nwarps = int(np.prod(self.batch, dtype=np.int64))
            lead = np.arange(nwarps, dtype=np.intp).reshape(self.batch + (1,)) if self.batch \
                else np.zeros((1,), np.intp)
            if self.per == "lane":
                lead = lead * 32 + np.arange(32, dtype=np.intp)
            lead = lead * self.size
            self._lead = lead
        return lead + off

    _WIDE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}

    def units(self, addr: np.ndarray, width: int, where: str = ""):
        """Fast path of an access by every lane of ``width`` bytes aligned to ``width`` (1, 2,
        4, 8 or 16): ``(view, idx)`` with ``view`` the memory as flat ``width``-byte items and
        ``idx`` the intp item index of each lane, so that ``view[idx]`` gathers and
        ``view[idx] = v`` scatters (16-byte items are complex128: copied, never computed on, so
        every bit pattern survives).  None where this memory does not allow it (then use
        :meth:`load`/:meth:`store`).  Misaligned or out-of-range lanes raise as :meth:`load`
        does, with the same message."""
        if self.per == "lane" or self.size % width or self.base % width \
                or self.per == "warp" and addr.shape[:-1] != self.batch \
                or not self.data.flags.c_contiguous or not addr.size:
            return None
        base = self.base
        if int(np.bitwise_or.reduce(addr, axis=None)) & (width - 1) \
                or int(addr.max()) > base + self.size - width or base and int(addr.min()) < base:
            self._offsets(addr, width, None, where, width)  # raises the usual error
            return None
        off = addr.astype(np.intp, order="C")  # (a broadcast register would keep odd strides)
        if base:
            off -= base
        if width > 1:
            off >>= width.bit_length() - 1
        if self.batch and self.per == "warp":
            lead = self._unit_lead.get(width)
            if lead is None:
                nwarps = int(np.prod(self.batch, dtype=np.int64))
                lead = np.arange(nwarps, dtype=np.intp).reshape(self.batch + (1,)) * (self.size // width)
                self._unit_lead[width] = lead
            off += lead
        return self.data.reshape(-1).view(self._WIDE[width]), off

    def _unit(self, nbytes, align):
        a = align or nbytes
        for u in (8, 4, 2):
            if nbytes % u == 0 and a % u == 0 and self.base % u == 0 and self.size % u == 0:
                return u
        return 1

    _UNITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

    def load(self, addr, nbytes, mask, where="", align=None):
        off = self._offsets(addr, nbytes, mask, where, align)
        u = self._unit(nbytes, align)
        flat = self.data.reshape(-1).view(self._UNITS[u])
        n = nbytes // u
        idx = (off // u if u > 1 else off)[..., None] + np.arange(n, dtype=np.intp) if n > 1 \
            else (off // u if u > 1 else off)[..., None]
        return flat[idx].view(np.uint8)

    def store(self, addr, data, mask, where="", align=None):
        if self.readonly:
            raise MemoryError_(f"{where}: the {self.name} state space is read-only"
                               ).at(space=self.name, reason="read-only")
        nbytes = data.shape[-1]
        off = self._offsets(addr, nbytes, mask, where, align)
        u = self._unit(nbytes, align)
        flat = self.data.reshape(-1).view(self._UNITS[u])
        vals = np.ascontiguousarray(data).view(self._UNITS[u])
        idx = (off // u if u > 1 else off)[..., None] + np.arange(nbytes // u, dtype=np.intp)
        if mask is None:
            flat[idx] = vals
        else:
            flat[idx[mask]] = vals[mask]


#: Bytes of a page of :class:`PagedMemory` (a smaller space uses one page of its size rounded up
#: to a power of two, at least 16 bytes), and the most pages per lane indexed by a dense table
#: (8 bytes per page of every lane: at most 512 bytes); more are found in a sorted map of the
#: pages stored into.
PAGE_BYTES = 64
DENSE_PAGES = 64
_UNIT_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class PagedMemory(AddressSpace):
    """Per-lane memory (``.local``): ``size`` bytes for each lane of ``batch`` warps, kept in
    pages of :data:`PAGE_BYTES` allocated at the first store into them (all new pages of an
    instruction in one step).  A byte never stored reads as ``fill``.  The pages of a lane are
    found through a dense table up to :data:`DENSE_PAGES` pages per lane, else through a
    sorted map of the pages stored into, so memory follows the bytes touched, whatever the
    size declared.  :meth:`track_origins` adds an int32 per byte in the same pages (the
    sanitizer's origins, -1 = never written)."""

    per = "lane"
    base = 0

    def __init__(self, name: str, size: int, batch: tuple[int, ...] = (), *, window: int | None = None,
                 fill: int = 0, page: int = PAGE_BYTES) -> None:
        self.name, self.size, self.window, self.readonly = name, int(size), window, False
        self.batch, self.fill = tuple(batch), int(fill)
        p = 16
        while p < min(self.size, page):
            p <<= 1
        self.page, self._shift = p, p.bit_length() - 1
        self.npages = max(1, -(-self.size // p))
        nlanes = int(np.prod(self.batch, dtype=np.int64)) * 32
        self._lead = (np.arange(nlanes, dtype=np.int64) * self.npages).reshape(self.batch + (32,))
        # page (lane, page) -> offset of its bytes in ``_pages``; 0 (never stored) is a page of
        # ``fill`` bytes no store writes.  Dense: a table over every page; sparse: sorted keys
        self._table = np.zeros(nlanes * self.npages, np.int64) if self.npages <= DENSE_PAGES else None
        self._keys = np.zeros(0, np.int64)
        self._starts = np.zeros(0, np.int64)
        self._pages = np.full(p, self.fill, np.uint8)
        self._origin: np.ndarray | None = None
        self.used = 1  # pages in use (the fill page included)
        self._complete = False  # every page of every lane stored into (dense table)

    @property
    def allocated_bytes(self) -> int:
        """Bytes of the pages stored into so far."""
        return (self.used - 1) * self.page

    def track_origins(self) -> None:
        """Keep an int32 origin per byte (-1 until :meth:`set_origins` writes it)."""
        if self._origin is None:
            self._origin = np.full(self._pages.size, -1, np.int32)

    def _grow(self, pages: int) -> None:
        have = self._pages.size >> self._shift
        if pages <= have:
            return
        n = max(pages, 2 * have) << self._shift
        data = np.zeros(n, np.uint8) if self.fill == 0 else np.full(n, self.fill, np.uint8)
        data[:self._pages.size] = self._pages
        self._pages = data
        if self._origin is not None:
            origin = np.full(n, -1, np.int32)
            origin[:self._origin.size] = self._origin
            self._origin = origin

    def _check(self, addr, nbytes, mask, where, align):
        """Alignment and bounds of the active lanes; the byte offsets (inactive lanes at 0)."""
        self._check_align(addr, mask, nbytes, align, where)
        self._check_bounds(addr, addr, nbytes, mask, where, align)  # base 0
        return self._offsets(addr, mask)

    def _offsets(self, addr, mask):
        if addr.shape[:-1] != self.batch:
            raise WarpsimError(f"register batch {addr.shape[:-1]} does not match the "
                               f"{self.name} memory batch {self.batch}")
        off = addr.astype(np.int64)
        return off if mask is None else np.where(mask, off, 0)

    def _start(self, key):
        """Offset in ``_pages`` of each page key (0, the fill page, where never stored)."""
        if self._table is not None:
            return self._table[key]
        keys = self._keys
        if not keys.size:
            return np.zeros(key.shape, np.int64)
        pos = np.searchsorted(keys, key)
        np.minimum(pos, keys.size - 1, out=pos)
        return np.where(keys[pos] == key, self._starts[pos], 0)

    def _allocate(self, key) -> None:
        """Pages for the keys ``key`` (1-D) that have none."""
        if self._complete:
            return
        new = key[self._start(key) == 0]
        if not new.size:
            return
        new = np.unique(new)
        self._grow(self.used + new.size)
        starts = np.arange(self.used, self.used + new.size, dtype=np.int64) << self._shift
        self.used += new.size
        if self._table is not None:
            self._table[new] = starts
            self._complete = self.used - 1 == self._table.size
        else:
            at = np.searchsorted(self._keys, new)
            self._keys = np.insert(self._keys, at, new)
            self._starts = np.insert(self._starts, at, starts)

    def _keys_of(self, off):
        lead = self._lead if off.ndim == self._lead.ndim else self._lead[..., None]
        return lead if self.npages == 1 else lead + (off >> self._shift)

    def _index(self, off, nbytes, unit, mask, alloc, whole):
        """Flat ``unit``-sized item index into the pages of each unit of each lane's access
        ``(*batch, 32, nbytes // unit)``, allocating the missing pages first with ``alloc``.
        ``whole``: every access lies within one page (aligned to its size)."""
        if not whole:  # unit by unit (a unit never crosses a page)
            off = off[..., None] + np.arange(0, nbytes, unit, dtype=np.int64)
        key = self._keys_of(off)
        if alloc:
            self._allocate(key.reshape(-1) if mask is None else key[mask].reshape(-1))
        idx = self._start(key) | (off & (self.page - 1)) if self.npages > 1 else self._start(key) | off
        if unit > 1:
            idx >>= unit.bit_length() - 1
        if whole:
            n = nbytes // unit
            idx = idx[..., None] + np.arange(n, dtype=np.int64) if n > 1 else idx[..., None]
        return idx

    @staticmethod
    def _unit(nbytes, align):
        a = align or nbytes
        for u in (8, 4, 2):
            if nbytes % u == 0 and a % u == 0:
                return u
        return 1

    def _whole(self, nbytes, align):
        return (align or nbytes) >= nbytes and nbytes <= self.page

    def load(self, addr, nbytes, mask, where="", align=None):
        off = self._check(addr, nbytes, mask, where, align)
        u = self._unit(nbytes, align)
        idx = self._index(off, nbytes, u, mask, False, self._whole(nbytes, align))
        return self._pages.view(_UNIT_TYPES[u])[idx].view(np.uint8).reshape(addr.shape + (nbytes,))

    def store(self, addr, data, mask, where="", align=None):
        nbytes = data.shape[-1]
        off = self._check(addr, nbytes, mask, where, align)
        u = self._unit(nbytes, align)
        idx = self._index(off, nbytes, u, mask, True, self._whole(nbytes, align))
        flat = self._pages.view(_UNIT_TYPES[u])
        vals = np.ascontiguousarray(data).view(_UNIT_TYPES[u])
        if mask is None:
            flat[idx] = vals
        else:
            flat[idx[mask]] = vals[mask]

    def origins(self, addr, nbytes, mask) -> np.ndarray:
        """Origins of the bytes of an access (checked by the access itself): (*batch, 32, nbytes)."""
        return self._origin[self._index(self._offsets(addr, mask), nbytes, 1, mask, False, self.npages == 1)]

    def set_origins(self, addr, nbytes, mask, value) -> None:
        """Set the origins of an access's bytes (its pages exist: the store came first)."""
        idx = self._index(self._offsets(addr, mask), nbytes, 1, mask, True, self.npages == 1)
        if mask is None:
            self._origin[idx] = value
        else:
            val = value if np.ndim(value) == 0 else np.broadcast_to(value, idx.shape)[mask]
            self._origin[idx[mask]] = val

    def read(self, dtype: object = np.uint8, offset: int = 0, count: int | None = None) -> np.ndarray:
        """A copy of every lane's bytes at ``offset`` viewed as ``dtype`` (``count`` elements,
        default to the end): shape ``(*batch, 32, count)``."""
        dt = np.dtype(dtype)
        if count is None:
            count = (self.size - offset) // dt.itemsize
        n = count * dt.itemsize
        if offset < 0 or n < 0 or offset + n > self.size:
            raise MemoryError_(f"read of {n} bytes at offset {offset} is outside {self.name} "
                               f"memory of {self.size} bytes")
        off = np.full(self.batch + (32,), offset, np.int64)
        return self._pages[self._index(off, n, 1, None, False, self.npages == 1)].view(dt)


class GlobalMemory(AddressSpace):
    """Global memory: buffers at 64-bit addresses from :data:`GLOBAL_BASE`, 256-byte aligned,
    with unmapped gaps between them; one copy for every warp."""

    name = "global"
    window = 0  # generic addresses of global memory are the addresses themselves

    def __init__(self) -> None:
        self._starts = np.zeros(0, np.uint64)  # buffer bounds, ready for every access
        self._ends = np.zeros(0, np.uint64)
        self.data = np.zeros(0, np.uint8)
        self._room = self.data  # self.data is its first bytes (see reserve)

    def reserve(self, nbytes: int) -> None:
        """Make room for ``nbytes`` more bytes (buffers, their gaps and alignment), so that the
        allocations that follow do not copy what is already there (a large launch would
        otherwise hold two copies of its buffers while placing the last one)."""
        want = self.data.size + int(nbytes)
        if want > self._room.size:
            room = np.zeros(want, np.uint8)  # untouched pages cost nothing until written
            room[:self.data.size] = self.data
            self._room = room
            self.data = room[:self.data.size]

    def alloc(self, values: object = None, *, nbytes: int | None = None, align: int = 256) -> int:
        """Place a copy of ``values`` (a NumPy array, its bytes) or ``nbytes`` zero bytes in
        global memory; return its address."""
        raw = None
        if values is not None:
            raw = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
            nbytes = raw.size
        if nbytes is None or nbytes < 0:
            raise ValueError("alloc needs values or nbytes >= 0")
        end = int(self._ends[-1]) if self._ends.size else GLOBAL_BASE
        first = end + 256 if self._ends.size else GLOBAL_BASE
        start = (first + align - 1) // align * align  # the first buffer honours its alignment too
        size = start + max(nbytes, 1) - GLOBAL_BASE
        if size > self._room.size:
            self.reserve(size - self.data.size)
        self.data = self._room[:size]
        if raw is not None:
            self.data[start - GLOBAL_BASE:start - GLOBAL_BASE + nbytes] = raw
        self._starts = np.append(self._starts, np.uint64(start))
        self._ends = np.append(self._ends, np.uint64(start + nbytes))
        return start

    def view(self, address: int, dtype: object, count: int) -> np.ndarray:
        """A copy of ``count`` elements of ``dtype`` at ``address``."""
        dt = np.dtype(dtype)
        o = address - GLOBAL_BASE
        return self.data[o:o + count * dt.itemsize].copy().view(dt)

    def units(self, addr: np.ndarray, width: int, where: str = ""):
        """Fast path of an access by every lane of ``width`` bytes aligned to ``width`` (1, 2,
        4, 8 or 16) when all of them fall inside one buffer (an access to one array, the usual
        case): ``(view, idx)`` as :meth:`FlatMemory.units` gives them.  None otherwise (then
        use :meth:`load`/:meth:`store`, which check each lane and raise as usual)."""
        if not addr.size or not self._starts.size or width not in FlatMemory._WIDE:
            return None
        if int(np.bitwise_or.reduce(addr, axis=None)) & (width - 1):
            return None
        lo, hi = int(addr.min()), int(addr.max())
        bounds = self.__dict__.get("_bounds")
        if bounds is None or len(bounds[0]) != self._starts.size:  # buffers as Python ints
            bounds = self._bounds = (self._starts.tolist(), self._ends.tolist())
        i = bisect.bisect_right(bounds[0], lo) - 1
        if i < 0 or hi + width > bounds[1][i]:
            return None
        off = addr.astype(np.intp, order="C")
        off -= GLOBAL_BASE
        if width > 1:
            off >>= width.bit_length() - 1
        n = self.data.size // width * width
        return self.data[:n].view(FlatMemory._WIDE[width]), off

    def _index(self, addr, nbytes, mask, where, align):
        self._check_align(addr, mask, nbytes, align, where)
        starts, ends = self._starts, self._ends
        i = np.searchsorted(starts, addr, side="right") - 1
        ok = i >= 0
        ic = np.maximum(i, 0)
        if len(starts):
            # (addr < end too: an address near 2**64 wraps addr + nbytes around)
            ok &= (addr < ends[ic]) & (addr + np.uint64(nbytes) <= ends[ic])
        else:
            ok = np.zeros(addr.shape, bool)
        bad = ~ok if mask is None else (~ok & mask)
        if bad.any():
            j = _first_bad(bad)
            raise MemoryError_(
                f"{where}: {_lane_desc(j, addr.ndim - 1)} accesses {nbytes} bytes at global "
                f"address {int(addr[j]):#x}, outside every allocated buffer"
            ).at(**_where(j, addr, "global", "outside", nbytes, align or nbytes))
        off = (addr - np.uint64(GLOBAL_BASE)).astype(np.intp)
        if mask is not None:
            off = np.where(mask, off, 0)
        return off[..., None] + np.arange(nbytes, dtype=np.intp)

    def load(self, addr, nbytes, mask, where="", align=None):
        return self.data[self._index(addr, nbytes, mask, where, align)]

    def store(self, addr, data, mask, where="", align=None):
        idx = self._index(addr, data.shape[-1], mask, where, align)
        if mask is None:
            self.data[idx] = data
        else:
            self.data[idx[mask]] = data[mask]


class TrackedGlobal(GlobalMemory):
    """Global memory that remembers which bytes were stored to (atomics included): a part of
    a launch spread over processes (:mod:`warpsim.kernel.executor`) sends back those bytes.
    Loads are :class:`GlobalMemory`'s, fast paths included; stores take the checked way."""

    written: np.ndarray | None = None

    def store(self, addr, data, mask, where="", align=None):
        idx = self._index(addr, data.shape[-1], mask, where, align)
        if self.written is None or self.written.size != self.data.size:
            self.written = np.zeros(self.data.size, bool)
        if mask is None:
            self.data[idx] = data
            self.written[idx] = True
        else:
            self.data[idx[mask]] = data[mask]
            self.written[idx[mask]] = True

    def diffs(self, buffers: dict, arrays: list, indices: list) -> list:
        """Per array placed in global memory (argument ``indices[j]``, array ``arrays[j]``):
        (packed written mask, written bytes)."""
        out = []
        for i, a in zip(indices, arrays):
            o, n = buffers[i] - GLOBAL_BASE, np.asarray(a).nbytes
            w = self.written[o:o + n] if self.written is not None else np.zeros(n, bool)
            out.append((np.packbits(w), self.data[o:o + n][w]))
        return out
