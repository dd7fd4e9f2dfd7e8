"""Bytes and FLOPs of launches counted by replaying them in the checked interpreter (profile's last
source of work figures), on the CPU: capture, signatures, weighting, limits, apply."""
import pytest
import torch
import triton
import triton.language as tl

from tritonkit.profile._interpret import Counted, LaunchCapture, apply_interpreted
from tritonkit.profile._proton import KernelStats


@triton.jit
def _add(x, y, o, n, B: tl.constexpr):
    off = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + off, tl.load(x + off, mask=off < n) + tl.load(y + off, mask=off < n), mask=off < n)


@triton.jit(launch_metadata=lambda grid, kernel, args: {"bytes": 1})
def _declared(x, B: tl.constexpr):
    tl.store(x + tl.arange(0, B), 1.0)


@triton.jit
def _double_in_place(x, n, B: tl.constexpr):
    off = tl.arange(0, B)
    v = tl.load(x + off, mask=off < n)
    # loops as many times as the first element says: counted work depends on the input values
    for _ in range(tl.load(x).to(tl.int32)):
        v = v * 2.0
    tl.store(x + off, v, mask=off < n)


def _launch(cap, fn, grid, *args, **kw):
    cap.on_launch(fn, args, kw, grid)


def test_one_signature_gives_exact_bytes_and_flops_per_launch():
    cap = LaunchCapture()
    n = 1000
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    for _ in range(3):
        _launch(cap, _add, (4,), x, y, o, n, B=256)
    (c,) = cap.count().values()
    assert (c.kernel, c.launches_seen, c.counted) == ("_add", 3, 3)
    assert c.bytes == 3 * n * 4 and c.requested_bytes == 3 * n * 4
    assert c.flops == {"flops32": 4 * 256}


def test_signatures_are_weighted_by_their_launches():
    cap = LaunchCapture()
    small = [torch.randn(1000) for _ in range(3)]
    big = [torch.randn(2000) for _ in range(3)]
    for _ in range(3):
        _launch(cap, _add, (4,), *small, 1000, B=256)
    _launch(cap, _add, (8,), *big, 2000, B=256)
    (c,) = cap.count().values()
    assert c.counted == 4 and c.bytes == (3 * 12000 + 24000) / 4
    assert c.flops["flops32"] == (3 * 1024 + 2048) / 4


def test_arguments_are_copied_before_the_launch_changes_them():
    cap = LaunchCapture()
    x = torch.full((8,), 3.0)
    _launch(cap, _double_in_place, (1,), x, 8, B=8)
    x.fill_(0.0)  # what the kernel (or the script) does to x afterwards must not change the count
    (c,) = cap.count().values()
    assert c.flops == {"flops32": 3 * 8}  # three doublings of 8 lanes, from the values at launch time


def test_kernels_with_launch_metadata_are_not_captured():
    cap = LaunchCapture()
    _launch(cap, _declared, (1,), torch.zeros(4), B=4)
    assert cap.count() == {}


def test_launches_over_the_limit_say_why_and_are_not_counted():
    cap = LaunchCapture(launch_limit=4096)
    n = 1000  # 3 tensors of 4000 bytes: 12000 bytes
    _launch(cap, _add, (4,), torch.randn(n), torch.randn(n), torch.empty(n), n, B=256)
    (c,) = cap.count().values()
    assert c.counted == 0 and c.bytes is None and "limit" in c.why_not


@triton.jit
def _spin(x):
    while tl.load(x) > 0:
        pass


def test_a_replay_that_does_not_finish_is_reported_not_raised():
    cap = LaunchCapture()
    _launch(cap, _spin, (1,), torch.ones(1))
    (c,) = cap.count(timeout_s=0.5).values()
    assert c.counted == 0 and c.bytes is None and "did not finish" in c.why_not and "timeout" in c.why_not


def test_apply_interpreted_fills_only_kernels_with_no_work_figures():
    ks = [KernelStats(name="_add", scope=(), launches=10, time_ns=1e6),
          KernelStats(name="declared", scope=(), launches=2, time_ns=1e6, bytes=8.0, work_source="launch_metadata")]
    counted = {"_add": {"counted": 3, "bytes": 12000.0, "flops": {"flops32": 1024.0}},
               "declared": {"counted": 1, "bytes": 1.0, "flops": {}}}
    out = apply_interpreted(ks, {name: Counted.from_dict(c) for name, c in counted.items()})
    assert out[0].bytes == 120000.0 and out[0].flops == {32: 10240.0} and out[0].work_source == "interpreter"
    assert out[1] is ks[1] and ks[0].work_source is None  # the input is not modified


def test_apply_interpreted_leaves_uncounted_kernels_alone():
    ks = [KernelStats(name="_add", scope=(), launches=1, time_ns=1e6)]
    counted = {"_add": Counted.from_dict({"counted": 0, "bytes": None, "why_not": "too big"})}
    assert apply_interpreted(ks, counted)[0] is ks[0]


def test_only_the_first_launches_of_a_kernel_are_signed_the_rest_only_counted():
    from tritonkit.profile._interpret import SIGNED_LAUNCHES
    cap = LaunchCapture()
    small = [torch.randn(1000) for _ in range(3)]
    for _ in range(SIGNED_LAUNCHES + 4):
        _launch(cap, _add, (4,), *small, 1000, B=256)
    _launch(cap, _add, (8,), *[torch.randn(2000) for _ in range(3)], 2000, B=256)  # never signed
    (c,) = cap.count().values()
    assert c.launches_seen == SIGNED_LAUNCHES + 5 and c.counted == SIGNED_LAUNCHES and c.bytes == 12000


def test_counted_round_trips_and_reads_malformed_fields_as_nothing_counted():
    c = Counted("_add", launches_seen=20, counted=16, bytes=12000.0, requested_bytes=24000.0,
                flops={"flops32": 1024.0}, why_not="")
    assert Counted.from_dict(c.to_dict()) == c
    bad = Counted.from_dict({"kernel": "_k", "counted": "many", "bytes": "big", "flops": {"flops16": "x", "flops32": 2},
                             "surprise": 1})
    assert bad == Counted("_k", flops={"flops32": 2.0})
    assert Counted.from_dict({}) == Counted("")
    with pytest.raises(TypeError):
        Counted.from_dict(["not", "a", "dict"])
