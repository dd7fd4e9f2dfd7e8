"""Terminal rendering of ``tritonkit profile``'s results: the per-kernel table and the scope tree."""
from __future__ import annotations

from typing import List, Optional

from rich.text import Text
from rich.tree import Tree

from .fit import Column, FitLine, FitTable
from .names import short_name

#: the widest a kernel's name is shown in the kernel table, cells (a wider console leaves the rest to
#: the other columns)
_KERNEL_WIDTH = 64


def _long_name(name: str) -> str:
    """A kernel's name as :func:`~tritonkit.report.names.short_name` makes it readable (a mangled C++
    name as ``function<Arg, Arg>``), not yet cut: the table cuts it to its column."""
    return short_name(name, 10_000)


def _f(x: Optional[float], fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def kernel_table(reports: List, peaks, title: str = "tritonkit profile: GPU kernels, slowest first") -> FitTable:
    """A table of :class:`~tritonkit.profile.KernelReport` rows, with the peaks in the caption, laid
    out for the width it is printed at (:class:`~tritonkit.report.fit.FitTable`): one line per kernel,
    numbers whole; kernel names are shortened (:func:`~tritonkit.report.names.short_name`: mangled C++
    names become ``function<Arg>``), then cut in the middle to the room left; where the console is
    too narrow for all 14 columns (80), the table is printed in parts, each starting with the kernel.
    The JSON keeps the names whole."""
    t = FitTable(Column("kernel", shorten=True, key=True, min_width=20, max_width=_KERNEL_WIDTH),
                 Column("scope", shorten=True, min_width=8),
                 *(Column(col, justify="right") for col in ("launches", "total ms", "mean us", "host us", "GB/s",
                                                             "TFLOP/s", "% peak")),
                 Column("bound"), Column("regs/spills/smem", justify="right"), Column("warps/stages", justify="right"),
                 Column("occupancy", justify="right"), Column("work from"),
                 title=title, caption=f"peaks: {peaks.name}, {peaks.bandwidth_gbps:.0f} GB/s, "
                                      + ", ".join(f"{d} {v:g}" for d, v in peaks.tflops.items()) +
                                      f" TFLOP/s ({peaks.source}); % of peak (% of measured ceiling where calibrated)")
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
        t.add_row(_long_name(r.name), "/".join(r.scope) or "-", str(r.launches), f"{r.total_ms:.3f}",
                  f"{r.mean_us:.1f}", _f(r.host_us, ".1f"), _f(r.gbps, ".0f"), _f(r.tflops, ".1f"), pct_s,
                  Text(str(r.bound), style=style), rs, ws,
                  f"{res['occupancy'] * 100:.0f}%" if "occupancy" in res else "-", r.work_source or "-")
    return t


def scope_tree(root, min_share: float = 0.0) -> Tree:
    """A rich Tree of the scope tree with inclusive GPU time (ms) and share of the total, like
    ``proton-viewer``; nodes under ``min_share`` of the total are left out. Each node is one line: its
    name is cut in the middle to the room its depth leaves (:class:`~tritonkit.report.fit.FitLine`)."""
    total = root.inclusive_ns or 1.0
    tree = Tree(f"[b]GPU time {total / 1e6:.3f} ms[/b]")

    def add(parent, node):
        for c in sorted(node.children, key=lambda n: -n.inclusive_ns):
            share = c.inclusive_ns / total
            if share < min_share:
                continue
            suffix = Text(f"  ({c.launches} launches)", style="dim") if c.kernel else Text()
            add(parent.add(FitLine(Text(f"{c.inclusive_ns / 1e6:.3f} ms  {share * 100:5.1f}%  "), _long_name(c.name),
                                   suffix, max_width=80)), c)

    add(tree, root)
    return tree


def comparison_table(cmp) -> FitTable:
    """A table of a :class:`~tritonkit.profile.Comparison`: ms, TFLOP/s, GB/s, % of peak, speed-up;
    one line per implementation, its name cut in the middle where the console is narrow."""
    peak = cmp.peaks.peak_tflops(cmp.dtype) if (cmp.peaks and cmp.flops) else None
    t = FitTable(Column("implementation", shorten=True, key=True, min_width=16),
                 *(Column(col, justify="right") for col in ("ms (p20-p80)", "TFLOP/s", "GB/s", "% of peak",
                                                            "speed-up")),
                 title="side by side" + (f" ({cmp.dtype}, peak {peak:g} TFLOP/s on {cmp.peaks.name})" if peak else ""))
    for r in cmp.rows:
        t.add_row(r.name, f"{r.ms:.4f} ({r.ms_p20:.4f}-{r.ms_p80:.4f})", _f(r.tflops, ".1f"), _f(r.gbps, ".0f"),
                  "-" if r.pct_peak is None else f"{r.pct_peak:.1f}%", f"{r.speedup:.3f}x")
    return t


def ceiling_table(ceiling, peaks) -> FitTable:
    """A table of a measured :class:`~tritonkit.profile.Ceiling` next to the datasheet peaks."""
    t = FitTable(Column("what", shorten=True, key=True, min_width=20),
                 *(Column(col, justify="right") for col in ("measured", "datasheet", "% of datasheet")),
                 title=f"measured ceiling vs datasheet: {peaks.name}", caption=ceiling.source)
    if ceiling.bandwidth_gbps:
        t.add_row("bandwidth, GB/s", f"{ceiling.bandwidth_gbps:.0f}", f"{peaks.bandwidth_gbps:.0f}",
                  f"{100 * ceiling.bandwidth_gbps / peaks.bandwidth_gbps:.1f}%")
    for dtype, v in ceiling.tflops.items():
        p = peaks.peak_tflops(dtype)
        t.add_row(f"{dtype} matmul, TFLOP/s", f"{v:.1f}", _f(p, "g"), "-" if not p else f"{100 * v / p:.1f}%")
    return t
