"""One launch: how it gets here (:mod:`.intercept`: Triton's launch paths patched while a session
runs; :mod:`.autotune`: every config of an autotuned kernel), its arguments (:mod:`.arguments`),
its state while it runs (:mod:`.state`: :class:`~.state.Launch`), the procedure that runs it with
an engine (:mod:`.run`: :func:`~.run.run_launch`) and its debug operations (:mod:`.debug_ops`)."""
from .run import run_launch
from .state import Batch, Launch

__all__ = ["Launch", "Batch", "run_launch"]
