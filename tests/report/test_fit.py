"""Tables that fit a CI log (``tritonkit.report.fit``): every table tritonkit prints, rendered with long
kernel names, configs and paths at 80 columns, has lines of at most 80 characters, one line per row
(in each part where the table is split), every number whole, and names cut in the middle that keep
their start and their end; on a console that is not UTF-8 the cut is "..."."""
import io
from types import SimpleNamespace

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from tritonkit.profile import Ceiling, KernelReport, peaks_by_name
from tritonkit.report.fit import Column, FitTable, ellipsis_for, shorten_middle

WIDTH = 80
#: a Triton kernel's name longer than any column at 80
LONG = "fused_attention_forward_kernel_with_causal_mask_and_dropout_" + "x" * 40 + "_BLOCK_M128_end"
#: PyTorch's fill kernel as Proton names it: shown as vectorized_elementwise_kernel<FillFunctor>
MANGLED = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEESt5arrayIPcLm1EEEEviT0_T1_"
#: a config as the tuner writes it (``point_key``)
CONFIG = "BLOCK_K=64,BLOCK_M=128,BLOCK_N=256,GROUP_M=8,num_stages=3,num_warps=8"


def render(*renderables, width=WIDTH, file=None):
    """What ``renderables`` print on a ``width``-column console that is not a terminal."""
    console = Console(file=file or io.StringIO(), width=width)
    for r in renderables:
        console.print(r)
    return console.file.getvalue()


def fits(text, width=WIDTH):
    """Every line of ``text`` takes at most ``width`` cells."""
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, "\n".join(wide)


def body_lines(text):
    """The rows of the boxed tables in ``text`` (their lines between the side lines)."""
    return [line for line in text.splitlines() if line.startswith("│")]


def parts(text):
    """How many boxed tables ``text`` has (a table too wide for the console is printed in parts)."""
    return sum(line.startswith("┏") for line in text.splitlines())


def lines_of(text, name):
    """The lines that show ``name`` (its start)."""
    return [line for line in text.splitlines() if name[:10] in line]


def assert_cut_in_the_middle(text, name, ellipsis="…"):
    """Each line that shows ``name`` shows its start and its end with ``ellipsis`` between them."""
    lines = lines_of(text, name)
    assert lines, f"{name[:10]} not shown"
    for line in lines:
        assert ellipsis in line and name[-6:] in line, line
        assert line.index(name[:10]) < line.index(ellipsis) < line.index(name[-6:])


# ------------------------------------------------------------------------------------------ the helper

def test_shorten_middle_keeps_the_start_and_the_end():
    cut = shorten_middle(LONG, 30)
    assert len(cut) == 30 and cut.startswith(LONG[:17]) and cut.endswith(LONG[-12:]) and "…" in cut
    assert shorten_middle("softmax_kernel", 30) == "softmax_kernel"
    ascii_cut = shorten_middle(LONG, 30, "...")
    assert len(ascii_cut) == 30 and "..." in ascii_cut and "…" not in ascii_cut and ascii_cut.endswith("128_end")
    wide = shorten_middle("核函数" * 10, 9)  # East Asian characters take two cells each
    assert cell_len(wide) <= 9 and wide.startswith("核函") and wide.endswith("函数")
    assert shorten_middle(LONG, 2, "...") == "fu"  # no room for the ellipsis: the start
    with pytest.raises(ValueError, match="width must be >= 1"):
        shorten_middle(LONG, 0)


def test_the_ellipsis_is_ascii_where_the_console_is_not_utf8():
    assert ellipsis_for("utf-8") == "…" and ellipsis_for(None) == "…"
    assert ellipsis_for("ascii") == "..." and ellipsis_for("latin-1") == "..."


def test_a_table_wider_than_the_console_is_printed_in_parts_with_its_name_first():
    t = FitTable(Column("kernel", shorten=True, key=True, min_width=20),
                 *(Column(f"column {i}", justify="right") for i in range(12)), title="wide")
    t.add_row(LONG, *(f"{i}.{i:04d}" for i in range(12)))
    text = render(t)
    fits(text)
    assert parts(text) > 1 and "wide (continued)" in text
    assert len(body_lines(text)) == parts(text)  # the row is one line in each part
    assert all(any(f"{i}.{i:04d}" in row for row in body_lines(text)) for i in range(12))  # numbers whole
    assert_cut_in_the_middle(text, LONG)
    with pytest.raises(ValueError, match="2 cells for 13 columns"):
        t.add_row("a", "b")
    with pytest.raises(TypeError, match="padding"):
        FitTable(Column("a"), padding=(0, 0))


def test_a_name_cell_keeps_its_suffix_whole():
    t = FitTable(Column("kernel", shorten=True, key=True), Column("runner-up", shorten=True, min_width=24))
    t.add_row("k", (CONFIG, " (+12.5%)"))
    text = render(t, width=40)
    fits(text, 40)
    (line,) = body_lines(text)
    assert "(+12.5%)" in line and CONFIG[:8] in line and "…" in line


# ---------------------------------------------------------------------------------------- the tables

def test_check_summary_at_80_columns():
    from tritonkit.report.terminal import render_summary
    kernels = [SimpleNamespace(name=LONG, launches=1234567, programs=987654321, configs=[1, 2, 3], findings=12,
                               seconds=4321.25),
               SimpleNamespace(name="add_kernel", launches=3, programs=12, configs=[], findings=0, seconds=0.5)]
    summary = {"findings_by_kind": {"out_of_bounds": 12}, "launches": 1234570, "programs": 987654333,
               "accesses": 10, "lanes": 100, "seconds": 4321.75}
    text = render(render_summary(summary, kernels, []))
    fits(text)
    rows = [line for line in text.splitlines() if "│" in line]
    assert len(rows) == 2  # one line per kernel
    (long_row,) = lines_of(text, LONG)
    assert all(n in long_row for n in ("1234567", "987654321", "3", "12", "4321.25"))
    assert_cut_in_the_middle(text, LONG)


def _kernel(name, **kw):
    d = dict(name=name, scope=["outer_scope_of_the_model_forward_pass"], launches=123456, total_ms=1234.567,
             mean_us=9999.9, host_us=12.3, bytes=1e9, gbps=3012.0, tflops=812.3, pct_peak_bw=90.0,
             pct_ceiling_bw=99.0, bound="memory", work_source="launch_metadata",
             resources={"registers": 255, "spills": 0, "shared": 232448, "num_warps": 8, "num_stages": 4,
                        "occupancy": 0.5})
    d.update(kw)
    return KernelReport(**d)


def test_profile_kernel_table_at_80_columns():
    from tritonkit.report.profile import kernel_table
    reports = [_kernel(LONG), _kernel(MANGLED, launches=7, total_ms=0.5)]
    text = render(kernel_table(reports, peaks_by_name("H100")))
    fits(text)
    assert parts(text) >= 2 and len(body_lines(text)) == len(reports) * parts(text)
    long_rows = lines_of(text, LONG)
    assert len(long_rows) == parts(text)  # the kernel's name starts every part's row
    for number in ("123456", "1234.567", "9999.9", "12.3", "3012", "812.3", "90% (99%)", "255/0/232448", "8/4",
                   "50%", "launch_metadata"):
        assert any(number in row for row in long_rows), number
    assert_cut_in_the_middle(text, LONG)
    fill = lines_of(text, "vectorized_elementwise_kernel<FillFunctor>")  # demangled first, then cut
    assert len(fill) == parts(text) and all("Functor>" in row for row in fill)
    assert MANGLED[:10] not in text


def test_profile_kernel_table_keeps_whole_names_where_they_fit():
    from tritonkit.report.profile import kernel_table
    text = render(kernel_table([_kernel("softmax_kernel")], peaks_by_name("H100")), width=240)
    fits(text, 240)
    assert parts(text) == 1 and "softmax_kernel" in text and "outer_scope_of_the_model_forward_pass" in text
    assert "…" not in "".join(body_lines(text))


def test_the_recorded_profile_and_its_scope_tree_at_80_columns(prof, peaks, reports):
    from tritonkit.report.profile import kernel_table, scope_tree
    text = render(kernel_table(reports, peaks))
    fits(text)
    assert len(body_lines(text)) == len(reports) * parts(text)
    tree = render(scope_tree(prof.tree))
    fits(tree)
    nodes = [line for line in tree.splitlines() if " ms " in line]
    assert len(nodes) == len(tree.splitlines()) - 1  # one line per node (and the total's)
    assert any("…" in line and "launches)" in line for line in nodes)  # a long name cut, its count whole


def test_profile_comparison_and_ceiling_tables_at_80_columns():
    from tritonkit.profile import compare
    from tritonkit.report.profile import ceiling_table, comparison_table
    peaks = peaks_by_name("H100")
    fns = {LONG: lambda: (2.0, 1.9, 2.1), "Triton": lambda: (1.0, 0.95, 1.05)}
    cmp = compare(fns, flops=2.0 * 8192 ** 3, dtype="bf16", peaks=peaks, bench=lambda fn: fn())
    text = render(comparison_table(cmp), ceiling_table(Ceiling(3010.0, {"bf16": 760.0}, "test"), peaks))
    fits(text)
    assert "2.0000 (1.9000-2.1000)" in text and "2.000x" in text and "89.9%" in text
    comparison_parts = parts(text) - 1  # the ceiling's table fits in one
    assert len(lines_of(text, LONG)) == comparison_parts and len(body_lines(text)) == 2 * comparison_parts + 2
    assert_cut_in_the_middle(text, LONG)


def _tune_result(kernel=LONG):
    from tritonkit.tune._result import Trial, TuneResult
    points = [dict(BLOCK_K=64, BLOCK_M=m, BLOCK_N=256, GROUP_M=8, num_stages=3, num_warps=8) for m in (64, 128, 256)]
    return TuneResult(kernel=kernel, key=["4096", "4096", "4096", "torch.bfloat16"], tuning_s=123.45,
                      flops=2 * 4096 ** 3, trials=[Trial(point=points[0], ms=0.5123), Trial(point=points[1], ms=0.5321),
                                                   Trial(point=points[2], status="failed", error="out of resources")])


def test_tune_winners_at_80_columns():
    from tritonkit.report.tune import render_results
    console = Console(file=io.StringIO(), width=WIDTH)
    render_results([_tune_result(), _tune_result("matmul_kernel")], console)
    text = console.file.getvalue()
    fits(text)
    assert len(body_lines(text)) == 2 * parts(text)
    rows = lines_of(text, LONG)
    for number in ("0.5123", "268.3 TFLOP/s", "(+3.9%)", "3 run, 1 failed", "123.45"):
        assert any(number in row for row in rows), number
    assert_cut_in_the_middle(text, LONG)
    assert any(row.count("BLOCK_K=64") for row in rows)  # configs cut in the middle too


def test_tune_cache_list_and_show_at_80_columns(tmp_path):
    from tritonkit.report.tune import print_cache_entries, print_cache_list
    from tritonkit.tune import Trial, TuneCache
    from tritonkit.tune._cache import KernelId
    cache = TuneCache(tmp_path / "a_cache_directory_with_a_long_name_" / ("deeper_" * 8))
    kid = KernelId(LONG, "0123456789abcdef", "3.9.0", "NVIDIA H100 80GB HBM3")
    cache.record(kid, ["4096", "4096", "torch.bfloat16"], Trial(point={"BLOCK": 128, "GROUP": 8}, ms=1.2345))
    cache.record(kid, ["4096", "4096", "torch.bfloat16"],
                 Trial(point={"BLOCK": 1024, "GROUP": 8}, status="failed",
                       error="out of resources: shared memory, Required: 262144, Hardware limit: 232448"))
    console = Console(file=io.StringIO(), width=WIDTH)
    print_cache_list(list(cache.entries()), cache.directory, console)
    print_cache_entries(cache.show(LONG[:20]), console)
    text = console.file.getvalue()
    fits(text)
    listed, shown = text.split("key(s) in")
    assert len(body_lines(listed)) == parts(listed) and len(body_lines(shown)) == 2 * parts(shown)
    assert any("1.2345" in row for row in lines_of(listed, LONG)) and "3.9.0" in listed
    assert_cut_in_the_middle(listed, LONG)
    assert any("BLOCK=128,GROUP=8 *" in row and "1.2345" in row for row in body_lines(shown))  # the star whole
    assert any("out of res" in row and "232448" in row for row in body_lines(shown))  # an error cut in the middle


def test_a_console_that_is_not_utf8_gets_ascii_ellipses():
    from tritonkit.report.profile import kernel_table

    class AsciiFile(io.StringIO):
        encoding = "ascii"
    text = render(kernel_table([_kernel(LONG)], peaks_by_name("H100")), file=AsciiFile())
    fits(text)
    text.encode("ascii")  # nothing an ASCII stream cannot write
    assert_cut_in_the_middle(text, LONG, "...")


def test_fit_line_cuts_the_name_to_the_room_it_is_printed_in():
    from tritonkit.report.fit import FitLine
    line = FitLine(Text("1.000 ms  "), LONG, Text("  (5 launches)"))
    text = render(line, width=60)
    assert len(text.splitlines()) == 1 and cell_len(text.rstrip("\n")) <= 60
    assert text.startswith("1.000 ms  fused_att") and "128_end  (5 launches)" in text
