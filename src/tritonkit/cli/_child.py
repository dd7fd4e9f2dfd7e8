"""The child processes of ``tritonkit check``, ``tune`` and ``profile``: ``python -m tritonkit.cli._child
check OPTIONS KIND NAME ARGS...`` runs the user's program checked and journaled in
``$TRITONKIT_RUN_DIR`` (see :func:`tritonkit.check.process.run_root`; ``OPTIONS`` is a
:class:`~tritonkit.check.process.CheckOptions` as JSON); ``... tune KIND NAME ARGS...`` runs it with
``triton.autotune`` standing for tritonkit's autotuner; ``... gpu-log KIND NAME ARGS...`` runs it natively
with every launch's tensor arguments logged (``tritonkit check --gpu=sanitizer``, under
``compute-sanitizer``); ``... profile WORK KIND NAME ARGS...`` runs it
under Proton (see :func:`tritonkit.profile.run_profiled`). ``KIND NAME ARGS`` is a
:meth:`~tritonkit.cli._target.Target.words`. The exit status is the program's (0 or 3, 130
interrupted, 2 tritonkit failed), or the tuner's :data:`~tritonkit.tune.EXIT_CONTEXT_POISONED`."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

from ._target import Target


def main(argv: Optional[List[str]] = None) -> int:
    """Run one child; returns its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    step, rest = argv[0], argv[1:]
    if step == "check":
        import json

        from ._supervise import die_with_parent
        die_with_parent()
        from ..check.journal import RUN_DIR_ENV
        from ..check.process import CheckOptions, run_root
        return run_root(Target.from_words(rest[1:]), CheckOptions.from_dict(json.loads(rest[0])),
                        os.environ[RUN_DIR_ENV])
    if step == "gpu":  # every launch instrumented on the GPU (tritonkit check --gpu)
        from ..check.gpu import runtime
        runtime.install(os.environ[runtime.ENV])
        return Target.from_words(rest).run("tritonkit check --gpu")
    if step == "gpu-log":  # under compute-sanitizer: every launch's tensor arguments logged
        from ..check.gpu import launch_log
        launch_log.install(os.environ[launch_log.ENV])
        return Target.from_words(rest).run("tritonkit check --gpu")
    if step == "tune":
        from ..tune import install_patch
        install_patch()
        return Target.from_words(rest).run("tritonkit tune")
    if step == "profile":
        from ..profile import run_profiled
        target = Target.from_words(rest[1:])
        return run_profiled(rest[0], lambda: target.run("tritonkit profile"),
                            tuned=bool(os.environ.get("TRITONKIT_PROFILE_TUNED")),
                            interpret_limit_mb=float(os.environ.get("TRITONKIT_PROFILE_INTERPRET_MB", "64")))
    print(f"tritonkit: unknown child step {step!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
