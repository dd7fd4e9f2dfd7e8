"""The whole result of one ``tritonkit profile`` run: what its ``--json`` file holds and what the
doctor's report and page read back (:class:`ProfileReport`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional

from ._devices import DevicePeaks
from ._plain import part, require_mapping, strings, text
from ._proton import ScopeNode
from ._roofline import Ceiling, KernelReport


@dataclass
class ProfileReport:
    """One profile: the device's peaks, the measured ceiling, every kernel's figures and the scope tree.

    Attributes:
        peaks: the datasheet peaks the kernels were compared with (GB/s, TFLOP/s), or None.
        ceiling: the measured ceiling (``tritonkit calibrate``), or None where never calibrated.
        kernels: one :class:`~tritonkit.profile.KernelReport` per kernel and scope, slowest first
            (times in ms and us, GB/s, TFLOP/s, % of peak).
        tree: the scope tree with GPU time in ns (:class:`~tritonkit.profile.ScopeNode`), or None.
        source: the Proton tree file the profile was read from.
        charts: the chart files written next to the JSON (PNG and SVG).
    """

    peaks: Optional[DevicePeaks] = None
    ceiling: Optional[Ceiling] = None
    kernels: List[KernelReport] = field(default_factory=list)
    tree: Optional[ScopeNode] = None
    source: str = ""
    charts: List[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain JSON data: ``{"peaks", "ceiling", "kernels", "tree", "source", "charts"}`` (each part
        through its own ``to_dict``; None where missing)."""
        return {"peaks": self.peaks.to_dict() if self.peaks is not None else None,
                "ceiling": self.ceiling.to_dict() if self.ceiling is not None else None,
                "kernels": [k.to_dict() for k in self.kernels],
                "tree": self.tree.to_dict() if self.tree is not None else None, "source": self.source,
                "charts": list(self.charts)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ProfileReport":
        """The inverse of :meth:`to_dict`, tolerant: a part that is missing or cannot be read (peaks
        without a bandwidth, a tree that is not an object, an empty ceiling) is None, a kernel that
        is not an object is left out, and a kernel's malformed fields take their defaults.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a profile report")
        kernels = d.get("kernels") if isinstance(d.get("kernels"), list) else []
        return cls(peaks=part(DevicePeaks.from_dict, d.get("peaks")),
                   ceiling=part(Ceiling.from_dict, d.get("ceiling")),
                   kernels=[KernelReport.from_dict(k) for k in kernels if isinstance(k, Mapping)],
                   tree=part(ScopeNode.from_dict, d.get("tree")), source=text(d.get("source")),
                   charts=strings(d.get("charts")))

