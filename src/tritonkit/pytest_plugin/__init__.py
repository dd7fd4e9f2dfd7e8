"""``pytest --tritonkit``: every test of a suite with each Triton launch checked on the CPU.

Registered through the ``pytest11`` entry point, so installing tritonkit is enough. Without
``--tritonkit`` it only declares its options and markers (this module imports nothing heavy).

With it, each test (its fixtures' setup, its body, and then its teardown, each in a session of
their own) runs with :func:`tritonkit.check.checking` active; a test whose launches have findings
fails with them as its failure (or, where it failed anyway, in a section of its report), and
``xfail`` still applies. Python processes the tests start are checked too (see
:mod:`tritonkit.check.process`) and their findings are those of the test that was running when they
came in. At the end, a terminal summary (kernels, launches, findings per test) and, with
``--tritonkit-json FILE``, the JSON keyed by node id. With pytest-xdist each worker checks its
tests and the findings travel with the test reports, so the summary and JSON are one; a worker that
crashes leaves its findings in its journal, which the controller reads.

Options: ``--tritonkit[=KINDS]``, ``--tritonkit-json FILE``, ``--tritonkit-sarif FILE``,
``--tritonkit-baseline FILE``, ``--tritonkit-update-baseline FILE``, ``--tritonkit-repro DIR``, ``--tritonkit-nan``,
``--tritonkit-no-children``, ``--tritonkit-engine {auto,sequential}``, ``--tritonkit-timeout S``,
``--tritonkit-outputs {gpu,checked}``, ``--tritonkit-gpu-above ELEMENTS``, ``--tritonkit-stall-polls N``,
``--tritonkit-batch-memory MB``.
Markers: ``@pytest.mark.tritonkit(checks=[...] or "a,b", nan=bool)`` and
``@pytest.mark.tritonkit_off``.
"""
from __future__ import annotations

from typing import List

import pytest

from .options import DEFAULT_KINDS, json_output, kinds_or_none, options_from, require_pytest

__all__ = ["require_pytest", "options_from"]


def pytest_addoption(parser) -> None:
    """Declare ``--tritonkit`` and its options."""
    g = parser.getgroup("tritonkit", "tritonkit: check every Triton launch of each test on the CPU")
    g.addoption("--tritonkit", nargs="?", const=DEFAULT_KINDS, default=None, metavar="KINDS",
                help="run each test with every Triton launch checked in tritonkit's checked interpreter; a test "
                     "whose launches have findings fails. KINDS (write --tritonkit=KINDS): the checks, "
                     "comma-separated (default: those on by default; tritonkit check --list-checks lists them)")
    g.addoption("--tritonkit-json", metavar="FILE", default=None,
                help="with --tritonkit: also write the findings as JSON, keyed by test node id")
    g.addoption("--tritonkit-sarif", metavar="FILE", default=None,
                help="with --tritonkit: also write the findings as SARIF 2.1.0 (GitHub code scanning), one result per "
                     "distinct finding")
    g.addoption("--tritonkit-baseline", metavar="FILE", default=None,
                help="with --tritonkit: findings that match one in FILE (a file of --tritonkit-update-baseline, or a "
                     "--json/--tritonkit-json output: same kind, kernel, file, line and argument) are known: they are "
                     "shown in the test's report but do not fail it; new ones do")
    g.addoption("--tritonkit-update-baseline", metavar="FILE", default=None,
                help="with --tritonkit: write the run's findings to FILE as the baseline to accept (they then fail "
                     "no test of this run)")
    g.addoption("--tritonkit-repro", metavar="DIR", default=None,
                help="with --tritonkit: for every launch with a finding, write a reproducer folder in DIR (repro.py, "
                     "the launch's exact arguments, a README), as tritonkit check --repro does")
    g.addoption("--tritonkit-nan", action="store_true", default=False,
                help="with --tritonkit: also report where NaN/Inf values that reach memory are made")
    g.addoption("--tritonkit-no-children", action="store_true", default=False,
                help="with --tritonkit: do not check the Python processes the tests start")
    g.addoption("--tritonkit-engine", choices=("auto", "sequential"), default="auto",
                help="with --tritonkit: the checked interpreter's engine (default auto: batched)")
    g.addoption("--tritonkit-timeout", type=float, metavar="SECONDS", default=None,
                help="with --tritonkit: stop a launch that runs longer than this (a finding)")
    g.addoption("--tritonkit-outputs", choices=("gpu", "checked"), default="gpu",
                help="with --tritonkit: where a launch on CUDA tensors gets its results: gpu (default: checked in "
                     "the interpreter, then run natively, so tests see the GPU's results; a launch with findings "
                     "keeps the interpreter's) or checked (the interpreter's results)")
    g.addoption("--tritonkit-gpu-above", metavar="ELEMENTS", default=None,
                help="with --tritonkit: a launch whose tensor arguments are all on a CUDA device and view more than "
                     "this many elements in all (whole storages) is checked on the GPU instead, at native speed, for "
                     "out-of-bounds accesses and int32 overflow only (default 2^30; off: every launch in the "
                     "interpreter)")
    g.addoption("--tritonkit-stall-polls", type=int, metavar="N", default=None,
                help="with --tritonkit: stop a program that polls one address N times while nothing writes "
                     "and no other program can run (default 10000, 0 never)")
    g.addoption("--tritonkit-batch-memory", type=int, metavar="MB", default=None,
                help="with --tritonkit: the most memory one value of a batch of programs may take, in MiB (default 4)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    """Before the test files are imported: read a bare ``--tritonkit`` followed by a path as the flag
    and the path, and check that ``-n`` has pytest-xdist."""
    ns = early_config.known_args_namespace
    _flag_before_path(args, ns)
    if getattr(ns, "tritonkit", None) is None:
        return
    if not early_config.pluginmanager.hasplugin("xdist") and any(
            a in ("-n", "--numprocesses", "--dist") or a.startswith(("--numprocesses=", "--dist=")) or
            (a.startswith("-n") and a[2:].isdigit()) for a in args):
        raise pytest.UsageError("pytest --tritonkit -n: -n runs tests in parallel through pytest-xdist, which is not "
                                "installed (or is disabled by -p no:xdist): pip install pytest-xdist, or leave -n out")


def _flag_before_path(args: List[str], ns) -> None:
    """``pytest --tritonkit tests/``: argparse took ``tests/`` for KINDS; where it is not a list of
    checks, make it ``--tritonkit`` (the defaults) and a path again."""
    value = getattr(ns, "tritonkit", None)
    if value in (None, DEFAULT_KINDS) or "--tritonkit" not in args:
        return
    i = args.index("--tritonkit")
    if i + 1 >= len(args) or args[i + 1] != value or kinds_or_none(value) is not None:
        return
    args[i] = f"--tritonkit={DEFAULT_KINDS}"
    ns.tritonkit = DEFAULT_KINDS
    paths = getattr(ns, "file_or_dir", None)
    if isinstance(paths, list):
        paths.insert(0, value)


def pytest_configure(config) -> None:
    """Declare the markers; with ``--tritonkit``, register the checking half (:mod:`.checking`).

    Raises:
        pytest.UsageError: a ``--tritonkit-*`` option without ``--tritonkit``; pytest older than 8;
            a bad ``--tritonkit=KINDS`` or timeout; a ``--tritonkit-json`` FILE that cannot be
            written (:func:`~.options.json_output`; its missing directories are created).
    """
    config.addinivalue_line("markers", "tritonkit(checks=None, nan=None): with pytest --tritonkit, check this test's "
                                       "Triton launches with these checks (a list or 'a,b') and/or the NaN/Inf check")
    config.addinivalue_line("markers", "tritonkit_off: with pytest --tritonkit, run this test unchecked")
    value = config.getoption("tritonkit", None)
    if value is None:
        given = [o for o, v in (("--tritonkit-json", config.getoption("tritonkit_json", None)),
                                ("--tritonkit-sarif", config.getoption("tritonkit_sarif", None)),
                                ("--tritonkit-baseline", config.getoption("tritonkit_baseline", None)),
                                ("--tritonkit-repro", config.getoption("tritonkit_repro", None)),
                                ("--tritonkit-update-baseline", config.getoption("tritonkit_update_baseline", None)),
                                ("--tritonkit-nan", config.getoption("tritonkit_nan", False)),
                                ("--tritonkit-no-children", config.getoption("tritonkit_no_children", False)))
                 if v]
        if given:
            raise pytest.UsageError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --tritonkit, "
                                    "which is not given: add --tritonkit")
        return
    require_pytest(pytest.__version__)
    options = options_from(config)
    worker = hasattr(config, "workerinput")  # the controller writes the files
    outputs = {o: None if worker else json_output(config, o)
               for o in ("tritonkit_json", "tritonkit_sarif", "tritonkit_update_baseline")}
    given = [p for p in outputs.values() if p]
    if len(set(given)) != len(given):
        raise pytest.UsageError("--tritonkit-json, --tritonkit-sarif and --tritonkit-update-baseline name the same "
                                "file: give each its own")
    from .checking import CheckingPlugin
    from .options import baseline_of
    plugin = CheckingPlugin(config, options)
    plugin.json_path = outputs["tritonkit_json"]
    plugin.sarif_path = outputs["tritonkit_sarif"]
    plugin.update_baseline = outputs["tritonkit_update_baseline"]
    plugin.baseline = baseline_of(config)
    plugin.accept_all = bool(config.getoption("tritonkit_update_baseline", None))
    repro_dir = config.getoption("tritonkit_repro", None)
    if repro_dir:
        from ..check import repro
        try:  # made by the first reproducer, as before: a run without findings leaves no DIR
            repro.configure(repro.directory_for(repro_dir, make=False))
        except ValueError as e:
            raise pytest.UsageError(f"--tritonkit-repro {e}") from None
    config.pluginmanager.register(plugin, "tritonkit-checking")
