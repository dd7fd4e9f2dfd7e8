"""Finding kinds: each is declared once, in its own module, and nothing else names it. A new kind is
one module: the example of ``docs/internals.md``, run from the page itself, needs nothing else."""
import ast
import importlib
import io
import os
import pkgutil
import re
import sys
import types

import pytest
import torch
import triton
import triton.language as tl
from rich.console import Console

import tritonkit
from tritonkit.check import CheckReport, checks
from tritonkit.check.checks import base
from tritonkit.report import render_finding

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src", "tritonkit")


def _example_source() -> str:
    """The module of "Adding a check kind" in docs/internals.md."""
    with open(os.path.join(ROOT, "docs", "internals.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index("## Adding a check kind"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def division_check():
    """The example check kind, loaded as ``tritonkit.check.checks.int_division`` (and unloaded after)."""
    name = "tritonkit.check.checks.int_division"
    mod = types.ModuleType(name)
    mod.__package__ = "tritonkit.check.checks"
    sys.modules[name] = mod
    try:
        exec(compile(_example_source(), "docs/internals.md", "exec"), mod.__dict__)
        yield mod.IntDivisionByZero
    finally:
        sys.modules.pop(name, None)
        base.KINDS.pop("int_division_by_zero", None)
        base.CHECKS.pop("int_division_by_zero", None)


@triton.jit
def divide(x_ptr, d_ptr, out_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1)
    d = tl.load(d_ptr + offs, mask=offs < n, other=1)
    tl.store(out_ptr + offs, x // d, mask=offs < n)  # LINE: divide


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_the_documented_example_is_a_whole_new_check_kind(division_check, line_of, engine):
    assert checks.CHECKS["int_division_by_zero"] is division_check
    x = torch.arange(64, dtype=torch.int32)
    d = torch.ones(64, dtype=torch.int32)
    d[[5, 40, 41]] = 0
    out = torch.zeros(64, dtype=torch.int32)
    with tritonkit.checking(checks=["out_of_bounds", "int_division_by_zero"], engine=engine) as s:
        divide[(2,)](x, d, out, 64, B=32)
    (f,) = s.findings
    assert (f.kind, f.kernel, f.line, f.count) == ("int_division_by_zero", "divide", line_of(divide, "divide"), 3)
    assert f.program_ids == [[0], [1]] and f.num_programs == 2
    assert f.hint.startswith("guard the divisor")
    text = io.StringIO()
    Console(file=text, width=120).print(render_finding(f))
    assert "3 with a divisor of 0" in text.getvalue() and "guard the divisor" in text.getvalue()
    again = CheckReport.from_dict(s.to_dict()).findings
    assert [g.to_dict() for g in again] == [f.to_dict()]
    with tritonkit.checking(checks=["int_division_by_zero"], engine=engine) as s:
        divide[(2,)](x, torch.ones(64, dtype=torch.int32), out, 64, B=32)
    assert s.findings == []


def test_every_module_of_the_checks_package_is_loaded_and_its_kinds_registered():
    found = {}
    for m in pkgutil.iter_modules(checks.__path__):
        mod = importlib.import_module(f"tritonkit.check.checks.{m.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, base.FindingKind) and obj.__module__ == mod.__name__ \
                    and "kind" in vars(obj) and obj.kind:
                found[obj.kind] = obj
    assert found and {k: base.KINDS[k] for k in found} == found
    assert set(checks.FINDING_KINDS) == set(found)
    assert set(checks.CHECK_KINDS) == {k for k, c in found.items() if issubclass(c, base.Check)}
    assert list(checks.CHECK_KINDS) == sorted(checks.CHECK_KINDS, key=lambda k: base.CHECKS[k].order)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c.color) and c.title for c in found.values())


def _string_constants(path):
    """String literals of a module that are not docstrings."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            docs.add(id(node.body[0].value))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs}


def test_no_module_but_its_own_names_a_finding_kind():
    """The renderers, the session, the engines and the command line know kinds only through the
    registry: a kind's name is a literal only in the module that declares it."""
    owners = {k: os.path.abspath(sys.modules[c.__module__].__file__) for k, c in base.KINDS.items()}
    named = {}
    for dirpath, _, files in os.walk(SRC):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.abspath(os.path.join(dirpath, name))
            hits = {k for k in _string_constants(path) & set(owners) if owners[k] != path}
            if hits:
                named[os.path.relpath(path, SRC)] = sorted(hits)
    assert named == {}
