"""Launches from several Python threads at once (issue 45): each runs whole, one at a time, its
findings and record its own; none raises tritonkit's internal error in its thread."""
import threading

import torch
import triton
import triton.language as tl

from tritonkit.check import checking


@triton.jit
def _racy_copy(x_ptr, out_ptr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))  # no mask: 100 elements, 2 x 64 lanes


@triton.autotune(configs=[triton.Config({"B": 32}), triton.Config({"B": 64})], key=["n"])
@triton.jit
def _tuned_copy(x_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_launches_from_several_threads_at_once_are_each_checked():
    errors, start = [], threading.Barrier(4)

    def work(i):
        try:
            start.wait()
            for _ in range(3):
                x, out = torch.randn(100), torch.zeros(100)
                _racy_copy[(2,)](x, out, B=64)
                n = 50 + i  # a key of its own: every config checked in this thread
                _tuned_copy[lambda meta: (triton.cdiv(n, meta["B"]),)](torch.randn(n), torch.zeros(n), n)
        except BaseException as e:  # noqa: B036 - what a thread raises is the test's failure
            errors.append(e)

    with checking(workers=1) as session:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    found = {(f.kind, f.arg): f for f in session.findings}
    assert set(found) == {("out_of_bounds", "x_ptr"), ("out_of_bounds", "out_ptr")}
    assert all(f.launches == 12 and f.kernel == "_racy_copy" for f in found.values())
    plain = [r for r in session.launches if r.kernel == "_racy_copy"]
    assert len(plain) == 12 and all(r.status == "ok" and r.programs == 2 for r in plain)
    # each thread's key under both configs once, then its two later launches under the kept one
    assert sum(r.kernel == "_tuned_copy" for r in session.launches) == 4 * (2 + 2)
