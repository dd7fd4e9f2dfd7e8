"""Making ``triton.autotune`` build tritonkit's autotuner in this process (what ``tritonkit tune``'s
child process and ``tritonkit profile --tuned`` do before running the user's script)."""
from __future__ import annotations

import json
import os

from ._result import TuneResult


def install_patch() -> None:
    """Make ``triton.autotune`` build tritonkit's autotuner, with the defaults the ``tritonkit tune``
    supervisor passed in the environment (``TRITONKIT_TUNE_STRATEGY``, ``TRITONKIT_TUNE_BUDGET``,
    ``TRITONKIT_TUNE_VERBOSE``), and append every :class:`TuneResult` as one JSON line to
    ``$TRITONKIT_TUNE_REPORT`` (fsync'ed, so that a crash loses none) as it is made."""
    import triton
    import triton.runtime as rt
    import triton.runtime.autotuner as at

    from . import _autotuner
    from ._autotuner import autotune
    if os.environ.get("TRITONKIT_TUNE_STRATEGY"):
        _autotuner.DEFAULTS["strategy"] = os.environ["TRITONKIT_TUNE_STRATEGY"]
    if os.environ.get("TRITONKIT_TUNE_BUDGET"):
        _autotuner.DEFAULTS["budget"] = os.environ["TRITONKIT_TUNE_BUDGET"]
    if os.environ.get("TRITONKIT_TUNE_VERBOSE"):
        _autotuner.DEFAULTS["verbose"] = True
    report = os.environ.get("TRITONKIT_TUNE_REPORT")
    if report:
        def write(result: TuneResult) -> None:
            with open(report, "a") as fh:
                fh.write(json.dumps(result.to_dict()) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        _autotuner.ON_RESULT.append(write)
    triton.autotune = autotune
    rt.autotune = autotune
    at.autotune = autotune
