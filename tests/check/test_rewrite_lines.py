"""The checked interpreter's rewrite places a kernel's code on the lines of its file as Triton's own
rewriter does: findings and tracebacks name the kernel's lines."""
import pytest
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

from tritonkit.check.interp.rewrite import SimtRewriter, TritonRewriter


@triton.autotune(configs=[triton.Config({"B": 16})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % 16 == 0})
@triton.jit
def _decorated(x, n, B: tl.constexpr, EVEN: tl.constexpr):
    """A kernel under three decorators, its docstring
    on two lines."""
    def_like = 0  # a line that mentions def
    tl.store(x + tl.arange(0, B), def_like)


@triton.jit
def _plain(x):
    tl.store(x, 1)


def _base(fn):
    """What Triton's rewriter takes for ``fn``'s file and ``def`` line."""
    return _interp.FunctionRewriter._get_jit_fn_file_line(TritonRewriter(fn))


@pytest.mark.parametrize("fn", [_decorated.fn.fn.fn, _plain.fn, tl.max.fn, tl.sum.fn, tl.zeros.fn],
                         ids=["autotune-heuristics-jit", "jit", "tl.max", "tl.sum", "tl.zeros"])
@pytest.mark.parametrize("rewriter", [TritonRewriter, SimtRewriter], ids=["sequential", "simt"])
def test_the_def_line_is_tritons(fn, rewriter):
    file_name, line = rewriter(fn)._get_jit_fn_file_line()
    assert (file_name, line) == _base(fn)
    with open(file_name) as f:
        assert f.readlines()[line - 1].lstrip().startswith(f"def {fn.__name__}(")


def test_a_rewritten_kernel_keeps_its_lines():
    """Every statement of the rewritten kernel sits on the line it has in this file."""
    import ast
    r = SimtRewriter(_decorated.fn.fn.fn)
    trees = []
    r._compile_and_exec = lambda tree: trees.append(tree) or _decorated.fn.fn.fn
    r.rewrite_ast()
    fn = next(n for n in trees[0].body if isinstance(n, ast.FunctionDef))
    with open(__file__) as f:
        lines = f.readlines()
    assert lines[fn.lineno - 1].startswith("def _decorated(")
    store = next(n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "store")
    assert "tl.store(x + tl.arange(0, B), def_like)" in lines[store.lineno - 1]
