"""Whether a launch of an instrumented kernel may be *replayed* (:mod:`.instrument`): run again with
its writes skipped, reading memory as the launch left it, so that the accesses it only counted
inside its loops make their records."""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Optional, Set

from .shadows import call_name

#: the accesses of a kernel that are counted at most (inside loops, before a replay): each has a counter
#: cell in the record buffer's header (:mod:`.device`); the others record as outside loops
COUNTED_SITES = 63
_PURE_BUILTINS = {"min", "max", "range", "len", "float", "int", "isinstance", "getattr", "hasattr", "abs"}
#: calls that have an effect a replay must not repeat (other than the writes it skips)
_EFFECTS = {"device_print", "device_assert", "inline_asm_elementwise", "debug_barrier", "print"}


def replayable(fn: ast.FunctionDef, rw, helper_writes=None) -> bool:
    """Whether a launch of the kernel ``fn`` may be run again with its writes skipped (a *replay*,
    which reads memory as the launch left it and makes the records of its counted sites): no
    atomic (a replay could not skip one whose result steers the kernel: a lock), every store
    instrumented (so the replay can skip it), no descriptor access, print or assert, inline
    assembly, and no helper that may do any of these (``helper_writes(name)``: whether the global
    function ``name`` may; None: every helper may). ``rw``: the kernel's rewriter (its ``target``
    tells the stores it instruments)."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        f = node.func
        if isinstance(f, ast.Attribute) and (f.attr.startswith("atomic") or f.attr in _EFFECTS
                                             or (name is None and f.attr in ("store", "scatter", "load", "gather"))):
            return False
        if name == "store" and rw.target(node) is None:
            return False
        if isinstance(f, ast.Name) and f.id not in _PURE_BUILTINS:
            if f.id in _EFFECTS or helper_writes is None or helper_writes(f.id):
                return False
    return True


def helper_writes_of(obj, seen: Optional[Set[int]] = None) -> bool:
    """Whether the global ``obj`` a kernel calls may write or have another effect a replay must
    not repeat: a ``@triton.jit`` helper whose body (or a helper's it calls) does; anything that is
    not a helper (a builtin of Triton's, a constexpr function) is taken as pure only where it is one
    of Triton's own."""
    seen = set() if seen is None else seen
    fn = getattr(obj, "fn", None)
    if fn is None or not hasattr(obj, "arg_names"):  # not a JITFunction
        module = getattr(obj, "__module__", "") or ""
        return not module.startswith("triton.language")
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and (f.attr.startswith("atomic") or f.attr in _EFFECTS
                                             or f.attr in ("store", "scatter")):
            return True
        if isinstance(f, ast.Name) and f.id not in _PURE_BUILTINS and helper_writes_of(fn.__globals__.get(f.id), seen):
            return True
    return False
