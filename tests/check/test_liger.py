"""Real Liger-Kernel ops under ``tritonkit.checking()``, on small CPU float32 tensors.

The cases (inputs, the Liger call, an independent float64 PyTorch reference, and which ops run,
fail or cannot run on a CPU) live in ``tests/data/liger_cases.py``, shared with
``benchmarks/liger_coverage.py``; the ``liger`` fixture loads them. Every op runs forward and,
where Liger has one, backward inside a check session. Ops the checked interpreter can run must
make no finding and match the reference. An op it cannot run yet must stop with one clear finding
that points into ``liger_kernel``, raised as :class:`tritonkit.CheckAborted`, never crash; each
carries the cause in ``EXPECTED_FAILURES`` so that the issue that lifts the limit can move it to
``RUNNABLE``. Ops that cannot run on a CPU for reasons outside Triton (``NOT_ON_CPU``) must fail
in Liger's host code with the documented error, after checked launches that made no finding.
"""
from __future__ import annotations

import os
import traceback

import pytest
import torch

import tritonkit

pytest.importorskip("liger_kernel")


@pytest.fixture(autouse=True)
def _liger_on_cpu(liger):
    """Keep Liger on its CPU paths while each test runs (see ``liger_cases.cpu_only``)."""
    with liger.cpu_only():
        yield


# numpy warns about masked-off lanes (-inf - -inf) that the kernels discard.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def test_every_case_is_classified(liger):
    """Each op case is runnable, an expected failure or not runnable on a CPU: exactly one of them."""
    groups = [set(liger.RUNNABLE), set(liger.EXPECTED_FAILURES), set(liger.NOT_ON_CPU)]
    assert sum(len(g) for g in groups) == len(set().union(*groups)), "a case is in two groups"
    assert len(liger.RUNNABLE) == len(set(liger.RUNNABLE))
    assert set().union(*groups) == set(liger.CASES)


def test_liger_op_runs_clean(liger, liger_op):
    """The op runs forward and backward in the checked interpreter with every check on (``nan_inf``
    included: Liger uses other=-inf, atomics, torch.empty outputs and int32 offsets) without a
    finding, and its outputs and gradients match float64 PyTorch."""
    op = liger_op
    case = liger.CASES[op]()
    with tritonkit.checking(nan=True) as session:
        got = case.run_liger()
    assert not session.findings, [f.to_dict() for f in session.findings]
    summary = session.summary()
    assert "nan_inf" in summary["checks"] and "data_race" in summary["checks"]
    assert summary["launches"] > 0 and summary["programs"] > 0 and summary["aborted"] is None
    want = case.run_reference()
    assert sorted(got) == sorted(want)
    for key, ref in want.items():
        torch.testing.assert_close(got[key], ref.to(got[key].dtype), atol=case.atol, rtol=case.rtol,
                                   msg=lambda m, key=key: f"{op} {key}: {m}")


def test_liger_op_not_runnable_yet(liger, liger_failing_op):
    """The op stops with one clear finding in Liger's source (not a crash, not a tritonkit error)."""
    op = liger_failing_op
    case = liger.CASES[op]()
    with pytest.raises(tritonkit.CheckAborted):
        with tritonkit.checking() as session:
            case.run_liger()
    assert session.aborted
    expected = liger.EXPECTED_FAILURES[op]
    assert len(session.findings) == 1, [f.to_dict() for f in session.findings]
    f = session.findings[0]
    assert f.kind == expected.kind, f.to_dict()
    assert os.path.abspath(f.file).startswith(liger.LIGER_DIR + os.sep), f.to_dict()
    assert f.line > 0 and f.source, f.to_dict()
    assert f.call_stack and f.call_stack[0]["function"] == f.kernel
    assert expected.message in f.message, f.message
    assert "raised inside tritonkit" not in f.message


def test_liger_op_not_on_cpu(liger, liger_not_on_cpu_op):
    """Liger's own host code stops the op on a CPU with the documented error (so the entry goes
    when Liger lifts the limit); the launches made before it are checked and clean."""
    op = liger_not_on_cpu_op
    case = liger.CASES[op]()
    expected = liger.NOT_ON_CPU[op]
    with tritonkit.checking() as session:
        with pytest.raises(expected.error, match=expected.message or None) as info:
            case.run_liger()
    assert not session.findings, [f.to_dict() for f in session.findings]
    assert session.aborted is None
    where = traceback.extract_tb(info.value.__traceback__)[-1]
    assert os.path.abspath(where.filename).startswith(liger.LIGER_DIR + os.sep), where

