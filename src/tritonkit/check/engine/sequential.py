"""One program at a time, ``z`` fastest, as Triton's interpreter runs a launch: the oracle the
batched engine is tested against, and its fallback."""
from __future__ import annotations

from ..interp.kernels import rewritten
from ..triton_hooks import patched_language
from .base import Engine


class SequentialEngine(Engine):
    """Runs every program of a launch one after another with the launch's own builder."""

    name = "sequential"

    def run(self, launch, call_args):
        """Run every program (see :meth:`Engine.run`); never declines: returns None."""
        fn = rewritten(launch.pyfn)
        _, gy, gz = launch.grid
        total = launch.grid[0] * gy * gz
        # each engine patches the language with its own builder (Triton 3.6 keeps the first patch
        # of a nested scope)
        with patched_language(launch.builder):
            for e in range(total):
                launch.begin_program(e // (gy * gz), (e // gz) % gy, e % gz)
                fn(**call_args)
                launch.record.programs += 1
        return None
