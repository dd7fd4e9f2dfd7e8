"""Short, readable names of GPU kernels for tables and charts: mangled C++ names (PyTorch's and
cuBLAS's kernels) become ``function<Arg, Arg>``, long names are cut in the middle. No matplotlib
here, so that the terminal tables use it for free."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .fit import shorten_middle

__all__ = ["LABEL_WIDTH", "short_name"]

#: the default width of a label, characters
LABEL_WIDTH = 40


def _brief_mangled(name: str) -> Optional[Tuple[str, List[str]]]:
    """(function, template-argument entities) of an Itanium-mangled C++ name, by a tolerant scan.

    Not a demangler: it reads source names (``<length><identifier>``), nested names
    (``N ... E``, whose last name is the entity), template arguments (``I ... E``), literals
    (``Li4E``), substitutions (``S0_``, ``St``), template parameters (``T_``), lambdas (``Ul...E_``)
    and local names (``Z ... E``) well enough to name a kernel. None where it cannot.
    """
    if not name.startswith("_Z"):
        return None
    s, i, n = name, 2, len(name)
    stack: List[Dict[str, Any]] = []
    func: Optional[str] = None
    args: List[str] = []
    std_next = False

    def emit(ident: Optional[str], direct_in_z: bool = False) -> None:
        nonlocal func
        if not ident or ident.startswith("_GLOBAL__N"):
            return
        zs = [f for f in stack if f["kind"] == "Z"]
        if any(f["kind"] == "U" for f in stack):  # a lambda's parameter types
            return
        if zs:  # inside a local name: only the enclosing function's own name speaks
            if not direct_in_z or zs[-1]["first"]:
                return
            zs[-1]["first"] = True
        if any(f["kind"] == "I" for f in stack):
            if ident not in args:
                args.append(ident)
        elif func is None:
            func = ident

    steps = 0
    while i < n:
        steps += 1
        if steps > 4 * n:
            return None
        c = s[i]
        if c.isdigit():
            m = re.match(r"\d+", s[i:])
            length = int(m.group())
            i += len(m.group())
            if length <= 0 or i + length > n:
                return None
            ident = s[i:i + length]
            i += length
            if std_next:
                ident, std_next = None, False
            if stack and stack[-1]["kind"] == "N":
                stack[-1]["names"].append(ident)
            else:
                emit(ident, direct_in_z=bool(stack) and stack[-1]["kind"] == "Z")
            if not stack and func is not None and not s.startswith("I", i):
                break
            continue
        if c == "L":
            m = re.match(r"L[a-z]n?\d+E", s[i:])
            if m:
                i += len(m.group())
                continue
            if s.startswith("L_Z", i):
                stack.append({"kind": "L", "names": [], "first": False})
                i += 3
                continue
            i += 1
            continue
        if c == "S":
            if i + 1 < n and s[i + 1] in "tabsiod":
                std_next = s[i + 1] == "t"
                i += 2
                continue
            m = re.match(r"S[0-9A-Z]*_", s[i:])
            if m:
                i += len(m.group())
                if stack and stack[-1]["kind"] == "N":
                    stack[-1]["names"].append(None)
                continue
            i += 1
            continue
        if c == "T":
            m = re.match(r"T\d*_", s[i:])
            i += len(m.group()) if m else 1
            continue
        if c == "U" and s.startswith("Ul", i):
            stack.append({"kind": "U", "names": [], "first": False})
            i += 2
            continue
        if c == "U" and s.startswith("Ut", i):
            m = re.match(r"Ut\d*_", s[i:])
            i += len(m.group()) if m else 2
            continue
        if c in "NIZ":
            stack.append({"kind": c, "names": [], "first": False})
            i += 1
            continue
        if c == "D" and i + 1 < n:
            i += 2
            continue
        if c == "E":
            if not stack:
                break
            frame = stack.pop()
            i += 1
            if frame["kind"] == "N":
                names = frame["names"]
                emit(names[-1] if names else None, direct_in_z=bool(stack) and stack[-1]["kind"] == "Z")
            elif frame["kind"] == "U":
                m = re.match(r"\d*_", s[i:])
                if m:
                    i += len(m.group())
            if not stack and func is not None and not s.startswith("I", i):
                break
            continue
        i += 1  # builtin types, qualifiers, operator names
    return (func, args) if func else None


def _middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis in the middle (the end tells kernels apart):
    :func:`~tritonkit.report.fit.shorten_middle`."""
    return shorten_middle(text, width)


def short_name(name: str, width: int = LABEL_WIDTH) -> str:
    """A kernel's name for a chart label: mangled C++ names become ``function<Arg, Arg>`` (namespaces,
    ``std::`` types, literals and lambda internals dropped), then anything longer than ``width`` is
    cut in the middle with an ellipsis.

    Args:
        name: the kernel's name as the profile records it.
        width: the most characters the label may have (at least 1).

    Returns:
        The label, ``len(label) <= width``.

    Raises:
        ValueError: ``width`` < 1.
    """
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    name = " ".join(str(name).split())
    try:
        brief = _brief_mangled(name)
    except (ValueError, IndexError, AttributeError):
        brief = None
    if brief is None:
        return _middle(name, width)
    func, args = brief
    # template arguments come innermost first (the most specific: MulFunctor before BinaryFunctor)
    choices = [args[:2], args[:1]] if args else [[]]
    for chosen in choices:
        suffix = f"<{', '.join(chosen)}>" if chosen else ""
        if len(func) + len(suffix) <= width:
            return func + suffix
        room = width - len(suffix) - 1
        if room >= 12:
            return func[:room] + "…" + suffix
    return _middle(func + (f"<{', '.join(args[:2])}>" if args else ""), width)
