"""Terminal rendering of ``tritonkit profile``'s results: the per-kernel table and the scope tree."""
from __future__ import annotations

from typing import List, Optional

from rich.table import Table
from rich.tree import Tree

from .names import short_name


def _f(x: Optional[float], fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def kernel_table(reports: List, peaks, title: str = "tritonkit profile: GPU kernels, slowest first") -> Table:
    """A rich Table of :class:`~tritonkit.profile.KernelReport` rows, with the peaks in the caption.
    Kernel names are shortened (:func:`~tritonkit.report.names.short_name`: mangled C++ names become
    ``function<Arg>``); the JSON keeps them whole."""
    t = Table(title=title, caption=f"peaks: {peaks.name}, {peaks.bandwidth_gbps:.0f} GB/s, "
                                   + ", ".join(f"{d} {v:g}" for d, v in peaks.tflops.items()) +
                                   f" TFLOP/s ({peaks.source}); % of peak (% of measured ceiling where calibrated)")
    for col, just in (("kernel", "left"), ("scope", "left"), ("launches", "right"), ("total ms", "right"),
                      ("mean us", "right"), ("host us", "right"), ("GB/s", "right"), ("TFLOP/s", "right"),
                      ("% peak", "right"), ("bound", "left"), ("regs/spills/smem", "right"),
                      ("warps/stages", "right"), ("occupancy", "right"), ("work from", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for r in reports:
        if r.bound == "compute":
            pct, ceil = r.pct_peak_flops, r.pct_ceiling_flops
        else:
            pct, ceil = (r.pct_peak_bw, r.pct_ceiling_bw) if r.pct_peak_bw is not None else \
                (r.pct_peak_flops, r.pct_ceiling_flops)
        pct_s = "-" if pct is None else f"{pct:.0f}%" + (f" ({ceil:.0f}%)" if ceil is not None else "")
        res = r.resources
        rs = "-" if not res else f"{res.get('registers', '-')}/{res.get('spills', '-')}/{res.get('shared', '-')}"
        ws = "-" if not res else f"{res.get('num_warps', '-')}/{res.get('num_stages', '-')}"
        style = {"memory": "cyan", "compute": "green", "latency": "yellow", "host": "red"}.get(r.bound, "dim")
        t.add_row(short_name(r.name, 48), "/".join(r.scope) or "-", str(r.launches), f"{r.total_ms:.3f}", f"{r.mean_us:.1f}",
                  _f(r.host_us, ".1f"), _f(r.gbps, ".0f"), _f(r.tflops, ".1f"), pct_s,
                  f"[{style}]{r.bound}[/{style}]", rs, ws,
                  f"{res['occupancy'] * 100:.0f}%" if "occupancy" in res else "-", r.work_source or "-")
    return t


def scope_tree(root, min_share: float = 0.0) -> Tree:
    """A rich Tree of the scope tree with inclusive GPU time (ms) and share of the total, like
    ``proton-viewer``; nodes under ``min_share`` of the total are left out."""
    total = root.inclusive_ns or 1.0
    tree = Tree(f"[b]GPU time {total / 1e6:.3f} ms[/b]")

    def add(parent, node):
        for c in sorted(node.children, key=lambda n: -n.inclusive_ns):
            share = c.inclusive_ns / total
            if share < min_share:
                continue
            label = f"{c.inclusive_ns / 1e6:.3f} ms  {share * 100:5.1f}%  {short_name(c.name, 80)}"
            if c.kernel:
                label += f"  [dim]({c.launches} launches)[/dim]"
            add(parent.add(label), c)

    add(tree, root)
    return tree


def comparison_table(cmp) -> Table:
    """A rich Table of a :class:`~tritonkit.profile.Comparison`: ms, TFLOP/s, GB/s, % of peak, speed-up."""
    peak = cmp.peaks.peak_tflops(cmp.dtype) if (cmp.peaks and cmp.flops) else None
    t = Table(title="side by side" + (f" ({cmp.dtype}, peak {peak:g} TFLOP/s on {cmp.peaks.name})" if peak else ""))
    for col in ("implementation", "ms (p20-p80)", "TFLOP/s", "GB/s", "% of peak", "speed-up"):
        t.add_column(col, justify="left" if col == "implementation" else "right")
    for r in cmp.rows:
        t.add_row(r.name, f"{r.ms:.4f} ({r.ms_p20:.4f}-{r.ms_p80:.4f})", _f(r.tflops, ".1f"), _f(r.gbps, ".0f"),
                  "-" if r.pct_peak is None else f"{r.pct_peak:.1f}%", f"{r.speedup:.3f}x")
    return t


def ceiling_table(ceiling, peaks) -> Table:
    """A rich Table of a measured :class:`~tritonkit.profile.Ceiling` next to the datasheet peaks."""
    t = Table(title=f"measured ceiling vs datasheet: {peaks.name}", caption=ceiling.source)
    for col in ("what", "measured", "datasheet", "% of datasheet"):
        t.add_column(col, justify="left" if col == "what" else "right")
    if ceiling.bandwidth_gbps:
        t.add_row("bandwidth, GB/s", f"{ceiling.bandwidth_gbps:.0f}", f"{peaks.bandwidth_gbps:.0f}",
                  f"{100 * ceiling.bandwidth_gbps / peaks.bandwidth_gbps:.1f}%")
    for dtype, v in ceiling.tflops.items():
        p = peaks.peak_tflops(dtype)
        t.add_row(f"{dtype} matmul, TFLOP/s", f"{v:.1f}", _f(p, "g"), "-" if not p else f"{100 * v / p:.1f}%")
    return t
