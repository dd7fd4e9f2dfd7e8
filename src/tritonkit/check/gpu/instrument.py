"""``tritonkit check --gpu``: a ``@triton.jit`` kernel rewritten so that every load, store and atomic
checks its addresses against the view of the tensor argument its pointer derives from, and its int32
offset arithmetic against the same arithmetic in int64, on the GPU, at native speed.

The rewrite works on the kernel's source (its AST), once per kernel and set of tensor arguments:

* **Provenance.** A pointer expression's *root* is the kernel parameter it is computed from, found
  through the names the body assigns (``p = x_ptr + offs``), arithmetic, indexing and
  ``tl.where``; of those, the parameters the launch passes tensors to. An access whose pointer has
  exactly one such root is instrumented; others (a pointer made by a call: ``tl.make_block_ptr``,
  a tensor descriptor, a helper's return value; or two roots) are left as they are, and listed.
* **Offsets in int64.** Every name the instrumented pointers are computed from gets a *shadow*
  (``name__tk``) assigned next to it: for an integer, its value computed again in int64 from the
  shadows of its operands (program ids, argument values and loaded integers widened first); for a
  pointer, its offset in int64 from its root, in the root's elements. The access is then made
  through ``root + offset``, and its mask becomes
  ``guard_offset(offset, mask, <the root's view>, ptr, root, ...)`` (:func:`.device.guard_offset`):
  ``mask`` and inside the view. Masks computed from offsets keep Triton's axis properties
  (contiguity, divisibility) where masks computed from addresses do not, so a checked load keeps
  its vector width and its place in a software pipeline. Where the kernel's own pointer differs from
  ``root + offset``, its int32 arithmetic wrapped: an ``int_overflow`` record.
* **The view.** An argument's extent (``hi``) and its gaps (a column slice, a step) are passed as
  extra arguments per root (:func:`view_layout`); ``hi`` is specialized by Triton like any integer
  (a multiple of 16 keeps the vector width).
* **Where an offset cannot be computed again** (a pointer cast to another element type, a load
  inside the offset expression, a name assigned pointers and integers), the access keeps its
  pointer and its mask becomes ``guard(ptr, mask, ...)`` (:func:`.device.guard`), which checks the
  addresses themselves: the same findings, a slower access, and no overflow check (listed).
* Helpers the kernel calls (other ``@triton.jit`` functions) are not rewritten: their accesses are
  not checked in this mode.

:func:`instrumented` returns the rewritten kernel as a Triton ``JITFunction`` (compiled and cached by
Triton like any kernel) with its site table; :func:`extra_arguments` gives a launch's extra
arguments; :mod:`.runtime` launches it in place of the original.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import inspect
import os
import tempfile
import textwrap
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

#: the names of the accesses rewritten, and the position of their ``mask`` argument
ACCESSES = {"load": 1, "store": 2, "atomic_add": 2, "atomic_max": 2, "atomic_min": 2, "atomic_and": 2,
            "atomic_or": 2, "atomic_xor": 2, "atomic_xchg": 2}
_KIND = {"load": "load", "store": "store"}
GUARD = "_tritonkit_gpu_guard"  # the names the helpers have in the kernel's module globals
GUARD_OFFSET = "_tritonkit_gpu_guard_offset"
WIDE = "_tritonkit_gpu_wide"
TERM = "_tritonkit_gpu_term"
PROBE = "_tritonkit_gpu_desc_probe"  # + the descriptor's rank
REPLAY = "_tk_replay"  # a constexpr parameter: 1 in a replay (writes skipped, counted sites make records)
#: counted sites at most (device.COUNTED_SITES)
COUNTED_SITES = 63
REC, CAP = "_tk_rec", "_tk_cap"
SHADOW = "__tk"
#: calls whose value is a function of their arguments alone: computed again inside a shadow
_PURE = {"arange", "program_id", "num_programs", "full", "zeros", "zeros_like", "full_like", "cdiv", "minimum",
         "maximum", "abs", "broadcast_to", "reshape", "view", "expand_dims", "trans", "permute"}
_HINTS = {"multiple_of", "max_contiguous", "max_constancy"}
#: the per-root extra parameters, in order (``g``: the number of gap levels, a constexpr)
_ROOT_PARAMS = ("hi", "s1", "e1", "s2", "e2", "g")


def param_name(kind: str, root: str) -> str:
    """The extra parameter ``kind`` (one of ``hi s1 e1 s2 e2 g``) of the root argument ``root``."""
    return f"_tk_{kind}_{root}"


def root_copy(root: str) -> str:
    """The name holding the root argument's pointer as the launch passed it (the body may reassign
    the parameter)."""
    return f"_tk_root_{root}"


@dataclasses.dataclass
class Site:
    """One instrumented access: its line in the kernel's file, the operation, the root argument,
    the line where its pointer was formed (the assignment of the name it reads, or the access's
    own line), whether its offset is computed again in int64 (``exact``: overflow checked too), and
    whether it is *counted*: inside a loop of a kernel that may be replayed, its first run only
    counts its offending lanes (cheap), and a replay of the launch makes its records."""

    line: int
    access: str
    root: str
    ptr_line: int = 0
    exact: bool = True
    counted: bool = False
    label: str = ""  # the argument as findings name it (a descriptor's base: ``x_desc.base``); "": root

    @property
    def arg(self) -> str:
        """The argument as findings name it."""
        return self.label or self.root


@dataclasses.dataclass
class Instrumented:
    """A kernel rewritten for one set of tensor arguments.

    Attributes:
        jit: the rewritten kernel (a Triton ``JITFunction``).
        sites: the instrumented accesses by site number.
        roots: the parameters that get view arguments (:func:`extra_arguments`).
        skipped: lines of accesses left unchecked (no single tensor root).
        file: the original kernel's source file.
    """

    jit: object
    sites: Dict[int, Site]
    roots: List[str]
    skipped: List[int]
    file: str

    @property
    def no_overflow(self) -> List[int]:
        """Lines of accesses checked from their addresses only: their int32 overflow is not checked."""
        return sorted({s.line for s in self.sites.values() if not s.exact})


def _is_tl_call(node: ast.Call) -> Optional[str]:
    """The access name of ``tl.load(...)``-like calls (``tl.X``, ``triton.language.X``)."""
    f = node.func
    if not isinstance(f, ast.Attribute) or f.attr not in ACCESSES:
        return None
    base = f.value
    if isinstance(base, ast.Name) and base.id in ("tl", "language"):
        return f.attr
    if isinstance(base, ast.Attribute) and base.attr == "language":
        return f.attr
    return None


def _call_name(node: ast.Call) -> Optional[str]:
    """``tl.X(...)`` / ``triton.language.X(...)`` -> ``X``; ``v.X(...)`` (a method) -> None."""
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("tl", "language"):
        return f.attr
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "language":
        return f.attr
    if isinstance(f, ast.Name) and f.id in ("min", "max"):
        return {"min": "minimum", "max": "maximum"}[f.id]
    return None


def _is_method(node: ast.Call, name: str) -> bool:
    return isinstance(node.func, ast.Attribute) and node.func.attr == name and _call_name(node) is None


class _Provenance:
    """The parameters each name of a function body may be computed from (flow-insensitive)."""

    def __init__(self, params: List[str]) -> None:
        self.params = set(params)
        self.env: Dict[str, Set[str]] = {}

    def of(self, node) -> Set[str]:
        if isinstance(node, ast.Name):
            return set(self.env.get(node.id, set())) | ({node.id} if node.id in self.params else set())
        if isinstance(node, ast.BinOp):
            return self.of(node.left) | self.of(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.of(node.operand)
        if isinstance(node, ast.Subscript):
            return self.of(node.value)
        if isinstance(node, ast.IfExp):
            return self.of(node.body) | self.of(node.orelse)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "where" \
                and len(node.args) == 3:
            return self.of(node.args[1]) | self.of(node.args[2])
        if isinstance(node, ast.Call) and _call_name(node) in _HINTS and node.args:
            return self.of(node.args[0])
        return set()

    def learn(self, body: List[ast.stmt]) -> None:
        """Propagate through every assignment until nothing changes."""
        assigns = []
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, ast.Assign):
                assigns.extend((t, node.value) for t in node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                assigns.append((node.target, node.value if isinstance(node, ast.AnnAssign)
                                else ast.BinOp(left=node.target, op=node.op, right=node.value)))
        changed = True
        while changed:
            changed = False
            for target, value in assigns:
                if isinstance(target, ast.Name):
                    got = self.of(value)
                    old = self.env.setdefault(target.id, set())
                    if not got <= old:
                        old |= got
                        changed = True


def _names(node) -> Set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _wide(node) -> ast.Call:
    return ast.Call(func=ast.Name(id=WIDE, ctx=ast.Load()), args=[node], keywords=[])


def _term(native, exact) -> ast.Call:
    """``term(native, exact)`` (:func:`.device.term`): an offset term checked against its own width."""
    return ast.Call(func=ast.Name(id=TERM, ctx=ast.Load()), args=[copy.deepcopy(native), exact], keywords=[])


_CONFLICT = ("conflict",)
_INT = ("int",)


class _Shadows:
    """The int64 shadows of the names the instrumented pointers are computed from (see the module).

    A name's kind is ``("int",)``, ``("ptr", root)`` or :data:`_CONFLICT` (no shadow: assigned a
    pointer and an integer, or pointers of two roots, or a value that cannot be computed again).
    """

    def __init__(self, fn: ast.FunctionDef, tensors: FrozenSet[str], prov: _Provenance) -> None:
        self.params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        self.constexprs = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
                           if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
        self.tensors, self.prov = tensors, prov
        self.assigns: Dict[str, List[ast.AST]] = {}  # name -> values (None: a tuple element, a loop variable)
        self.lines: Dict[str, List[int]] = {}
        self.kinds: Dict[str, tuple] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._target(t, node.value, node.lineno)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self._add(node.target.id, ast.BinOp(left=ast.Name(id=node.target.id, ctx=ast.Load()), op=node.op,
                                                    right=node.value), node.lineno)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                if "constexpr" in ast.unparse(node.annotation):
                    self.constexprs.add(node.target.id)
                else:
                    self._add(node.target.id, node.value, node.lineno)
            elif isinstance(node, (ast.For, ast.comprehension)):
                self._target(node.target, None, getattr(node, "lineno", 0))
            elif isinstance(node, ast.With):
                for item in node.items:
                    if item.optional_vars is not None:
                        self._target(item.optional_vars, None, node.lineno)
        self._solve()

    def _target(self, t, value, line: int) -> None:
        if isinstance(t, ast.Name):
            self._add(t.id, value, line)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._target(e, None, line)

    def _add(self, name: str, value, line: int) -> None:
        self.assigns.setdefault(name, []).append(value)
        self.lines.setdefault(name, []).append(line)

    def kind(self, node) -> Optional[tuple]:
        """The kind of an expression's value under the current kinds (None: not known yet)."""
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.assigns:
                if n in self.tensors:  # a root parameter the body reassigns: starts as the root
                    return self.kinds.get(n, ("ptr", n))
                return self.kinds.get(n)
            if n in self.tensors:
                return ("ptr", n)
            return _INT
        if isinstance(node, ast.Constant):
            return _INT
        if isinstance(node, ast.BinOp):
            a, b = self.kind(node.left), self.kind(node.right)
            if _CONFLICT in (a, b):
                return _CONFLICT
            if a is None or b is None:  # not known yet
                return None
            if _CONFLICT in (a, b):
                return _CONFLICT
            if a == _INT and b == _INT:
                return _INT
            if a[0] == "ptr" and b == _INT and isinstance(node.op, (ast.Add, ast.Sub)):
                return a
            if b[0] == "ptr" and a == _INT and isinstance(node.op, ast.Add):
                return b
            return _CONFLICT
        if isinstance(node, ast.UnaryOp):
            k = self.kind(node.operand)
            return _CONFLICT if k not in (None, _INT) else k
        if isinstance(node, ast.Subscript):
            return self.kind(node.value)
        if isinstance(node, ast.IfExp):
            return self._same(self.kind(node.body), self.kind(node.orelse))
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if (name == "where" or _is_method(node, "where")) and len(node.args) == 3:
                return self._same(self.kind(node.args[1]), self.kind(node.args[2]))
            if name in _HINTS and node.args:
                return self.kind(node.args[0])
            if _is_method(node, "to"):
                k = self.kind(node.func.value)
                return _CONFLICT if k is not None and k[0] == "ptr" else (_INT if k is not None else None)
            if name in ("minimum", "maximum"):
                return self._same(*(self.kind(a) for a in node.args[:2])) if len(node.args) >= 2 else _INT
            return _INT
        return _INT

    @staticmethod
    def _same(a, b):
        if a is None or b is None:
            return a or b
        return a if a == b else _CONFLICT

    def _solve(self) -> None:
        """Kinds of the assigned names: a fixed point over their assignments, then names whose value
        cannot be computed again (:meth:`shadow` fails) marked as conflicts, until nothing changes."""
        changed = True
        while changed:
            changed = False
            for name, values in self.assigns.items():
                k = ("ptr", name) if name in self.tensors else None
                for v in values:
                    vk = _INT if v is None else self.kind(v)
                    if v is None and (self.prov.of(ast.Name(id=name, ctx=ast.Load())) & self.tensors):
                        vk = _CONFLICT  # a loop variable or tuple element computed from a pointer
                    k = self._same(k, vk)
                if k is not None and k != self.kinds.get(name):
                    self.kinds[name] = k
                    changed = True
        changed = True
        while changed:
            changed = False
            for name, values in self.assigns.items():
                if self.kinds.get(name, _CONFLICT) == _CONFLICT:
                    continue
                for v in values:
                    if v is not None and self.assigned(name, v) is None:
                        self.kinds[name] = _CONFLICT
                        changed = True
                        break

    def assigned(self, name: str, value):
        """The shadow of ``name`` after an assignment of ``value`` to it: the value computed again
        in int64, or, for an integer that cannot be (a load inside it), its new value widened (its
        own int32 overflow is then not seen; a pointer's offset must be computed again)."""
        got = self.shadow(value, whole=name)
        if got is None and self.kinds.get(name) == _INT:
            got = _wide(ast.Name(id=name, ctx=ast.Load()))
        return got

    def shadow(self, node, whole: Optional[str] = None):
        """The int64 shadow of an expression (an AST), or None where it cannot be computed again.
        ``whole``: the name the expression is assigned to (a call that is the whole value is then
        read back from it instead of being made twice)."""
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.assigns:
                k = self.kinds.get(n)
                return None if k in (None, _CONFLICT) else ast.Name(id=n + SHADOW, ctx=ast.Load())
            if n in self.tensors:
                return ast.Constant(0)
            if n in self.constexprs or n not in self.params:
                return ast.Name(id=n, ctx=ast.Load())
            return _wide(ast.Name(id=n, ctx=ast.Load()))
        if isinstance(node, ast.Constant):
            return copy.deepcopy(node)
        if isinstance(node, ast.BinOp):
            if self.kind(node) in (None, _CONFLICT):
                return None
            left, right = self.shadow(node.left), self.shadow(node.right)
            if left is None or right is None:
                return None
            kl, kr = self.kind(node.left), self.kind(node.right)
            if kl[0] == "ptr" and kr == _INT and not isinstance(node.right, ast.Constant):
                right = _term(node.right, right)  # an integer added to a pointer: its own width checked
            elif kr[0] == "ptr" and kl == _INT and not isinstance(node.left, ast.Constant):
                left = _term(node.left, left)
            return ast.BinOp(left=left, op=copy.deepcopy(node.op), right=right)
        if isinstance(node, ast.UnaryOp):
            operand = self.shadow(node.operand)
            return None if operand is None else ast.UnaryOp(op=copy.deepcopy(node.op), operand=operand)
        if isinstance(node, ast.Subscript):
            value = self.shadow(node.value)
            return None if value is None else ast.Subscript(value=value, slice=copy.deepcopy(node.slice),
                                                            ctx=ast.Load())
        if isinstance(node, ast.IfExp):
            body, orelse = self.shadow(node.body), self.shadow(node.orelse)
            if body is None or orelse is None or self.kind(node) in (None, _CONFLICT):
                return None
            return ast.IfExp(test=copy.deepcopy(node.test), body=body, orelse=orelse)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if (name == "where" or _is_method(node, "where")) and len(node.args) == 3 and not node.keywords:
                if self.kind(node) in (None, _CONFLICT):
                    return None
                a, b = self.shadow(node.args[1]), self.shadow(node.args[2])
                if a is None or b is None:
                    return None
                return ast.Call(func=copy.deepcopy(node.func), args=[copy.deepcopy(node.args[0]), a, b], keywords=[])
            if name in _HINTS and node.args:
                x = self.shadow(node.args[0])
                return None if x is None else ast.Call(func=copy.deepcopy(node.func),
                                                       args=[x] + copy.deepcopy(node.args[1:]),
                                                       keywords=copy.deepcopy(node.keywords))
            if _is_method(node, "to"):
                x = self.shadow(node.func.value)
                if x is None:
                    return None
                return _wide(ast.Call(func=ast.Attribute(value=x, attr="to", ctx=ast.Load()),
                                      args=copy.deepcopy(node.args), keywords=copy.deepcopy(node.keywords)))
            if name in ("minimum", "maximum") and len(node.args) == 2 and not node.keywords:
                a, b = self.shadow(node.args[0]), self.shadow(node.args[1])
                if a is None or b is None:
                    return None
                return ast.Call(func=copy.deepcopy(node.func), args=[a, b], keywords=[])
            if whole is not None:  # the whole value: read it back from the name it was assigned to
                return _wide(ast.Name(id=whole, ctx=ast.Load()))
            if name in _PURE:
                return _wide(copy.deepcopy(node))
            return None
        if isinstance(node, ast.Attribute):
            return copy.deepcopy(node)
        return None

    def needed(self, pointers: List[ast.AST]) -> Set[str]:
        """The assigned names the pointer expressions are computed from (transitively)."""
        todo = [n for p in pointers for n in _names(p)]
        seen: Set[str] = set()
        while todo:
            n = todo.pop()
            if n in seen or n not in self.assigns:
                continue
            seen.add(n)
            for v in self.assigns[n]:
                if v is not None:
                    todo.extend(_names(v))
        return seen


class _Rewriter(ast.NodeTransformer):
    def __init__(self, prov: _Provenance, shadows: _Shadows, tensors: FrozenSet[str], first_line: int,
                 absent: FrozenSet[str] = frozenset()) -> None:
        self.prov, self.shadows, self.tensors, self.first_line, self.absent = prov, shadows, tensors, first_line, absent
        self.sites: Dict[int, Site] = {}
        self.roots: List[str] = []
        self.skipped: List[int] = []
        self.loops = 0  # loops around the node being visited
        self.descriptors: Dict[str, int] = {}  # host-side tensor descriptor parameters and their ranks
        self.replay = False  # whether the kernel may be replayed (set by rewrite() before visiting)

    def _loop(self, node):
        self.loops += 1
        try:
            return self.generic_visit(node)
        finally:
            self.loops -= 1

    visit_For = visit_While = _loop

    def _descriptor(self, node: ast.Call) -> bool:
        """A ``desc.load([o0, o1])`` / ``desc.store([o0, o1], value)`` through a host-side tensor
        descriptor argument (``self.descriptors``: name -> rank, 1 or 2): a site whose probe
        (:func:`.device.desc_probe`) checks the block's elements against the view of the
        descriptor's base tensor, made a statement of its own before the access's (see
        :func:`_with_probes`); the access itself is left as it is. False where it is not one."""
        f = node.func
        if not (isinstance(f.value, ast.Name) and f.value.id in self.descriptors and f.attr in ("load", "store")
                and node.args and isinstance(node.args[0], (ast.List, ast.Tuple))):
            return False
        desc, rank = f.value.id, self.descriptors[f.value.id]
        offsets = node.args[0].elts
        if len(offsets) != rank:
            return False
        line = self.first_line + node.lineno - 1
        site = len(self.sites)
        self.sites[site] = Site(line, f.attr, desc, line, True, False, label=f"{desc}.base")
        if desc not in self.roots:
            self.roots.append(desc)
        args = [copy.deepcopy(o) for o in offsets]
        args += [ast.Name(id=param_name(f"dn{i}", desc), ctx=ast.Load()) for i in range(rank)]
        args += [ast.Name(id=param_name(f"ds{i}", desc), ctx=ast.Load()) for i in range(rank)]
        args += [ast.Name(id=param_name(k, desc), ctx=ast.Load()) for k in _ROOT_PARAMS[:-1]]
        args += [ast.Name(id=REC, ctx=ast.Load()), ast.Name(id=CAP, ctx=ast.Load()), ast.Constant(site),
                 ast.Name(id=param_name("g", desc), ctx=ast.Load())]
        args += [ast.Name(id=param_name(f"db{i}", desc), ctx=ast.Load()) for i in range(rank)]
        probe = ast.Expr(value=ast.Call(func=ast.Name(id=f"{PROBE}{rank}", ctx=ast.Load()), args=args, keywords=[]))
        node._tk_probes = getattr(node, "_tk_probes", []) + [probe]
        return True

    def target(self, node: ast.Call) -> Optional[Tuple[str, ast.AST, str]]:
        """``(access name, pointer expression, root)`` of an access this rewrite instruments."""
        name = _is_tl_call(node)
        if name is None:
            return None
        ptr = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("pointer", "ptr")),
                                                 None)
        if ptr is None:
            return None
        prov = self.prov.of(ptr)
        roots = prov & self.tensors
        if prov & self.absent or len(roots) != 1:
            return None
        return name, ptr, next(iter(roots))

    def visit_Call(self, node: ast.Call):
        original = copy.deepcopy(node)
        node = self.generic_visit(node)
        name = _is_tl_call(node)
        if name is None:
            f = node.func
            if isinstance(f, ast.Attribute) and (f.attr in ACCESSES or f.attr in ("gather", "scatter")):
                if not self._descriptor(node):
                    self.skipped.append(self.first_line + node.lineno - 1)  # a descriptor's access: not checked
            return node
        line = self.first_line + node.lineno - 1
        found = self.target(original)
        if found is None:
            ptr = node.args[0] if node.args else None
            prov = self.prov.of(ptr) if ptr is not None else set()
            if not (prov & self.absent and not prov & self.tensors):  # through a pointer passed None: cannot run
                self.skipped.append(line)
            return node
        _, ptr, root = found
        if root not in self.roots:
            self.roots.append(root)
        site = len(self.sites)
        off = self.shadows.shadow(ptr)
        exact = off is not None and self.shadows.kind(ptr) == ("ptr", root)
        ptr_line = line
        if isinstance(ptr, ast.Name) and ptr.id in self.shadows.lines:
            before = [n for n in self.shadows.lines[ptr.id] if n <= node.lineno]
            ptr_line = self.first_line + (before[-1] if before else self.shadows.lines[ptr.id][-1]) - 1
        counted = bool(self.loops) and self.replay and exact and site < COUNTED_SITES
        self.sites[site] = Site(line, _KIND.get(name, "atomic"), root, ptr_line, exact, counted)
        pos = ACCESSES[name]
        mask = None
        if len(node.args) > pos:
            mask = node.args[pos]
        else:
            kw = next((k for k in node.keywords if k.arg == "mask"), None)
            if kw is not None:
                mask = kw.value
        view = [ast.Name(id=param_name(k, root), ctx=ast.Load()) for k in _ROOT_PARAMS[:-1]]
        tail = [ast.Name(id=REC, ctx=ast.Load()), ast.Name(id=CAP, ctx=ast.Load()), ast.Constant(site),
                ast.Name(id=param_name("g", root), ctx=ast.Load())]
        replay = ast.Name(id=REPLAY, ctx=ast.Load())
        # a counted site counts on the first run and records on the replay; a write is skipped on the replay
        count = ast.BinOp(left=ast.Constant(1), op=ast.Sub(), right=replay) if counted else ast.Constant(0)
        skip = replay if name != "load" else ast.Constant(0)
        mask_arg = mask if mask is not None else ast.Constant(None)
        base = ast.Name(id=root_copy(root), ctx=ast.Load())
        if exact:
            guarded = ast.Call(func=ast.Name(id=GUARD_OFFSET, ctx=ast.Load()),
                               args=[off, mask_arg, *view, *tail, count, skip], keywords=[])
            new_ptr = ast.BinOp(left=base, op=ast.Add(), right=copy.deepcopy(off))
            if node.args:
                node.args[0] = new_ptr
            else:
                node.keywords = [ast.keyword(arg=k.arg, value=new_ptr) if k.arg in ("pointer", "ptr") else k
                                 for k in node.keywords]
        else:
            guarded = ast.Call(func=ast.Name(id=GUARD, ctx=ast.Load()),
                               args=[node.args[0] if node.args else ptr, mask_arg, *view, base, *tail, skip],
                               keywords=[])
        if len(node.args) > pos:
            node.args[pos] = guarded
        else:
            node.keywords = [k for k in node.keywords if k.arg != "mask"] + [ast.keyword(arg="mask", value=guarded)]
        return node


def _with_probes(stmts: List[ast.stmt]) -> List[ast.stmt]:
    """``stmts`` with the probes of the descriptor accesses each statement makes (see
    ``_Rewriter._descriptor``) put before it; a compound statement's bodies get theirs inside."""
    out: List[ast.stmt] = []
    for s in stmts:
        own = []
        for field, value in ast.iter_fields(s):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(s, field, _with_probes(value))
            elif isinstance(value, ast.AST):
                own.extend(p for n in ast.walk(value) for p in getattr(n, "_tk_probes", []))
            elif isinstance(value, list):
                own.extend(p for v in value if isinstance(v, ast.AST) for n in ast.walk(v)
                           for p in getattr(n, "_tk_probes", []))
        out.extend(own)
        out.append(s)
    return out


def _with_shadows(stmts: List[ast.stmt], shadows: _Shadows, needed: Set[str]) -> List[ast.stmt]:
    """``stmts`` with each needed name's shadow assigned after each assignment of the name (and at
    the start of a loop's body for its variable)."""
    def ok(n: str) -> bool:
        return n in needed and shadows.kinds.get(n) not in (None, _CONFLICT)

    def assign(n: str, value) -> ast.Assign:
        return ast.Assign(targets=[ast.Name(id=n + SHADOW, ctx=ast.Store())], value=value, lineno=0)

    def after(s: ast.stmt) -> List[ast.stmt]:
        out = []
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Name) and ok(t.id):
                    out.append(assign(t.id, shadows.assigned(t.id, s.value)))
                elif isinstance(t, (ast.Tuple, ast.List)):
                    out.extend(assign(e.id, _wide(ast.Name(id=e.id, ctx=ast.Load()))) for e in t.elts
                               if isinstance(e, ast.Name) and ok(e.id))
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and ok(s.target.id):
            n = s.target.id
            out.append(assign(n, shadows.assigned(n, ast.BinOp(left=ast.Name(id=n, ctx=ast.Load()), op=s.op,
                                                               right=s.value))))
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None \
                and ok(s.target.id):
            out.append(assign(s.target.id, shadows.assigned(s.target.id, s.value)))
        return [o for o in out if o.value is not None]

    out: List[ast.stmt] = []
    for s in stmts:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(s, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(s, field, _with_shadows(block, shadows, needed))
        if isinstance(s, ast.For):
            loop_vars = [s.target] if isinstance(s.target, ast.Name) else \
                [e for e in getattr(s.target, "elts", []) if isinstance(e, ast.Name)]
            s.body = [assign(v.id, _wide(ast.Name(id=v.id, ctx=ast.Load()))) for v in loop_vars if ok(v.id)] + s.body
        out.append(s)
        out.extend(after(s))
    return out


_PURE_BUILTINS = {"min", "max", "range", "len", "float", "int", "isinstance", "getattr", "hasattr", "abs"}
#: calls that have an effect a replay must not repeat (other than the writes it skips)
_EFFECTS = {"device_print", "device_assert", "inline_asm_elementwise", "debug_barrier", "print"}


def replayable(fn: ast.FunctionDef, rw: "_Rewriter", helper_writes=None) -> bool:
    """Whether a launch of the kernel ``fn`` may be run again with its writes skipped (a *replay*,
    which reads memory as the launch left it and makes the records of its counted sites): no
    atomic (a replay could not skip one whose result steers the kernel: a lock), every store
    instrumented (so the replay can skip it), no descriptor access, print or assert, inline
    assembly, and no helper that may do any of these (``helper_writes(name)``: whether the global
    function ``name`` may; None: every helper may)."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
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


def rewrite(source: str, tensors: FrozenSet[str], first_line: int = 1,
            absent: FrozenSet[str] = frozenset(), helper_writes=None,
            descriptors: FrozenSet[Tuple[str, int]] = frozenset()) -> Tuple[str, Dict[int, Site], List[str],
                                                                           List[int], str]:
    """Rewrite a ``@triton.jit`` function's source (decorators dropped) for the tensor parameters
    ``tensors`` (``absent``: parameters passed None; an access through them cannot run and is not
    counted as unchecked; ``helper_writes``: see :func:`replayable`; ``descriptors``: the parameters
    passed host-side tensor descriptors, with their ranks). Returns ``(new source, sites, roots,
    skipped lines, the function's name)``.

    Raises:
        ValueError: the source holds no function definition.
    """
    tree = ast.parse(textwrap.dedent(source))
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        raise ValueError("no function definition in the kernel's source")
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    prov = _Provenance(params)
    prov.learn(fn.body)
    shadows = _Shadows(fn, tensors, prov)
    rw = _Rewriter(prov, shadows, tensors, first_line, absent)
    pointers = [t[1] for t in (rw.target(n) for n in ast.walk(fn) if isinstance(n, ast.Call)) if t is not None]
    rw.replay = replayable(fn, rw, helper_writes)
    rw.descriptors = {d: r for d, r in descriptors if r in (1, 2)}
    needed = shadows.needed(pointers)
    body = fn.body
    doc = [body[0]] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
    body = _with_shadows(body[len(doc):], shadows, needed)
    body = _with_probes([rw.visit(s) for s in body])
    prologue = [ast.Assign(targets=[ast.Name(id=root_copy(r), ctx=ast.Store())], value=ast.Name(id=r, ctx=ast.Load()),
                           lineno=0) for r in rw.roots]
    for n in sorted(needed & set(params)):  # a parameter the body reassigns: its shadow starts as the parameter
        if shadows.kinds.get(n) in (None, _CONFLICT):
            continue
        start = ast.BinOp(left=_wide(ast.Call(func=ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()),
                                                                 attr="program_id", ctx=ast.Load()),
                                              args=[ast.Constant(0)], keywords=[])),
                          op=ast.Mult(), right=ast.Constant(0)) if n in tensors \
            else _wide(ast.Name(id=n, ctx=ast.Load()))
        prologue.append(ast.Assign(targets=[ast.Name(id=n + SHADOW, ctx=ast.Store())], value=start, lineno=0))
    fn.body = doc + prologue + body
    fn.decorator_list = []
    extra = [REC, CAP] + [param_name(k, r) for r in rw.roots for k in _ROOT_PARAMS] + [REPLAY]
    for d in rw.roots:
        if d in rw.descriptors:
            extra += [param_name(f"{k}{i}", d) for k in ("dn", "ds", "db") for i in range(rw.descriptors[d])]
    for n in extra:
        constexpr = n.startswith(("_tk_g_", "_tk_db")) or n == REPLAY
        fn.args.args.append(ast.arg(arg=n, annotation=ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()),
                                                                    attr="constexpr", ctx=ast.Load())
                                    if constexpr else None))
    if fn.args.defaults:  # after parameters with defaults, ours need one too (always passed)
        fn.args.defaults.extend(ast.Constant(0) for _ in extra)
    ast.fix_missing_locations(tree)
    return ast.unparse(fn), rw.sites, rw.roots, rw.skipped, fn.name


def _helper_writes(obj, seen: Optional[Set[int]] = None) -> bool:
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
        if isinstance(f, ast.Name) and f.id not in _PURE_BUILTINS and _helper_writes(fn.__globals__.get(f.id), seen):
            return True
    return False


def _folder() -> str:
    path = os.path.join(tempfile.gettempdir(), f"tritonkit-gpu-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.makedirs(path, exist_ok=True)
    return path


def instrumented(jit_fn, tensors: FrozenSet[str], absent: FrozenSet[str] = frozenset(),
                 descriptors: FrozenSet[Tuple[str, int]] = frozenset()) -> Instrumented:
    """The rewritten kernel of the ``JITFunction`` ``jit_fn`` for the tensor parameters ``tensors``
    (``absent``: the parameters passed None; ``descriptors``: those passed host-side tensor
    descriptors, with their ranks).

    Raises:
        OSError, TypeError, ValueError, SyntaxError: its source cannot be read or rewritten.
    """
    import triton

    from . import device
    fn = jit_fn.fn
    lines, start = inspect.getsourcelines(fn)
    source, sites, roots, skipped, name = rewrite("".join(lines), tensors, start, absent,
                                                  helper_writes=lambda n: _helper_writes(fn.__globals__.get(n)),
                                                  descriptors=descriptors)
    digest = hashlib.sha256(f"{fn.__code__.co_filename}\0{source}".encode()).hexdigest()[:24]
    path = os.path.join(_folder(), f"{name}_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(source + "\n")
        os.replace(tmp, path)
    namespace = fn.__globals__  # the kernel's own globals, live: the helpers are added under private names
    namespace[GUARD], namespace[GUARD_OFFSET] = device.guard, device.guard_offset
    namespace[WIDE], namespace[TERM] = device.wide, device.term
    namespace[PROBE + "1"], namespace[PROBE + "2"] = device.desc_probe1, device.desc_probe2
    code = compile(source + "\n", path, "exec")
    local: dict = {}
    exec(code, namespace, local)
    new = local[name]
    new.__module__, new.__qualname__ = fn.__module__, getattr(fn, "__qualname__", name)
    given = getattr(jit_fn, "do_not_specialize", None) or []
    keep = [p if isinstance(p, str) else jit_fn.arg_names[p] for p in given]
    jit = triton.jit(new, do_not_specialize=keep + [REC, CAP], debug=getattr(jit_fn, "debug", None),
                     noinline=getattr(jit_fn, "noinline", None))
    jit._tritonkit_instrumented = True
    return Instrumented(jit=jit, sites=sites, roots=roots, skipped=skipped, file=fn.__code__.co_filename)


def view_layout(t) -> Tuple[int, List[Tuple[int, int]], bool]:
    """The view of the tensor ``t`` as :func:`.device.inside` checks it: ``(hi, levels, exact)``.

    ``hi`` is one past the offset (in elements from ``t.data_ptr()``) of its last element (0 for an
    empty tensor). ``levels`` are its gap levels, outermost first: ``(s, e)`` pairs in elements,
    meaning that an offset ``r`` (reduced by the levels before) is inside where ``r % s < e``: a
    column slice of a wider matrix has one, ``x[:, :, ::2]`` of a contiguous tensor two. ``exact``
    is False where the view cannot be told exactly with the guard's two levels (more gaps, or
    overlapping elements as ``as_strided`` makes): then only the outer levels are checked, which
    never reports an element of the view.
    """
    dims = sorted(((int(n), int(s)) for n, s in zip(t.shape, t.stride()) if int(n) > 1 and int(s) != 0),
                  key=lambda d: d[1])
    if any(int(n) == 0 for n in t.shape):
        return 0, [], True
    span, levels, exact = 1, [], True
    for n, s in dims:
        if s < span:  # overlapping elements: the extent alone
            return 1 + sum((n - 1) * s for n, s in dims), [], False
        if s > span:
            levels.append((s, span))
        span = (n - 1) * s + span
    levels.reverse()
    if len(levels) > 2:
        levels, exact = levels[:2], False
    return span, levels, exact


def extra_arguments(inst: Instrumented, named: Dict[str, object], rec, cap: int,
                    replay: bool = False) -> Dict[str, object]:
    """The extra keyword arguments a launch of ``inst.jit`` takes: the record buffer ``rec`` (an
    int64 CUDA tensor of ``device.HEADER + cap * device.RECORD`` elements, zeroed) and its capacity
    in records, each root argument's view (:func:`view_layout`) from the launch's tensors
    ``named``, and whether the launch is a replay (writes skipped, counted sites make records)."""
    out: Dict[str, object] = {REC: rec, CAP: cap, REPLAY: int(replay)}
    for root in inst.roots:
        value = named[root]
        if is_descriptor(value):
            for i, (n, st, b) in enumerate(zip(value.shape, value.strides, value.block_shape)):
                out.update({param_name(f"dn{i}", root): int(n), param_name(f"ds{i}", root): int(st),
                            param_name(f"db{i}", root): int(b)})
            value = value.base
        hi, levels, _ = view_layout(value)
        (s1, e1), (s2, e2) = (levels + [(1, 1), (1, 1)])[:2]
        out.update({param_name("hi", root): hi, param_name("s1", root): s1, param_name("e1", root): e1,
                    param_name("s2", root): s2, param_name("e2", root): e2, param_name("g", root): len(levels)})
    return out


def is_descriptor(value) -> bool:
    """Whether a launch argument is a host-side tensor descriptor
    (``triton.tools.tensor_descriptor.TensorDescriptor``: a base tensor, a shape, strides in elements
    and the block each access moves)."""
    return all(hasattr(value, a) for a in ("base", "shape", "strides", "block_shape")) and \
        hasattr(getattr(value, "base", None), "untyped_storage")
