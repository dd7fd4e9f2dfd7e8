"""Reading Proton's output (``*.hatchet``, the tree format) without llnl-hatchet.

A Proton tree file is a JSON list: ``[root, devices]``. ``root`` is a node
``{"frame": {"name", "type"}, "metrics": {...}, "children": [...]}``. Kernel nodes carry
``count`` (launches), ``time (ns)`` (GPU time, summed over launches), ``device_id`` and
``device_type``, and, where the kernel's ``launch_metadata`` gives them, ``bytes`` and
``flops<width>`` (summed over launches). Scope nodes (``proton.scope``) carry only the metrics
the user gave them. ``devices`` maps device type -> device id -> attributes (``arch``,
``num_sms``, ``clock_rate``/``memory_clock_rate`` in kHz, ``bus_width`` in bits).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from ._plain import integer, mapping, number, require_mapping, text

TIME = "time (ns)"
#: Proton's own metadata frames (launch metadata computed in a scope of this name) are dropped.
_METADATA_PREFIX = "__proton"


@dataclass
class ScopeNode:
    """A node of the scope tree: a scope or a kernel, with inclusive GPU time.

    Attributes:
        name: the frame's name (a kernel's name, or its ``launch_metadata`` ``name``).
        kernel: True for a kernel (it has launches and GPU time of its own).
        launches / time_ns: a kernel's launches and summed GPU time, ns (0 for a scope).
        metrics: the node's own metrics, as recorded.
        children: sub-nodes.
    """

    name: str
    kernel: bool = False
    launches: int = 0
    time_ns: float = 0.0
    metrics: Dict[str, Any] = field(default_factory=dict)
    children: List["ScopeNode"] = field(default_factory=list)

    @property
    def inclusive_ns(self) -> float:
        """GPU time of this node and everything under it, ns."""
        return self.time_ns + sum(c.inclusive_ns for c in self.children)

    def walk(self, path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], "ScopeNode"]]:
        """(scope path, node) for every node under this one, depth first (the root not included)."""
        for c in self.children:
            yield path, c
            yield from c.walk(path + (c.name,))

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data of the node and its sub-tree (times in ns)."""
        return {"name": self.name, "kernel": self.kernel, "launches": self.launches, "time_ns": self.time_ns,
                "inclusive_ns": self.inclusive_ns, "metrics": self.metrics,
                "children": [c.to_dict() for c in self.children]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ScopeNode":
        """The inverse of :meth:`to_dict` (``inclusive_ns`` is derived, not read). Missing or malformed
        fields take their defaults; children that are not mappings are left out.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a scope node")
        children = d.get("children") if isinstance(d.get("children"), list) else []
        return cls(text(d.get("name"), "?"), d.get("kernel") is True, integer(d.get("launches")),
                   number(d.get("time_ns")) or 0.0, mapping(d.get("metrics")),
                   [cls.from_dict(c) for c in children if isinstance(c, Mapping)])


@dataclass
class KernelStats:
    """One kernel in one scope, summed over its launches.

    Attributes:
        name: the kernel's name (its ``launch_metadata`` ``name`` where it gives one).
        scope: the scope path above it (``()`` at the top).
        launches: launches recorded.
        time_ns: GPU time summed over the launches, ns.
        bytes: bytes moved, summed over launches (None where unknown).
        flops: FLOP width in bits (8, 16, 32, 64) -> FLOPs summed over launches.
        work_source: where ``bytes``/``flops`` come from: ``launch_metadata``, ``scope`` (the
            metrics of the kernel's scope, when it holds only this kernel), or None.
        device: ``"<type>:<id>"``, e.g. ``"CUDA:0"``.
    """

    name: str
    scope: Tuple[str, ...]
    launches: int
    time_ns: float
    bytes: Optional[float] = None
    flops: Dict[int, float] = field(default_factory=dict)
    work_source: Optional[str] = None
    device: str = ""

    @property
    def mean_us(self) -> float:
        """Mean GPU time per launch, microseconds."""
        return self.time_ns / max(self.launches, 1) / 1e3


@dataclass
class ProtonProfile:
    """A parsed Proton tree file: the scope tree, the kernels, the devices' attributes."""

    tree: ScopeNode
    kernels: List[KernelStats]
    devices: Dict[str, Dict[str, Any]]
    path: str = ""

    def device_info(self, device: str = "") -> Dict[str, Any]:
        """Attributes of ``device`` (``"CUDA:0"``), or of the first device when not given or unknown."""
        if device in self.devices:
            return self.devices[device]
        return next(iter(self.devices.values()), {})


def match_name(name: str, keys: Iterable[str]) -> Optional[str]:
    """The key that names the same kernel as the Proton kernel name ``name``: ``name`` itself, else
    the longest key that ``name`` starts with as a whole word. A kernel's ``launch_metadata`` name
    starts with its function's name by convention (``"add_kernel n=4096"`` -> ``add_kernel``), and
    ``add_kernel_plain`` never matches ``add_kernel``.

    Args:
        name: a kernel name from a Proton profile.
        keys: names to match against (function names, ncu's kernel names).

    Returns:
        The matching key, or None.
    """
    keys = list(keys)
    if name in keys:
        return name
    best = None
    for key in keys:
        if key and name.startswith(key) and (len(name) == len(key) or not (name[len(key)].isalnum()
                                                                            or name[len(key)] == "_")):
            if best is None or len(key) > len(best):
                best = key
    return best


def _flops(metrics: Dict[str, Any]) -> Dict[int, float]:
    out = {}
    for k, v in metrics.items():
        if k.startswith("flops") and k[5:].isdigit() and isinstance(v, (int, float)) and v:
            out[int(k[5:])] = float(v)
    return out


def _node(raw: Dict[str, Any]) -> Optional[ScopeNode]:
    if not isinstance(raw, dict) or "frame" not in raw:
        raise ValueError("not a Proton tree node (no 'frame')")
    name = str(raw["frame"].get("name", "?"))
    if name.startswith(_METADATA_PREFIX):
        return None
    metrics = dict(raw.get("metrics") or {})
    kernel = "device_type" in metrics and TIME in metrics and bool(metrics.get("count"))
    node = ScopeNode(name, kernel, int(metrics.get("count", 0) or 0) if kernel else 0,
                     float(metrics.get(TIME, 0) or 0) if kernel else 0.0, metrics)
    for c in raw.get("children") or []:
        child = _node(c)
        if child is not None:
            node.children.append(child)
    return node


def parse_proton(data: Any, path: str = "") -> ProtonProfile:
    """Parse Proton's tree data (the loaded JSON).

    Raises:
        ValueError: ``data`` is not Proton's tree format (the message says what was found).
    """
    if not isinstance(data, list) or not data or not isinstance(data[0], dict) or "frame" not in data[0]:
        kind = type(data).__name__
        raise ValueError(f"{path or 'the data'} is not a Proton tree profile (expected a JSON list [root, devices] "
                         f"as written by proton.start(..., data='tree'); found a {kind}). Trace files (data='trace')"
                         f" are not read.")
    root = _node(data[0]) or ScopeNode("ROOT")
    devices: Dict[str, Dict[str, Any]] = {}
    if len(data) > 1 and isinstance(data[1], dict):
        for dtype, by_id in data[1].items():
            if isinstance(by_id, dict):
                for did, info in by_id.items():
                    devices[f"{dtype}:{did}"] = dict(info)
    kernels: List[KernelStats] = []
    for scope, node in root.walk():
        if not node.kernel:
            continue
        k = KernelStats(node.name, scope, node.launches, node.time_ns,
                        device=f"{node.metrics.get('device_type', '')}:{node.metrics.get('device_id', '')}")
        flops, nbytes = _flops(node.metrics), node.metrics.get("bytes")
        if flops or nbytes:
            k.flops, k.bytes, k.work_source = flops, (float(nbytes) if nbytes else None), "launch_metadata"
        kernels.append(k)
    # a scope given metrics by the user (proton.scope(name, {"flops16": ...})) that holds exactly one
    # kernel: those metrics are that kernel's work
    for scope, node in root.walk():
        if node.kernel or not (_flops(node.metrics) or node.metrics.get("bytes")):
            continue
        inner = [k for k in kernels if k.scope[:len(scope) + 1] == scope + (node.name,)]
        if len(inner) == 1 and inner[0].work_source is None:
            inner[0].flops = _flops(node.metrics)
            inner[0].bytes = float(node.metrics["bytes"]) if node.metrics.get("bytes") else None
            inner[0].work_source = "scope"
    return ProtonProfile(root, kernels, devices, path)


def read_proton(path: str) -> ProtonProfile:
    """Read a Proton tree file (``*.hatchet``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not JSON or not Proton's tree format.
    """
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a Proton profile: not JSON ({e})") from None
    return parse_proton(data, path)
