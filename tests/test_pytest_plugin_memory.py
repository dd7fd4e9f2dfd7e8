"""``pytest --tritonkit`` keeps no test's memory for the tests after it (issue 40: Liger-Kernel's
``test_cross_entropy.py`` grew by a failed test's tensors at each failure, 7 GiB for its largest).

pytest keeps a failed test's exception in ``sys.last_*`` until the next test's body starts; its
traceback keeps the test's frames, and what they hold, in reference cycles that only a garbage
collection frees. A check session leaves the objects it finds out of the collector's passes while it
runs (``gc.freeze``), so the plugin must forget the failure and collect before the next test's first
session begins: a collection inside a session frees nothing that the session froze."""
import textwrap

import pytest

pytest_plugins = ["pytester"]

KERNEL = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def copy_kernel(x_ptr, out_ptr, n, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


    def copy(x):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), B=64)
        return out
''')

#: tests that each hold 48 MiB (over glibc's mmap threshold: freed, it leaves the process) in a
#: reference cycle, which only a garbage collection frees: from the frame of a test that fails (by an
#: assert, which pytest keeps in ``sys.last_*``, or by ``pytest.fail``, which it does not), or kept by
#: a passing test until the next one replaces it (garbage while that one's session has it frozen); the
#: last test reads what they left
SUITE = textwrap.dedent('''
    import weakref

    import pytest
    import torch

    from kern import copy

    MIB = 48
    KEPT = 7
    FREED = []
    RSS = []
    KEEP = [None]


    def _rss_mib():
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("VmRSS:"))


    def _hold(name):
        RSS.append(_rss_mib())
        big = torch.ones(MIB << 18)  # float32, every page written
        weakref.finalize(big, FREED.append, name)
        held = [big]
        held.append(held)
        x = torch.arange(100.0)
        assert torch.equal(copy(x), x)
        return held


    @pytest.mark.parametrize("i", range(2))
    def test_fails_by_an_assert(i):
        held = _hold(f"assert{i}")
        assert held is None, "fails on purpose"


    @pytest.mark.parametrize("i", range(2))
    def test_fails_by_pytest_fail(i):
        held = _hold(f"fail{i}")
        pytest.fail(f"fails on purpose, holding {len(held)}")


    @pytest.mark.parametrize("i", range(KEPT))
    def test_replaces_what_the_last_one_kept(i):
        KEEP[0] = _hold(f"kept{i}")


    def test_what_the_tests_left_is_freed():
        RSS.append(_rss_mib())
        grew = max(RSS) - RSS[0]
        expected = {"assert0", "assert1", "fail0", "fail1"} | {f"kept{i}" for i in range(KEPT - 2)}
        assert expected <= set(FREED), (sorted(expected - set(FREED)), RSS)
        assert grew < 256 + 3 * MIB, (grew, RSS)  # the margin the plugin allows between collections
''')


def test_what_a_test_leaves_in_reference_cycles_is_freed_before_the_next_ones(pytester):
    pytester.makepyfile(kern=KERNEL, test_suite=SUITE)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tritonkit", "--tb=line", timeout=300)
    out = "\n".join(result.outlines + result.errlines)
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed")) == (8, 4), out
