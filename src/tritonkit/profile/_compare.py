"""Side-by-side comparison of implementations of one operation (the seed's example: cuBLAS through
``torch.matmul`` against a Triton matmul at 8192^3 in bf16)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional

from ._devices import DevicePeaks
from ._plain import number, part, require_mapping, text


@dataclass
class CompareRow:
    """One implementation: median ms (20th-80th percentile), TFLOP/s, GB/s, % of peak, speed-up
    over the first implementation (its time / this one's)."""

    name: str
    ms: float
    ms_p20: float
    ms_p80: float
    tflops: Optional[float] = None
    gbps: Optional[float] = None
    pct_peak: Optional[float] = None
    speedup: float = 1.0

    def to_dict(self) -> dict:
        """Plain JSON data (ms, TFLOP/s, GB/s, %)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CompareRow":
        """The inverse of :meth:`to_dict`; missing or malformed figures are None (times 0 ms, speed-up 1).

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a comparison row")
        ms = number(d.get("ms")) or 0.0
        return cls(text(d.get("name"), "?"), ms, number(d.get("ms_p20")) or ms, number(d.get("ms_p80")) or ms,
                   number(d.get("tflops")), number(d.get("gbps")), number(d.get("pct_peak")),
                   number(d.get("speedup")) or 1.0)


@dataclass
class Comparison:
    """The rows of :func:`compare`, the work per call and the peaks they were compared with."""

    rows: List[CompareRow] = field(default_factory=list)
    flops: Optional[float] = None
    bytes: Optional[float] = None
    dtype: str = "bf16"
    peaks: Optional[DevicePeaks] = None

    def to_dict(self) -> dict:
        """Plain JSON data (the peaks as a dict)."""
        d = asdict(self)
        d["peaks"] = self.peaks.to_dict() if self.peaks else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Comparison":
        """The inverse of :meth:`to_dict`; rows that are not objects are left out, peaks that cannot be
        read are None.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = require_mapping(d, "a comparison")
        rows = d.get("rows") if isinstance(d.get("rows"), list) else []
        return cls([CompareRow.from_dict(r) for r in rows if isinstance(r, Mapping)], number(d.get("flops")),
                   number(d.get("bytes")), text(d.get("dtype"), "bf16"), part(DevicePeaks.from_dict, d.get("peaks")))


def compare(fns: Dict[str, Callable[[], object]], flops: Optional[float] = None, bytes: Optional[float] = None,
            dtype: str = "bf16", peaks: Optional[DevicePeaks] = None, warmup: int = 50, rep: int = 300,
            bench: Optional[Callable] = None) -> Comparison:
    """Time each implementation and put them side by side.

    Args:
        fns: name -> a zero-argument function that runs the operation once (first = baseline).
        flops / bytes: work of one call (for TFLOP/s, GB/s and % of peak); None where unknown.
        dtype: whose compute peak applies (``bf16``, ``fp16``, ``fp32``, ``tf32``, ``fp8``).
        peaks: the device's peaks (default: the current device's).
        warmup / rep: ``triton.testing.do_bench``'s warm-up and repetition time, ms.
        bench: ``bench(fn) -> (median, p20, p80)`` in ms (default ``triton.testing.do_bench``).

    Raises:
        ValueError: ``fns`` is empty.
    """
    if not fns:
        raise ValueError("compare needs at least one implementation: compare({'torch': f, 'triton': g}, flops=...)")
    if bench is None:
        import triton.testing

        def bench(fn):
            return triton.testing.do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5, 0.2, 0.8])
    if peaks is None:
        from ._devices import current_peaks
        peaks = current_peaks()
    out = Comparison(flops=flops, bytes=bytes, dtype=dtype, peaks=peaks)
    for name, fn in fns.items():
        med, lo, hi = bench(fn)
        row = CompareRow(name, float(med), float(lo), float(hi))
        secs = row.ms * 1e-3
        if flops:
            row.tflops = flops / secs / 1e12
            peak = peaks.peak_tflops(dtype)
            row.pct_peak = 100.0 * row.tflops / peak if peak else None
        if bytes:
            row.gbps = bytes / secs / 1e9
            if not flops:
                row.pct_peak = 100.0 * row.gbps / peaks.bandwidth_gbps
        out.rows.append(row)
    base = out.rows[0].ms
    for row in out.rows:
        row.speedup = base / row.ms
    return out
