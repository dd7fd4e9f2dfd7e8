"""Timing you can trust: interleaved rounds, L2 flushes, CUDA graphs for small kernels, NVML clocks.

The scheduler (:func:`time_interleaved`) is written against a small :class:`RoundTimer` interface
so that its logic is tested on the CPU with a fake timer; :class:`CudaRoundTimer` is the real one.

Method, per batch of configs:

1. a global warm-up (the kernels themselves, about ``warmup_ms``) so the GPU's clocks have ramped
   before the first timed run and the order of configs does not matter;
2. a short estimate per config (the median of 3 rounds over the batch); when the batch's median estimate is under
   ``graph_below_us`` every config is timed as a CUDA graph of several launches (launch overhead
   would otherwise decide), else one launch per sample with the L2 cache flushed before each (a
   256 MiB memset, larger than any L2 today); one mode per batch, so configs compare alike;
3. rounds: in each, every config still short of its sample count runs once, in a fresh random
   order, so slow drifts (clocks, temperature) hit every config alike;
4. the fastest few (``retime_top``) and any whose confidence interval overlaps the best's get
   another set of rounds;
5. the result per config: the median and a distribution-free 95% confidence interval of the
   median (order statistics of the binomial), with the SM and memory clocks NVML read during its
   rounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from .._imports import require


@dataclass
class TimingOptions:
    """Knobs of :func:`time_interleaved` (times in ms unless named otherwise).

    Attributes:
        warmup_ms: GPU time spent running the batch's kernels, untimed, before the first round.
        target_ms: GPU time per config to spend on samples (its sample count is
            ``target_ms / estimate``, clipped to [min_samples, max_samples]).
        min_samples / max_samples: bounds on the samples per config.
        flush_l2: flush the L2 cache before each sample (not inside CUDA graphs).
        cuda_graph: True always, False never, None (default): graphs for the whole batch when its
            median estimate is under ``graph_below_us`` (one mode per batch, so configs compare alike).
        graph_below_us: the batch's median estimate, in microseconds, under which graphs are used.
        graph_launches_us: launches per graph so that one replay lasts about this many microseconds.
        retime_top: how many of the fastest configs get a second set of rounds.
    """

    warmup_ms: float = 30.0
    target_ms: float = 15.0
    min_samples: int = 7
    max_samples: int = 100
    flush_l2: bool = True
    cuda_graph: Optional[bool] = None
    graph_below_us: float = 10.0
    graph_launches_us: float = 500.0
    retime_top: int = 3


@dataclass
class Timing:
    """One config's samples and their summary.

    Attributes:
        samples_ms: every timed sample, ms per launch.
        graph: whether the samples came from CUDA-graph replays.
        sm_clock_mhz / mem_clock_mhz: median NVML clocks read after the rounds this config ran in.
    """

    samples_ms: List[float] = field(default_factory=list)
    graph: bool = False
    sm_clock_mhz: Optional[float] = None
    mem_clock_mhz: Optional[float] = None

    @property
    def median_ms(self) -> float:
        """Median of the samples, ms (``inf`` without samples)."""
        return float(np.median(self.samples_ms)) if self.samples_ms else math.inf

    @property
    def ci_ms(self) -> Optional[Tuple[float, float]]:
        """95% confidence interval of the median, ms (:func:`median_ci`), or None."""
        return median_ci(self.samples_ms)


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> Optional[Tuple[float, float]]:
    """A distribution-free confidence interval of the median: the order statistics ``j``, ``k`` with
    ``P(X_(j) <= median <= X_(k)) >= confidence`` under the binomial(n, 1/2) law (normal
    approximation), clipped to the sample range. None for fewer than 2 samples.

    Args:
        samples: the measurements (any unit; the interval is in the same unit).
        confidence: between 0 and 1.

    Raises:
        ValueError: ``confidence`` is not in (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(samples)
    if n < 2:
        return None
    s = np.sort(np.asarray(samples, dtype=float))
    z = {0.9: 1.6449, 0.95: 1.96, 0.99: 2.5758}.get(round(confidence, 2))
    if z is None:
        from statistics import NormalDist
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return float(s[lo]), float(s[max(lo, hi)])


class RoundTimer:
    """What the scheduler needs from a timer (a fake one in tests, CUDA events on the GPU)."""

    def prepare(self, index: int, graph: bool, launches: int) -> None:
        """Make config ``index`` ready to be timed (``graph``: capture ``launches`` launches)."""

    def warmup(self, indices: Sequence[int], ms: float) -> None:
        """Run the configs untimed for about ``ms`` of device time in all."""

    def round(self, indices: Sequence[int]) -> List[float]:
        """Time one sample of each config in ``indices``, in that order: ms per launch each."""
        raise NotImplementedError

    def clocks(self) -> Tuple[Optional[float], Optional[float]]:
        """(SM, memory) clocks in MHz now, or (None, None)."""
        return None, None


def time_interleaved(n: int, timer: RoundTimer, options: TimingOptions = TimingOptions(),
                     rng: Optional[np.random.Generator] = None) -> List[Timing]:
    """Time ``n`` configs through ``timer`` in interleaved rounds (see the module's docstring).

    Args:
        n: how many configs (indices ``0 .. n-1`` of ``timer``).
        timer: runs and times them (:class:`RoundTimer`).
        options: :class:`TimingOptions` (sample counts, when to use CUDA graphs, re-timing).
        rng: the source of the rounds' random orders (default seeded with 0).

    Returns:
        one :class:`Timing` per config, in index order (samples in ms per launch).
    """
    rng = rng or np.random.default_rng(0)
    idx = list(range(n))
    if n == 0:
        return []
    timer.warmup(idx, options.warmup_ms)
    est = list(np.median(np.array([timer.round(idx) for _ in range(3)], dtype=float), axis=0))
    # One mode for the whole batch: graph replays (back to back, warm L2) and flushed single
    # launches measure different things, so mixing them would rank configs by their mode.
    use_graph = bool(options.cuda_graph) if options.cuda_graph is not None \
        else float(np.median(est)) * 1e3 < options.graph_below_us
    graph = [use_graph for _ in idx]
    launches = [max(1, int(options.graph_launches_us / max(est[i] * 1e3, 0.5))) if graph[i] else 1 for i in idx]
    for i in idx:
        timer.prepare(i, graph[i], launches[i])
    out = [Timing(graph=graph[i]) for i in idx]
    clocks: List[List[Tuple[Optional[float], Optional[float]]]] = [[] for _ in idx]

    def rounds(members: List[int]) -> None:
        want = {i: int(np.clip(options.target_ms / max(est[i], 1e-4), options.min_samples, options.max_samples))
                for i in members}
        done = {i: 0 for i in members}
        while True:
            todo = [i for i in members if done[i] < want[i]]
            if not todo:
                break
            order = [todo[j] for j in rng.permutation(len(todo))]
            times = timer.round(order)
            c = timer.clocks()
            for i, t in zip(order, times):
                out[i].samples_ms.append(float(t))
                clocks[i].append(c)
                done[i] += 1

    rounds(idx)
    if n > 1 and options.retime_top > 0:
        ranked = sorted(idx, key=lambda i: out[i].median_ms)
        best_ci = out[ranked[0]].ci_ms or (out[ranked[0]].median_ms,) * 2
        again = [i for i in ranked if ranked.index(i) < options.retime_top
                 or ((out[i].ci_ms or (out[i].median_ms,) * 2)[0] <= best_ci[1])]
        rounds(again)
    for i in idx:
        sm = [c[0] for c in clocks[i] if c[0] is not None]
        mem = [c[1] for c in clocks[i] if c[1] is not None]
        out[i].sm_clock_mhz = float(np.median(sm)) if sm else None
        out[i].mem_clock_mhz = float(np.median(mem)) if mem else None
    return out


class Clocks:
    """GPU clocks through NVML (nvidia-ml-py, the ``tune`` extra); every method returns None where
    NVML is unavailable (not installed, no driver, no such device): timing goes on without clocks.
    :meth:`shared` gives one instance per device and process (NVML's start-up is not free).

    Args:
        device_index: the CUDA device (NVML's index).
    """

    _shared: dict = {}

    @classmethod
    def shared(cls, device_index: int = 0) -> "Clocks":
        """The process's one :class:`Clocks` for ``device_index``."""
        if device_index not in cls._shared:
            cls._shared[device_index] = cls(device_index)
        return cls._shared[device_index]

    def __init__(self, device_index: int = 0):
        self._handle = None
        try:
            pynvml = require("pynvml", "SM and memory clocks during timing")
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        except Exception:
            self._handle = None

    @property
    def available(self) -> bool:
        """Whether NVML answered for this device."""
        return self._handle is not None

    def read(self) -> Tuple[Optional[float], Optional[float]]:
        """(SM clock, memory clock) in MHz now."""
        if self._handle is None:
            return None, None
        try:
            n = self._nvml
            return (float(n.nvmlDeviceGetClockInfo(self._handle, n.NVML_CLOCK_SM)),
                    float(n.nvmlDeviceGetClockInfo(self._handle, n.NVML_CLOCK_MEM)))
        except Exception:
            return None, None

    def max_sm(self) -> Optional[float]:
        """The SM clock's maximum in MHz (the datasheet boost: 1980 on an H100 SXM)."""
        if self._handle is None:
            return None
        try:
            return float(self._nvml.nvmlDeviceGetMaxClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None


class CudaRoundTimer(RoundTimer):
    """Times launches with CUDA events on the current stream.

    Args:
        calls: one zero-argument function per config that launches its kernel once (hooks and
            argument restores included).
        restore: called before each sample when the kernel reads what it writes (in-place or
            atomic accumulation), outside the timed region; None when not needed.
        flush_l2: flush the L2 cache before each event-timed sample.
        clocks: a :class:`Clocks` (None: no clock readings).
    """

    def __init__(self, calls: Sequence[Callable[[], None]], restore: Optional[Callable[[], None]] = None,
                 flush_l2: bool = True, clocks: Optional[Clocks] = None):
        import torch
        self.torch = torch
        self.calls = list(calls)
        self.restore = restore
        self.flush_l2 = flush_l2
        self._clocks = clocks
        self._flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda") if flush_l2 else None
        self._graphs: dict = {}
        self._launches = [1] * len(self.calls)

    def prepare(self, index: int, graph: bool, launches: int) -> None:
        """Capture config ``index`` as a CUDA graph of ``launches`` launches where ``graph`` (not
        when arguments must be restored between samples, nor when capture fails: then it keeps
        event timing of single launches)."""
        if not graph or self.restore is not None:
            return
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.calls[index]()  # a run on the side stream before capture
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                for _ in range(launches):
                    self.calls[index]()
        except Exception:
            return  # not capturable (a hook that synchronizes): keep event timing
        self._graphs[index] = g
        self._launches[index] = launches

    def warmup(self, indices: Sequence[int], ms: float) -> None:
        """Run the configs ``indices`` in turn, untimed, until about ``ms`` of GPU time is spent
        (at most 1000 rounds)."""
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        spent, rounds = 0.0, 0
        while spent < ms and rounds < 1000:
            start.record()
            for i in indices:
                self.calls[i]()
            end.record()
            end.synchronize()
            spent += start.elapsed_time(end)
            rounds += 1

    def round(self, indices: Sequence[int]) -> List[float]:
        """One sample of each config in ``indices``, in that order, with CUDA events: ms per launch
        (a graph's replay divided by its launches), L2 flushed before each single launch."""
        torch = self.torch
        events = []
        for i in indices:
            if self.restore is not None:
                self.restore()
            g = self._graphs.get(i)
            if g is None and self._flush is not None:
                self._flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            if g is not None:
                g.replay()
            else:
                self.calls[i]()
            e.record()
            events.append((i, s, e))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / self._launches[i] if i in self._graphs else s.elapsed_time(e)
                for i, s, e in events]

    def clocks(self) -> Tuple[Optional[float], Optional[float]]:
        """(SM, memory) clocks in MHz now (NVML), or (None, None)."""
        return self._clocks.read() if self._clocks else (None, None)


class WallRoundTimer(RoundTimer):
    """Times calls with the host's clock (``time.perf_counter``): for kernels run by Triton's CPU
    interpreter (``TRITONKIT_TUNE_ON_CPU=1``, used by the tests), where there is no device to time.

    Args:
        calls: one zero-argument function per config.
        restore: called before each sample, outside the timed region, or None.
    """

    def __init__(self, calls: Sequence[Callable[[], None]], restore: Optional[Callable[[], None]] = None):
        self.calls = list(calls)
        self.restore = restore

    def round(self, indices: Sequence[int]) -> List[float]:
        """One sample of each config in ``indices``, in that order: host-clock ms per call."""
        import time
        out = []
        for i in indices:
            if self.restore is not None:
                self.restore()
            t0 = time.perf_counter()
            self.calls[i]()
            out.append((time.perf_counter() - t0) * 1e3)
        return out
