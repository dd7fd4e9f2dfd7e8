"""The rewrite takes a kernel's source from its file's lines and transforms it in one walk: the trees
it makes are those of Triton's way (``inspect`` for the source, each transformer its own walk)."""
import ast
import importlib.util
import inspect
import textwrap

import pytest
import triton.language as tl
from triton.runtime import interpreter as _interp

from tritonkit.check.interp import rewrite
from tritonkit.check.interp.rewrite import SimtRewriter, TritonRewriter

#: functions laid out the ways a file may lay them out; each is rewritten both ways
_LAYOUTS = '''
import triton
import triton.language as tl


@triton.jit
def multi_line_signature(
    x,
    n,
):
    if n > 0:
        return
    for i in range(n):
        x += min(i, n) if i and not n else max(i, 1)
        y = min(i, n) if i and not n else max(i, 1)
    tl.store(x, y)


@triton.jit
def docstring_at_column_zero(x):
    """A docstring whose second line
starts at column 0."""
    y = x + 1
    return y


@triton.jit
def backslash_at_column_zero(x):
    y = x + \\
1
    while y < 3:
        y = y + 1
    return y


@triton.jit
def trailing_comment(x, n):
    y = [x,
         n]
    return y
# a comment at column 0, then the next function


class Holder:
    @staticmethod
    def method(x, n):
        for i in range(0, n, 2):
            if i < n - 1:
                x = x + i
        return x

    def other(self):
        return 0


if True:
    def under_an_if(x):
        a = (x
    )  # a closing bracket as far left as the def
        return a
else:
    pass


def last_without_newline(x):
    return x or 1'''


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    path = tmp_path_factory.mktemp("layouts") / "layouts_mod.py"
    path.write_text(_LAYOUTS)
    spec = importlib.util.spec_from_file_location("layouts_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(rewriter_cls, fn, monkeypatch=None, tritons_way=False):
    """The tree ``rewriter_cls`` makes for ``fn`` (Triton's way for the source where ``tritons_way``),
    and whether ``inspect.getsourcelines`` was called."""
    calls = []
    original = inspect.getsourcelines
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inspect, "getsourcelines", lambda obj: calls.append(obj) or original(obj))
        if tritons_way:
            mp.setattr(rewrite, "_function_source", lambda fn: None)
        r = rewriter_cls(fn)
        trees = []
        r._compile_and_exec = lambda tree: trees.append(tree) or fn
        r.rewrite_ast()
    rewrite._counter = __import__("itertools").count()  # the loop names of both trees alike
    return ast.dump(trees[0], include_attributes=True), bool(calls)


_NAMES = ["multi_line_signature", "docstring_at_column_zero", "backslash_at_column_zero", "trailing_comment",
          "Holder.method", "under_an_if", "last_without_newline"]


def _function(module, name):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return getattr(obj, "fn", obj)


@pytest.mark.parametrize("name", _NAMES)
@pytest.mark.parametrize("rewriter_cls", [TritonRewriter, SimtRewriter], ids=["sequential", "simt"])
def test_the_source_from_the_files_lines_gives_tritons_tree(layouts, name, rewriter_cls):
    fn = _function(layouts, name)
    rewrite._counter = __import__("itertools").count()
    ours, inspected = _tree(rewriter_cls, fn)
    theirs, _ = _tree(rewriter_cls, fn, tritons_way=True)
    assert ours == theirs
    # where the lines end the function early (a string or a continuation at column 0) the parse
    # fails and Triton's way is taken; elsewhere ``inspect`` is not needed
    assert inspected == (name in ("docstring_at_column_zero", "backslash_at_column_zero"))


def test_a_tree_that_stops_before_the_functions_last_line_is_not_taken(layouts):
    fn = _function(layouts, "multi_line_signature")
    whole = ast.parse(textwrap.dedent(inspect.getsource(fn).split("@triton.jit\n", 1)[-1]))
    ast.increment_lineno(whole, fn.__code__.co_firstlineno)
    assert rewrite._covers(whole, fn)
    whole.body[0].end_lineno -= 2  # as if the source had ended two lines early
    assert not rewrite._covers(whole, fn)
    whole.body.append(ast.Pass())  # a statement after the function: not the function alone
    assert not rewrite._covers(whole, fn)


def _library_functions():
    fns = []
    for module in (tl.standard, tl.core, tl.math):
        for name, obj in sorted(vars(module).items()):
            fn = getattr(obj, "fn", None)
            if type(obj).__name__ == "JITFunction" and callable(fn) and fn not in fns:
                fns.append(fn)
    return fns


def _separate_walks(ours):
    """What :func:`rewrite._one_pass` stands for: each of ``ours`` in its own walk, in order."""
    class Separate:
        def __init__(self, local_names):
            self.local_names = local_names

        def visit(self, tree):
            for cls in ours:
                tree = cls(self.local_names).visit(tree)
            return tree
    return Separate


class _AssignsLikeTriton36(ast.NodeTransformer):
    """Triton 3.6's interpreter transform: an assignment's value wrapped in ``to_tensor``, its
    targets walked, the value itself not walked into."""

    def visit_Assign(self, node):
        node.targets = [self.visit(t) for t in node.targets]
        call = ast.Attribute(value=ast.Name(id="interpreter_semantic", ctx=ast.Load()), attr="to_tensor",
                             ctx=ast.Load())
        node.value = ast.Call(func=call, args=[node.value, ast.Constant(value=False)], keywords=[])
        return node


@pytest.mark.parametrize("triton_transformer", [None, _AssignsLikeTriton36()], ids=["this-triton", "triton-3.6"])
@pytest.mark.parametrize("rewriter_cls", [TritonRewriter, SimtRewriter], ids=["sequential", "simt"])
def test_the_fast_walks_make_what_the_walks_one_after_the_other_make(layouts, rewriter_cls, triton_transformer):
    fns = _library_functions() + [_function(layouts, n) for n in _NAMES]
    assert len(fns) > 20
    cls = rewriter_cls if triton_transformer is None else type("R", (rewriter_cls,),
                                                                 {"ast_transformer": triton_transformer})
    for fn in fns:
        rewrite._counter = __import__("itertools").count()
        fast, _ = _tree(cls, fn)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rewrite, "_one_pass", _separate_walks)
            mp.setattr(rewrite, "_fast", lambda triton_cls: None)  # Triton's own walk
            separate, _ = _tree(cls, fn)
        assert fast == separate, fn.__qualname__
        if fn.__name__ == "multi_line_signature":  # ``y = min(...) if ... else max(...)`` rewritten too
            assert "func=Name(id='min'" not in fast and "func=Name(id='max'" not in fast


def test_tritons_transformer_keeps_its_own_walk_where_it_defines_one():
    class OwnWalk(_interp.ASTTransformer):
        def generic_visit(self, node):
            return super().generic_visit(node)

    assert rewrite._fast(_interp.ASTTransformer) is not None
    assert rewrite._fast(OwnWalk) is None


class _Edits:
    """Rewrites that use every way a transformer may answer: a new node, None (removed), a list."""

    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        return ast.copy_location(ast.BinOp(left=node.right, op=node.op, right=node.left), node)

    def visit_Expr(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Constant):
            return None  # docstrings and bare constants removed
        return [node, ast.copy_location(ast.Pass(), node)]


class _Renames:
    """A visitor of a node class the fast walk otherwise skips."""

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id=node.id + "_", ctx=node.ctx), node)


@pytest.mark.parametrize("edits", [_Edits, _Renames])
def test_the_fast_walk_gives_node_transformers_results(edits):
    fast = type("Fast", (edits, rewrite._FastTransformer), {})
    slow = type("Slow", (edits, ast.NodeTransformer), {})
    for source in (inspect.getsource(rewrite), _LAYOUTS):
        a, b = fast().visit(ast.parse(source)), slow().visit(ast.parse(source))
        assert ast.dump(a, include_attributes=True) == ast.dump(b, include_attributes=True)
