"""tritonkit.tune's optional libraries: none is imported with the package; each is imported through
``tritonkit._imports.require`` when used, so a missing one raises MissingDependency naming the extra
to install (Optuna and filelock: ``tune``; scikit-learn: ``distill``), except nvidia-ml-py, without
which timing goes on without clock readings."""
import subprocess
import sys

import pytest

from tritonkit._imports import MissingDependency
from tritonkit.tune import Budget, Evaluator, KernelId, ReplayRunner, Trial, TuneCache, TuneResult, distill
from tritonkit.tune._bench import Clocks
from tritonkit.tune.strategies import STRATEGIES, get_strategy

OPTIONAL = ("optuna", "filelock", "sklearn", "pynvml")


def hide(monkeypatch, *names):
    """Make ``names`` unimportable for the rest of the test (an entry of None in sys.modules)."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def test_importing_the_package_imports_no_optional_library():
    code = ("import pkgutil, importlib, sys, tritonkit.tune as t\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in {!r}]\n"
            "for m in pkgutil.walk_packages(t.__path__, 'tritonkit.tune.'):\n"
            "    importlib.import_module(m.name)\n"
            "print(sorted({{m.split('.')[0] for m in sys.modules}} & set({!r})))").format(OPTIONAL, OPTIONAL)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]"


def _tiny_evaluator():
    rr = ReplayRunner({f"A={a},B={b}": 1.0 + a + b for a in range(3) for b in range(3)})
    return Evaluator(rr.points(), rr, Budget(4)), rr


@pytest.mark.parametrize("name", ["tpe", "hybrid"])
def test_tpe_and_hybrid_without_optuna_name_the_tune_extra(monkeypatch, name):
    hide(monkeypatch, "optuna")
    strategy = get_strategy(name, seed=0)  # made without Optuna: imported when the search starts
    ev, rr = _tiny_evaluator()
    with pytest.raises(MissingDependency, match=r"pip install 'tritonkit\[tune\]'") as e:
        strategy.run(ev)
    assert "optuna" in str(e.value).lower() and rr.evaluations == 0


def test_the_other_strategies_need_no_optuna(monkeypatch):
    hide(monkeypatch, "optuna")
    for name in sorted(set(STRATEGIES) - {"tpe", "hybrid"}):
        ev, _ = _tiny_evaluator()
        get_strategy(name, seed=0).run(ev)
        assert ev.evaluations == 4, name


def test_the_cache_without_filelock_reads_but_cannot_write(monkeypatch, tmp_path):
    kid = KernelId("k", "h", "3.6.0", "cpu")
    hide(monkeypatch, "filelock")
    cache = TuneCache(tmp_path)
    assert cache.lookup(kid, ["1"], {"A": 1}) is None and list(cache.entries()) == []
    with pytest.raises(MissingDependency, match=r"pip install 'tritonkit\[tune\]'") as e:
        cache.record(kid, ["1"], Trial({"A": 1}, ms=1.0))
    assert "filelock" in str(e.value)
    monkeypatch.undo()
    cache.record(kid, ["1"], Trial({"A": 1}, ms=1.0))
    hide(monkeypatch, "filelock")
    assert TuneCache(tmp_path).lookup(kid, ["1"], {"A": 1}).ms == 1.0  # reading a sound file takes no lock


def test_distill_without_scikit_learn_names_the_distill_extra(monkeypatch):
    results = [TuneResult("k", [str(m)], [Trial({"B": 1}, ms=float(m)), Trial({"B": 2}, ms=2.0)])
               for m in (1, 2, 3, 4, 5)]
    hide(monkeypatch, "sklearn", "sklearn.tree")
    with pytest.raises(MissingDependency, match=r"pip install 'tritonkit\[distill\]'") as e:
        distill(results, ["M"])
    assert "scikit-learn" in str(e.value)
    assert isinstance(e.value, ImportError)  # what `tritonkit distill` turns into a usage error


def test_clocks_without_nvidia_ml_py_are_unavailable(monkeypatch):
    hide(monkeypatch, "pynvml")
    clocks = Clocks(0)
    assert not clocks.available
    assert clocks.read() == (None, None) and clocks.max_sm() is None
