"""What ``pytest --tritonkit`` runs with: the command line's options and each test's markers, and
the names shared by the plugin's two halves (this module is light: pytest imports it in every run)."""
from __future__ import annotations

from typing import Any, List, Optional

import pytest

#: the attribute of a test report with what checking its phase found (plain data: crosses xdist)
REPORT_ATTR = "tritonkit"
#: the value of ``--tritonkit`` given without ``=KINDS``: the default checks
DEFAULT_KINDS = "default"
#: the oldest pytest the plugin runs on (hook wrappers' ``force_exception``, ``Config.stash``)
MIN_PYTEST = (8, 0)


def require_pytest(version: str) -> None:
    """Raise :class:`pytest.UsageError` where ``version`` (pytest's) is older than :data:`MIN_PYTEST`."""
    try:
        have = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return  # a development version: let it run
    if have < MIN_PYTEST:
        need = ".".join(map(str, MIN_PYTEST))
        raise pytest.UsageError(f"pytest --tritonkit needs pytest {need} or newer; this is pytest {version}: "
                                f"pip install -U 'pytest>={need}'")


def json_output(config, option: str = "tritonkit_json") -> Optional[str]:
    """``--tritonkit-json FILE`` (or the output option ``option``: ``tritonkit_sarif``,
    ``tritonkit_update_baseline``) as an absolute path (taken now: a test may ``os.chdir``) made ready
    to be written at the end of the run, or None where it is not given. Its missing parent
    directories are created, as ``--junitxml`` does, and a write is tried now
    (:func:`tritonkit._io.output_problem`), so a path that cannot be written is said before any
    test runs rather than after all of them.

    Raises:
        pytest.UsageError: FILE is a directory or an existing Python source file (``conftest.py``),
            its directory cannot be created, or it cannot be written (permissions, a socket).
    """
    import os

    from .._io import output_problem, python_source
    given = config.getoption(option, None)
    if not given:
        return None
    name = "--" + option.replace("_", "-")
    path = os.path.abspath(given)
    if os.path.isdir(path):
        raise pytest.UsageError(f"{name} {given}: it is a directory; give a file name")
    if python_source(path):
        raise pytest.UsageError(f"{name} {given}: an existing Python source file; writing it would "
                                f"overwrite it: give another path (a name ending .json)")
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise pytest.UsageError(f"{name} {given}: cannot create its directory {directory}: "
                                f"{e.strerror or e}") from None
    problem = output_problem(path)
    if problem is not None:
        raise pytest.UsageError(f"{name} {given}: cannot be written: {problem}; give another path")
    return path


def baseline_of(config):
    """The :class:`~tritonkit.check.baseline.Baseline` of ``--tritonkit-baseline FILE`` (source
    paths relative to pytest's root directory), or None where it is not given.

    Raises:
        pytest.UsageError: FILE is missing, is not JSON, or holds no findings list.
    """
    given = config.getoption("tritonkit_baseline", None)
    if not given:
        return None
    from ..check.baseline import Baseline, BaselineError
    try:
        return Baseline.load(given, root=str(config.rootpath))
    except BaselineError as e:
        raise pytest.UsageError(f"--tritonkit-baseline {e}") from None


def kinds_or_none(value: str) -> Optional[List[str]]:
    """``value`` as a list of known checks, or None where it is not one."""
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if not kinds or any(not k.replace("_", "").isalnum() for k in kinds):
        return None
    from ..check.checks import CHECK_KINDS
    return kinds if all(k in CHECK_KINDS for k in kinds) else None


def options_from(config):
    """The run's :class:`~tritonkit.check.process.CheckOptions` from the command line.

    Raises:
        pytest.UsageError: an unknown check in ``--tritonkit=KINDS``; a non-positive timeout or batch memory;
            a ``--tritonkit-gpu-above`` that is not a number of elements or ``off``.
    """
    from ..check.errors import launch_timeout
    from ..check.process import CheckOptions
    value = config.getoption("tritonkit")
    kinds = None
    if value != DEFAULT_KINDS:
        kinds = kinds_or_none(value)
        if kinds is None:
            from ..check.checks import CHECK_KINDS
            raise pytest.UsageError(f"--tritonkit={value}: not a list of checks; choose from {', '.join(CHECK_KINDS)} "
                                    "(comma-separated), or give --tritonkit alone for the defaults")
    timeout = config.getoption("tritonkit_timeout")
    try:
        timeout = launch_timeout(timeout)
    except ValueError as e:
        raise pytest.UsageError(f"--tritonkit-timeout {e}") from None
    batch = config.getoption("tritonkit_batch_memory")
    if batch is not None and batch <= 0:
        raise pytest.UsageError("--tritonkit-batch-memory MB: a positive number of MiB")
    from ..check.launch.on_gpu import PYTEST_GPU_ABOVE, parse_gpu_above
    given = config.getoption("tritonkit_gpu_above")
    try:
        gpu_above = PYTEST_GPU_ABOVE if given is None else parse_gpu_above(given)
    except ValueError as e:
        raise pytest.UsageError(f"--tritonkit-gpu-above: {e}") from None
    return CheckOptions(checks=kinds, nan=bool(config.getoption("tritonkit_nan")),
                        engine=config.getoption("tritonkit_engine"), timeout=timeout,
                        batch_memory=batch << 20 if batch else None,
                        children=not config.getoption("tritonkit_no_children"),
                        outputs=config.getoption("tritonkit_outputs"),
                        stall_polls=_stall_polls(config), gpu_above=gpu_above)


def marker_options(item, base) -> Optional[Any]:
    """The options a test runs with: ``base`` changed by its ``tritonkit`` marker, or None for a test
    marked ``tritonkit_off``.

    Raises:
        ValueError: the marker names an unknown check, or takes arguments it does not know.
    """
    import dataclasses
    if item.get_closest_marker("tritonkit_off") is not None:
        return None
    mark = item.get_closest_marker("tritonkit")
    if mark is None:
        return base
    unknown = set(mark.kwargs) - {"checks", "nan"}
    if mark.args or unknown:
        raise ValueError("@pytest.mark.tritonkit takes only checks=[...] and nan=True/False"
                         + (f", not {', '.join(sorted(unknown))}" if unknown else ""))
    out = dataclasses.replace(base)
    checks = mark.kwargs.get("checks")
    if checks is not None:
        from ..check.checks import CHECK_KINDS
        kinds = [k.strip() for k in checks.split(",")] if isinstance(checks, str) else [str(k) for k in checks]
        bad = [k for k in kinds if k not in CHECK_KINDS]
        if bad or not kinds:
            raise ValueError(f"@pytest.mark.tritonkit(checks=...): unknown check {', '.join(bad) or '(none given)'}; "
                             f"choose from {', '.join(CHECK_KINDS)}")
        out.checks = kinds
    if "nan" in mark.kwargs:
        from ..check.checks.nan_inf import NanInfCheck
        out.nan = bool(mark.kwargs["nan"])
        if out.checks is not None and out.nan and NanInfCheck.kind not in out.checks:
            out.checks = [*out.checks, NanInfCheck.kind]
    return out


def _stall_polls(config):
    """``--tritonkit-stall-polls`` (None: the default).

    Raises:
        pytest.UsageError: a negative number.
    """
    value = config.getoption("tritonkit_stall_polls")
    if value is not None and value < 0:
        raise pytest.UsageError("--tritonkit-stall-polls N: a number of polls, 0 (never stop) or more")
    return value
