"""The checks a checked launch runs on every access, one module per finding kind."""
from ._base import Access, Check
from .bounds import BoundsCheck

__all__ = ["Access", "Check", "BoundsCheck", "default_checks"]


def default_checks():
    """The checks on by default: out-of-bounds accesses."""
    return [BoundsCheck()]
