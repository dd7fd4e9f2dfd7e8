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
  (``name__tk``, :mod:`.shadows`) assigned next to it: for an integer, its value computed again in
  int64 from the shadows of its operands (program ids, argument values and loaded integers widened
  first); for a pointer, its offset in int64 from its root, in the root's elements, each integer
  term added to it checked against its own width (:func:`.device.term`: a term that wraps puts its
  lane outside every view and marks it). The access is then made through ``root + offset``, and its
  mask becomes ``guard_offset(offset, mask, <the root's view>, ...)``
  (:func:`.device.guard_offset`): ``mask`` and inside the view. Masks computed from offsets keep
  Triton's axis properties (contiguity, divisibility) where masks computed from addresses do not,
  so a checked load keeps its vector width and its place in a software pipeline.
* **Loops.** Inside a loop of a kernel that may be replayed (:mod:`.replay`), an access only counts
  its offending lanes; the runtime replays a launch whose counted accesses offended, with every
  write skipped, and that replay makes their records (``_tk_replay``, a constexpr parameter).
* **Tensor descriptors** passed from the host: each ``desc.load`` / ``desc.store`` gets a probe
  statement before it (:func:`.device.desc_probe2`) checking the block's elements against the
  view of the descriptor's base tensor.
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
from typing import Dict, FrozenSet, List, Optional, Tuple

from .replay import COUNTED_SITES, helper_writes_of, replayable
from .shadows import ACCESSES, CONFLICT, SHADOW, TERM, WIDE, Provenance, Shadows, is_tl_call, wide_call, with_shadows

_KIND = {"load": "load", "store": "store"}
GUARD = "_tritonkit_gpu_guard"  # the names the helpers have in the kernel's module globals
GUARD_OFFSET = "_tritonkit_gpu_guard_offset"
PROBE = "_tritonkit_gpu_desc_probe"  # + the descriptor's rank
REPLAY = "_tk_replay"  # a constexpr parameter: 1 in a replay (writes skipped, counted sites make records)
REC, CAP = "_tk_rec", "_tk_cap"
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
    masked: bool = True  # whether the access has a mask (a descriptor's shape counts as one)

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


class _Rewriter(ast.NodeTransformer):
    def __init__(self, prov: Provenance, shadows: Shadows, tensors: FrozenSet[str], first_line: int,
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
        name = is_tl_call(node)
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
        name = is_tl_call(node)
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
        pos = ACCESSES[name]
        mask = None
        if len(node.args) > pos:
            mask = node.args[pos]
        else:
            kw = next((k for k in node.keywords if k.arg == "mask"), None)
            if kw is not None:
                mask = kw.value
        self.sites[site] = Site(line, _KIND.get(name, "atomic"), root, ptr_line, exact, counted,
                                masked=mask is not None)
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
    prov = Provenance(params)
    prov.learn(fn.body)
    shadows = Shadows(fn, tensors, prov)
    rw = _Rewriter(prov, shadows, tensors, first_line, absent)
    pointers = [t[1] for t in (rw.target(n) for n in ast.walk(fn) if isinstance(n, ast.Call)) if t is not None]
    rw.replay = replayable(fn, rw, helper_writes)
    rw.descriptors = {d: r for d, r in descriptors if r in (1, 2)}
    needed = shadows.needed(pointers)
    body = fn.body
    doc = [body[0]] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
    body = with_shadows(body[len(doc):], shadows, needed)
    body = _with_probes([rw.visit(s) for s in body])
    prologue = [ast.Assign(targets=[ast.Name(id=root_copy(r), ctx=ast.Store())], value=ast.Name(id=r, ctx=ast.Load()),
                           lineno=0) for r in rw.roots]
    for n in sorted(needed & set(params)):  # a parameter the body reassigns: its shadow starts as the parameter
        if shadows.kinds.get(n) in (None, CONFLICT):
            continue
        start = ast.BinOp(left=wide_call(ast.Call(func=ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()),
                                                                 attr="program_id", ctx=ast.Load()),
                                              args=[ast.Constant(0)], keywords=[])),
                          op=ast.Mult(), right=ast.Constant(0)) if n in tensors \
            else wide_call(ast.Name(id=n, ctx=ast.Load()))
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
                                                  helper_writes=lambda n: helper_writes_of(fn.__globals__.get(n)),
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


def extent(shape, strides) -> int:
    """One past the offset (in elements from the first element) of a view's last element: ``1 +
    sum((n - 1) * s)`` over its dimensions (``shape``, ``strides`` in elements), 0 for an empty view."""
    if any(int(n) == 0 for n in shape):
        return 0
    return 1 + sum((int(n) - 1) * int(s) for n, s in zip(shape, strides))


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
    hi = extent(t.shape, t.stride())
    if hi == 0:
        return 0, [], True
    dims = sorted(((int(n), int(s)) for n, s in zip(t.shape, t.stride()) if int(n) > 1 and int(s) != 0),
                  key=lambda d: d[1])
    span, levels, exact = 1, [], True
    for n, s in dims:
        if s < span:  # overlapping elements: the extent alone
            return hi, [], False
        if s > span:
            levels.append((s, span))
        span = (n - 1) * s + span
    levels.reverse()
    if len(levels) > 2:
        levels, exact = levels[:2], False
    return hi, levels, exact


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


def root_tensor(value):
    """The tensor a root argument's accesses are checked against: a descriptor's base tensor, or the
    argument itself."""
    return value.base if is_descriptor(value) else value


def is_descriptor(value) -> bool:
    """Whether a launch argument is a host-side tensor descriptor
    (``triton.tools.tensor_descriptor.TensorDescriptor``: a base tensor, a shape, strides in elements
    and the block each access moves)."""
    return all(hasattr(value, a) for a in ("base", "shape", "strides", "block_shape")) and \
        hasattr(getattr(value, "base", None), "untyped_storage")
