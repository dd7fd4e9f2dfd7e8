"""What a checked launch allocates is released when it ends: the tensors it saw (and, through the
frames that called it, everything its callers held) are freed as soon as the program drops them,
without waiting for a garbage collection, and nothing of a launch outlives it in Triton's or the
kernel's modules. (Liger-Kernel's cross-entropy tests grew by a whole test's tensors per test when
a launch's builder stayed in a kernel module's globals.)"""
import gc
import sys
import textwrap
import weakref

import pytest
import torch
import triton
import triton.language as tl

from tritonkit.check import checking
from tritonkit.check.interp.builder import CheckedBuilder
from tritonkit.check.launch.state import Launch


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    tl.store(out_ptr + offs, tl.max(tl.load(x_ptr + offs, mask=m, other=0.0), 0) + tl.zeros([B], tl.float32), mask=m)


def _launch_and_forget():
    """Launch on tensors only this function holds; return weak references to them."""
    x = torch.randn(4096)
    out = torch.empty(4096)
    big = torch.zeros(1 << 20)  # a caller's tensor the launch never sees: kept alive only by this frame
    _scale_kernel[(16,)](x, out, x.numel(), B=256)
    return [weakref.ref(t) for t in (x, out, big)]


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_the_tensors_of_a_launch_are_freed_when_the_program_drops_them(engine):
    gc.collect()
    was = gc.isenabled()
    gc.disable()  # freed by reference counting alone: no cycle keeps them
    try:
        with checking(engine=engine) as session:
            refs = _launch_and_forget()
            alive = [r() is not None for r in refs]
    finally:
        if was:
            gc.enable()
    assert session.launches and not session.findings
    assert alive == [False, False, False]


def test_no_launch_or_builder_outlives_its_launch(tmp_path):
    """A kernel defined in a module of its own, launched for the first time under checking: the
    module's globals (which Triton's rewriter extends) hold no builder; a Launch object that Triton
    still references afterwards (Triton 3.6 keeps the last one until the next launch) holds nothing
    of its launch; and launches do not pile up."""
    path = tmp_path / "fresh_kernel_module.py"
    path.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl


        @triton.jit
        def fresh_kernel(x_ptr, B: tl.constexpr):
            offs = tl.arange(0, B)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs) + tl.max(tl.load(x_ptr + offs), 0))
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        import fresh_kernel_module
        alive = []
        for _ in range(3):
            with checking():
                fresh_kernel_module.fresh_kernel[(1,)](torch.randn(32), B=32)
            module_globals = [vars(fresh_kernel_module), vars(tl.standard), vars(tl.core)]
            assert not [k for g in module_globals for k, v in g.items() if isinstance(v, CheckedBuilder)]
            gc.collect()
            launches = [o for o in gc.get_objects() if type(o) is Launch]
            assert all(x.space is None and x.builder is None and x.entry_frame is None for x in launches)
            alive.append(len(launches) + sum(issubclass(type(o), CheckedBuilder) for o in gc.get_objects()))
        assert alive[0] <= 2 and alive[0] == alive[1] == alive[2], alive
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("fresh_kernel_module", None)


def test_a_long_launch_hands_freed_heap_memory_back(monkeypatch):
    """A launch that ran longer than ``_TRIM_AFTER_S`` trims the C heap when it ends (glibc keeps
    freed arrays of a few MiB resident otherwise); a short one does not pay for it."""
    from tritonkit.check.launch import run
    calls = []
    monkeypatch.setattr(run, "_libc_trim", lambda pad: calls.append(pad))
    monkeypatch.setattr(run, "_TRIM_AFTER_S", 1e9)
    with checking():
        _launch_and_forget()
    assert calls == []
    monkeypatch.setattr(run, "_TRIM_AFTER_S", 0.0)
    with checking():
        _launch_and_forget()
    assert calls == [0]


def test_the_per_element_pools_grow_in_place_and_keep_their_values():
    """The guard's and the race shadow's pools grow by realloc (no second copy alive at once), never
    past the storage's pages, keep what they held, and fall back to a copy while a view is alive."""
    import numpy as np

    from tritonkit.check.engine.guard import _Owners
    from tritonkit.check.memory import PAGE
    cells = _Owners(10 * PAGE)
    pos = cells.index(np.array([5, PAGE + 7, 3 * PAGE + 1], dtype=np.int64))
    cells.own[pos] = [11, 12, 13]
    view = cells.own[:4]  # alive across the next growth: the pool is copied, the view stays valid
    pos2 = cells.index(np.arange(10 * PAGE, dtype=np.int64)[::PAGE // 2])
    assert cells.cap == 10 and cells.own.shape[0] == 10 * PAGE  # never past the storage's pages
    assert cells.own[pos].tolist() == [11, 12, 13]
    assert view.shape[0] == 4
    fresh = np.setdiff1d(pos2, pos)
    assert (cells.own[fresh] == -1).all() and (cells.flags[fresh] == 0).all()  # initial values
    del view
    small = _Owners(64 * PAGE)
    small.index(np.array([0], dtype=np.int64))
    small.own[small.index(np.array([0], dtype=np.int64))] = 7
    small.index(np.arange(0, 64 * PAGE, PAGE, dtype=np.int64))  # grows without a view: in place
    assert small.own[small.index(np.array([0], dtype=np.int64))][0] == 7 and small.cap == 64
