"""Running a user's script (or ``-m`` module) as ``__main__`` in this process, as the child
processes of ``tritonkit tune`` and ``tritonkit profile`` do."""
from __future__ import annotations

import os
import runpy
import sys
import traceback
from typing import List

EXIT_OK, EXIT_SCRIPT_FAILED = 0, 3


def run_target(kind: str, what: str, rest: List[str]) -> int:
    """Run ``what`` (``kind`` ``"script"``: a path; ``"module"``: a module name) with ``sys.argv``
    set to ``[what, *rest]`` and its directory (or the working directory) first on ``sys.path``.

    Returns:
        0 when it ends normally or with ``sys.exit(0)``; 3 when it raises (its traceback is
        printed) or exits with another status.
    """
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [what, *rest]
    sys.path.insert(0, os.path.dirname(os.path.abspath(what)) if kind == "script" else os.getcwd())
    try:
        if kind == "script":
            runpy.run_path(what, run_name="__main__")
        else:
            runpy.run_module(what, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return EXIT_OK if e.code in (None, 0) else EXIT_SCRIPT_FAILED
    except Exception:
        traceback.print_exc()
        return EXIT_SCRIPT_FAILED
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
    return EXIT_OK
