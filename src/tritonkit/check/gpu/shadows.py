"""The int64 *shadows* of ``tritonkit check --gpu``'s kernel rewrite (:mod:`.instrument`): for every
name an instrumented pointer is computed from, the same value computed again in int64 (an integer)
or its offset in the root argument's elements (a pointer), assigned next to the name.

* :class:`Provenance`: the kernel parameters each name may be computed from (flow-insensitive).
* :class:`Shadows`: each assigned name's kind (integer, pointer of one root, or neither), and the
  shadow of an expression: integer parameters, program ids and loaded integers widened first
  (:func:`.device.wide`), each integer term added to a pointer checked against its own width
  (:func:`.device.term`).
* :func:`with_shadows`: a function body with the shadows' assignments put in.
"""
from __future__ import annotations

import ast
import copy
from typing import Dict, FrozenSet, List, Optional, Set

#: the names of the accesses rewritten, and the position of their ``mask`` argument
ACCESSES = {"load": 1, "store": 2, "atomic_add": 2, "atomic_max": 2, "atomic_min": 2, "atomic_and": 2,
            "atomic_or": 2, "atomic_xor": 2, "atomic_xchg": 2}
WIDE = "_tritonkit_gpu_wide"  # the names the helpers have in the kernel's module globals
TERM = "_tritonkit_gpu_term"
SHADOW = "__tk"  # a shadow's name: the name's, this added
#: calls whose value is a function of their arguments alone: computed again inside a shadow
_PURE = {"arange", "program_id", "num_programs", "full", "zeros", "zeros_like", "full_like", "cdiv", "minimum",
         "maximum", "abs", "broadcast_to", "reshape", "view", "expand_dims", "trans", "permute"}
_HINTS = {"multiple_of", "max_contiguous", "max_constancy"}


def is_tl_call(node: ast.Call) -> Optional[str]:
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


def call_name(node: ast.Call) -> Optional[str]:
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
    return isinstance(node.func, ast.Attribute) and node.func.attr == name and call_name(node) is None


class Provenance:
    """The parameters each name of a function body may be computed from (flow-insensitive)."""

    def __init__(self, params: List[str]) -> None:
        self.params = set(params)
        self.env: Dict[str, Set[str]] = {}

    def of(self, node) -> Set[str]:
        """The parameters the expression ``node`` (an AST) may be computed from."""
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
        if isinstance(node, ast.Call) and call_name(node) in _HINTS and node.args:
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


def wide_call(node) -> ast.Call:
    """The AST of ``wide(node)`` (:func:`.device.wide`): ``node`` in int64 where it is a narrower
    integer tensor."""
    return ast.Call(func=ast.Name(id=WIDE, ctx=ast.Load()), args=[node], keywords=[])


def _term(native, exact) -> ast.Call:
    """``term(native, exact)`` (:func:`.device.term`): an offset term checked against its own width."""
    return ast.Call(func=ast.Name(id=TERM, ctx=ast.Load()), args=[copy.deepcopy(native), exact], keywords=[])


CONFLICT = ("conflict",)
_INT = ("int",)


class Shadows:
    """The int64 shadows of the names the instrumented pointers are computed from (see the module).

    A name's kind is ``("int",)``, ``("ptr", root)`` or :data:`CONFLICT` (no shadow: assigned a
    pointer and an integer, or pointers of two roots, or a value that cannot be computed again).
    """

    def __init__(self, fn: ast.FunctionDef, tensors: FrozenSet[str], prov: Provenance) -> None:
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
            if CONFLICT in (a, b):
                return CONFLICT
            if a is None or b is None:  # not known yet
                return None
            if CONFLICT in (a, b):
                return CONFLICT
            if a == _INT and b == _INT:
                return _INT
            if a[0] == "ptr" and b == _INT and isinstance(node.op, (ast.Add, ast.Sub)):
                return a
            if b[0] == "ptr" and a == _INT and isinstance(node.op, ast.Add):
                return b
            return CONFLICT
        if isinstance(node, ast.UnaryOp):
            k = self.kind(node.operand)
            return CONFLICT if k not in (None, _INT) else k
        if isinstance(node, ast.Subscript):
            return self.kind(node.value)
        if isinstance(node, ast.IfExp):
            return self._same(self.kind(node.body), self.kind(node.orelse))
        if isinstance(node, ast.Call):
            name = call_name(node)
            if (name == "where" or _is_method(node, "where")) and len(node.args) == 3:
                return self._same(self.kind(node.args[1]), self.kind(node.args[2]))
            if name in _HINTS and node.args:
                return self.kind(node.args[0])
            if _is_method(node, "to"):
                k = self.kind(node.func.value)
                return CONFLICT if k is not None and k[0] == "ptr" else (_INT if k is not None else None)
            if name in ("minimum", "maximum"):
                return self._same(*(self.kind(a) for a in node.args[:2])) if len(node.args) >= 2 else _INT
            return _INT
        return _INT

    @staticmethod
    def _same(a, b):
        if a is None or b is None:
            return a or b
        return a if a == b else CONFLICT

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
                        vk = CONFLICT  # a loop variable or tuple element computed from a pointer
                    k = self._same(k, vk)
                if k is not None and k != self.kinds.get(name):
                    self.kinds[name] = k
                    changed = True
        changed = True
        while changed:
            changed = False
            for name, values in self.assigns.items():
                if self.kinds.get(name, CONFLICT) == CONFLICT:
                    continue
                for v in values:
                    if v is not None and self.assigned(name, v) is None:
                        self.kinds[name] = CONFLICT
                        changed = True
                        break

    def assigned(self, name: str, value):
        """The shadow of ``name`` after an assignment of ``value`` to it: the value computed again
        in int64, or, for an integer that cannot be (a load inside it), its new value widened (its
        own int32 overflow is then not seen; a pointer's offset must be computed again)."""
        got = self.shadow(value, whole=name)
        if got is None and self.kinds.get(name) == _INT:
            got = wide_call(ast.Name(id=name, ctx=ast.Load()))
        return got

    def shadow(self, node, whole: Optional[str] = None):
        """The int64 shadow of an expression (an AST), or None where it cannot be computed again.
        ``whole``: the name the expression is assigned to (a call that is the whole value is then
        read back from it instead of being made twice)."""
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.assigns:
                k = self.kinds.get(n)
                return None if k in (None, CONFLICT) else ast.Name(id=n + SHADOW, ctx=ast.Load())
            if n in self.tensors:
                return ast.Constant(0)
            if n in self.constexprs or n not in self.params:
                return ast.Name(id=n, ctx=ast.Load())
            return wide_call(ast.Name(id=n, ctx=ast.Load()))
        if isinstance(node, ast.Constant):
            return copy.deepcopy(node)
        if isinstance(node, ast.BinOp):
            if self.kind(node) in (None, CONFLICT):
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
            if body is None or orelse is None or self.kind(node) in (None, CONFLICT):
                return None
            return ast.IfExp(test=copy.deepcopy(node.test), body=body, orelse=orelse)
        if isinstance(node, ast.Call):
            name = call_name(node)
            if (name == "where" or _is_method(node, "where")) and len(node.args) == 3 and not node.keywords:
                if self.kind(node) in (None, CONFLICT):
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
                return wide_call(ast.Call(func=ast.Attribute(value=x, attr="to", ctx=ast.Load()),
                                      args=copy.deepcopy(node.args), keywords=copy.deepcopy(node.keywords)))
            if name in ("minimum", "maximum") and len(node.args) == 2 and not node.keywords:
                a, b = self.shadow(node.args[0]), self.shadow(node.args[1])
                if a is None or b is None:
                    return None
                return ast.Call(func=copy.deepcopy(node.func), args=[a, b], keywords=[])
            if whole is not None:  # the whole value: read it back from the name it was assigned to
                return wide_call(ast.Name(id=whole, ctx=ast.Load()))
            if name in _PURE:
                return wide_call(copy.deepcopy(node))
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



def with_shadows(stmts: List[ast.stmt], shadows: Shadows, needed: Set[str]) -> List[ast.stmt]:
    """``stmts`` with each needed name's shadow assigned after each assignment of the name (and at
    the start of a loop's body for its variable)."""
    def ok(n: str) -> bool:
        return n in needed and shadows.kinds.get(n) not in (None, CONFLICT)

    def assign(n: str, value) -> ast.Assign:
        return ast.Assign(targets=[ast.Name(id=n + SHADOW, ctx=ast.Store())], value=value, lineno=0)

    def after(s: ast.stmt) -> List[ast.stmt]:
        out = []
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Name) and ok(t.id):
                    out.append(assign(t.id, shadows.assigned(t.id, s.value)))
                elif isinstance(t, (ast.Tuple, ast.List)):
                    out.extend(assign(e.id, wide_call(ast.Name(id=e.id, ctx=ast.Load()))) for e in t.elts
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
                setattr(s, field, with_shadows(block, shadows, needed))
        if isinstance(s, ast.For):
            loop_vars = [s.target] if isinstance(s.target, ast.Name) else \
                [e for e in getattr(s.target, "elts", []) if isinstance(e, ast.Name)]
            s.body = [assign(v.id, wide_call(ast.Name(id=v.id, ctx=ast.Load()))) for v in loop_vars
                      if ok(v.id)] + s.body
        out.append(s)
        out.extend(after(s))
    return out
