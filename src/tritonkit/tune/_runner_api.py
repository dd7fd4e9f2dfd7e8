"""The runner interface: what measures configs for the :class:`~tritonkit.tune.Evaluator`.

A *runner* takes a batch of points (configs as plain dicts, see :mod:`tritonkit.tune._space`) and
returns one :class:`~tritonkit.tune.Trial` per point, in order. Two runners implement it:

* :class:`~tritonkit.tune._runner.LaunchRunner`: compiles, checks and times the configs on the
  arguments of a real launch (on the GPU, or in Triton's CPU interpreter);
* :class:`~tritonkit.tune.ReplayRunner`: looks them up in a recorded (or synthetic) landscape.

The evaluator, and through it every search strategy, sees only this interface; any callable with
the same signature (a test's fake runner, a lambda) is a runner too (:class:`Runner` is a
structural ``typing.Protocol``).
"""
from __future__ import annotations

from typing import List, Protocol, Sequence, runtime_checkable

from ._result import Trial
from ._space import Point


@runtime_checkable
class Runner(Protocol):
    """Measures a batch of configs of one kernel at one tuning key.

    Implementations may have more (``LaunchRunner.finish``, ``ReplayRunner.clock``); the evaluator
    and the strategies use only :meth:`__call__`.
    """

    def __call__(self, points: Sequence[Point]) -> List[Trial]:
        """Measure ``points``.

        Args:
            points: the configs to measure, each a plain dict (meta-parameters and compiler
                options); distinct, and only candidates (the evaluator filters and deduplicates).
                A runner may compile them together and time them interleaved.

        Returns:
            Exactly one :class:`~tritonkit.tune.Trial` per point, in the order of ``points``:
            ``status="ok"`` with ``ms`` the median time of one launch in milliseconds (finite,
            > 0), or another status of :data:`~tritonkit.tune.STATUSES` (``failed``, ``wrong``,
            ``crashed``) with ``ms = inf`` and ``error`` saying why; ``source`` says where the
            number comes from (``gpu``, ``cpu``, ``replay``, ``fake``).

        Raises:
            Exception: only for what ends all tuning in this process (``LaunchRunner`` raises
                :class:`~tritonkit.tune._runner.ContextPoisoned` when a config broke the CUDA
                context); a config that fails is a trial, never an exception.
        """
        ...
