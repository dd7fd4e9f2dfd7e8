"""The profiled process: Proton around the user's script, and the host time of every Triton launch.

``tritonkit profile`` runs the script in a child process (``python -m tritonkit.cli._child profile
WORK ...``) that calls :func:`run_profiled`; the parent reads ``WORK/profile.hatchet`` (Proton's
tree) and ``WORK/meta.json`` (:class:`ChildMeta`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional

from ._interpret import Counted, LaunchCapture
from ._plain import mapping, numbers, optional_text, require_mapping

#: host time per launch is measured on at most this many launches of each kernel ...
SAMPLES_PER_KERNEL = 50
#: ... and only among the first this many launches in all; then the timer takes itself out.
MAX_TIMED = 2000


@dataclasses.dataclass
class ChildMeta:
    """What the profiled process found besides Proton's tree (``WORK/meta.json``).

    Attributes:
        host_us: Triton function name -> median host time per launch, us.
        resources: Triton function name -> ``{"registers", "spills", "shared" (bytes), "num_warps",
            "num_stages"}`` of its compiled kernel.
        interpreted: Triton function name -> the interpreter's :class:`~tritonkit.profile._interpret.Counted`.
        device: the CUDA device's name, or None.
    """

    host_us: Dict[str, float] = dataclasses.field(default_factory=dict)
    resources: Dict[str, Dict[str, float]] = dataclasses.field(default_factory=dict)
    interpreted: Dict[str, Counted] = dataclasses.field(default_factory=dict)
    device: Optional[str] = None

    def to_dict(self) -> dict:
        """Plain JSON data (the counts through :meth:`Counted.to_dict`)."""
        return {"host_us": dict(self.host_us), "resources": {k: dict(v) for k, v in self.resources.items()},
                "interpreted": {k: c.to_dict() for k, c in self.interpreted.items()}, "device": self.device}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ChildMeta":
        """The inverse of :meth:`to_dict`; missing or malformed parts take their defaults (entries that
        are not what they should be are left out).

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "the profiled process's meta data")
        resources = {str(k): mapping(v) for k, v in mapping(d.get("resources")).items() if isinstance(v, Mapping)}
        interpreted = {str(k): Counted.from_dict(v) for k, v in mapping(d.get("interpreted")).items()
                       if isinstance(v, Mapping)}
        return cls(host_us=numbers(d.get("host_us")), resources=resources, interpreted=interpreted,
                   device=optional_text(d.get("device")))

    @classmethod
    def read(cls, path: str) -> Optional["ChildMeta"]:
        """The meta file at ``path``, or None where the child wrote none (or half of one)."""
        try:
            with open(path) as fh:
                return cls.from_dict(json.load(fh))
        except (OSError, ValueError, TypeError):
            return None


def resources_of(kernel) -> Dict[str, float]:
    """Registers, spills, shared memory (bytes), num_warps and num_stages of a compiled kernel."""
    meta = getattr(kernel, "metadata", None)
    out = {}
    for key, value in (("registers", getattr(kernel, "n_regs", None)), ("spills", getattr(kernel, "n_spills", None)),
                       ("shared", getattr(meta, "shared", None)), ("num_warps", getattr(meta, "num_warps", None)),
                       ("num_stages", getattr(meta, "num_stages", None))):
        if isinstance(value, (int, float)):
            out[key] = value
    return out


class HostTimer:
    """Host time per launch of the profiled script's Triton kernels, sampled.

    :attr:`run` is a plain function that stands in for ``JITFunction.run``: it times at most
    :data:`SAMPLES_PER_KERNEL` launches of each kernel, notes every launch for the interpreter's
    count (``capture``), keeps each kernel's compiled resources, and after :data:`MAX_TIMED`
    launches in all calls ``restore`` (which puts ``original`` back), so that nothing of tritonkit's
    is on the launch path for the rest of the script.

    Args:
        original: the ``JITFunction.run`` it wraps.
        restore: puts ``original`` back in place.
        capture: a :class:`~tritonkit.profile._interpret.LaunchCapture` (or anything with its
            ``on_launch``).
    """

    def __init__(self, original, restore: Callable[[], None], capture) -> None:
        import time
        self.samples: Dict[str, List[float]] = {}
        self.resources: Dict[str, Dict[str, float]] = {}
        self.launches = 0
        samples, resources = self.samples, self.resources

        def run(jit, *args, **kwargs):
            self.launches += 1
            if self.launches >= MAX_TIMED:
                restore()
            name = jit.fn.__name__
            if not kwargs.get("warmup"):
                capture.on_launch(jit, args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")},
                                  kwargs.get("grid"))
            seen = samples.get(name)
            if kwargs.get("warmup") or (seen is not None and len(seen) >= SAMPLES_PER_KERNEL):
                return original(jit, *args, **kwargs)
            t0 = time.perf_counter()
            kernel = None
            try:
                kernel = original(jit, *args, **kwargs)
                return kernel
            finally:
                samples.setdefault(name, []).append((time.perf_counter() - t0) * 1e6)
                if kernel is not None and name not in resources:
                    resources[name] = resources_of(kernel)
        self.run = run

    def host_us(self) -> Dict[str, float]:
        """Kernel name -> median host time per launch, us (the first launch, which compiles, left out;
        kernels launched once have none)."""
        import statistics
        return {name: statistics.median(v[1:]) for name, v in self.samples.items() if len(v) > 1}


def run_profiled(work: str, run: Callable[[], int], tuned: bool = False, interpret_limit_mb: float = 64) -> int:
    """Run ``run()`` (the user's script) under Proton with Triton's launch hook, timing the host
    side of launches; write ``work/profile.hatchet`` and ``work/meta.json`` (:class:`ChildMeta`).

    Args:
        work: a directory to write into.
        run: runs the script; returns its exit status.
        tuned: let tritonkit's autotuner stand in for ``triton.autotune`` (cached winners launch
            with no trial).
        interpret_limit_mb: the largest launch (MiB of tensor arguments) captured to count its
            bytes and FLOPs in the interpreter afterwards (0: none).

    Returns:
        what ``run()`` returned.
    """
    import triton.profiler as proton
    from triton.runtime.jit import JITFunction

    from .._io import atomic_write_text

    original = JITFunction.run
    capture = LaunchCapture(launch_limit=int(interpret_limit_mb * 2**20))

    def restore() -> None:
        JITFunction.run = original
    timer = HostTimer(original, restore, capture)
    if tuned:
        from ..tune import install_patch
        install_patch()
    JITFunction.run = timer.run
    proton.start(os.path.join(work, "profile"), hook="triton")
    # the profiler's own objects (tritonkit, rich, numpy, ...) go to the permanent generation: the
    # script's garbage collections then scan what the script made, as they would without tritonkit
    import gc
    gc.collect()
    gc.freeze()
    try:
        status = run()
    finally:
        proton.finalize()
        JITFunction.run = original
        import torch
        try:
            interpreted = capture.count()
        except Exception as e:  # counting is a bonus: never lose the profile for it
            print(f"tritonkit profile: counting bytes and FLOPs in the interpreter failed: {e}", file=sys.stderr)
            interpreted = {}
        meta = ChildMeta(host_us=timer.host_us(), resources=timer.resources, interpreted=interpreted,
                         device=torch.cuda.get_device_name() if torch.cuda.is_available() else None)
        atomic_write_text(os.path.join(work, "meta.json"), json.dumps(meta.to_dict()))
    return status
