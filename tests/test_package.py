"""The package's shape: no import cycle (between modules, or between the packages at any level),
no module over ~600 lines but data tables, and ``tritonkit.check`` usable without the optional
libraries."""
import ast
import os
import subprocess
import sys
import textwrap
from collections import defaultdict


SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
MAX_LINES = 600
DATA_TABLES = {"tritonkit/check/interp/libdevice.py"}  # CPU versions of every libdevice symbol: a table


def _modules():
    """{module name: (path, is_package)} of every module under src/tritonkit."""
    out = {}
    for dirpath, _, files in os.walk(os.path.join(SRC, "tritonkit")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(path, SRC)[:-3].replace(os.sep, ".")
                is_pkg = name.endswith(".__init__")
                out[name[: -len(".__init__")] if is_pkg else name] = (path, is_pkg)
    return out


def _imports(modules):
    """{module: modules it imports}: every import statement, at module level, in functions and under
    ``TYPE_CHECKING`` alike. ``from P import x`` imports the module ``P.x`` where there is one, else
    ``P`` itself (a name its ``__init__`` defines)."""
    edges = defaultdict(set)
    for mod, (path, is_pkg) in modules.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = mod.split(".")[: len(mod.split(".")) - node.level + (1 if is_pkg else 0)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges[mod].update(t for t in targets if t in modules and t != mod)
    return edges


def _cycles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_modules():
    modules = _modules()
    assert _cycles(modules, _imports(modules)) == []


def test_no_import_cycle_between_packages():
    """At every package, its children (modules, and sub-packages taken whole) import each other
    without a cycle; the package's own ``__init__`` (which re-exports them) is left out."""
    modules = _modules()
    edges = _imports(modules)
    packages = [m for m, (_, is_pkg) in modules.items() if is_pkg]
    found = {}
    for pkg in packages:
        depth = pkg.count(".") + 1

        def child(m):
            if not m.startswith(pkg + ".") or m == pkg:
                return None
            return ".".join(m.split(".")[: depth + 1])
        kids = {child(m) for m in modules} - {None}
        kid_edges = defaultdict(set)
        for src, dsts in edges.items():
            a = child(src)
            if a is None:
                continue
            for dst in dsts:
                b = child(dst)
                if b is not None and b != a:
                    kid_edges[a].add(b)
        cycles = _cycles(kids, kid_edges)
        if cycles:
            found[pkg] = cycles
    assert found == {}


def test_no_module_is_over_600_lines():
    long = {}
    for name, (path, _) in _modules().items():
        rel = os.path.relpath(path, SRC).replace(os.sep, "/")
        with open(path, encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES and rel not in DATA_TABLES:
            long[rel] = n
    assert long == {}


def test_the_check_runs_without_the_optional_libraries(tmp_path):
    """``import tritonkit.check`` and a checked launch, with Optuna, matplotlib, Jinja2, Pillow,
    nvidia-ml-py and scikit-learn made unimportable; then the tuner's TPE names the extra to install."""
    script = tmp_path / "hidden.py"
    script.write_text(textwrap.dedent('''
        import sys

        HIDDEN = ("optuna", "matplotlib", "jinja2", "PIL", "pynvml", "sklearn")

        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HIDDEN:
                    raise ImportError(f"{name} is hidden by the test")
                return None

        sys.meta_path.insert(0, Hide())
        for name in list(sys.modules):
            if name.split(".")[0] in HIDDEN:
                del sys.modules[name]

        import torch
        import triton
        import triton.language as tl

        import tritonkit.check
        from tritonkit.cli import main

        @triton.jit
        def add(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1.0, mask=offs < n)

        x, out = torch.randn(100), torch.empty(100)
        session = tritonkit.check_launch(add, (2,), x, out, 100, BLOCK=64)
        assert [f.kind for f in session.findings] == ["out_of_bounds"], session.findings
        assert not any(m.split(".")[0] in HIDDEN for m in sys.modules)

        from tritonkit._imports import MissingDependency
        from tritonkit.tune import Budget, Evaluator, ReplayRunner
        from tritonkit.tune.strategies import get_strategy
        replay = ReplayRunner({"BLOCK=16": 1.0, "BLOCK=32": 2.0})
        try:
            get_strategy("tpe", seed=0).run(Evaluator(replay.points(), replay, Budget(2)))
        except MissingDependency as e:
            assert "tritonkit[tune]" in str(e), e
        else:
            raise AssertionError("the tpe strategy ran without Optuna: no MissingDependency")
        print("OK")
    '''))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TRITON_INTERPRET="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("OK")
