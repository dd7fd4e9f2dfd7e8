"""``tritonkit tune sweep FILE.py``: a sweep described by a Python file.

The file defines, at its top level: ``kernel`` (a ``@triton.jit`` kernel), ``workload(key) ->
(args, kwargs)`` (seeded; ``kwargs`` with ``grid``), ``keys`` (a list of dicts such as
``{"M": 64}``), and ``configs`` (``triton.Config`` objects) or ``space`` (a dict of value lists);
optionally ``reference(**named_args)`` and ``table`` (``{"E": 8, "N": 14336, "dtype": None, "key":
"M"}``: write the vLLM fused-MoE table). Workers import the file by its name, so its directory is
put on ``sys.path`` and the file is imported under its stem.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from ._launch import sweep_kernel
from ._tables import MoeTable


def load(path: str) -> Any:
    """Import the sweep file ``path`` under its stem (its directory first on ``sys.path``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: it lacks ``kernel``, ``workload``, ``keys``, or both ``configs`` and ``space``.
    """
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no sweep file {path}")
    directory, stem = os.path.dirname(path), os.path.splitext(os.path.basename(path))[0]
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module = importlib.import_module(stem)
    missing = [n for n in ("kernel", "workload", "keys") if not hasattr(module, n)]
    if not hasattr(module, "configs") and not hasattr(module, "space"):
        missing.append("configs or space")
    if missing:
        raise ValueError(f"{path} does not define {', '.join(missing)} (a sweep file defines kernel, "
                         f"workload(key) -> (args, kwargs), keys, and configs or space)")
    return module


def run_file(path: str, **options: Any):
    """Run the sweep that file ``path`` describes (:func:`~._launch.sweep_kernel`).

    Args:
        path: the sweep file.
        **options: :func:`~._sweep.sweep`'s options (``engine``, ``workers``, ``strategy``,
            ``budget``, ``cache``, ``out_dir``, ``progress``).

    Returns:
        :class:`~._sweep.SweepResult`.

    Raises:
        FileNotFoundError, ValueError: as :func:`load`.
        WorkerError: as :func:`~._sweep.sweep`.
    """
    m = load(path)
    table = getattr(m, "table", None)
    return sweep_kernel(m.kernel, m.workload, list(m.keys), configs=getattr(m, "configs", None),
                        space=getattr(m, "space", None), reference=getattr(m, "reference", None),
                        table=MoeTable(**table) if isinstance(table, dict) else table, **options)
