"""Terminal rendering of the tuner's results with rich: the winners per kernel and key
(``tritonkit tune``), a distilled heuristic (``tritonkit distill``) and the tuning cache
(``tritonkit cache list|show``). Each takes the tuner's plain result objects."""
from __future__ import annotations

from typing import List, Optional, Sequence


def render_results(results: List, console, restarts: int = 0) -> None:
    """Print one row per kernel and key (:class:`~tritonkit.tune.TuneResult`): winner, its time (ms)
    and throughput (TFLOP/s or GB/s), runner-up, counts by outcome, tuning time (s); then the first
    wrong or crashed configs, the SM clocks seen (NVML) and how often the script was restarted.
    Each row is one line at the console's width: numbers whole, kernel names, keys and configs cut
    in the middle (:class:`~tritonkit.report.fit.FitTable`); the ``--json`` output keeps them whole."""
    from .fit import Column, FitTable
    from .terminal import safe
    if not results:
        console.print("tritonkit tune: no @triton.autotune kernel was tuned (none launched with more than one "
                      "config, or none found)")
        return
    table = FitTable(Column("kernel", shorten=True, key=True, min_width=16), Column("key", shorten=True, min_width=10),
                     Column("winner", shorten=True, min_width=24), Column("ms", justify="right"),
                     Column("speed", justify="right"), Column("runner-up", shorten=True, min_width=28),
                     Column("configs"), Column("tuning s", justify="right"),
                     title="tritonkit tune: winners per kernel and key (times in ms)")
    for r in results:
        w, u = r.winner, r.runner_up
        tput = ""
        if r.tflops() is not None:
            tput = f"{r.tflops():.1f} TFLOP/s"
        elif r.gbps() is not None:
            tput = f"{r.gbps():.0f} GB/s"
        counts = {"run": sum(1 for t in r.trials if t.source != "cache" and t.status != "pruned"),
                  "cached": sum(1 for t in r.trials if t.source == "cache")}
        counts.update({s: r.count(s) for s in ("failed", "wrong", "crashed", "pruned")})
        table.add_row(safe(r.kernel), safe(", ".join(r.key)), safe(w.key) if w else "-", f"{w.ms:.4f}" if w else "-",
                      tput, (safe(u.key), f" (+{(u.ms / w.ms - 1) * 100:.1f}%)") if (u and w) else "-",
                      ", ".join(f"{n} {k}" for k, n in counts.items() if n), f"{r.tuning_s:.2f}")
    console.print(table)
    bad = [t for r in results for t in r.trials if t.status in ("wrong", "crashed")]
    for t in bad[:10]:
        # an error's text is the config's own (``[/]``, ESC...): shown literally, never as markup
        console.print(f"  {t.status}: {safe(t.key)}: {safe(t.error)}", markup=False, highlight=False)
    clocks = [t.sm_clock_mhz for r in results for t in r.trials if t.sm_clock_mhz]
    if clocks:
        console.print(f"SM clock during timing: {min(clocks):.0f}-{max(clocks):.0f} MHz (NVML)")
    if restarts:
        console.print(f"the script was restarted {restarts} time(s) after crashes")


def _pct(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def print_distilled(d, console, out: Optional[str] = None) -> None:
    """Print a :class:`~tritonkit.tune.Distilled` result: depth, configs, held-out regret, notes.

    Args:
        d: the result.
        console: a ``rich.console.Console``.
        out: the path the module was written to, to say so.
    """
    from ..tune import point_key
    from .fit import Column, FitTable

    ho, base = d.held_out, d.baseline
    console.print(f"[bold]{d.kernel}[/]: {d.n_keys} tuned keys -> decision tree of depth {d.depth} "
                  f"({d.leaves} case(s)) splitting on {', '.join(d.splits_on()) or 'nothing: one config for all keys'}")
    if d.cv_speed:
        console.print("  cross-validated speed by depth (+ratios: may split on ratios of key arguments): "
                      + ", ".join(f"{k}: {_pct(v)}" for k, v in sorted(d.cv_speed.items())))
    t = FitTable(Column("config", shorten=True, key=True, min_width=20), Column("training keys", justify="right"),
                 Column(f"within {100 * d.tolerance:g}%", justify="right"), title="configs used", title_justify="left")
    counts = d.leaf_counts()
    for c in d.configs:
        n, w = counts.get(point_key(c), (0, 0))
        t.add_row(point_key(c), str(n), str(w))
    console.print(t)
    style = "green" if d.meets_goal else "yellow"
    console.print(f"held out ({ho.method}): [{style}]{_pct(ho.speed_geomean)}[/] of per-key tuned speed "
                  f"(geomean; goal {_pct(d.goal)}), worst key {_pct(ho.speed_worst)}; slowdown mean "
                  f"{_pct(ho.slowdown_mean)}, worst {_pct(ho.slowdown_worst)}; "
                  f"one config for all keys: {_pct(base.speed_geomean)}")
    if ho.unknown or ho.failed:
        console.print(f"[yellow]held out: picked config not measured at {len(ho.unknown)} key(s), failed at "
                      f"{len(ho.failed)}; left out of the statistics[/]")
    if not d.meets_goal:
        console.print(f"[yellow]below the goal of {_pct(d.goal)}: tune more shapes near the worst keys, or "
                      "raise --max-depth[/]")
    for n in d.notes:
        console.print(f"[dim]note: {n}[/]", highlight=False)
    if out:
        console.print(f"wrote {out}")


def _key_text(key: Sequence[str]) -> str:
    return ", ".join(key) if key else "(none)"


def _ms(ms: Optional[float]) -> str:
    return "-" if ms is None else f"{ms:.4f}"


def print_cache_list(entries: List, directory: str, console) -> None:
    """One line per kernel, device, Triton version and key of the tuning cache
    (:class:`~tritonkit.tune.TuneCache` entries): configs cached, failures, the winner and its ms.

    One line per row at the console's width: kernel names, devices, keys and configs are cut in the
    middle where they do not fit (:class:`~tritonkit.report.fit.FitTable`), numbers are whole.

    Every string comes from a cache file, which anyone may have written: each goes through
    :func:`~tritonkit.report.terminal.safe` (``rich.text.Text`` keeps ESC, and a lone surrogate
    would make a UTF-8 stdout raise)."""
    from rich.text import Text

    from .fit import Column, FitTable
    from .terminal import safe

    if not entries:
        console.print(safe(f"the tuning cache in {directory} is empty"), markup=False, highlight=False)
        return
    t = FitTable(Column("kernel", shorten=True, key=True, min_width=16), Column("device", shorten=True, min_width=10),
                 Column("triton"), Column("key", shorten=True, min_width=10), Column("configs", justify="right"),
                 Column("failed", justify="right"), Column("winner", shorten=True, min_width=24),
                 Column("ms", justify="right"), title=Text(safe(f"tuning cache: {directory}")), title_justify="left")
    for e in entries:
        t.add_row(*(Text(safe(x)) for x in (e.kernel, e.device, e.triton, _key_text(e.key), str(e.configs),
                                            str(e.failures), e.winner or "-", _ms(e.winner_ms))))
    console.print(t)
    files = len({e.path for e in entries})
    console.print(f"{len(entries)} key(s) in {files} file(s); times in ms", markup=False, highlight=False)


def print_cache_entries(entries: List, console) -> None:
    """Every cached config of some kernels (tuning cache entries), fastest first, per device,
    Triton version and key; the winner starred. Strings from the cache files are escaped
    (:func:`~tritonkit.report.terminal.safe`), and configs and errors cut in the middle to the
    console's width, as in :func:`print_cache_list`."""
    from rich.text import Text

    from .fit import Column, FitTable
    from .terminal import safe

    for e in entries:
        title = Text(safe(f"{e.kernel}  key [{_key_text(e.key)}]  {e.device}  triton {e.triton}  "
                          f"source {e.source_hash}"))
        t = FitTable(Column("#", justify="right", key=True), Column("config", shorten=True, key=True, min_width=28),
                     Column("status"), Column("ms", justify="right"), Column("95% CI ms", justify="right"),
                     Column("samples", justify="right"), Column("error", shorten=True, min_width=24),
                     title=title, title_justify="left", caption=Text(safe(e.path)), caption_justify="left")
        for i, tr in enumerate(e.trials, 1):
            ci = f"{tr.ci_ms[0]:.4f}-{tr.ci_ms[1]:.4f}" if tr.ci_ms else "-"
            mark = " *" if tr.key == e.winner else ""
            error = "" if tr.error is None else str(tr.error)  # a cache file's null or number: no TypeError
            error = error if len(error) <= 200 else error[:197] + "..."
            cells = [Text(safe(x)) for x in (str(i), tr.key, tr.status, _ms(tr.ms) if tr.ok else "-", ci,
                                             str(tr.samples) if tr.samples else "-", error)]
            cells[1] = (cells[1], mark)  # the winner's star is kept where the config is cut
            t.add_row(*cells)
        console.print(t)
        extra = f"; {e.in_flight} config(s) in flight" if e.in_flight else ""
        console.print(f"{e.configs} config(s), {e.failures} not ok{extra}; * the winner"
                      + (f" ({_ms(e.winner_ms)} ms)" if e.winner else " (none ran correctly)"),
                      markup=False, highlight=False)
