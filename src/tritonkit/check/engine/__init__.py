"""How a launch's programs run: an :class:`~.base.Engine` runs them all or declines and undoes what
it did. :class:`~.batched.BatchedEngine` runs many programs per execution of the kernel's body
(falling back where it must); :class:`~.sequential.SequentialEngine` runs one program at a time
and never declines."""
from .base import Engine
from .batched import DEFAULT_BATCH_MEMORY, BatchedEngine
from .sequential import SequentialEngine

__all__ = ["Engine", "BatchedEngine", "SequentialEngine", "DEFAULT_BATCH_MEMORY"]
