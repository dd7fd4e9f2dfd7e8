"""Recipes: Triton's front end run once per kind of call, its builder calls replayed after that.

Every ``triton.language`` builtin the kernel calls (``tl.load``, ``a * b``, ``tl.dot``, ...) runs
Triton's front end (``triton.language.semantic``: type checks, promotion, broadcasting of block
types) before it reaches the builder that computes. What the front end asks of the builder depends
only on the *types* of the tensors it is given and on the other arguments' values, never on the
tensors' data (it was written for MLIR, whose values it cannot read). So the first call of a
builtin with given argument types and values records the builder calls it made (a :class:`Recipe`:
each call's method, its constant arguments, which earlier value each handle argument was, and the
result's Triton type); a later call with the same key calls the same builder methods on its own
handles and wraps the result the same way. The builder underneath (its computing, checks, taints,
counts) runs exactly as before: only Triton's type logic is skipped, so findings, outputs and counts
cannot differ.

Measured on the CPU machine (Intel Xeon VM, 2 cores, Triton 3.9, 2026-11-26): a warm launch of a
4-program vector add 2.4-3.5 -> 1.8 ms and of an 8-row layer norm 3.6-4.5 -> 2.9 ms (with the
patching and builder changes of the same commit); causal attention 8x512x64 made 124,000 Python
calls instead of 235,000, but its time moved by less than the machine's noise (it is bound by numpy).

A call is recorded only where that reasoning holds; otherwise the front end runs every time:

* arguments other than tensors, dtypes, constexprs, Python scalars, strings, ``None`` and tuples,
  lists or slices of them (a function, a descriptor) make the call unkeyed;
* a recording fails, and the key is remembered as never to replay, when the front end handed the
  builder a handle that was neither an argument's nor a builder result of this call, returned one,
  returned anything but tensors, tuples of them, constants or ``None``, or read a value's data
  (``bool``/``int`` of a tensor: :func:`read_data`) other than a value it made from the call's
  constants alone (a value the call's key fixes);
* only :class:`~tritonkit.check.interp.batched.BatchedBuilder` replays (its class sets
  ``replays``); the sequential engine, tritonkit's oracle in the differential tests, always runs
  Triton's front end.

Recipes live for the process (a few KiB each; at most :data:`MAX_RECIPES`, then they are all
dropped and recorded again), so a kernel's later launches start with them; a forked share worker
inherits them.
"""
from __future__ import annotations

import enum
import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

TensorHandle = _interp.TensorHandle
_TENSOR = tl.tensor
_BLOCK = tl.block_type
_POINTER = tl.pointer_type
_DTYPE = tl.dtype
_CONSTEXPR = tl.constexpr
_VALUE = tl.core.base_value
_LANG_TUPLE = getattr(tl.core, "tuple", None)
#: what a builder call may be given as a constant (what else it is given must be a value of the call)
_CONSTANTS = frozenset({bool, int, float, str, bytes, type(None), type(Ellipsis), slice, type})


def _ir_enums() -> tuple:
    """Triton's IR enumerations (cache modifier, eviction policy, ...) that are not ``enum.Enum``s:
    Triton 3.6 builds them with pybind11, and its front end hands their members to the builder."""
    try:
        from triton._C.libtriton import ir
    except ImportError:  # pragma: no cover
        return ()
    kinds = (getattr(ir, name) for name in dir(ir))
    return tuple(k for k in kinds if isinstance(k, type) and hasattr(k, "__members__") and not issubclass(k, enum.Enum))


_CONSTANT_KINDS = (tl.dtype, np.dtype, enum.Enum, np.generic) + _ir_enums()
_SCALARS = (bool, int, float, str, type(None), type(Ellipsis))

#: the most recipes kept; past it the cache is emptied (a generated kernel per call would grow it)
MAX_RECIPES = 20000
#: key -> Recipe, or None for a call whose recording failed (the front end runs every time)
_RECIPES: Dict[tuple, Optional["Recipe"]] = {}
_MISSING = object()


class _NoKey(Exception):
    """An argument that does not make a key (see :func:`_key`)."""


#: id of a block or pointer type -> (the type, its key): replayed results share their recipe's type
#: objects, so most keys are looked up, not made (at most MAX_RECIPES, then emptied)
_TYPE_KEYS: Dict[int, tuple] = {}


def _type_key(ty):
    """A hashable key equal for equal Triton types (``block_type`` and ``pointer_type`` are not
    hashable in every Triton version). Raises :class:`_NoKey` for other unhashable types."""
    cls = type(ty)
    if cls is _BLOCK or cls is _POINTER:
        got = _TYPE_KEYS.get(id(ty))
        if got is not None and got[0] is ty:
            return got[1]
        if cls is _BLOCK:
            key = (_BLOCK, _type_key(ty.element_ty), tuple(int(s) for s in ty.shape))
        else:
            key = (_POINTER, _type_key(ty.element_ty), ty.address_space, bool(ty.const))
        if len(_TYPE_KEYS) >= MAX_RECIPES:
            _TYPE_KEYS.clear()
        _TYPE_KEYS[id(ty)] = (ty, key)  # the type is kept: its id is not reused while it is here
        return key
    if cls is _DTYPE:
        return ty
    try:
        hash(ty)
    except TypeError:
        raise _NoKey from None
    return ty


def _arg_key(v, handles: list, seen: dict):
    """The key of one argument; tensors' handles are appended to ``handles`` (``seen``: id of a
    handle -> its first index, so that ``x * x`` and ``x * y`` differ)."""
    cls = type(v)
    if cls is _TENSOR:
        h = v.handle
        first = seen.setdefault(id(h), len(handles))
        handles.append(h)
        return (_TENSOR, _type_key(v.type), first)
    if cls is float:
        if v != v:  # NaN: equal to no key, so a recipe made for it would never be found again
            raise _NoKey
        return (float, v, math.copysign(1.0, v))  # -0.0 == 0.0, but the sign of zero matters
    if cls in _SCALARS:
        return (cls, v)
    if cls is _CONSTEXPR:
        return (_CONSTEXPR, _arg_key(v.value, handles, seen))
    if cls is tuple or cls is list:
        return (cls, tuple(_arg_key(x, handles, seen) for x in v))
    if cls is slice:
        return (slice, _arg_key(v.start, handles, seen), _arg_key(v.stop, handles, seen),
                _arg_key(v.step, handles, seen))
    if isinstance(v, _DTYPE):
        return (_DTYPE, _type_key(v))
    raise _NoKey


def _key(member, args, kwargs) -> Tuple[Optional[tuple], list]:
    """``(key, handles)`` of a builtin call (key None: not keyable), ``handles`` the argument
    tensors' handles in order of appearance."""
    handles: list = []
    seen: dict = {}
    try:
        key = (member, tuple(_arg_key(a, handles, seen) for a in args),
               tuple((k, _arg_key(v, handles, seen)) for k, v in kwargs.items()))
    except _NoKey:
        return None, handles
    return key, handles


# --- recording ---------------------------------------------------------------------------------
class _Slot:
    """An argument of a recorded builder call that is a value: slot ``i`` of the replay's values."""

    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i


class _Failed(Exception):
    """The recording cannot stand for later calls."""


#: the builder's attributes that are tritonkit's own (read by tritonkit's hooks, not the front end)
_OWN = frozenset({"launch", "replays"})


class _Recorder:
    """Stands for the builder while a call is recorded: each method call is made on the builder
    and written down; other attributes read (``options``) are written down with their values."""

    def __init__(self, builder, handles: list) -> None:
        self._builder = builder
        self.slots: Dict[int, int] = {}
        self.keep: list = list(handles)  # ids stay unique while the recording runs
        for i, h in enumerate(handles):
            if not (type(h) in _CONSTANTS or isinstance(h, _CONSTANT_KINDS)):
                self.slots.setdefault(id(h), i)
        self.n = len(handles)
        #: slots whose data the call's key fixes: made by constant makers from constants alone
        self.fixed: set = set()
        self.steps: List[tuple] = []
        self.attrs: List[tuple] = []
        self.failed = False

    def __getattr__(self, name):
        value = getattr(self._builder, name)
        if name in _OWN:
            return value
        if not callable(value) or isinstance(value, type):
            self.attrs.append((name, value))
            return value

        def record(*args, **kwargs):
            out = value(*args, **kwargs)
            self._step(name, args, kwargs, out)
            return out
        return record

    def _template(self, v):
        """An argument of a builder call as the recipe keeps it: a value of this call (an argument's
        handle or a builder result) as its slot, containers item by item, constants as they are.
        Raises :class:`_Failed` for anything else (a value from elsewhere, an object it does not
        know to be constant)."""
        slot = self.slots.get(id(v))
        if slot is not None:
            return _Slot(slot)
        cls = type(v)
        if cls in _CONSTANTS or isinstance(v, _CONSTANT_KINDS):
            return v
        if cls is tuple or cls is list:
            return cls(self._template(x) for x in v)
        if cls is dict:
            return {k: self._template(x) for k, x in v.items()}
        if cls is _LANG_TUPLE or cls is _CONSTEXPR:  # a block's shape, a constexpr: constant unless it holds values
            for x in (v if cls is _LANG_TUPLE else (v.value,)):
                if self._template(x) is not x:
                    raise _Failed
            return v
        raise _Failed

    def _step(self, name, args, kwargs, out) -> None:
        try:
            targs = tuple(self._template(a) for a in args)
            tkw = {k: self._template(v) for k, v in kwargs.items()}
        except _Failed:
            self.failed = True
            return
        if name.startswith("get_") and name.endswith("_ty") and isinstance(out, _CONSTANT_KINDS):
            return  # a type getter (no effect): later steps hold the type it gave as a constant
        outs = []
        items = out if type(out) in (tuple, list) else (out,)
        fixed = (name.startswith("get_") or name in _FIXING) and self._fixed(targs) and self._fixed(tkw)
        for x in items:
            if not (type(x) in _CONSTANTS or isinstance(x, _CONSTANT_KINDS)):  # a handle, a block pointer's
                self.keep.append(x)
                self.slots[id(x)] = self.n
                if fixed:
                    self.fixed.add(self.n)
                outs.append(self.n)
                self.n += 1
            else:
                outs.append(None)
        self.steps.append((name, targs, tkw, type(out) in (tuple, list), tuple(outs)))

    def _fixed(self, template) -> bool:
        """Whether every value in a step's argument ``template`` is a slot of :attr:`fixed`."""
        if isinstance(template, _Slot):
            return template.i in self.fixed
        if type(template) in (tuple, list):
            return all(self._fixed(x) for x in template)
        if type(template) is dict:
            return all(self._fixed(x) for x in template.values())
        return True


#: builder methods whose result's data is a function of their arguments' alone (besides the ``get_*``
#: constant makers): a value they make from constants is the same in every call with the same key
_FIXING = frozenset({"create_splat", "create_broadcast", "create_expand_dims", "create_reshape", "create_fp_to_fp",
                     "create_fp_ext", "create_fp_trunc", "create_int_cast", "create_si_to_fp", "create_ui_to_fp",
                     "create_fp_to_si", "create_fp_to_ui", "create_bitcast"})

#: the recording running now (reads of a value's data make it fail: :func:`read_data`)
_RECORDING: List[_Recorder] = []


def read_data(handle=None) -> None:
    """Called where a kernel value's data is read as a Python value (``bool``/``int`` of a tensor,
    ``handle`` its handle): a call being recorded then depends on data, and is not replayed, unless
    the value is one the call made from its constant arguments alone, whose data the call's key
    fixes. (Triton's front end asks ``if other``/``if mask`` in ``tl.load`` and ``tl.store``, which
    are true there: :func:`~tritonkit.check.interp.batched_ops.front_end_call`.)"""
    if _RECORDING:
        rec = _RECORDING[-1]
        slot = rec.slots.get(id(handle)) if handle is not None else None
        if slot is None or slot not in rec.fixed:
            rec.failed = True


def _out_template(out, rec: _Recorder, args):
    """How to rebuild the call's result: a tensor as (its handle's slot, its attributes), the
    very argument tensor it returned, a tuple or list of these, or a constant."""
    cls = type(out)
    if cls is _TENSOR:
        for i, a in enumerate(args):
            if a is out:
                return ("arg", i)
        attrs = dict(vars(out))
        del attrs["handle"]
        if out.handle is None:  # a store's or an assert's result
            return ("const tensor", attrs)
        slot = rec.slots.get(id(out.handle))
        if slot is None:
            raise _Failed
        return ("tensor", slot, attrs)
    if cls is tuple or cls is list:
        return (cls, tuple(_out_template(x, rec, args) for x in out))
    if cls in _SCALARS or cls is _CONSTEXPR:
        return ("const", out)
    raise _Failed


def _replay_steps(steps, builder, values: list) -> None:
    for name, targs, tkw, many, outs in steps:
        args = [_fill(a, values) for a in targs] if targs else ()
        kwargs = {k: _fill(v, values) for k, v in tkw.items()} if tkw else {}
        out = getattr(builder, name)(*args, **kwargs)
        if many:
            for slot, x in zip(outs, out):
                if slot is not None:
                    values.append(x)
        elif outs[0] is not None:
            values.append(out)


def _fill(a, values):
    cls = type(a)
    if cls is _Slot:
        return values[a.i]
    if cls is tuple or cls is list:
        return cls(_fill(x, values) for x in a)
    if cls is dict:
        return {k: _fill(x, values) for k, x in a.items()}
    return a


def _rebuild(t, values, args):
    kind = t[0]
    if kind == "tensor":
        out = _TENSOR.__new__(_TENSOR)
        d = out.__dict__
        d.update(t[2])
        d["handle"] = values[t[1]]
        return out
    if kind == "arg":
        return args[t[1]]
    if kind == "const tensor":
        out = _TENSOR.__new__(_TENSOR)
        out.__dict__.update(t[1])
        out.handle = None
        return out
    if kind == "const":
        return t[1]
    return kind(_rebuild(x, values, args) for x in t[1])


class Recipe:
    """The builder calls of one builtin call, and how its result is made from them."""

    __slots__ = ("steps", "out", "attrs")

    def __init__(self, steps, out, attrs) -> None:
        self.steps = steps
        self.out = out
        self.attrs = attrs

    def replay(self, builder, handles: list, args):
        """The builtin's result for argument handles ``handles`` (in :func:`_key`'s order), or
        ``_MISSING`` where the builder's attributes the front end read have changed."""
        for name, value in self.attrs:
            now = getattr(builder, name)
            if now is not value and now != value:
                return _MISSING
        values = list(handles)
        _replay_steps(self.steps, builder, values)
        return _rebuild(self.out, values, args)


def call(member, args, kwargs, sem):
    """Call the builtin ``member`` with the interpreter's semantic ``sem``: replayed from a recipe
    where one exists for this key, recorded where none does (see the module).

    ``args`` (a tuple) and ``kwargs`` (a dict) are the builtin's arguments as the kernel gave them.
    Returns what the builtin returns: a ``tl.tensor`` (its handle's data shaped as the builder
    makes it), a tuple of them, a constant or None.

    Raises:
        whatever Triton's front end or the builder raises for this call (a type error, a
        :class:`~tritonkit.check.errors.Divergence`): a replay makes the same builder calls, so it
        raises what the recorded call would have raised from the builder.
    """
    if _RECORDING:
        return member(*args, **kwargs, _semantic=sem)
    key, handles = _key(member, args, kwargs)
    if key is None:
        return member(*args, **kwargs, _semantic=sem)
    recipe = _RECIPES.get(key, _MISSING)
    if recipe is None:
        return member(*args, **kwargs, _semantic=sem)
    builder = sem.builder
    if recipe is not _MISSING:
        out = recipe.replay(builder, handles, args)
        if out is not _MISSING:
            return out
    return _record(key, member, args, kwargs, sem, builder, handles)


def _record(key, member, args, kwargs, sem, builder, handles):
    rec = _Recorder(builder, handles)
    _RECORDING.append(rec)
    sem.builder = rec
    try:
        out = member(*args, **kwargs, _semantic=sem)
    finally:
        sem.builder = builder
        _RECORDING.pop()
    recipe = None
    if not rec.failed:
        try:
            recipe = Recipe(rec.steps, _out_template(out, rec, args), tuple(rec.attrs))
        except _Failed:
            recipe = None
    if len(_RECIPES) >= MAX_RECIPES:
        _RECIPES.clear()
    _RECIPES[key] = recipe
    return out
