"""The batched engine's and the sequential engine's rewrite of a ``@triton.jit`` function's source.

Both start from Triton's own interpreter rewrite (``triton.runtime.interpreter.FunctionRewriter``):

* :class:`TritonRewriter` (the sequential engine's) makes ``min``/``max`` calls, ``and``/``or`` and
  ``not`` what Triton's compiler makes them (:func:`.simt.builtin_minmax`, :func:`.simt.boolean`,
  :func:`.simt.logical_not`);
* :class:`SimtRewriter` (the batched engine's) also folds early returns into ``if`` branches and
  rewrites the loops and ``if`` statements so that they run over a batch whose programs diverge (the
  runtime they call is :mod:`.simt`, which describes them).

The rewritten code calls its runtime through the name :data:`.simt._MODULE` in the kernel's globals
(:func:`.kernels.rewritten` binds it). The disk cache keys rewritten code by this file.
"""
from __future__ import annotations

import ast
import copy
import itertools
import linecache
import textwrap
from typing import List, Optional

from triton.runtime import interpreter as _interp

from .simt import _MODULE

_counter = itertools.count()


def _stored_names(body: List[ast.stmt]) -> Optional[List[str]]:
    """Plain names the statements assign (in order, once each), or None if the loop cannot be
    rewritten (``break``/``continue``/``return``/``yield``, assignments to attributes or items,
    ``global``/``nonlocal``)."""
    names: List[str] = []

    def walk(node) -> bool:
        if isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Global,
                             ast.Nonlocal)):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                             ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return True  # their own scope
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)) and isinstance(node.ctx, ast.Store):
            return False
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if node.id not in names and not node.id.startswith("_tk_"):  # not a rewritten inner loop's own
                names.append(node.id)
        return all(walk(child) for child in ast.iter_child_nodes(node))

    return names if all(walk(s) for s in body) else None


def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _call(attr: str, args, keywords=()) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=_name(_MODULE), attr=attr, ctx=ast.Load()), args=list(args),
                    keywords=list(keywords))


#: node classes that hold nothing a rewrite changes (names, constants, contexts, operators): the
#: transformers here do not walk into them unless one has a visitor for their class
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
_GENERIC, _LEAF = object(), object()


class _FastTransformer(ast.NodeTransformer):
    """``ast.NodeTransformer``, walked faster: each node class's visitor is looked up once per
    transformer class, and the nodes of :data:`_LEAVES` are not walked into where no visitor wants
    them (a third of a kernel's nodes are names, constants and their contexts). The results are
    ``ast.NodeTransformer``'s."""

    _tables: dict = {}  # transformer class -> {node class: its visitor, _LEAF or _GENERIC}

    def visit(self, node):
        cls = node.__class__
        table = _FastTransformer._tables.get(type(self))
        if table is None:
            table = _FastTransformer._tables[type(self)] = {}
        how = table.get(cls)
        if how is None:
            how = getattr(type(self), "visit_" + cls.__name__, None)
            if how is None or how is getattr(ast.NodeVisitor, "visit_" + cls.__name__, None):
                how = _LEAF if issubclass(cls, _LEAVES) else _GENERIC
            table[cls] = how
        if how is _LEAF:
            return node
        if how is _GENERIC:
            return self.generic_visit(node)
        return how(self, node)

    def generic_visit(self, node):
        visit, AST = self.visit, ast.AST
        for field in node._fields:
            old = getattr(node, field, None)
            if isinstance(old, list):
                new = []
                for value in old:
                    if isinstance(value, AST):
                        value = visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, AST):
                            new.extend(value)
                            continue
                    new.append(value)
                old[:] = new
            elif isinstance(old, AST):
                value = visit(old)
                if value is None:
                    delattr(node, field)
                elif value is not old:
                    setattr(node, field, value)
        return node


def _thunk(expr) -> ast.Lambda:
    """``lambda: expr``."""
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=expr)


def _saves_and_merges(loop: str, names: List[str]):
    saves, merges = [], []
    for i, n in enumerate(names):
        saved = f"_tk_{loop}_s{i}"
        saves.append(ast.Try(
            body=[ast.Assign(targets=[_name(saved, True)], value=_name(n))],
            handlers=[ast.ExceptHandler(type=_name("NameError"), name=None,
                                        body=[ast.Assign(targets=[_name(saved, True)],
                                                         value=ast.Attribute(value=_name(_MODULE), attr="UNSET",
                                                                             ctx=ast.Load()))])],
            orelse=[], finalbody=[]))
        merge = ast.Assign(targets=[_name(n, True)],
                           value=ast.Call(func=ast.Attribute(value=_name(loop), attr="merge", ctx=ast.Load()),
                                          args=[_name(n), _name(saved)], keywords=[]))
        # a name the body assigns only under a condition (``if STAGE == 2: mask = ...``, a compile-time
        # branch not taken) may still be unbound after the iteration: it stays so, as in the original
        merges.append(ast.Try(body=[merge], handlers=[ast.ExceptHandler(type=_name("NameError"), name=None,
                                                                        body=[ast.Pass()])],
                              orelse=[], finalbody=[]))
    guard = ast.If(test=ast.Attribute(value=_name(loop), attr="masked", ctx=ast.Load()), body=merges, orelse=[])
    return saves, ([guard] if merges else [])


def _located(stmts: List[ast.stmt], node: ast.AST) -> List[ast.stmt]:
    """``stmts``, made in place of ``node``, given its location."""
    for s in stmts:
        ast.copy_location(s, node)
    return stmts


def _is_range(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "range") or (isinstance(f, ast.Attribute) and f.attr == "range")


def _locals_of(fn: ast.FunctionDef) -> set:
    """The local variable names of a function: its parameters and every name it binds (not in
    nested scopes), less those it declares ``global`` or ``nonlocal``, as Python decides them."""
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    declared: set = set()
    nested = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    stack = list(fn.body)
    while stack:  # one walk, the function's own scope only
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, nested):
            continue
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            continue
        if isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return {n for n in names - declared if not n.startswith("_tk_")}


def _dead_on_entry(body: List[ast.stmt], names: List[str]) -> List[bool]:
    """For each name, whether the body assigns it (a plain top-level assignment) before anything reads it."""
    dead = {}
    for stmt in body:
        loads, stores = set(), set()
        assigns = isinstance(stmt, (ast.Assign, ast.AnnAssign))
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    loads.add(n.id)
                elif assigns and isinstance(n.ctx, ast.Store):
                    stores.add(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                loads.add(n.target.id)  # x += ...
        for n in loads:
            dead.setdefault(n, False)
        for n in stores:
            dead.setdefault(n, True)
    return [dead.get(n, False) for n in names]


def _method(loop: str, attr: str, args) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=_name(loop), attr=attr, ctx=ast.Load()), args=list(args), keywords=[])


def _compaction(loop: str, node: ast.For, local_names: set):
    """The statement a compacted ``for`` runs at the top of an iteration whose programs changed (the
    function's local variables the body uses narrowed: ``names = loop.narrow(locals(), ...)``) and the
    one after the loop (they and the loop target widened): see :mod:`.compact`. A variable not bound
    is bound to ``UNSET`` by them."""
    targets = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
    body = ast.Module(body=node.body, type_ignores=[])
    used = {n.id for n in ast.walk(body) if isinstance(n, ast.Name)}  # read or assigned in the body
    names = sorted((used & local_names) - set(targets))
    target = targets[0] if isinstance(node.target, ast.Name) else None
    if not names and target is None:
        return ast.Pass(), ast.Pass()
    locals_call = ast.Call(func=_name("locals"), args=[], keywords=[])
    keys = ast.Constant(tuple(names))

    def store(extra=()):
        return ast.Tuple(elts=[_name(n, True) for n in names + list(extra)], ctx=ast.Store())
    head = ast.If(test=ast.Attribute(value=_name(loop), attr="narrowing", ctx=ast.Load()),
                  body=[ast.Assign(targets=[store()], value=_method(
                      loop, "narrow", [locals_call, keys, ast.Constant(tuple(_dead_on_entry(node.body, names)))]))]
                  if names else [ast.Pass()], orelse=[])
    tail = ast.If(test=ast.Attribute(value=_name(loop), attr="widens", ctx=ast.Load()),
                  body=[ast.Assign(targets=[store([target] if target else [])], value=_method(
                      loop, "widen", [locals_call, keys, ast.Constant(target)]))], orelse=[])
    return head, tail


class _LoopTransformer(_FastTransformer):
    def __init__(self, local_names: set) -> None:
        self.local_names = local_names
        self.loops = 0  # loops around the node being visited

    def _visit_body(self, node):
        self.loops += 1
        try:
            return self.generic_visit(node)
        finally:
            self.loops -= 1

    def visit_For(self, node: ast.For):
        node = self._visit_body(node)
        if node.orelse or not _is_range(node.iter):
            return node
        names = _stored_names(node.body)
        if names is None:
            return node
        target_names = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        names = [n for n in names if n not in target_names]
        loop = f"_tk_loop{next(_counter)}"
        saves, merges = _saves_and_merges(loop, names)
        head, tail = _compaction(loop, node, self.local_names)
        make = ast.Assign(targets=[_name(loop, True)], value=ast.copy_location(
            _call("loop_range", node.iter.args, node.iter.keywords), node.iter))
        new_for = ast.For(target=node.target, iter=_name(loop), body=[head] + saves + node.body + merges, orelse=[],
                          type_comment=None)
        out = [make, new_for, tail]
        return _located(out, node)

    def visit_While(self, node: ast.While):
        node = self._visit_body(node)
        if node.orelse:
            return node
        names = _stored_names(node.body)
        if names is None:
            return node
        loop = f"_tk_loop{next(_counter)}"
        saves, merges = _saves_and_merges(loop, names)
        make = ast.Assign(targets=[_name(loop, True)], value=_call("loop_while", []))
        test = ast.copy_location(ast.Call(func=ast.Attribute(value=_name(loop), attr="test", ctx=ast.Load()),
                                          args=[node.test], keywords=[]), node.test)
        new_while = ast.While(test=test, body=saves + node.body + merges, orelse=[])
        out = [make, new_while]
        return _located(out, node)

    def visit_IfExp(self, node: ast.IfExp):
        """``a if c else b``: :func:`.simt.if_exp` of thunks of ``a`` and ``b``."""
        node = self.generic_visit(node)
        return ast.copy_location(_call("if_exp", [node.test, _thunk(node.body), _thunk(node.orelse)]), node)

    def visit_If(self, node: ast.If):
        """``if`` on a value that may differ between programs: each branch runs for the programs that
        take it, with an active mask, its variables merged as a loop body's are (see
        :class:`.simt._If`); one that exits (``return``, ``break``, ``continue``) or assigns to
        attributes or items keeps the group split."""
        node = self.generic_visit(node)
        then_names, else_names = _stored_names(node.body), _stored_names(node.orelse)
        if then_names is None or else_names is None:
            return node
        branch = f"_tk_if{next(_counter)}"
        make = ast.copy_location(_call("branch", [node.test, ast.Constant(self.loops > 0)]), node.test)
        out: List[ast.stmt] = [ast.Assign(targets=[_name(branch, True)], value=make)]
        for taken, body, names in ((True, node.body, then_names), (False, node.orelse, else_names)):
            if not body:
                continue
            saves, merges = _saves_and_merges(branch, names)
            leave = ast.Expr(value=_method(branch, "leave", []))
            enter = _method(branch, "enter", [ast.Constant(taken)])
            out.append(ast.If(test=enter, body=saves + body + merges + [leave], orelse=[]))
        return _located(out, node)


def _bare_return(node) -> bool:
    return isinstance(node, ast.Return) and (node.value is None or (isinstance(node.value, ast.Constant)
                                                                     and node.value.value is None))


def _returns(stmts: List[ast.stmt]) -> bool:
    """Whether a bare ``return`` ends some path through the statements, outside loops (in them or
    their ``if`` branches, at any depth)."""
    return any(_bare_return(s) or (isinstance(s, ast.If) and (_returns(s.body) or _returns(s.orelse)))
               for s in stmts)


#: a function whose folded body would have more than this many times its AST nodes keeps its returns
#: (each ``if`` that returns on one path and falls through on both gets a copy of what follows it)
MAX_FOLD_GROWTH = 4


def fold_early_returns(stmts: List[ast.stmt]) -> List[ast.stmt]:
    """A function's body with its bare ``return`` statements (outside loops) folded into ``if``
    branches: what follows an ``if`` that returns on some path moves into its branches (``if pid >=
    n: return`` then ``rest`` becomes ``if pid >= n: pass else: rest``; a branch that can return and
    fall through gets its own copy), and a ``return`` drops what follows it. The same function,
    whose ``if`` statements :meth:`_LoopTransformer.visit_If` can run over a divergent batch. The
    body is returned unchanged where folding would grow it more than :data:`MAX_FOLD_GROWTH` times."""
    folded = _fold(stmts)
    if folded is stmts:
        return stmts
    size = sum(1 for s in stmts for _ in ast.walk(s))
    return folded if sum(1 for s in folded for _ in ast.walk(s)) <= MAX_FOLD_GROWTH * max(size, 1) else stmts


def _fold(stmts: List[ast.stmt]) -> List[ast.stmt]:
    """:func:`fold_early_returns` of statements after which nothing runs (a function's body, and
    the branches made here)."""
    for i, s in enumerate(stmts):
        if _bare_return(s):
            return stmts[:i]
        if isinstance(s, ast.If) and (_returns(s.body) or _returns(s.orelse)):
            rest = stmts[i + 1:]
            body = _fold(s.body + rest)
            orelse = _fold(s.orelse + copy.deepcopy(rest))  # each branch its own nodes: they are rewritten in place
            return stmts[:i] + [ast.copy_location(ast.If(test=s.test, body=body or [ast.Pass()], orelse=orelse), s)]
    return stmts


class _BuiltinsTransformer(_FastTransformer):
    """What Python would evaluate per program but Triton's compiler evaluates on kernel values:
    ``min(...)``/``max(...)`` calls (given what the name means there; a local of that name is left
    alone) become :func:`.simt.builtin_minmax` calls, ``a and b``/``a or b`` become
    :func:`.simt.boolean` of thunks of the operands, ``not a`` :func:`.simt.logical_not`."""

    def __init__(self, local_names: set) -> None:
        self.local_names = local_names

    def visit_Call(self, node: ast.Call):
        node = self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("min", "max") and f.id not in self.local_names:
            return ast.copy_location(_call("builtin_minmax", [f] + node.args, node.keywords), node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp):
        node = self.generic_visit(node)
        thunks = [_thunk(v) for v in node.values]
        return ast.copy_location(_call("boolean", [ast.Constant(isinstance(node.op, ast.And))] + thunks), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("logical_not", [node.operand]), node)
        return node


def _fast(triton_cls: type) -> Optional[type]:
    """Triton's transformer class walked as :class:`_FastTransformer` walks (its rules unchanged: it
    visits what it visits, Triton 3.6's assignments not their values), or None where it walks its
    own way (it defines ``visit`` or ``generic_visit``) or is made with arguments (then Triton's own
    instance walks)."""
    if triton_cls not in _FAST:
        own = {m for cls in triton_cls.__mro__ if cls not in (ast.NodeTransformer, ast.NodeVisitor, object)
               for m in vars(cls) if m in ("visit", "generic_visit", "__init__")}
        _FAST[triton_cls] = None if own else type("_FastTriton", (_FastTransformer, triton_cls), {})
    return _FAST[triton_cls]


def _one_pass(ours: tuple) -> type:
    """One transformer class that applies ``ours`` (our transformer classes, whose node classes are
    disjoint) in one walk, each node's children first, then each rule of ours for it: what their
    walks one after the other make, as no rule of one makes a node another rewrites."""
    if ours not in _ONE_PASS:
        def __init__(self, local_names: set) -> None:
            for cls in ours:
                cls.__init__(self, local_names)
        _ONE_PASS[ours] = type("_OnePass", ours, {"__init__": __init__})
    return _ONE_PASS[ours]


_FAST: dict = {}
_ONE_PASS: dict = {}


def _function_source(fn):
    """``(file, line of the def, the function's source from its def line, dedented)`` from the
    file's lines as ``linecache`` holds them, or None. ``inspect.getsourcelines``, which Triton's
    rewriter calls, tokenizes the function to find its end (1-2 ms of a kernel's first rewrite on
    the CPU machine): here the source ends before the first line of code indented no deeper than
    the ``def`` (not a closing bracket), and the caller checks that the parsed function covers every
    line of the function's code (:func:`_covers`), else takes Triton's way."""
    code = fn.__code__
    filename = code.co_filename
    linecache.checkcache(filename)
    lines = linecache.getlines(filename)
    start = _def_index(code, lines)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = len(lines)
    for i in range(start + 1, len(lines)):
        text = lines[i].lstrip()
        if text and text[0] != "#" and len(lines[i]) - len(text) <= indent and text[0] not in ")]}":
            end = i
            break
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return filename, start + 1, textwrap.dedent("".join(lines[start:end]))


def _def_index(code, lines: List[str]) -> Optional[int]:
    """The index in ``lines`` (a file's lines) of the ``def`` line of the function whose code is
    ``code``: the first at or after its first line (below its decorators), or None."""
    return next((i for i in range(max(0, code.co_firstlineno - 1), len(lines))
                 if lines[i].lstrip().startswith("def ")), None)


def _covers(tree: ast.Module, fn) -> bool:
    """Whether ``tree`` is one function whose lines reach the last line of ``fn``'s code."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    last = max((line for _, _, line in fn.__code__.co_lines() if line is not None), default=0)
    return tree.body[0].end_lineno >= last


class TritonRewriter(_interp.FunctionRewriter):
    """Triton's interpreter rewrite of a ``@triton.jit`` function, with ``min``/``max``, ``and``/``or``
    and ``not`` as Triton's compiler has them (:class:`_BuiltinsTransformer`): the sequential
    engine's rewrite.

    The function's source is taken from its file's lines (:func:`_function_source`, Triton's way
    where that fails), parsed at its def's line of the file instead of every node moved there
    after, and transformed in two walks: Triton's (:func:`_fast`), then ours in one
    (:func:`_one_pass`); the nodes made without a location are given one once, at the end. The
    result is Triton's rewrite followed by ours. (Triton's rules cannot share our walk: Triton 3.6's
    ``visit_Assign`` does not walk into the value it wraps.)"""

    #: our transformers, applied after Triton's, in order (:func:`_one_pass` merges their walks)
    _ours: tuple = (_BuiltinsTransformer,)

    def rewrite_ast(self):
        found = _function_source(self.fn)
        if found is not None:
            self.filename, self.def_file_lineno, src = found
            try:
                tree = self._parse(src)
            except SyntaxError:  # not the function's whole source: Triton's way finds it
                tree = None
            if tree is not None and _covers(tree, self.fn):
                return self._compile_and_exec(self._transform(tree))
        return super().rewrite_ast()

    def _get_jit_fn_file_line(self):
        """The function's file and the line of its ``def`` in it (below its decorators), as Triton's
        rewriter takes them from a ``JITFunction`` made for the purpose, from the file's lines
        (cached by ``linecache``): making the ``JITFunction`` reads the function's source again
        (1.5 ms of a 9 ms rewrite of a causal attention's kernel on the CPU machine)."""
        code = self.fn.__code__
        start = _def_index(code, linecache.getlines(code.co_filename))
        return (code.co_filename, start + 1) if start is not None else super()._get_jit_fn_file_line()

    def _transform_ast(self, src):
        # Triton's rewrite_ast calls it (where the source was not found from the file's lines)
        return self._transform(self._parse(src))

    def _parse(self, src: str) -> ast.Module:
        return ast.parse("\n" * (self.def_file_lineno - 1) + src)

    def _transform(self, tree: ast.Module) -> ast.Module:
        fns = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.local_names = _locals_of(fns[0]) if fns else set()
        for fn in fns:
            self._prepare(fn)
        fast = _fast(type(self.ast_transformer))
        tree = (fast() if fast is not None else self.ast_transformer).visit(tree)  # Triton's walk
        tree = _one_pass(self._ours)(self.local_names).visit(tree)  # then ours, in one walk
        ast.fix_missing_locations(tree)
        return tree

    def _prepare(self, fn: ast.FunctionDef) -> None:
        """What is done to the parsed function before it is transformed (nothing here)."""


class SimtRewriter(TritonRewriter):
    """Triton's interpreter rewrite of a ``@triton.jit`` function (with :class:`TritonRewriter`'s
    ``min``/``max``, ``and``/``or`` and ``not``), its early returns folded into branches
    (:func:`fold_early_returns`, on the parsed function: the rewrites commute with it), and its
    loops and branches made runnable over a batch whose programs diverge (see :mod:`.simt`)."""

    _ours = (_BuiltinsTransformer, _LoopTransformer)

    def _prepare(self, fn: ast.FunctionDef) -> None:
        fn.body = fold_early_returns(fn.body) or [ast.Pass()]
