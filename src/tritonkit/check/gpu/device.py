"""The device side of ``tritonkit check --gpu``: :func:`guard`, the ``@triton.jit`` helper every
instrumented load, store and atomic calls (see :mod:`.instrument`).

The record buffer is an int64 tensor: element 0 counts the records made (it may exceed the
capacity: the excess is counted, not kept), then ``RECORD`` int64 fields per record: the access
site, the program id (x, y, z), the number of offending lanes, and the smallest and largest byte
offset among them from the start of the argument's storage (``lo``). The site field carries
:data:`MAGIC` added, so that a record an unchecked access overwrote can be told apart.
"""
import triton
import triton.language as tl

#: int64 fields per record (after the counter)
RECORD = 7
_FAR = tl.constexpr(1 << 62)
#: added to a record's site number: a record without it was not made by the guard (an unchecked
#: access of the kernel wrote over the buffer)
MAGIC = tl.constexpr(0x7E57 << 32)


@triton.jit
def guard(ptr, mask, lo, hi, rec, cap, site: tl.constexpr):
    """The mask of ``ptr``'s lanes that may be performed: ``mask`` (None: every lane) and inside
    ``[lo, hi)`` bytes (the storage of the argument the pointer derives from). Where some active
    lane is outside, one record is made in ``rec`` (see the module) for this program and ``site``."""
    addr = ptr.to(tl.int64)
    nbytes: tl.constexpr = ptr.dtype.element_ty.primitive_bitwidth // 8
    inb = (addr >= lo) & (addr + nbytes <= hi)
    if mask is None:
        bad = inb == 0
        ok = inb
    else:
        bad = mask & (inb == 0)
        ok = mask & inb
    flat_bad = bad.to(tl.int32) + tl.zeros((1,), tl.int32)
    n = tl.sum(flat_bad)
    if n > 0:
        rel = addr - lo + tl.zeros((1,), tl.int64)
        lowest = tl.min(tl.where(flat_bad != 0, rel, _FAR))
        highest = tl.max(tl.where(flat_bad != 0, rel, -_FAR))
        slot = tl.atomic_add(rec, 1)
        if slot < cap:
            at = rec + 1 + slot * 7
            tl.store(at, site + MAGIC)
            tl.store(at + 1, tl.program_id(0))
            tl.store(at + 2, tl.program_id(1))
            tl.store(at + 3, tl.program_id(2))
            tl.store(at + 4, n)
            tl.store(at + 5, lowest)
            tl.store(at + 6, highest)
    return ok
