"""Triton's language as the checked interpreter runs it: what tritonkit patches in ``triton.language``
while a launch runs, and what it computes in place of Triton's interpreter.

* :class:`patched_language` — Triton's own interpreter patches of ``triton.language`` with a
  tritonkit builder underneath, restored on exit; plus tritonkit's own: ``bool``/``index`` of kernel
  values under the batched engine, ``np.asarray`` of kernel tensors (pdb), builtins an earlier plain
  interpreter launch left stale;
* ``tl.reduce`` / ``tl.associative_scan`` with bf16/fp16/fp8 inputs computed on exact fp32 copies
  and rounded once (numpy would add raw bf16 bits), batched where the inputs are, shown to the
  checks' ``reduce`` hooks;
* ``tl.static_print`` / ``tl.static_assert`` once per specialization and call site, as at compile
  time (a failed ``static_assert`` is an ``assert_failed`` finding, unless an autotuner is trying
  configs: see :data:`autotuning`).
"""
from __future__ import annotations

import contextvars
import importlib
import inspect
import sys
import warnings
from typing import Dict, List, Tuple

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from .checks.asserts import AssertFailed
from .errors import StaticAssertFailed
from .findings import Violation
from .interp import batched_ops, recipes, taint
from .interp.batched_ops import BatchedReduce, BatchedScan, is_batched
from .interp.builder import interp_np_dtype
from .interp.builtins import interpreted_codes
from .interp.kernels import kernel_frames
from .interp.numerics import BITS_TYPES, from_float, to_float, values

#: True while an autotuner tries its configs (a config that fails a static_assert is skipped there)
autotuning: "contextvars.ContextVar[bool]" = contextvars.ContextVar("tritonkit_autotuning", default=False)


def _tensor_array(self, dtype=None, copy=None):
    data = values(self.handle.data, self.dtype)
    return data if dtype is None else data.astype(dtype)


def _unstale(scope) -> None:
    """Put back, for this scope, Triton builtins that an earlier plain-interpreter launch left
    patched (Triton 3.6 does not restore ``triton.language.core`` after kernels that call jitted
    functions such as ``tl.max``): the stale wrapper is bound to that launch's builder, and
    re-patching skips what is no longer a builtin. Triton's wrapper keeps the original as its
    ``member`` keyword default."""
    for pkg in (tl, tl.core, tl.math, tl.tensor):
        for name, member in list(vars(pkg).items()):
            if getattr(member, "__name__", "") != "<lambda>" or getattr(member, "__module__", "") != _interp.__name__:
                continue
            original = (getattr(member, "__kwdefaults__", None) or {}).get("member")
            if original is not None and tl.core.is_builtin(original):
                scope.set_attr(pkg, name, original)


def _reload_imported_while_patched(before: frozenset) -> None:
    """Execute again, in import order, the Triton modules first imported inside a patched scope
    (``before``: the modules imported when it began), now that it is restored.

    Triton's code generator binds ``min``, ``max`` and ``print`` to ``triton.language.core``
    functions when it is imported (Gluon's modules bind others), and Triton imports it lazily: the
    first ``mangle_type`` does. Imported inside a patched scope it would keep the interpreter's
    wrappers for good, and every later native compile of a kernel calling ``min(...)`` would fail
    (Liger-Kernel's RMSNorm backward under ``outputs="gpu"``). tritonkit types arguments itself
    (:func:`~tritonkit.check.launch.arguments.type_name`) so as not to pay for that import (about
    0.045 s in a fresh process); this is the net for whatever else imports Triton modules while a
    launch runs. A reload rebinds a module's names in place, so functions other modules imported
    from it see the new ones."""
    for name in [n for n in list(sys.modules) if n.startswith("triton.") and n not in before]:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__spec__", None) is not None:
            importlib.reload(module)


#: per module patched: ``(module, [(name, the interpreter's wrapper of the builtin)])``, made once per
#: process (``inspect.getmembers`` of seven modules on every launch took most of a small launch's
#: time: 4 of 6 ms for a vector add of 4 programs); emptied when Triton modules are reloaded
_WRAPPERS: Dict[int, Tuple[object, List[Tuple[str, object]]]] = {}
#: every ``(object, name, value)`` the first patching in this process set (:func:`_patch`), set
#: again by later launches in one loop (0.5 ms of a small launch went to patching attribute by
#: attribute); emptied with :data:`_WRAPPERS` when Triton modules are reloaded
_PLAN: List[Tuple[object, str, object]] = []
_PLAN_KEY: list = [None]  # the modules the plan was made for (see _plan_key)


def _plan_key() -> tuple:
    """The modules and classes :func:`_patch` patches, by identity: a plan made for others (a module
    reloaded, CUDA's libdevice importable only later) is made again."""
    return tuple(id(m) for m in (tl, tl.core, tl.math, tl.tensor, tl.core.tensor, tl.core.tensor_descriptor_base,
                                 _cuda_libdevice()))


class _Scope(_interp._LangPatchScope):
    """Triton's ``_LangPatchScope`` (attributes set, and put back by ``restore``), that can also
    write down what it sets (``plan``) and set a written-down plan again (:meth:`apply`)."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = None

    def set_attr(self, obj, name: str, value) -> None:
        super().set_attr(obj, name, value)
        if self.plan is not None:
            self.plan.append((obj, name, value))

    def apply(self, plan) -> None:
        """Set every ``(object, name, value)`` of ``plan``, as ``set_attr`` would, in one loop."""
        changes, missing = self._changes, _interp._MISSING
        for obj, name, value in plan:
            changes.append((obj, name, getattr(obj, name, missing)))
            setattr(obj, name, value)


#: the patched scopes entered and not yet exited (a launch's, and its engine's within it)
_ENTERED: list = []


def _wrapper(member):
    """What Triton's interpreter puts in place of the builtin ``member``: a call with the
    interpreter's semantic (whose builder each scope sets), whatever ``_semantic`` the caller gave.
    Triton 3.9's own wrapper does this; Triton 3.6's binds the builder it was made with, so it could
    not be kept from one launch (and one builder) to the next."""
    def interpreted(*args, **kwargs):
        kwargs.pop("_semantic", None)
        sem = _interp.interpreter_semantic
        if getattr(sem.builder, "replays", False):
            return recipes.call(member, args, kwargs, sem)
        return member(*args, **kwargs, _semantic=sem)
    interpreted.__name__ = getattr(member, "__name__", "interpreted")
    interpreted.__doc__ = getattr(member, "__doc__", None)
    return interpreted


def _patch_builtins(pkg, scope) -> None:
    """Triton's ``_patch_builtin(pkg, builder, scope)``: each builtin of ``pkg`` replaced by the
    interpreter's wrapper (:func:`_wrapper`), from wrappers made once per process."""
    got = _WRAPPERS.get(id(pkg))
    if got is None or got[0] is not pkg:
        wrapped = [(name, _wrapper(member)) for name, member in inspect.getmembers(pkg) if tl.core.is_builtin(member)]
        got = _WRAPPERS[id(pkg)] = (pkg, wrapped)
    for name, wrapper in got[1]:
        scope.set_attr(pkg, name, wrapper)


def _patch(scope) -> None:
    """Patch Triton's language for interpretation (Triton's own interpreter patches, tritonkit's
    builtin wrappers and its own replacements) through ``scope``."""
    # the builtins themselves, for the names no module patch reaches (``_pow = libdevice.pow``)
    for fn, name, code in interpreted_codes((tl, tl.core, tl.math, tl.core.tensor_descriptor_base, _cuda_libdevice())):
        scope.set_attr(fn, name, code)
    for lang in (tl, tl.core):
        _patch_builtins(lang, scope)
        _patch_builtins(lang.tensor, scope)
        if lang is tl:
            _patch_builtins(lang.math, scope)
        _interp._patch_lang_tensor(lang.tensor, scope)
        _interp._patch_lang_core(lang, scope)
        # Triton < 3.7 converts with int(array of shape (1,)), which NumPy >= 2.4 refuses; under the
        # batched engine a value that differs between programs splits the batch (see _batched)
        scope.set_attr(lang.tensor, "__index__", batched_ops.tensor_index)
        scope.set_attr(lang.tensor, "__bool__", batched_ops.tensor_bool)
        scope.set_attr(lang.tensor, "T", property(batched_ops.tensor_transpose))
        # np.asarray(x) of a kernel tensor is its values (in pdb, in device-side debugging)
        scope.set_attr(lang.tensor, "__array__", _tensor_array)
    sem = _interp.interpreter_semantic  # one object for the process; each scope sets its builder
    for name in ("load", "store"):
        scope.set_attr(sem, name, batched_ops.front_end_call(sem, name))
    _patch_builtins(tl.core.tensor_descriptor_base, scope)
    cuda_libdevice = _cuda_libdevice()
    if cuda_libdevice is not None:  # called directly: tl.extra.cuda.libdevice.tanh(x)
        _patch_builtins(cuda_libdevice, scope)
    for lang in (tl, tl.core):
        scope.set_attr(lang, "reduce", _reduce)
        scope.set_attr(lang, "associative_scan", _scan)
    for lang in (tl, tl.core):
        scope.set_attr(lang, "static_print", _static_print)
        scope.set_attr(lang, "static_assert", _static_assert)
    taint.install(scope)
    scope.set_attr(_interp.TensorHandle, "bat", False)  # values with a program axis (batched engine)
    scope.set_attr(_interp.TensorHandle, "fmul", None)  # a product's (lhs, rhs): fma contraction
    scope.set_attr(_interp, "_get_np_dtype", interp_np_dtype)


class patched_language:
    """Triton's language patched for interpretation, with ``builder`` (a
    :class:`~tritonkit.check.interp.builder.CheckedBuilder`) underneath, for a ``with`` block.
    Within another such block (a launch's engine within the launch) only the builder changes: the
    patches are the same."""

    def __init__(self, builder):
        self.builder = builder
        self.nested = False

    def __enter__(self):
        if _ENTERED:
            self.nested = True
            return self._use_builder()
        self.modules = len(sys.modules)
        self.imported = frozenset(sys.modules)
        scope = _Scope()
        _unstale(scope)
        key = _plan_key()
        if _PLAN and _PLAN_KEY[0] == key:
            scope.apply(_PLAN)
        else:  # the first launch, or a module patched then is no longer the one imported
            scope.plan = []
            _patch(scope)
            _PLAN[:] = scope.plan
            _PLAN_KEY[0] = key
            scope.plan = None
        self.errstate = np.errstate(all="ignore")  # the GPU raises no floating-point exceptions
        self.errstate.__enter__()
        self.scope = scope
        return self._use_builder()

    def _use_builder(self) -> "patched_language":
        sem = _interp.interpreter_semantic
        self.saved = (sem.builder, _interp.interpreter_builder)
        sem.builder = self.builder
        _interp.interpreter_builder = self.builder
        _ENTERED.append(self)
        return self

    def __exit__(self, *exc):
        _ENTERED.pop()
        sem = _interp.interpreter_semantic
        sem.builder, _interp.interpreter_builder = self.saved
        if self.nested:
            return False
        self.scope.restore()
        self.errstate.__exit__(*exc)
        if len(sys.modules) != self.modules:
            _reload_imported_while_patched(self.imported)
            _WRAPPERS.clear()  # the reloaded modules' builtins are new objects
            _PLAN.clear()
        return False


def _cuda_libdevice():
    try:
        from triton.language.extra.cuda import libdevice
    except ImportError:  # pragma: no cover
        return None
    return libdevice


# --- reductions and scans of 16- and 8-bit floats ---------------------------------------------------
_LOW_FLOATS = BITS_TYPES | {"fp16"}


_FAST_COMBINE_NAMES = ("_sum_combine", "_prod_combine", "_elementwise_max", "_elementwise_min",
                       "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast",
                       "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast")
# triton.language.standard's combine functions that Triton's ReduceOps/ScanOps compute with numpy
_FAST_COMBINES = tuple(getattr(tl.standard, n) for n in _FAST_COMBINE_NAMES if hasattr(tl.standard, n))
_SUM_COMBINE = getattr(tl.standard, "_sum_combine", None)


def _widen(t):
    """A tl.tensor of bf16/fp16/fp8 values as an fp32 tensor (exact)."""
    if not isinstance(t, tl.tensor) or t.dtype.name not in _LOW_FLOATS:
        return t
    data = to_float(np.asarray(t.handle.data), t.dtype)
    ty = tl.block_type(tl.float32, list(t.type.shape)) if t.type.is_block() else tl.float32
    h = _interp.TensorHandle(data, tl.float32)
    h.bat = is_batched(t.handle)
    return tl.tensor(h, ty)


def _narrow(t, like):
    """An fp32 result of a widened reduction rounded back to the input's type."""
    if not isinstance(t, tl.tensor) or t.dtype != tl.float32:
        return t
    dt = like.dtype
    data = from_float(np.asarray(t.handle.data), dt)
    ty = tl.block_type(dt, list(t.type.shape)) if t.type.is_block() else dt
    h = _interp.TensorHandle(data, dt)
    h.bat = is_batched(t.handle)
    return tl.tensor(h, ty)


def _widened(op, input):
    """Run a reduce/scan op; the built-in combines (sum, max, argmax, ...) of bf16/fp16/fp8 values run
    on exact fp32 copies and round once at the end (numpy would otherwise add raw bf16 bits). The
    FLOPs of a float sum are counted, the operands' undefined/uninitialized lane taints are carried
    to the results (:func:`~tritonkit.check.interp.taint.through_reduce`), and the result is shown
    to the checks' ``reduce`` hooks."""
    items = input if isinstance(input, tuple) else (input,)
    with warnings.catch_warnings():  # nanmax of an all-NaN (poisoned) row: the GPU says nothing either
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _reduce_or_scan(op, input, items)
    launch = current_launch()
    if launch is None:
        return res
    if op.combine_fn is _SUM_COMBINE and isinstance(items[0], tl.tensor) \
            and items[0].dtype.is_floating():  # a float sum: one add per element (custom combines count their ops)
        launch.count_flops(int(np.size(items[0].handle.data)), items[0].dtype, (items[0].handle,))
    if any(getattr(getattr(t, "handle", None), "tainted", False) for t in items):
        batch = launch.batch
        taint.through_reduce(op, res if isinstance(res, tuple) else (res,), items,
                             1 if batch is None else int(batch.pids.shape[0]))
    if launch.hooks.reduce:
        what = "reduction" if isinstance(op, _interp.ReduceOps) else "scan"
        fn_name = getattr(getattr(op.combine_fn, "fn", op.combine_fn), "__name__", "reduction")
        name = fn_name.strip("_").replace("_combine", "").replace("elementwise_", "")  # _sum_combine -> sum
        outs = res if isinstance(res, tuple) else (res,)
        for hook in launch.hooks.reduce:
            hook(launch, what, name, outs, items)
    return res


def _reduce_or_scan(op, input, items):
    """Run a reduce/scan op, with 16- and 8-bit floats widened for the built-in combines."""
    first = items[0]
    if op.combine_fn not in _FAST_COMBINES or not isinstance(first, tl.tensor) or \
            first.dtype.name not in _LOW_FLOATS:
        return op.apply(input)
    res = op.apply(tuple(_widen(t) for t in items))
    out = tuple(_narrow(r, first) for r in res)
    return out if isinstance(input, tuple) else out[0]


def _reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
    return _widened(BatchedReduce(axis, combine_fn, keep_dims), input)


def _scan(input, axis, combine_fn, reverse=False, **kwargs):
    return _widened(BatchedScan(axis, combine_fn, reverse), input)


# --- compile-time debug operations: once per specialization and call site ---------------------------
def current_launch():
    """The launch whose builder is under the language now (a :class:`~tritonkit.check.launch.Launch`),
    or None outside a checked launch."""
    return getattr(_interp.interpreter_semantic.builder, "launch", None)


def _site_key(site_frame):
    """(specialization, call site) of a static_print/static_assert call, or None outside a launch."""
    launch = current_launch()
    if launch is None:
        return None, None
    frames = kernel_frames(site_frame)
    site = (frames[0].file, frames[0].line) if frames else (site_frame.f_code.co_filename, site_frame.f_lineno)
    return launch.session.static_sites, (launch.spec_key, site)


def _first_time(site_frame) -> bool:
    """Whether this static_print call site runs for the first time in this specialization."""
    seen, key = _site_key(site_frame)
    if seen is None:
        return True
    if key in seen:
        return False
    seen.add(key)
    return True


def _compile_time_value(v):
    """What ``print`` shows of a value at compile time: a tensor's type and shape, a constexpr's value."""
    if isinstance(v, tl.tensor):
        return f"{v.dtype}[{', '.join(str(int(s)) for s in v.shape)}]"
    if isinstance(v, tl.constexpr):
        return v.value
    return v


def _static_print(*values, sep=" ", end="\n", file=None, flush=False):
    if _first_time(sys._getframe(1)):
        print(*(_compile_time_value(v) for v in values), sep=sep, end=end, file=file, flush=flush)


def _static_assert(cond, msg="", *args, **kwargs):
    seen, key = _site_key(sys._getframe(1))
    if seen is not None and key in seen:  # held already for this specialization: a compile-time fact
        return
    value = cond.value if isinstance(cond, tl.constexpr) else cond
    if isinstance(value, tl.tensor):
        value = bool(np.asarray(value.handle.data).all())
    if value:
        if seen is not None:
            seen.add(key)
        return
    msg = msg.value if isinstance(msg, tl.constexpr) else msg
    launch = current_launch()
    text = f"static_assert failed: {msg}" if msg else "static_assert failed"
    if launch is not None and not autotuning.get():
        launch.report(Violation(kind=AssertFailed.kind, kernel=launch.kernel, frames=kernel_frames(sys._getframe(1)),
                                program_id=launch.program_id(), access="static_assert", masked=False, lanes=0,
                                message=text))
    raise StaticAssertFailed(text)


