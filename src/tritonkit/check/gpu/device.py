"""The device side of ``tritonkit check --gpu``: the ``@triton.jit`` helpers every instrumented load,
store and atomic calls (see :mod:`.instrument`).

Offsets here are in elements of the *root* argument (the tensor the pointer derives from), counted
from its first element (``tensor.data_ptr()``), in int64. A lane may be performed where its offset
``off`` lies in the root's view: ``0 <= off < hi`` (``hi``: one past the view's last element), and,
for a view with gaps (a column slice, a step), ``(off % s1) < e1`` and ``((off % s1) % s2) < e2``
for the view's ``G`` gap levels (see :func:`tritonkit.check.gpu.instrument.view_layout`).

The record buffer is an int64 tensor of :data:`HEADER` cells and then :data:`RECORD` fields per record.
Cell 0 counts the record slots taken (it may exceed the capacity: the excess is counted, not kept);
cell ``1 + site`` counts the offending lanes of a *counted* site (an access inside a loop, whose
first run only counts: see :func:`guard_offset`; at most :data:`COUNTED_SITES` of them). A record:
the access site (with :data:`MAGIC` added, so that a record an unchecked access overwrote can be
told apart), the program id (x, y, z), the number of offending lanes, ``C - lowest`` and ``highest
+ C`` of their offsets (:data:`C`: so that zeroed memory is the identity of the lanes' atomic maxima),
and what was found (:data:`OUT_OF_BOUNDS` or :data:`OVERFLOW`). A record of no lane is left unused.
The slots must be zero before a launch (:mod:`.runtime` zeroes those it read).
"""
import triton
import triton.language as tl

from .replay import COUNTED_SITES as _COUNTED_SITES

#: int64 fields per record
RECORD = 8
#: counted sites at most (sites past it make records, as outside loops)
COUNTED_SITES = _COUNTED_SITES
#: int64 cells before the first record: the slots taken, then one lane counter per counted site
HEADER = COUNTED_SITES + 1
#: the offset bias of the records' lowest and highest fields
C = tl.constexpr(1 << 61)
#: a record's last field: the lanes' addresses fall outside the root's view
OUT_OF_BOUNDS = 0
#: a record's last field: an int32 term of the lanes' offsets wrapped (computed again in int64, it does
#: not fit); the offsets recorded are the kernel's own (wrapped) ones
OVERFLOW = 1
_RECORD = tl.constexpr(RECORD)  # the same, for the kernels
_HEADER = tl.constexpr(HEADER)
#: added to an offset term that wrapped (:func:`term`): such a lane is outside every view, and its
#: exact offset is ``off - k * POISON`` (``k``: the number of wrapped terms, a few at most)
POISON = tl.constexpr(1 << 52)
#: added to a record's site number: a record without it was not made by the guard (an unchecked
#: access of the kernel wrote over the buffer)
MAGIC = tl.constexpr(0x7E57 << 32)


@triton.jit
def wide(x):
    """``x`` in int64 where it is an integer tensor of fewer bits; anything else as it is (pointers,
    floats, int64, compile-time constants)."""
    if not isinstance(x, tl.tensor):
        return x
    elif x.dtype.is_int() and x.dtype.primitive_bitwidth < 64:
        return x.to(tl.int64)
    else:
        return x


@triton.jit
def inside(off, hi, s1, e1, s2, e2, G: tl.constexpr):
    """Whether each offset (elements, int64) is an element of the view: ``0 <= off < hi`` and inside
    its first ``G`` (0-2) gap levels ``(s1, e1)``, ``(s2, e2)``."""
    inb = (off >= 0) & (off < hi)
    if G >= 1:
        r = off % s1
        inb = inb & (r < e1)
        if G >= 2:
            inb = inb & ((r % s2) < e2)
    return inb


@triton.jit
def _record(rec, cap, site: tl.constexpr, flags, off):
    """One record of this program's lanes where ``flags`` is set (a slot of the buffer, zeroed): the
    site, the program id, and by lane atomics (no block reduction: the slow path then needs no
    registers or shared memory of its own to speak of) the lanes' count, their smallest and largest
    offset (as they are: with :data:`POISON` added where a term wrapped) and whether any wrapped."""
    slot = tl.atomic_add(rec, 1)
    if slot < cap:
        at = rec + _HEADER + slot * _RECORD
        tl.store(at, site + MAGIC)
        tl.store(at + 1, tl.program_id(0))
        tl.store(at + 2, tl.program_id(1))
        tl.store(at + 3, tl.program_id(2))
        shape: tl.constexpr = flags.shape
        tl.atomic_add(tl.broadcast_to(at + 4, shape), 1, mask=flags, sem="relaxed")
        tl.atomic_max(tl.broadcast_to(at + 5, shape), -off + C, mask=flags, sem="relaxed")  # tensor first (interpreter)
        tl.atomic_max(tl.broadcast_to(at + 6, shape), off + C, mask=flags, sem="relaxed")
        tl.atomic_max(tl.broadcast_to(at + 7, shape), (off >= POISON // 2).to(tl.int64), mask=flags, sem="relaxed")


@triton.jit
def term(native, exact):
    """The offset term ``exact`` (an integer added to a pointer, computed in int64) as the access
    uses it: itself where the kernel's own term ``native`` is an int64 (or a constant), or where
    it fits ``native``'s integer type; else itself plus :data:`POISON`, which puts the lane outside
    every view (it is not performed) and tells the guard that it wrapped.
    ``native`` is read for its type only (its computation is left to the compiler to drop)."""
    if not isinstance(native, tl.tensor):
        return exact
    elif native.dtype.is_int() and native.dtype.primitive_bitwidth < 64:
        bits: tl.constexpr = native.dtype.primitive_bitwidth
        if native.dtype.is_int_signed():
            wraps = (exact < -(1 << (bits - 1))) | (exact >= (1 << (bits - 1)))
        else:
            wraps = (exact < 0) | (exact >= (1 << bits))
        # arithmetic, not tl.where: Triton's axis analysis keeps exact's divisibility through it
        return exact + wraps.to(tl.int64) * POISON
    else:
        return exact


@triton.jit
def _check(inb, mask, off, rec, cap, site: tl.constexpr, COUNT: tl.constexpr, SKIP: tl.constexpr):
    """The lanes that may be performed: ``mask`` (None: every lane) and ``inb``; none where ``SKIP``
    (a write during a replay). The offending lanes (active, not ``inb``) are counted where ``COUNT``
    (one lane atomic each, into the site's counter: nothing to pay while none offends), else one
    block reduction tells whether the program has any, and then :func:`_record` records them with
    their offsets ``off``."""
    if mask is None:
        ok = inb
        flag = inb == 0
    else:
        ok = mask & inb
        flag = mask & (inb == 0)
    if COUNT:
        tl.atomic_add(tl.broadcast_to(rec + 1 + site, flag.shape), 1, mask=flag, sem="relaxed")
    else:
        n = tl.max(flag.to(tl.int32) + tl.zeros((1,), tl.int32))
        if n > 0:
            _record(rec, cap, site, flag, off)
    if SKIP:
        ok = ok & False
    return ok


@triton.jit
def guard_offset(off, mask, hi, s1, e1, s2, e2, rec, cap, site: tl.constexpr, G: tl.constexpr,
                 COUNT: tl.constexpr, SKIP: tl.constexpr):
    """The mask of the lanes of an access made through ``root + off`` that may be performed:
    ``mask`` (None: every lane) and inside the root's view (see the module); none where ``SKIP``
    (a write during a replay). ``off`` is the access's offset computed again in int64 by the
    rewritten kernel, with :data:`POISON` added once for each of its terms that wrapped in the
    kernel's own arithmetic (see :func:`term`): such a lane is outside every view. The mask keeps
    the axis properties of ``off`` (contiguity, divisibility), so the access keeps its vector width.
    Offending lanes are counted (``COUNT``: an access in a loop, first run; a replay of the launch
    records them) or recorded (see :func:`_check`)."""
    return _check(inside(off, hi, s1, e1, s2, e2, G), mask, off, rec, cap, site, COUNT, SKIP)


@triton.jit
def guard(ptr, mask, hi, s1, e1, s2, e2, root, rec, cap, site: tl.constexpr, G: tl.constexpr,
          SKIP: tl.constexpr):
    """The mask of ``ptr``'s lanes that may be performed: ``mask`` (None: every lane) and inside the
    view of the tensor ``root`` points to (see the module), from the addresses themselves. Used
    where the rewrite could not compute the access's offset again (the lanes' mask then loses its
    vector width, and int32 overflow is not seen). Offending lanes are recorded; none is performed
    where ``SKIP`` (a write during a replay)."""
    esz: tl.constexpr = root.dtype.element_ty.primitive_bitwidth // 8
    nbytes: tl.constexpr = ptr.dtype.element_ty.primitive_bitwidth // 8
    diff = ptr.to(tl.int64) - root.to(tl.int64)
    own = tl.where(diff >= 0, diff // esz, -((esz - 1 - diff) // esz))
    inb = inside(own, hi, s1, e1, s2, e2, G) & (diff + nbytes <= hi * esz)
    return _check(inb, mask, own, rec, cap, site, 0, SKIP)


@triton.jit
def desc_probe1(o0, n0, st0, hi, s1, e1, s2, e2, rec, cap, site: tl.constexpr, G: tl.constexpr, B0: tl.constexpr):
    """The check of an access through a rank-1 host-side tensor descriptor (shape ``n0``, stride
    ``st0`` elements, block ``B0``) at offset ``o0``: its lanes inside the descriptor's shape (the
    others the hardware does not move) are checked against the view of the descriptor's base
    tensor, and a record made where one is outside. The access itself is not changed: a lane
    found here was moved by the hardware (see the report)."""
    idx = o0 + tl.arange(0, B0)
    off = idx.to(tl.int64) * st0
    _check(inside(off, hi, s1, e1, s2, e2, G), (idx >= 0) & (idx < n0), off, rec, cap, site, 0, 0)


@triton.jit
def desc_probe2(o0, o1, n0, n1, st0, st1, hi, s1, e1, s2, e2, rec, cap, site: tl.constexpr, G: tl.constexpr,
                B0: tl.constexpr, B1: tl.constexpr):
    """:func:`desc_probe1` for a rank-2 descriptor (shape ``(n0, n1)``, strides ``(st0, st1)``,
    block ``(B0, B1)``) at offsets ``(o0, o1)``."""
    r = o0 + tl.arange(0, B0)
    c = o1 + tl.arange(0, B1)
    active = ((r >= 0) & (r < n0))[:, None] & ((c >= 0) & (c < n1))[None, :]
    off = r.to(tl.int64)[:, None] * st0 + c.to(tl.int64)[None, :] * st1
    _check(inside(off, hi, s1, e1, s2, e2, G), active, off, rec, cap, site, 0, 0)
