"""Triton builtins called by a name the language patches never see.

Triton's interpreter (and tritonkit's, :func:`tritonkit.check.triton_hooks.patched_language`) patches
the builtins of ``triton.language``, ``triton.language.math`` and the CUDA ``libdevice`` module as
module attributes: ``tl.math.exp(x)`` or ``libdevice.pow(x, y)`` then reach the interpreter's
semantic. A builtin bound to another name is the unpatched function: a module global
(``_pow = libdevice.pow``), an alias (``from triton.language.extra.cuda.libdevice import finitef as
_isfinite``, ``from triton.language import where``), a closure's cell, an attribute of an object.
Called from a kernel without ``_semantic``, it raises Triton's ``ValueError: Did you forget to add
@triton.jit ?``, though the compiler resolves it like any other builtin.

:func:`interpreted_codes` gives, for each builtin of those modules, a code object to put in place
of its own while a launch runs (and to put back after): the same call when a ``_semantic`` is given,
the interpreter's semantic when none is (:func:`call_interpreted`). Patching the function object
rather than a binding covers every name it is reached by.
"""
from __future__ import annotations

from typing import Iterable, List, Tuple

import triton.language as tl
from triton.runtime import interpreter as _interp


def _template():
    fn = None  # the builtin's own function, as in ``triton.language.core.builtin``'s wrapper

    def wrapper(*args, **kwargs):
        if kwargs.get("_semantic") is None:  # reached by a name the language patches did not set
            from tritonkit.check.interp.builtins import call_interpreted
            return call_interpreted(fn, args, kwargs)
        return fn(*args, **kwargs)
    return wrapper


#: the code that stands in for a builtin wrapper's while a launch runs (its one free variable ``fn``)
INTERPRETED_CODE = _template().__code__
#: the code of ``triton.language.core.builtin``'s wrapper, shared by every builtin it made
_BUILTIN_CODE = tl.core.builtin(lambda _semantic=None: None).__code__
#: the function a builtin wraps -> the builtin, for those :func:`interpreted_codes` gave
_BUILTIN_OF: dict = {}
#: this file: a kernel's error raised in its frames (a builtin called with the wrong arguments) is the
#: kernel's, as it is raised in Triton's wrapper when the builtin is called by its module's name
FILE = _template.__code__.co_filename


def call_interpreted(fn, args: tuple, kwargs: dict):
    """Call the Triton builtin that wraps ``fn`` with the interpreter's semantic (and its recipes
    under the batched engine, as :func:`tritonkit.check.triton_hooks._wrapper` does).

    Returns what the builtin returns; raises what Triton's front end or the builder raises for
    the call."""
    kwargs.pop("_semantic", None)
    sem = _interp.interpreter_semantic
    member = _BUILTIN_OF.get(fn, fn)  # the builtin itself: the key of its recipes under any name
    if getattr(sem.builder, "replays", False):
        from . import recipes
        return recipes.call(member, args, kwargs, sem)
    return member(*args, **kwargs, _semantic=sem)


def interpreted_codes(modules: Iterable[object]) -> List[Tuple[object, str, object]]:
    """``(function, "__code__", code)`` for every builtin among the members of ``modules`` (modules
    or classes) that ``triton.language.core.builtin`` made, once each: what to set while a launch
    runs so that the builtin runs in the interpreter by whatever name it is called. A builtin made
    another way (its code is not the builtin wrapper's) is left out: its module attribute's patch
    is all it gets. Raises nothing."""
    if _BUILTIN_CODE.co_freevars != INTERPRETED_CODE.co_freevars:  # pragma: no cover - another Triton
        return []
    out, seen = [], set()
    for module in modules:
        if module is None:
            continue
        for member in list(vars(module).values()):
            if getattr(member, "__code__", None) is _BUILTIN_CODE and id(member) not in seen \
                    and tl.core.is_builtin(member):
                seen.add(id(member))
                out.append((member, "__code__", INTERPRETED_CODE))
                if member.__closure__:
                    _BUILTIN_OF[member.__closure__[0].cell_contents] = member
    return out
