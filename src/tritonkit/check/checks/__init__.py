"""The checks a checked launch runs, one module per finding kind."""
from typing import Iterable, List, Optional, Union

from ._base import Access, Check
from .access_map import AccessMap
from .bounds import BoundsCheck
from .nan_inf import NanInfCheck
from .overflow import OverflowCheck
from .races import RaceCheck
from .uninitialized import UninitializedCheck, mark_uninitialized

__all__ = ["Access", "AccessMap", "Check",
           "BoundsCheck", "RaceCheck", "UninitializedCheck", "OverflowCheck", "NanInfCheck",
           "UndefinedValues", "default_checks", "make_checks", "mark_uninitialized", "CHECK_KINDS"]


class UndefinedValues(Check):
    """``undefined_value``: masked-off lanes of loads without ``other=`` are poisoned and tracked
    (the work is done by the builder; this check only switches it on, see ``_undefined``)."""

    kind = "undefined_value"


# finding kind -> check class, in the order checks run (bounds first: it decides which lanes are performed)
_BY_KIND = {"out_of_bounds": BoundsCheck, "undefined_value": UndefinedValues, "data_race": RaceCheck,
            "uninitialized_read": UninitializedCheck, "int_overflow": OverflowCheck, "nan_inf": NanInfCheck}
CHECK_KINDS = tuple(_BY_KIND)
_OFF_BY_DEFAULT = ("nan_inf",)


def default_checks(nan: bool = False) -> List[Check]:
    """The checks on by default: every kind but ``nan_inf``, which ``nan=True`` adds (some kernels use
    Inf on purpose; its reports are only about values that reach memory, but it costs time)."""
    return make_checks([k for k in CHECK_KINDS if k not in _OFF_BY_DEFAULT or nan])


def make_checks(kinds: Optional[Iterable[Union[str, Check]]]) -> List[Check]:
    """Checks from finding kinds (``"out_of_bounds"``, ``"data_race"``, ...) or Check instances,
    ordered so that the bounds check runs first.

    Raises:
        ValueError: an unknown kind (the message lists the known ones).
    """
    out: List[Check] = []
    for k in kinds or ():
        if isinstance(k, Check):
            out.append(k)
        elif k in _BY_KIND:
            out.append(_BY_KIND[k]())
        else:
            raise ValueError(f"unknown check {k!r}: choose from {', '.join(CHECK_KINDS)}")
    out.sort(key=lambda c: 0 if isinstance(c, BoundsCheck) else 1)
    return out
