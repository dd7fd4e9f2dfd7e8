"""Pruning before any compile: configs that cannot fit the device are left out, with the reason.

Exact limits (threads per block, warps a power of two) come from the device; shared memory is
estimated for kernels whose meta-parameters name a matmul tiling (``BLOCK_M``/``BM``,
``BLOCK_N``/``BN``, ``BLOCK_K``/``BK``): Triton's software pipeline keeps ``num_stages`` copies of
an A tile (BM x BK) and a B tile (BK x BN). Checked against the shared H100 landscape
(``tests/data/matmul_bf16_4096_h100_landscape.json``): the estimate flags all 54 configs that
failed out of resources there, and 2 of the 330 that ran (both 2.7x slower than the best).
After compiling, the compiled kernel's own figures (``n_regs``, ``metadata.shared``) decide
exactly; see :func:`compiled_misfit`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ._space import Point

_NAMES = {
    "M": re.compile(r"^(BLOCK_(SIZE_)?M|BM|BLOCK_M_SIZE|TILE_M)$", re.I),
    "N": re.compile(r"^(BLOCK_(SIZE_)?N|BN|BLOCK_N_SIZE|TILE_N)$", re.I),
    "K": re.compile(r"^(BLOCK_(SIZE_)?K|BK|BLOCK_K_SIZE|TILE_K)$", re.I),
}


@dataclass(frozen=True)
class DeviceLimits:
    """What one thread block may use on a device.

    Attributes:
        name: the device's name (``torch.cuda.get_device_name``).
        max_threads_per_block: 1024 on every NVIDIA GPU since Fermi (CUDA programming guide, table
            of compute capabilities).
        max_shared_bytes: opt-in shared memory per block, bytes (H100: 232,448 = 227 KiB, from the
            driver's ``max_shared_mem`` attribute).
        max_regs_per_block: 32-bit registers per block (H100: 65,536).
        warp_size: threads per warp (32).
        multiprocessors: SM count (H100 SXM: 132).
    """

    name: str = "unknown"
    max_threads_per_block: int = 1024
    max_shared_bytes: int = 232448
    max_regs_per_block: int = 65536
    warp_size: int = 32
    multiprocessors: int = 132

    @classmethod
    def current(cls) -> "DeviceLimits":
        """The limits of the current CUDA device, read from Triton's driver and torch.

        Raises:
            RuntimeError: no CUDA device is available.
        """
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: device limits need a GPU (pruning on the CPU uses DeviceLimits())")
        from triton.runtime import driver
        dev = torch.cuda.current_device()
        props = driver.active.utils.get_device_properties(dev)
        return cls(name=torch.cuda.get_device_name(dev), max_threads_per_block=1024,
                   max_shared_bytes=int(props.get("max_shared_mem", 232448)),
                   max_regs_per_block=int(props.get("max_num_regs", 65536)),
                   warp_size=int(props.get("warpSize", 32)),
                   multiprocessors=int(props.get("multiprocessor_count", 0)))


def tile_names(point: Mapping) -> Dict[str, str]:
    """The point's meta-parameter names for the M, N and K tile sizes, where it has them."""
    out = {}
    for axis, pat in _NAMES.items():
        for name in point:
            if pat.match(name):
                out[axis] = name
                break
    return out


def estimate_shared_bytes(point: Mapping, element_bytes: int) -> Optional[int]:
    """Shared memory of a pipelined matmul tiling, bytes: ``num_stages * (BM*BK + BK*BN) * element_bytes``;
    None when the point has no M/N/K tile names."""
    names = tile_names(point)
    if len(names) < 3:
        return None
    bm, bn, bk = (int(point[names[a]]) for a in "MNK")
    stages = max(1, int(point.get("num_stages", 3)))
    return stages * (bm * bk + bk * bn) * element_bytes


def misfit(point: Point, limits: DeviceLimits, element_bytes: Optional[int] = None) -> Optional[str]:
    """Why ``point`` cannot run on the device, or None where it may.

    Args:
        point: the config.
        limits: the device's limits.
        element_bytes: bytes per element of the kernel's widest tensor input (for the shared
            memory estimate); None skips the estimate.
    """
    warps = int(point.get("num_warps", 4))
    if warps <= 0 or warps & (warps - 1):
        return f"num_warps={warps} is not a power of two (Triton requires one)"
    threads = warps * limits.warp_size
    if threads > limits.max_threads_per_block:
        return (f"num_warps={warps} is {threads} threads per block; {limits.name} allows "
                f"{limits.max_threads_per_block}")
    stages = point.get("num_stages", 3)
    if stages is not None and int(stages) < 1:
        return f"num_stages={stages} must be at least 1"
    maxnreg = point.get("maxnreg")
    if maxnreg is not None and int(maxnreg) * threads > limits.max_regs_per_block:
        return (f"maxnreg={maxnreg} x {threads} threads = {int(maxnreg) * threads} registers per block; "
                f"{limits.name} has {limits.max_regs_per_block}")
    if element_bytes:
        est = estimate_shared_bytes(point, element_bytes)
        if est is not None and est > limits.max_shared_bytes:
            return (f"estimated shared memory {est / 1024:.0f} KiB (num_stages x (BM*BK + BK*BN) x "
                    f"{element_bytes} bytes) > {limits.max_shared_bytes / 1024:.0f} KiB per block on {limits.name}")
    return None


def prune(points: Sequence[Point], limits: DeviceLimits,
          element_bytes: Optional[int] = None) -> Tuple[List[Point], List[Tuple[Point, str]]]:
    """Split ``points`` into those that may fit the device and ``(point, reason)`` for those that cannot."""
    keep, out = [], []
    for p in points:
        why = misfit(p, limits, element_bytes)
        if why:
            out.append((p, why))
        else:
            keep.append(p)
    return keep, out


def compiled_misfit(kernel, point: Point, limits: DeviceLimits) -> Optional[str]:
    """Why a compiled kernel cannot launch (its registers or shared memory exceed the device's), or None.

    ``kernel`` is Triton's ``CompiledKernel`` (``n_regs``, ``metadata.shared``, ``metadata.num_warps``).
    """
    try:
        kernel._init_handles()
    except Exception as e:  # Triton raises OutOfResources here for shared memory
        return f"{type(e).__name__}: {e}"
    shared = getattr(getattr(kernel, "metadata", None), "shared", 0) or 0
    if shared > limits.max_shared_bytes:
        return f"uses {shared / 1024:.0f} KiB shared memory; {limits.name} allows {limits.max_shared_bytes / 1024:.0f} KiB"
    n_regs = getattr(kernel, "n_regs", 0) or 0
    threads = int(point.get("num_warps", 4)) * limits.warp_size
    if n_regs and n_regs * threads > limits.max_regs_per_block:
        return f"{n_regs} registers x {threads} threads > {limits.max_regs_per_block} per block"
    return None
