"""Memory for the batched engine's short-lived arrays: glibc keeps what is freed for reuse once a
check session has begun, and NumPy advises no huge pages while one runs; and the objects a session
finds are left out of the garbage collector's passes while it runs (:class:`frozen_heap`); between
sessions, :func:`collect_garbage` frees what they left.

The batched engine makes and frees many short-lived numpy arrays of up to the batch memory budget
(4 MiB by default) per launch. glibc serves an allocation above its mmap threshold (128 KiB at
start, raised by itself up to 32 MiB as large blocks are freed) with a fresh ``mmap`` and gives
it back on ``free``, and it returns free memory at the top of its heap to the system beyond the
trim threshold: every such array costs a page fault per 4 KiB page on its first write. Measured
on the CPU machine (2 cores, Triton 3.9, 2026-11-24): a fresh process's first checked vector add of
2**22 fp32 took 0.22 s with 15,580 page faults, of which 0.11 s in the kernel; with the thresholds
below, 0.13 s; the warm causal attention 8x512x64 went from 0.12 to 0.07 s; peak RSS unchanged.

When a session begins, :func:`keep_freed_memory` sets the mmap threshold to 32 MiB (the highest
glibc's own adjustment reaches) and the trim threshold to 2 GiB, so freed blocks are reused instead
of faulted in again, and leaves them so for the rest of the process: put back at the session's
end, the next session's first launch paid the page faults again (a warm vector add of 2**22 fp32
faulted 11,000 pages per launch instead of 500). The process's resident memory then stays near its
peak until it exits, as with any allocator that keeps what it frees. It also grows the heap by
31 MiB at once and has Linux make those pages resident in one call, off the main thread
(:func:`_reserve_heap`): a fresh process's first launch then writes its first arrays into pages
already there instead of faulting them in one by one (a fault cost ~4 us on the CPU machine's VM);
those 31 MiB count in the process's resident memory from then on.

NumPy's advice to the kernel that its arrays of 4 MiB or more be backed by 2 MiB pages
(``madvise(MADV_HUGEPAGE)``) is turned off while a session runs (:func:`no_huge_pages`): with
Linux's default ``defrag`` setting (``madvise``), a fault in such a region may compact memory
synchronously to find a huge page, and the batch's arrays, made and freed by the thousand, paid for
it. Measured on the CPU machine: a fresh process's first checked layer norm of 4096x1024 fp32 took
0.40 s (0.30 s of it in the kernel) with the advice, 0.15 s without; a warm softmax of 4096x1024,
0.063 s against 0.043 s.

A process that set its allocator up itself (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_``, ``GLIBC_TUNABLES``), or ``TRITONKIT_KEEP_FREED_MEMORY=0``, is left as it is.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import threading
from typing import Optional

from ..._env import switched_off

M_TRIM_THRESHOLD = -1  # from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit; mallopt refuses more
SESSION_TRIM_THRESHOLD = 2 ** 31 - 1  # mallopt takes an int: 2 GiB

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def _mallopt():
    """glibc's ``mallopt`` as a ctypes function, or None (another C library, or not found)."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols (find_library would run ldconfig)
        fn = libc.mallopt
        libc.gnu_get_libc_version  # present in glibc only
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def _user_configured() -> bool:
    if switched_off("TRITONKIT_KEEP_FREED_MEMORY"):
        return True
    if any(name in os.environ for name in _USER_SETTINGS):
        return True
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")


def _set(fn, param: int, value: int) -> bool:
    return bool(fn(param, value))


_done: Optional[bool] = None


def keep_freed_memory() -> Optional[bool]:
    """Make glibc keep freed memory for reuse, once per process (see the module).

    Returns:
        True where the thresholds are set, None where nothing was changed (not glibc, the process
        configured its allocator, or ``mallopt`` refused).
    """
    global _done
    if _done is None:
        fn = None if _user_configured() else _mallopt()
        ok = fn is not None and _set(fn, M_MMAP_THRESHOLD, MMAP_THRESHOLD) and _set(fn, M_TRIM_THRESHOLD,
                                                                                SESSION_TRIM_THRESHOLD)
        _done = True if ok else False
        if ok and HEAP_RESERVE:
            _reserve_heap(HEAP_RESERVE)
    return True if _done else None


#: bytes of heap made resident when a session begins (see the module): below the mmap threshold, so
#: that the block comes from the heap glibc now keeps
HEAP_RESERVE = MMAP_THRESHOLD - (1 << 20)
MADV_POPULATE_WRITE = 23  # Linux 5.14 and later; older kernels refuse it (EINVAL) and nothing happens


def _reserve_heap(nbytes: int) -> None:
    """Grow glibc's heap by ``nbytes`` (a block allocated and freed at once: it stays in the heap,
    see :func:`keep_freed_memory`) and have a background thread ask Linux to make those pages
    resident in one call (``madvise(MADV_POPULATE_WRITE)``), so that the first launch's arrays
    reuse them instead of faulting each page in. Measured on the CPU machine (2 cores, 2026-11-27):
    a fresh process's first checked causal attention 8 x 512 x 64 faulted 1,330 pages instead of
    9,000 and took 0.10 s instead of 0.13 s; populating 31 MiB took 13 ms, off the main thread."""
    try:
        libc = ctypes.CDLL(None)
        malloc, free, madvise = libc.malloc, libc.free, libc.madvise
    except (OSError, AttributeError):
        return
    malloc.restype, malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    free.restype, free.argtypes = None, (ctypes.c_void_p,)
    madvise.restype, madvise.argtypes = ctypes.c_int, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    block = malloc(nbytes)
    if not block:
        return
    page = mmap.PAGESIZE
    lo, hi = (block + page - 1) // page * page, (block + nbytes) // page * page
    free(block)  # back to the heap's top, which is kept (trim threshold): the pages stay mapped
    if hi > lo:  # (populating pages another thread meanwhile writes is harmless: they are only faulted in)
        threading.Thread(target=madvise, args=(lo, hi - lo, MADV_POPULATE_WRITE), name="tritonkit-heap",
                         daemon=True).start()


def _madvise_switch():
    """NumPy's ``_set_madvise_hugepage`` (it returns the previous setting), or None."""
    for path in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = __import__(path, fromlist=["_set_madvise_hugepage"])
        except ImportError:
            continue
        fn = getattr(module, "_set_madvise_hugepage", None)
        if fn is not None:
            return fn
    return None


class no_huge_pages:
    """While the ``with`` block runs, NumPy does not advise huge pages for its arrays (see the
    module); the previous setting is put back at its end. Does nothing where NumPy lacks the switch
    or ``TRITONKIT_KEEP_FREED_MEMORY=0``."""

    def __enter__(self):
        self.previous = None
        fn = None if _user_configured() else _madvise_switch()
        if fn is not None:
            self.previous = bool(fn(False))
            self.fn = fn
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            self.fn(self.previous)
        return False


class frozen_heap:
    """While the ``with`` block runs, the objects that existed when it began are left out of the
    cyclic garbage collector's passes (``gc.freeze``): a process that imported torch and Triton holds
    a few hundred thousand of them, and each full collection a launch's allocations set off walked
    them all. Measured on the CPU machine: a fresh process's first checked launch 10-20 ms faster
    (matmul 512^3: 0.085 -> 0.070 s). They are handed back at the end (``gc.unfreeze``); garbage
    among them is collected then. A process that froze objects itself is left as it is."""

    def __enter__(self):
        import gc
        self.frozen = gc.get_freeze_count() == 0
        if self.frozen:
            gc.freeze()
        return self

    def __exit__(self, *exc):
        if self.frozen:
            import gc
            gc.unfreeze()
        return False


def resident_bytes() -> Optional[int]:
    """The process's resident memory in bytes (``/proc/self/statm``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * mmap.PAGESIZE
    except (OSError, ValueError, IndexError):
        return None


_trim = None


def collect_garbage() -> None:
    """A full garbage collection, then the C heap's free pages handed back to the system (glibc's
    ``malloc_trim``; :func:`keep_freed_memory` has glibc keep up to 2 GiB of them otherwise).

    For the moments between check sessions where what the last ones left may be garbage: a session
    freezes the objects it finds (:class:`frozen_heap`), so a collection while one runs frees none of
    them, and handed back at its end they wait in the oldest generation for a full collection, which
    Python makes rarely (in a test suite, a failed test's traceback holds its frames and their
    tensors in such cycles: issue 40). Costs a pass over every object (0.25-0.35 s in a process that
    imported torch, Triton and transformers on the CPU machine, 2026-11-29)."""
    import gc
    global _trim
    gc.collect()
    if _trim is None:
        _trim = False
        try:
            libc = ctypes.CDLL(None)
            libc.gnu_get_libc_version  # present in glibc only
            _trim = libc.malloc_trim
            _trim.argtypes, _trim.restype = (ctypes.c_size_t,), ctypes.c_int
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)
