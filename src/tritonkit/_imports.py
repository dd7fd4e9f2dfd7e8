"""Optional libraries, imported when a feature needs them, with a message that names the extra to install.

``tritonkit check`` needs only triton, torch, numpy and rich. The rest is optional:

=============== =================== ================================================
extra           libraries           for
=============== =================== ================================================
``tune``        Optuna, nvidia-ml-py, ``tritonkit tune``: the TPE strategy (Optuna), SM and memory
                filelock            clocks during timing (NVML), the tuning cache's locks
``report``      matplotlib, Jinja2, charts (roofline, time breakdown, tuning landscape), the
                Pillow              doctor's HTML page, heatmap images
``distill``     scikit-learn        ``tritonkit distill``: the decision tree
``all``         all of the above
=============== =================== ================================================
"""
from __future__ import annotations

import importlib
from types import ModuleType

#: the extra that installs each optional library (by its import name)
EXTRAS = {"optuna": "tune", "pynvml": "tune", "filelock": "tune", "matplotlib": "report", "jinja2": "report",
          "PIL": "report", "sklearn": "distill", "ray": "cluster"}
#: the distribution name of each, where it differs from the import name
_DISTRIBUTIONS = {"pynvml": "nvidia-ml-py", "PIL": "Pillow", "sklearn": "scikit-learn", "jinja2": "Jinja2"}


class MissingDependency(ImportError):
    """An optional library that a feature needs is not installed; the message says which extra
    installs it (``pip install 'tritonkit[EXTRA]'``)."""


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` (e.g. ``"optuna"``, ``"matplotlib.figure"``) for ``feature``.

    Args:
        module: the module to import; its top-level name must be a key of :data:`EXTRAS`.
        feature: what needs it, for the message (e.g. ``"the tpe strategy"``).

    Returns:
        the imported module.

    Raises:
        MissingDependency: the library is not installed (or fails to import); the message names
            it and the extra to install.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        dist = _DISTRIBUTIONS.get(top, top)
        extra = EXTRAS.get(top, "all")
        raise MissingDependency(f"{feature} needs {dist}, which is not installed: pip install 'tritonkit[{extra}]' "
                                f"(or pip install {dist}) ({e})") from e
