"""Memory around a check session: once one begins, glibc keeps freed memory for reuse (the batched
engine's arrays of up to the batch budget are then not faulted in again page by page at every batch
and launch); NumPy advises no huge pages and the heap is frozen while it runs; a launch's address
space is freed at its end."""
import os
import platform
import subprocess
import sys
import textwrap

import pytest
import triton
import triton.language as tl

@triton.jit
def _copy(x_ptr, out_ptr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


glibc_only = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's allocator only")

_CHILD = textwrap.dedent('''
    import resource, sys
    import numpy as np
    from tritonkit.check.memory.allocator import keep_freed_memory
    print("set", keep_freed_memory())
    faults = []
    for _ in range(4):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        # a batch's values at the default budget: several of up to 16 MiB alive at once
        values = [np.ones(4 << 20, dtype=np.float32) for _ in range(4)]
        del values
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print("faults", max(faults[1:]))
''')


def _run(env):
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    return lines["set"], int(lines["faults"])


@glibc_only
def test_a_freed_batch_sized_array_is_reused_without_page_faults():
    state, faults = _run({"TRITONKIT_KEEP_FREED_MEMORY": "1"})
    assert state == "True"
    assert faults < 400  # 64 MiB is 16384 pages


_FIRST = textwrap.dedent('''
    import resource, threading, time
    import numpy as np
    from tritonkit.check.memory.allocator import keep_freed_memory
    keep_freed_memory()
    for t in threading.enumerate():  # the heap reserve's pages made resident off the main thread
        if t.name == "tritonkit-heap":
            t.join(30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    values = [np.ones(1 << 18, dtype=np.float32) for _ in range(24)]  # 24 MiB (1 MiB arrays), first written here
    print("faults", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
''')


@glibc_only
@pytest.mark.parametrize("keep", ["1", "0"])
def test_the_first_arrays_of_a_session_reuse_the_heap_it_made_resident(keep):
    """The first batch's arrays (a fresh process's first launch) find their pages already resident
    where Linux has MADV_POPULATE_WRITE (5.14 and later); 24 MiB is 6,144 pages."""
    release = tuple(int(x) for x in platform.release().split(".")[:2] if x.isdigit())
    if keep == "1" and release < (5, 14):
        pytest.skip("MADV_POPULATE_WRITE needs Linux 5.14")
    proc = subprocess.run([sys.executable, "-c", _FIRST], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TRITONKIT_KEEP_FREED_MEMORY": keep})
    assert proc.returncode == 0, proc.stderr
    faults = int(proc.stdout.split()[-1])
    assert faults < 600 if keep == "1" else faults > 5000


@glibc_only
def test_it_can_be_turned_off_and_then_every_array_is_faulted_in_again():
    state, faults = _run({"TRITONKIT_KEEP_FREED_MEMORY": "0"})
    assert state == "None"
    assert faults > 2000


@glibc_only
def test_a_process_that_set_its_allocator_up_is_left_as_it_is():
    state, _ = _run({"MALLOC_TRIM_THRESHOLD_": "131072"})
    assert state == "None"


def test_numpy_advises_no_huge_pages_inside_a_session_and_as_before_after_it():
    from tritonkit.check import checking
    from tritonkit.check.memory.allocator import _madvise_switch
    switch = _madvise_switch()
    if switch is None:
        pytest.skip("this NumPy has no huge-page switch")
    for before in (True, False):
        switch(before)
        with checking():
            inside = switch(False)
        after = switch(before)
        assert inside is False and after is before


def test_the_objects_a_session_finds_are_frozen_while_it_runs_and_handed_back_after():
    import gc
    from tritonkit.check import checking
    gc.unfreeze()  # some packages freeze objects when imported (375 on the GPU machine's image)
    assert gc.get_freeze_count() == 0
    with checking():
        assert gc.get_freeze_count() > 1000  # what torch, Triton and tritonkit made before it began
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a process that freezes objects itself keeps its own choice
    try:
        count = gc.get_freeze_count()
        with checking():
            gc.collect()
            assert 0 < gc.get_freeze_count() <= count  # nothing frozen on top (a frozen object may die)
        assert 0 < gc.get_freeze_count() <= count  # nor handed back
    finally:
        gc.unfreeze()


def test_a_launch_leaves_no_cycle_holding_the_storages_it_mapped():
    """At a launch's end its address space (which maps the arguments' storages) is freed by
    reference counting: no cycle through its pointer tables keeps it for a collection, which a
    session that froze the heap would put off to its end."""
    import gc

    import torch

    from tritonkit.check import checking
    from tritonkit.check.memory import AddressSpace, HostStorage
    x = torch.arange(64, dtype=torch.float32)
    gc.collect()
    gc.disable()
    try:
        with checking():
            _copy[(2,)](x, torch.empty(64), B=32)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (AddressSpace, HostStorage))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
