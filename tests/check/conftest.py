"""Fixtures the check tests share: the line of a kernel's marker comment, a small kernel several
engines' tests launch, the example scripts' markers, seeded inputs, and the Liger-Kernel cases
(``tests/data/liger_cases.py``, also read by ``benchmarks/liger_coverage.py``)."""
import importlib.util
import inspect
import os
import sys
import re

import pytest
import torch
import triton
import triton.language as tl

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
_MARKER = re.compile(r"#\s*(BUG|REPORTED):\s*(\w+(?:\s*,\s*\w+)*)")


def _kernel_line(kernel, marker: str) -> int:
    """The 1-based file line of ``kernel``'s (a ``@triton.jit`` function's) source line that carries
    ``# LINE: marker``.

    Raises:
        StopIteration: no line of the kernel carries the marker.
    """
    src, start = inspect.getsourcelines(kernel.fn)
    return start + next(i for i, text in enumerate(src) if f"# LINE: {marker}" in text)


@pytest.fixture
def line_of():
    """``line_of(kernel, marker)``: the 1-based file line of the ``@triton.jit`` function ``kernel``'s
    source line that carries ``# LINE: marker``."""
    return _kernel_line


@triton.jit
def shifted_copy(x_ptr, out_ptr, n, SHIFT: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    v = tl.load(x_ptr + offs - SHIFT, mask=offs < n)  # LINE: shifted_copy.load
    tl.store(out_ptr + offs, v, mask=offs < n)


@pytest.fixture(name="shifted_copy")
def _shifted_copy_kernel():
    """A kernel copying ``x[offs - SHIFT]`` to ``out[offs]`` (masked by ``offs < n`` only): with
    ``SHIFT=-1`` in place, each program reads the first element of the next program's block."""
    return shifted_copy


def _marked_lines(module, tag, bug):
    """1-based lines of ``module``'s source with a ``# TAG: ...bug...`` marker comment."""
    lines = []
    with open(module.__file__) as fh:
        for number, text in enumerate(fh, 1):
            for m in _MARKER.finditer(text):
                if m.group(1) == tag and bug in [b.strip() for b in m.group(2).split(",")]:
                    lines.append(number)
    assert lines, f"no '# {tag}: {bug}' marker in {module.__file__}"
    return lines


@pytest.fixture
def marked_lines():
    """``marked_lines(module, tag, bug)``: the lines of an example script marked ``# TAG: bug``
    (``BUG`` where the bug is, ``REPORTED`` where tritonkit reports it)."""
    return _marked_lines


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture
def randn():
    """``randn(*shape, seed=0, dtype=torch.float32)``: normal values from a seeded generator."""
    return _randn


def _liger_cases():
    """The Liger-Kernel cases module (None where liger_kernel is not installed)."""
    if importlib.util.find_spec("liger_kernel") is None:
        return None
    spec = importlib.util.spec_from_file_location("liger_cases", os.path.join(DATA, "liger_cases.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up while it runs
    spec.loader.exec_module(mod)
    return mod


_LIGER = _liger_cases()


@pytest.fixture
def liger():
    """The Liger-Kernel cases (``tests/data/liger_cases.py``: ``CASES``, ``RUNNABLE``, ``NOT_ON_CPU``,
    ``cpu_only``, ``LIGER_DIR``); skips where liger_kernel is not installed."""
    if _LIGER is None:
        pytest.skip("liger_kernel is not installed")
    return _LIGER


_LIGER_GROUPS = {"liger_op": "RUNNABLE", "liger_failing_op": "EXPECTED_FAILURES", "liger_not_on_cpu_op": "NOT_ON_CPU"}


def pytest_generate_tests(metafunc):
    """``liger_op``: every Liger op the checked interpreter runs (``RUNNABLE``); ``liger_failing_op``:
    those that stop with a finding (``EXPECTED_FAILURES``); ``liger_not_on_cpu_op``: those whose host
    code needs a GPU (``NOT_ON_CPU``)."""
    for name, group in _LIGER_GROUPS.items():
        if name in metafunc.fixturenames:
            ops = getattr(_LIGER, group) if _LIGER is not None else []
            metafunc.parametrize(name, list(ops) if group == "RUNNABLE" else sorted(ops))
