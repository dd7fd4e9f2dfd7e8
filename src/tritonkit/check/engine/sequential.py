"""One program at a time, ``z`` fastest, as Triton's interpreter runs a launch: the oracle the
batched engine is tested against, and its fallback. A program that waits for memory another program
writes (a spin on a flag or a lock) gives way to the others meanwhile (see :mod:`.cooperative`)."""
from __future__ import annotations

from ..interp.kernels import rewritten
from ..triton_hooks import patched_language
from .base import Engine
from .cooperative import Cooperative


class SequentialEngine(Engine):
    """Runs every program of a launch one after another with the launch's own builder, letting a
    program that spins on memory give way to the others (:class:`~.cooperative.Cooperative`)."""

    name = "sequential"

    def run(self, launch, call_args):
        """Run every program (see :meth:`Engine.run`); never declines: returns None."""
        fn = rewritten(launch.pyfn)
        # each engine patches the language with its own builder (Triton 3.6 keeps the first patch
        # of a nested scope)
        with patched_language(launch.builder):
            launch.scheduler = Cooperative(launch, fn, call_args)
            try:
                launch.scheduler.run()
            finally:
                launch.scheduler = None
        return None
