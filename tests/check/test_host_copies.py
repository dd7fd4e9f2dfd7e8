"""Host copies of device storages in shared mappings, passes split between threads, and what the
transaction and the uninitialized-read check keep of them (tritonkit.check.memory.host).

A CPU tensor stands for the device's bytes here (``copy_to_host`` takes any storage); the shares'
differential tests run whole launches this way (``test_shares.py``, ``host_copies``)."""
import os
import threading

import numpy as np
import pytest
import torch

from tritonkit.check.checks import uninitialized as un
from tritonkit.check.engine.transaction import ON_DEVICE, Transaction
from tritonkit.check.memory import AddressSpace, HostStorage
from tritonkit.check.memory import host


def _storage(t: torch.Tensor, threads: int = 2) -> HostStorage:
    st = t.untyped_storage()
    copy = host.copy_to_host(st, threads)
    buf = torch.empty(0, dtype=torch.uint8).set_(copy.storage, 0, (st.nbytes(),), (1,)).numpy()
    return HostStorage(buf=buf, device_storage=st, host_storage=copy.storage, key=("cpu", st.data_ptr(), st.nbytes()),
                       shared=copy.shared, fill=copy.fill)


@pytest.mark.skipif(not os.sys.platform.startswith("linux"), reason="shared anonymous mappings: Linux")
def test_a_large_storage_is_copied_into_a_shared_mapping_with_its_one_value_found():
    t = torch.full((1 << 19,), 2.5, dtype=torch.float32)  # 2 MiB
    copy = host.copy_to_host(t.untyped_storage(), threads=2)
    assert copy.shared
    assert torch.equal(torch.empty(0, dtype=torch.float32).set_(copy.storage, 0, t.shape, (1,)), t)
    assert copy.fill.dtype == np.uint64 and copy.fill.view(np.float32).tolist() == [2.5, 2.5]
    t[-1] = 3.0
    assert host.copy_to_host(t.untyped_storage(), threads=2).fill is None  # more than one value
    small = host.copy_to_host(torch.ones(8).untyped_storage(), threads=2)
    assert not small.shared and small.fill is False  # torch's own copy, not looked at


def test_a_shared_copy_is_seen_by_a_forked_child_and_its_writes_by_the_parent():
    if not hasattr(os, "fork"):
        pytest.skip("fork")
    hs = _storage(torch.zeros(1 << 19))
    assert hs.shared
    pid = os.fork()
    if pid == 0:
        hs.buf[:8] = 7
        os._exit(0)
    os.waitpid(pid, 0)
    assert hs.buf[:8].tolist() == [7] * 8  # written in place: nothing to bring back


def _mapped(addr: int) -> bool:
    with open("/proc/self/maps") as fh:
        for line in fh:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr < hi:
                return True
    return False


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux's /proc")
@pytest.mark.parametrize("kind", ["shared", "huge"])
def test_a_mapping_made_by_hand_is_unmapped_with_its_last_array(monkeypatch, kind):
    monkeypatch.setattr(host, "GRAIN", 1 << 20)
    n = 3 << 20  # three pieces on three threads (shared); above GRAIN (huge)
    arr = host.shared_buffer(n, threads=3) if kind == "shared" else host.huge_array(n // 4, np.float32, 3, 1.5)
    addr = int(arr.ctypes.data)
    view = arr[10:20]
    assert _mapped(addr) and arr.nbytes == n
    if kind == "huge":
        assert (arr == 1.5).all() and addr % (2 << 20) == 0  # filled; aligned for huge pages
    else:
        arr[:] = 5
        assert (arr == 5).all()  # the pieces side by side are one range of bytes
    del arr
    assert _mapped(addr)  # a view still holds it
    del view
    assert not _mapped(addr)


def test_a_pass_is_split_between_threads_that_are_all_joined():
    seen = []
    lock = threading.Lock()

    def piece(lo, hi):
        with lock:
            seen.append((lo, hi, threading.current_thread().name))
    before = threading.active_count()
    host.in_parallel(piece, 1000, threads=4, grain=100)
    assert sorted((lo, hi) for lo, hi, _ in seen) == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    assert len({name for *_, name in seen}) == 4 and threading.active_count() == before
    seen.clear()
    host.in_parallel(piece, 1000, threads=4, grain=600)  # too little for two pieces
    assert [(lo, hi) for lo, hi, _ in seen] == [(0, 1000)]

    def fails(lo, hi):
        if lo:
            raise ValueError("piece")
    with pytest.raises(ValueError, match="piece"):
        host.in_parallel(fails, 1000, threads=2, grain=10)


class _Launch:
    def __init__(self, space):
        self.space, self.tx, self.record = space, None, type("R", (), {})()
        for name in ("programs", "accesses", "lanes", "flops", "batches", "groups", "masked_loops", "masked_branches"):
            setattr(self.record, name, 0)
        self.record.flops_by_width = {}


@pytest.mark.parametrize("values", ["one", "many"])
def test_a_held_storage_is_undone_from_its_value_or_the_device_without_a_journal(values):
    t = torch.full((1 << 18,), 4.0) if values == "one" else torch.arange(1 << 18, dtype=torch.float32)
    before = t.clone()
    hs = _storage(t)
    space = AddressSpace()
    launch = _Launch(space)
    tx = Transaction(launch, guard=None)
    space._journal(hs, hs.buf, slice(0, 64))  # a write of this process's, journaled
    hs.buf[:64] = 1
    tx.hold(hs)
    assert tx.undo == []  # its journal is dropped: the snapshot undoes it
    snap = tx.snapshots[id(hs)][1]
    assert (snap is ON_DEVICE) == (values == "many")
    hs.buf[1000:5000] = 9  # a worker's writes, in place
    tx.rollback()
    assert torch.equal(torch.from_numpy(hs.buf.view(np.float32)), before)


def test_the_device_found_one_value_stands_for_a_scan_until_a_write_is_committed():
    hs = _storage(torch.full((1 << 18,), 4.0))
    space = AddressSpace()
    space.storages[hs.key[:2]] = hs
    launch = _Launch(space)
    tx = Transaction(launch, guard=None)
    hs.buf[:4] = 0  # (bytes the scan would see: the device's value is taken unread)
    tx._first_write(hs)
    assert tx._fills[id(hs)].view(np.float32).tolist() == [4.0, 4.0]
    tx.rollback()  # undone: the bytes are the device's again
    tx = Transaction(launch, guard=None)
    tx._first_write(hs)
    assert tx._fills[id(hs)] is not None
    hs.written = True
    tx.commit()
    assert hs.fill is False
    tx = Transaction(launch, guard=None)
    tx._first_write(hs)
    assert tx._fills[id(hs)] is None  # written for good since the copy: scanned


def _tracked(n, fill_sentinel_at=None):
    pattern = un._FLOAT_SENTINELS[torch.float32]
    buf = np.full(n, pattern, dtype=np.uint32)
    return un._Tracked(g=4, ncells=n, pattern=pattern, uninit=None, allocated_at="x", guard_version=False), buf


def test_refresh_from_the_one_value_the_device_found_reads_no_byte():
    tr, buf = _tracked(1000)
    sentinel = np.array([un._FLOAT_SENTINELS[torch.float32]] * 2, dtype=np.uint32).view(np.uint64)[:1].copy()
    garbage = np.zeros(4000, dtype=np.uint8)  # not the sentinel: only the fill is looked at
    tr.refresh(garbage, threads=2, fill=sentinel)
    assert tr.uninit.all() and tr.uninit.shape == (1000,)
    tr2, _ = _tracked(1000)
    tr2.refresh(buf.view(np.uint8), threads=2, fill=np.zeros(1, dtype=np.uint64))  # one value, not the sentinel
    assert not tr2.anything_left()


def test_refresh_split_between_threads_matches_one_pass(monkeypatch):
    monkeypatch.setattr(un, "GRAIN", 64)
    monkeypatch.setattr(un, "_REFRESH_CELLS", 7)
    tr, buf = _tracked(1000)
    buf[[3, 500, 999]] = 0
    tr.refresh(buf.view(np.uint8), threads=4)
    assert np.flatnonzero(~tr.uninit).tolist() == [3, 500, 999]
    tr.uninit[600:700] = False  # a kernel wrote these
    buf[[10, 650]] = 1
    tr.refresh(buf.view(np.uint8), threads=4)
    expect = np.ones(1000, dtype=bool)
    expect[[3, 10, 500, 999]] = False
    expect[600:700] = False
    assert np.array_equal(tr.uninit, expect)


def test_a_workers_writes_merged_into_the_uninitialized_state_are_undone_exactly(monkeypatch):
    n = 400
    tr, _ = _tracked(n)
    tr.uninit = np.ones(n, dtype=bool)
    tr.uninit[150:160] = False  # partly initialized before
    undo = []

    class Launch:
        on_undo = staticmethod(undo.append)
        session = type("Session", (), {"workers": 2})()
    check = un.UninitializedCheck()
    monkeypatch.setattr(check, "_tracked", lambda launch, storage: tr)
    monkeypatch.setattr(un, "_registry", type("R", (), {"tracked": {1: tr}})())
    before = tr.uninit.copy()
    lo, hi = np.array([0, 100, 300], dtype=np.int64), np.array([50, 200, 310], dtype=np.int64)
    check.share_merge(Launch(), None, [(object(), 4, lo, hi)])
    assert not tr.uninit[0:50].any() and not tr.uninit[100:200].any() and not tr.uninit[300:310].any()
    assert tr.uninit[50:100].all() and tr.uninit[200:300].all()
    for fn in reversed(undo):
        fn()
    assert np.array_equal(tr.uninit, before)


# --- on a GPU: CUDA tensors' host copies in shared mappings, shared out, written in place ---------------
def _needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@pytest.mark.gpu
def test_a_large_cuda_storage_is_copied_with_its_one_value_found_on_the_device():
    _needs_cuda()
    t = torch.full((1 << 20,), 3.0, device="cuda")  # 4 MiB
    copy = host.copy_to_host(t.untyped_storage(), threads=4)
    assert copy.shared and copy.fill.view(np.float32).tolist() == [3.0, 3.0]
    assert torch.equal(torch.empty(0, dtype=torch.float32).set_(copy.storage, 0, t.shape, (1,)), t.cpu())
    t[12345] = -1.0
    copy = host.copy_to_host(t.untyped_storage(), threads=4)
    assert copy.fill is None  # copied, not filled
    assert torch.equal(torch.empty(0, dtype=torch.float32).set_(copy.storage, 0, t.shape, (1,)), t.cpu())


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["independent", "dependent"])
def test_a_cuda_launch_shared_out_gives_the_serial_result(monkeypatch, kernel):
    """Workers write the shared host copies in place; where their programs depend on each other
    (the second kernel reads ahead in place) the launch is undone from the device's bytes and run
    again serially: the outputs are the sequential engine's either way."""
    _needs_cuda()
    import test_batched as tb
    import test_shares as ts
    from tritonkit.check.engine import batched as engine
    from tritonkit.check.engine import shares
    for name, value in (("SECONDS_PER_LAUNCH", 0.0), ("SECONDS_PER_BYTE_WRITTEN", 0.0), ("MIN_SAVING", -100.0),
                        ("UNSHARE_SLOWER", float("inf"))):
        monkeypatch.setattr(shares, name, value)
    monkeypatch.setenv("TRITONKIT_CHECK_CACHE", "0")
    copied_in = []
    copy_in = shares._copy_in
    monkeypatch.setattr(shares, "_copy_in", lambda storage, *a: copied_in.append(storage) or copy_in(storage, *a))

    def go():
        if kernel == "independent":
            x = torch.randn(512, 1024, device="cuda", generator=torch.Generator("cuda").manual_seed(5))
            out = torch.empty_like(x)  # 2 MiB each: shared host copies
            ts.scaled_rows[(512,)](x, out, 1024, 2.0, B=1024)
            return out.cpu()
        x = torch.arange(512 * 1024, dtype=torch.float32, device="cuda")
        tb.read_ahead_in_place[(512,)](x, 512 * 1024, AHEAD=20, B=1024)
        return x.cpu()
    for memo in (engine._PER_PROGRAM, engine._SECONDS, engine._UNSHARED):
        memo.clear()
    seq = tb._run(go, "sequential", checks=["out_of_bounds"])
    engine._SECONDS.clear()
    par = tb._run(go, "auto", checks=["out_of_bounds"], workers=4, batch_memory=1 << 16)
    assert torch.equal(par[0], seq[0]) and par[1] == seq[1] == []
    (rec,) = par[2]
    assert rec.engine == "batched" and rec.processes == (4 if kernel == "independent" else 1)
    assert copied_in == []  # nothing came back through a file
    for memo in (engine._PER_PROGRAM, engine._SECONDS, engine._UNSHARED):
        memo.clear()
