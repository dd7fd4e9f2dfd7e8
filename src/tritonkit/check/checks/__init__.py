"""The checks a checked launch runs, one module per finding kind.

Every module of this package is imported here, and each :class:`~.base.Check` or
:class:`~.base.FindingKind` subclass it defines registers itself by its ``kind``: adding a check
kind is adding one module (see ``docs/internals.md``). :data:`CHECK_KINDS` lists the checks that
can be asked for by name, :data:`FINDING_KINDS` every kind a finding can have.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, List, Optional, Type, Union

from .base import CHECKS, KINDS, Access, Check, FindingKind, Hooks

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")

from .access_map import AccessMap  # noqa: E402
from .bounds import BoundsCheck  # noqa: E402
from .nan_inf import NanInfCheck  # noqa: E402
from .overflow import OverflowCheck  # noqa: E402
from .races import RaceCheck  # noqa: E402
from .undefined import UndefinedValues  # noqa: E402
from .uninitialized import UninitializedCheck, mark_uninitialized  # noqa: E402

__all__ = ["Access", "AccessMap", "Check", "FindingKind", "Hooks", "BoundsCheck", "RaceCheck", "UninitializedCheck",
           "OverflowCheck", "NanInfCheck", "UndefinedValues", "CHECK_KINDS", "FINDING_KINDS", "default_checks",
           "make_checks", "kind_of", "mark_uninitialized"]

#: the checks that can be asked for by name (``--checks``, ``checking(checks=[...])``), in their order
CHECK_KINDS = tuple(sorted(CHECKS, key=lambda k: CHECKS[k].order))
#: every finding kind: the checks' and those a launch reports itself (assert_failed, timeout, ...)
FINDING_KINDS = tuple(KINDS)


def kind_of(name: str) -> Type[FindingKind]:
    """The description of the finding kind ``name`` (its message, hint, facts and colour); a plain
    one for a kind nothing declares (e.g. from a newer tritonkit's JSON)."""
    return KINDS.get(name, FindingKind)


def default_checks(nan: bool = False) -> List[Check]:
    """The checks on by default: every kind but ``nan_inf``, which ``nan=True`` adds (some kernels use
    Inf on purpose; its reports are only about values that reach memory, but it costs time)."""
    return make_checks([k for k in CHECK_KINDS if CHECKS[k].default or nan])


def make_checks(kinds: Optional[Iterable[Union[str, Check]]]) -> List[Check]:
    """Checks from finding kinds (``"out_of_bounds"``, ``"data_race"``, ...) or Check instances, in
    the order given but for those that run first (``out_of_bounds``: it decides which lanes are
    performed).

    Raises:
        ValueError: an unknown kind (the message lists the known ones).
    """
    out: List[Check] = []
    for k in kinds or ():
        if isinstance(k, Check):
            out.append(k)
        elif k in CHECKS:
            out.append(CHECKS[k]())
        else:
            raise ValueError(f"unknown check {k!r}: choose from {', '.join(CHECK_KINDS)}")
    out.sort(key=lambda c: 0 if c.first else 1)
    return out
