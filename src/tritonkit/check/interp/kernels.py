"""Kernel source as the interpreter runs it: the rewritten bodies of ``@triton.jit`` functions, and
the kernel's frames on the Python stack.

:func:`rewritten` gives the interpretable version of a jitted function (Triton's own AST rewrite
with ``min``/``max`` as Triton's compiler has them, or with ``simt=True`` the batched engine's, see
:mod:`.simt`), cached, and remembers its code
object, so that :func:`kernel_frames` can tell the user's kernel lines apart from the interpreter's
and place a finding on the line that made it.
"""
from __future__ import annotations

import ast
import os
import sys
import threading
from typing import Any, Dict, List

import triton
from triton.runtime import interpreter as _interp

from ..findings import Frame

#: code objects of the rewritten (interpretable) jitted functions -> their names
KERNEL_CODES: Dict[Any, str] = {}
_REWRITTEN: Dict[Any, Any] = {}
#: held while a launch runs: launches (and the rewrite cache) are one at a time
LOCK = threading.RLock()
#: Triton's own builder: what its rewriter may copy into a kernel module's globals (it copies every
#: name of its interpreter module a module lacks, the builder of the moment included, and a launch's
#: builder left there would keep the launch, its frames and its tensors alive for good)
TRITONS_BUILDER = _interp.interpreter_builder
_TRITON_DIR = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep


def rewritten(pyfn, simt: bool = False):
    """The interpretable version of a ``@triton.jit`` function's Python body ``pyfn`` (cached in
    memory, and its code on disk: see :mod:`.disk_cache`).

    Uses Triton's own AST rewriter, with ``min``/``max`` of kernel values as Triton's compiler runs
    them (:func:`.simt.builtin_minmax`; ``simt``: then the loops made runnable over a batch of programs
    whose trip counts differ, for the batched engine, see :mod:`.simt`), and remembers the code
    object so that findings can be placed on kernel lines by walking the Python stack.
    """
    fn = _REWRITTEN.get((pyfn, simt))
    if fn is None:
        from . import disk_cache
        key = disk_cache.code_key(pyfn, "simt" if simt else "triton")
        code = disk_cache.load_code(key)
        builder, _interp.interpreter_builder = _interp.interpreter_builder, TRITONS_BUILDER
        try:
            if code is not None:
                fn = _exec_module(pyfn, code)
            else:
                from .rewrite import SimtRewriter, TritonRewriter
                rewriter = (SimtRewriter if simt else TritonRewriter)(pyfn)
                compiled = []

                def compile_and_exec(tree):
                    compiled.append(compile(_with_closure(pyfn, tree), filename=rewriter.filename, mode="exec"))
                    return _exec_module(pyfn, compiled[0])
                rewriter._compile_and_exec = compile_and_exec
                fn = rewriter.rewrite_ast()
                if compiled and fn is not pyfn:
                    disk_cache.store_code(key, compiled[0])
        finally:
            _interp.interpreter_builder = builder
        _REWRITTEN[(pyfn, simt)] = fn
        KERNEL_CODES[fn.__code__] = pyfn.__name__
    return fn


def _exec_module(pyfn, code):
    """Run a rewritten function's compiled module ``code`` as Triton's rewriter runs it (in the
    function's globals, after adding its interpreter module's names that they lack, and the runtime
    of :mod:`.simt`) and return the new function."""
    fn_globals = pyfn.__globals__
    from . import simt as simt_module  # the runtime of both rewrites (``min``/``max``; loops: simt)
    fn_globals.setdefault(simt_module._MODULE, simt_module)
    for name, value in vars(_interp).items():
        if name not in fn_globals:
            fn_globals[name] = value
    namespace: Dict[str, Any] = {}
    exec(code, fn_globals, namespace)
    factory = namespace.get(_CLOSURE)
    if factory is not None:  # the function's free variables, as its closure holds them now
        return factory(*(_cell_value(c) for c in pyfn.__closure__ or ()))
    return namespace[pyfn.__name__]


#: the function that a rewritten nested function is made in (see :func:`_with_closure`)
_CLOSURE = "_tk_closure"


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a free variable not bound yet: unbound in the rewrite too (None stands for it)
        return None


def _with_closure(pyfn, tree: ast.Module) -> ast.Module:
    """The rewritten module ``tree`` of a function with free variables (a ``@triton.jit`` function
    defined inside another, using that one's variables, which Triton's compiler reads from its
    closure) made the body of a function :data:`_CLOSURE` taking those variables and returning it:
    the rewrite is executed in the module's globals, where they are not. Other trees are returned
    as they are."""
    free = pyfn.__code__.co_freevars
    if not free or not tree.body:
        return tree
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in free], vararg=None, kwonlyargs=[],
                         kw_defaults=[], kwarg=None, defaults=[])
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    factory = ast.FunctionDef(name=_CLOSURE, args=args, decorator_list=[], returns=None, **extra,
                              body=tree.body + [ast.Return(value=ast.Name(id=pyfn.__name__, ctx=ast.Load()))])
    ast.copy_location(factory, tree.body[0])
    tree.body = [factory]
    return ast.fix_missing_locations(tree)


def user_code(code) -> bool:
    """Whether ``code`` is a jitted function of the user's (not one of triton.language's own, such
    as ``tl.sum``'s combine function)."""
    return code in KERNEL_CODES and not code.co_filename.startswith(_TRITON_DIR)


def kernel_frames(frame=None, stop=None) -> List[Frame]:
    """Kernel source frames on the current stack, innermost first (triton.language's own jitted
    helpers such as ``tl.sum`` are left out: a finding belongs on the user's line that called them).
    The walk starts at ``frame`` (default: the caller's) and ends at ``stop`` (the frame that
    started the launch: nothing above it is kernel code)."""
    out = []
    f = frame or sys._getframe(1)
    while f is not None and f is not stop:
        if user_code(f.f_code):
            out.append(Frame(f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return out


def kernel_frame(frame):
    """The innermost kernel (or jitted helper) frame at or above ``frame``, or None."""
    while frame is not None and not user_code(frame.f_code):
        frame = frame.f_back
    return frame


def traceback_frames(tb) -> List[Frame]:
    """The kernel frames of a traceback, innermost first."""
    out = []
    while tb is not None:
        if user_code(tb.tb_frame.f_code):
            out.append(Frame(tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    return out[::-1]


def innermost_kernel_frame(tb):
    """The innermost kernel frame object of a traceback (for pdb), or None."""
    last = None
    while tb is not None:
        if user_code(tb.tb_frame.f_code):
            last = tb.tb_frame
        tb = tb.tb_next
    return last


def innermost_file(tb) -> str:
    """The file of a traceback's innermost frame ("" for none)."""
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last.tb_frame.f_code.co_filename if last is not None else ""
