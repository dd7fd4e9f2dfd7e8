"""Host copies of the storages of tensors on a GPU, and memory-bound passes over large arrays
split between threads.

A launch under check runs on the host: each storage of a CUDA tensor argument is copied to host
memory when the launch maps it and copied back after the launch if a lane wrote it. For a storage of
:data:`SHARED_MIN_BYTES` or more, the host copy is made in a *shared* anonymous mapping
(``mmap(MAP_SHARED | MAP_ANONYMOUS)``) whose pages a few threads make resident at once
(``madvise(MADV_POPULATE_WRITE)``, Linux 5.14 or later) before the device's bytes are copied in:

* the copy is faster: a fresh private buffer (``storage.cpu()``) is faulted in one 4 KiB page at a
  time by the copy itself;
* a launch shared out between forked worker processes (:mod:`..engine.shares`) lets each worker
  write its programs' elements there in place: nothing is copied back through files, and neither
  the workers nor this process pay a copy-on-write fault per page written; a fork does not copy the
  mapping's page tables either.

Measured on the GPU machine (an H100's host, 16 cores, 2026-11-27) for a 4.3 GB storage:
``storage.cpu()`` 3.4 s; populating one shared mapping 2.1 s on one thread, 0.85 s on 16, and 16
mappings side by side on 16 threads 0.28 s; the copy 0.34 s; a fork of a process holding 13 GB
privately 0.18 s against 0.007 s with the 4.3 GB in a shared mapping; a forked child writing 1/16 of
the storage 0.33 s privately, 0.17 s shared. (Page-locking the copy for the driver made the copy
faster but not the whole: registering costs what the copy saves.)

Undoing a worker's writes to a shared mapping cannot rely on the copy-on-write copy the parent keeps
of private memory: the transaction keeps the one value the storage held or, failing that, restores
from the device's bytes, which change only when the launch copies back
(:meth:`~tritonkit.check.engine.transaction.Transaction.hold`).
"""
from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from typing import Callable, NamedTuple, Optional

import numpy as np

from .allocator import MADV_POPULATE_WRITE

#: device storages of at least this many bytes get a host copy in a shared mapping (see the module)
SHARED_MIN_BYTES = 1 << 20
#: bytes per thread at least in a pass split between threads (:func:`in_parallel`)
GRAIN = 64 << 20


class HostCopy(NamedTuple):
    """A device storage's bytes on the host.

    Attributes:
        storage: a CPU ``torch.UntypedStorage`` holding them.
        shared: whether it lives in a shared mapping (see the module).
        fill: where the storage is :data:`SHARED_MIN_BYTES` or more, the one value its bytes repeat
            (a length-1 array of the widest unsigned type that tiles them, as
            :func:`~tritonkit.check.engine.transaction._fill_value` gives) or None where they hold
            more than one; ``False`` where not looked for (a smaller storage, a device without the
            reductions it takes).
    """

    storage: object
    shared: bool
    fill: object


def in_parallel(fn: Callable[[int, int], None], n: int, threads: int, grain: Optional[int] = None) -> None:
    """Call ``fn(lo, hi)`` over ``[0, n)`` in contiguous pieces of at least ``grain`` (default
    :data:`GRAIN`), on up to ``threads`` threads (this one included) that are all joined before it
    returns (so that no thread is running when the session later forks). ``fn`` should release the
    GIL (a NumPy pass over a plain dtype, a ``madvise``) to gain anything. An exception in a piece
    is raised here."""
    k = int(max(1, min(threads, n // max(1, GRAIN if grain is None else grain))))
    if k == 1:
        fn(0, n)
        return
    bounds = [n * i // k for i in range(k + 1)]
    errors = []

    def run(i):
        try:
            fn(bounds[i], bounds[i + 1])
        except BaseException as e:  # pragma: no cover - re-raised below
            errors.append(e)
    pool = [threading.Thread(target=run, args=(i,), name=f"tritonkit-pass-{i}") for i in range(1, k)]
    for t in pool:
        t.start()
    run(0)
    for t in pool:
        t.join()
    if errors:
        raise errors[0]


def _libc():
    """libc's ``mmap``, ``munmap`` and ``madvise`` as ctypes functions, or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fns = libc.mmap, libc.munmap, libc.madvise
    except (OSError, AttributeError):  # pragma: no cover - not a C library we know
        return None
    fns[0].restype = ctypes.c_void_p
    fns[0].argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    fns[1].restype, fns[1].argtypes = ctypes.c_int, (ctypes.c_void_p, ctypes.c_size_t)
    fns[2].restype, fns[2].argtypes = ctypes.c_int, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return fns


_PROT_RW, _MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS, _MAP_NORESERVE = 3, 1, 2, 0x10, 0x20, 0x4000
_MADV_HUGEPAGE = 14
_HUGE = 2 << 20  # a huge page on x86-64 and arm64 with 4 KiB pages
_FAILED = ctypes.c_void_p(-1).value


class _Mapping:
    """Anonymous memory mapped by hand (Linux), exposed to NumPy (``np.asarray(mapping)``) and
    unmapped once no array over it is left.

    Shared: ``pieces`` shared mappings side by side in one reserved range, each its own object
    in the kernel, so that ``pieces`` threads make their pages resident at once (one shared mapping
    populates at about 2 GB/s however many threads fault it, measured on the GPU machine's host).
    Private: one mapping advised huge pages (faults, forks and copy on write per 2 MiB).
    ``then(offset, piece)``, where given, is called in the thread that made a piece resident, with
    the piece as a uint8 array (a host copy's bytes are copied in while other pieces populate).

    Raises:
        OSError: a mapping could not be made.
    """

    def __init__(self, nbytes: int, shared: bool, threads: int,
                 then: Optional[Callable[[int, np.ndarray], None]] = None) -> None:
        fns = _libc()
        if fns is None:  # pragma: no cover
            raise OSError("no mmap")
        mmap_, self._munmap, madvise = fns
        page = mmap.PAGESIZE
        self.size = -(-nbytes // page) * page + (0 if shared else _HUGE)
        base = mmap_(None, self.size, 0 if shared else _PROT_RW, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE,
                     -1, 0)
        if base in (None, _FAILED):
            raise OSError(ctypes.get_errno(), "mmap failed")
        self.base = base
        start = base if shared else -(-base // _HUGE) * _HUGE
        failed = []
        if not shared:
            madvise(start, nbytes, _MADV_HUGEPAGE)

        def piece(lo, hi):  # (pieces meet at page boundaries: each rounds its ends down)
            lo, hi = lo // page * page, (hi // page * page if hi < nbytes else nbytes)
            if hi <= lo:
                return
            if shared:  # a shared mapping of its own over this piece of the range
                end = hi if hi < nbytes else self.size
                if mmap_(base + lo, end - lo, _PROT_RW, _MAP_SHARED | _MAP_ANONYMOUS | _MAP_FIXED, -1, 0) != base + lo:
                    failed.append(ctypes.get_errno())
                    return
            madvise(start + lo, hi - lo, MADV_POPULATE_WRITE)
            if then is not None:
                then(lo, np.ctypeslib.as_array((ctypes.c_uint8 * (hi - lo)).from_address(start + lo)))
        try:
            in_parallel(piece, nbytes, threads)
        except BaseException:
            self.__del__()
            raise
        if failed:
            self.__del__()
            raise OSError(failed[0], "mmap failed")
        self.__array_interface__ = {"data": (start, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        if getattr(self, "base", None) is not None:
            self._munmap(self.base, self.size)
            self.base = None


def shared_buffer(nbytes: int, threads: int, then: Optional[Callable[[int, np.ndarray], None]] = None) -> np.ndarray:
    """``nbytes`` in shared anonymous memory, resident, as a uint8 array of shape ``(nbytes,)``
    (zeros, or what ``then(offset, piece)`` wrote in each piece: see :class:`_Mapping`); forked
    children write it in place.

    Raises:
        OSError: no mapping could be made.
        whatever ``then`` raises.
    """
    return np.asarray(_Mapping(nbytes, True, threads, then))


def huge_array(n: int, dtype, threads: int, value=0) -> np.ndarray:
    """An array of ``n`` elements of ``dtype``, each ``value``, in private memory advised huge pages,
    resident (see :class:`_Mapping`; each thread fills the piece it made resident): for per-cell
    state the size of a large storage, which a fork, a worker's copy on write and this process's
    writes after the fork then fault per 2 MiB, not per 4 KiB. A NumPy array (``np.full``) where it
    is smaller than :data:`GRAIN` or cannot be mapped."""
    dtype = np.dtype(dtype)
    if n * dtype.itemsize < GRAIN or not sys.platform.startswith("linux"):
        return np.full(n, value, dtype=dtype)

    def fill(lo, piece):
        if value:
            piece.view(dtype).fill(value)
    try:
        return np.asarray(_Mapping(n * dtype.itemsize, False, threads, fill)).view(dtype)
    except OSError:
        return np.full(n, value, dtype=dtype)


def _device_fill(dev) -> Optional[np.ndarray]:
    """The one value the device bytes ``dev`` (a uint8 tensor) repeat, as :class:`HostCopy` gives it,
    or None: compared on the device (``aminmax`` of the widest integer view, no temporary the size of
    the storage), one element copied."""
    import torch
    n = dev.shape[0]
    width = next((w for w in (8, 4, 2, 1) if n % w == 0 and dev.data_ptr() % w == 0), 1)
    view = dev.view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[width])
    lo, hi = torch.aminmax(view)
    if bool(lo != hi):
        return None
    return view[:1].cpu().numpy().view(np.dtype(f"u{width}")).copy()


def copy_to_host(st, threads: int) -> HostCopy:
    """A host copy of the device storage ``st`` (a ``torch.UntypedStorage`` on a GPU): in a shared,
    populated mapping where it is :data:`SHARED_MIN_BYTES` or more and the platform has one (see the
    module), else ``st.cpu()``. ``threads``: threads that may populate it (the session's workers).

    Raises:
        whatever copying the device's bytes raises (a CUDA error).
    """
    import torch
    n = st.nbytes()
    if n < SHARED_MIN_BYTES or not sys.platform.startswith("linux"):
        return HostCopy(st.cpu(), False, False)
    dev = torch.empty(0, dtype=torch.uint8, device=st.device).set_(st, 0, (n,), (1,))
    try:
        fill = _device_fill(dev)
    except Exception:  # a device without these reductions: copied, and scanned on the host if need be
        fill = False

    def copy_in(lo, piece):  # each piece as soon as it is resident, while others populate
        if fill is not None and fill is not False:  # one value (torch.empty's marker, torch.zeros): written
            piece.view(fill.dtype).fill(fill[0])
        else:
            torch.from_numpy(piece).copy_(dev[lo:lo + piece.shape[0]])
    try:
        host = shared_buffer(n, threads, copy_in)
    except OSError:  # no room for a mapping: torch's own copy
        return HostCopy(st.cpu(), False, False)
    host_t = torch.from_numpy(host)  # holds the array, which holds the mapping
    return HostCopy(host_t.untyped_storage(), True, fill)
