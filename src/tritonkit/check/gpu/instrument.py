"""``tritonkit check --gpu``: a ``@triton.jit`` kernel rewritten so that every load, store and atomic
checks its addresses against the storage of the tensor argument its pointer derives from, on the
GPU, at native speed.

The rewrite works on the kernel's source (its AST), once per kernel and set of tensor arguments:

* **Provenance.** A pointer expression's *root* is the kernel parameter it is computed from, found
  through the names the body assigns (``p = x_ptr + offs``), arithmetic, indexing and
  ``tl.where``; of those, the parameters the launch passes tensors to. An access whose pointer has
  exactly one such root is instrumented; others (a pointer made by a call: ``tl.make_block_ptr``,
  a tensor descriptor, a helper's return value; or two roots) are left as they are, and counted.
* **The check.** The access's mask becomes ``guard(ptr, mask, lo, hi, rec, cap, site)``
  (:func:`~.device.guard`): ``mask`` and inside ``[lo, hi)``, the root argument's storage in bytes
  (passed as two extra arguments per root, never specialized). A lane outside is not performed
  (nothing is read or written out of bounds), and the program makes one record of the site, its
  program id, the number of such lanes and their byte offsets.
* Helpers the kernel calls (other ``@triton.jit`` functions) are not rewritten: their accesses are
  not checked in this mode.

:func:`instrumented` returns the rewritten kernel as a Triton ``JITFunction`` (compiled and cached by
Triton like any kernel) with its site table; :mod:`.runtime` launches it in place of the original.
"""
from __future__ import annotations

import ast
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
GUARD = "_tritonkit_gpu_guard"  # the name the guard has in the kernel's module globals
REC, CAP = "_tk_rec", "_tk_cap"


def lo_name(root: str) -> str:
    """The extra parameter carrying the first byte address (int64) of ``root``'s storage."""
    return f"_tk_lo_{root}"


def hi_name(root: str) -> str:
    """The extra parameter carrying the address (int64) one byte past the end of ``root``'s storage."""
    return f"_tk_hi_{root}"


@dataclasses.dataclass
class Site:
    """One instrumented access: its line in the kernel's file, the operation, the root argument."""

    line: int
    access: str
    root: str


@dataclasses.dataclass
class Instrumented:
    """A kernel rewritten for one set of tensor arguments.

    Attributes:
        jit: the rewritten kernel (a Triton ``JITFunction``).
        sites: the instrumented accesses by site number.
        roots: the parameters that get ``lo``/``hi`` arguments.
        skipped: lines of accesses left unchecked (no single tensor root).
        file: the original kernel's source file.
    """

    jit: object
    sites: Dict[int, Site]
    roots: List[str]
    skipped: List[int]
    file: str


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


class _Rewriter(ast.NodeTransformer):
    def __init__(self, prov: _Provenance, tensors: FrozenSet[str], first_line: int,
                 absent: FrozenSet[str] = frozenset()) -> None:
        self.prov, self.tensors, self.first_line, self.absent = prov, tensors, first_line, absent
        self.sites: Dict[int, Site] = {}
        self.roots: List[str] = []
        self.skipped: List[int] = []

    def visit_Call(self, node: ast.Call):
        node = self.generic_visit(node)
        name = _is_tl_call(node)
        if name is None:
            f = node.func
            if isinstance(f, ast.Attribute) and (f.attr in ACCESSES or f.attr in ("gather", "scatter")):
                self.skipped.append(self.first_line + node.lineno - 1)  # a descriptor's access: not checked
            return node
        ptr = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("pointer", "ptr")),
                                                 None)
        line = self.first_line + node.lineno - 1
        if ptr is None:
            self.skipped.append(line)
            return node
        prov = self.prov.of(ptr)
        roots = prov & self.tensors
        if prov & self.absent:  # a pointer passed None: code that cannot run, or a pointer of two origins
            if roots:
                self.skipped.append(line)
            return node
        if len(roots) != 1:
            self.skipped.append(line)
            return node
        root = next(iter(roots))
        if root not in self.roots:
            self.roots.append(root)
        site = len(self.sites)
        self.sites[site] = Site(line, _KIND.get(name, "atomic"), root)
        pos = ACCESSES[name]
        mask = None
        if len(node.args) > pos:
            mask = node.args[pos]
        else:
            kw = next((k for k in node.keywords if k.arg == "mask"), None)
            if kw is not None:
                mask = kw.value
        guarded = ast.Call(func=ast.Name(id=GUARD, ctx=ast.Load()),
                           args=[ptr, mask if mask is not None else ast.Constant(None),
                                 ast.Name(id=lo_name(root), ctx=ast.Load()), ast.Name(id=hi_name(root), ctx=ast.Load()),
                                 ast.Name(id=REC, ctx=ast.Load()), ast.Name(id=CAP, ctx=ast.Load()),
                                 ast.Constant(site)], keywords=[])
        if len(node.args) > pos:
            node.args[pos] = guarded
        else:
            node.keywords = [k for k in node.keywords if k.arg != "mask"] + [ast.keyword(arg="mask", value=guarded)]
        return node


def rewrite(source: str, tensors: FrozenSet[str], first_line: int = 1,
            absent: FrozenSet[str] = frozenset()) -> Tuple[str, Dict[int, Site], List[str], List[int], str]:
    """Rewrite a ``@triton.jit`` function's source (decorators dropped) for the tensor parameters
    ``tensors`` (``absent``: parameters passed None; an access through them cannot run and is not
    counted as unchecked). Returns ``(new source, sites, roots, skipped lines, the function's name)``.

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
    rw = _Rewriter(prov, tensors, first_line, absent)
    fn.body = [rw.visit(s) for s in fn.body]
    fn.decorator_list = []
    extra = [REC, CAP] + [n for r in rw.roots for n in (lo_name(r), hi_name(r))]
    fn.args.args.extend(ast.arg(arg=n) for n in extra)
    if fn.args.defaults:  # after parameters with defaults, ours need one too (always passed)
        fn.args.defaults.extend(ast.Constant(0) for _ in extra)
    ast.fix_missing_locations(tree)
    return ast.unparse(fn), rw.sites, rw.roots, rw.skipped, fn.name


def _folder() -> str:
    path = os.path.join(tempfile.gettempdir(), f"tritonkit-gpu-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.makedirs(path, exist_ok=True)
    return path


def instrumented(jit_fn, tensors: FrozenSet[str], absent: FrozenSet[str] = frozenset()) -> Instrumented:
    """The rewritten kernel of the ``JITFunction`` ``jit_fn`` for the tensor parameters ``tensors``
    (``absent``: the parameters passed None).

    Raises:
        OSError, TypeError, ValueError, SyntaxError: its source cannot be read or rewritten.
    """
    import triton

    from . import device
    fn = jit_fn.fn
    lines, start = inspect.getsourcelines(fn)
    source, sites, roots, skipped, name = rewrite("".join(lines), tensors, start, absent)
    digest = hashlib.sha256(f"{fn.__code__.co_filename}\0{source}".encode()).hexdigest()[:24]
    path = os.path.join(_folder(), f"{name}_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(source + "\n")
        os.replace(tmp, path)
    namespace = fn.__globals__  # the kernel's own globals, live: the guard is added under a private name
    namespace[GUARD] = device.guard
    code = compile(source + "\n", path, "exec")
    local: dict = {}
    exec(code, namespace, local)
    new = local[name]
    new.__module__, new.__qualname__ = fn.__module__, getattr(fn, "__qualname__", name)
    ours = [REC, CAP] + [n for r in roots for n in (lo_name(r), hi_name(r))]
    given = getattr(jit_fn, "do_not_specialize", None) or []
    keep = [p if isinstance(p, str) else jit_fn.arg_names[p] for p in given]
    jit = triton.jit(new, do_not_specialize=keep + ours, debug=getattr(jit_fn, "debug", None),
                     noinline=getattr(jit_fn, "noinline", None))
    jit._tritonkit_instrumented = True
    return Instrumented(jit=jit, sites=sites, roots=roots, skipped=skipped, file=fn.__code__.co_filename)
