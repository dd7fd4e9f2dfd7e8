"""The interface every check implements."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .._launch import Launch
    from .._memory import Resolved


@dataclasses.dataclass
class Access:
    """One memory operation of one program, before it is performed.

    Attributes:
        op: what the kernel did: ``"load"``, ``"store"``, ``"atomic_add"``, ``"atomic_cas"``,
            ``"descriptor_load"``, ...
        kind: ``"load"``, ``"store"`` or ``"atomic"``.
        size: bytes per lane.
        masked: whether the kernel gave a mask (explicit, or the bounds of a descriptor/block pointer).
        shape: the block's shape.
    """

    op: str
    kind: str
    size: int
    masked: bool
    shape: Tuple[int, ...]


class Check:
    """A rule checked on every memory access of a checked launch.

    Subclasses set :attr:`kind` (the finding kind they report) and override
    :meth:`on_access`, which may clear lanes of ``res.ok`` (those lanes are then not performed)
    and reports violations through ``launch.report``.
    """

    kind: str = ""

    def on_access(self, launch: "Launch", access: Access, res: "Resolved") -> None:  # pragma: no cover
        raise NotImplementedError
