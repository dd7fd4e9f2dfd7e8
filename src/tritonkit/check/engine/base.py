"""The interface every engine implements: how a launch's programs are executed."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Dict, Optional


class Engine(ABC):
    """Runs every program of a launch through the kernel's body.

    An engine gets the launch in its starting state (arguments mapped, its builder made) and either
    runs all its programs, or undoes whatever it did and says why it could not; the next engine
    (one program at a time, which always can) then runs the launch from the start.
    """

    #: the name a launch record gives it (``LaunchRecord.engine``)
    name: str = ""

    @abstractmethod
    def run(self, launch, call_args: Dict[str, object]) -> Optional[str]:
        """Run the programs of ``launch`` (a :class:`~tritonkit.check.launch.Launch`) with the kernel's
        arguments by name (``call_args``: interpreter values).

        Returns:
            None when every program ran; else why this engine could not (all it did is undone).

        Raises:
            whatever stops the launch: :class:`~tritonkit.check.CheckAborted` (``stop_on_first``, a
            failed ``static_assert``), :class:`~tritonkit.check.errors.LaunchTimeout`,
            ``KeyboardInterrupt``, and what the kernel raises (the launch turns it into a finding).
        """
