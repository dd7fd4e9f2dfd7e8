"""The doctor's HTML page (tritonkit.report.html), its heatmaps (report.heatmap) and the tuning landscape
chart (report.charts): content, counts, escaping, self-containment. CPU only, no browser."""
import base64
import copy
import importlib.util
import json
import os
import re
from collections import Counter
from html.parser import HTMLParser

import numpy as np
import pytest

from tritonkit.report import heatmap as hm
from tritonkit.report.charts import tuning_landscape_chart, tuning_landscape_data
from tritonkit.report.html import build_page, render_report, write_report

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "doctor")
_spec = importlib.util.spec_from_file_location("doctor_fixtures", os.path.join(DATA, "make_fixtures.py"))
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)
access_map = fixtures.access_map

EVIL = "<script>alert(1)</script>"
OOB_RGB = hm._rgb(hm.OOB_COLOR)


def load(name):
    with open(os.path.join(DATA, name)) as fh:
        return json.load(fh)


# ------------------------------------------------------------------------------ a small DOM for asserts

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent=None):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    @property
    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag=None, cls=None, id=None):
        return [n for n in self.iter() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and (id is None or n.attrs.get("id") == id)]

    def find(self, tag=None, cls=None, id=None):
        found = self.find_all(tag, cls, id)
        assert found, f"no <{tag} class={cls} id={id}>"
        return found[0]


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse(page: str) -> Node:
    b = _Builder()
    b.feed(page)
    b.close()
    return b.root


# ------------------------------------------------------------------------------------- report builders

def _finding(kind, kernel, file, line, source="", **kw):
    f = {"kind": kind, "kernel": kernel, "file": file, "line": line, "source": source, "arg": "x_ptr",
         "tensor": {"shape": [1000], "dtype": "float32", "strides": [1]}, "access": "load", "masked": False,
         "count": 24, "program_ids": [[3]], "num_programs": 1, "elements": "x_ptr[1000:1024]", "num_elements": 24,
         "reason": "past_end", "hint": "add a mask", "message": f"{kind} in {kernel}", "call_stack": [],
         "examples": [], "other": None, "configs": [], "occurrences": 1, "launches": 1}
    f.update(kw)
    return f


def _trial(point, status="ok", ms=None, error="", source="gpu"):
    return {"point": point, "status": status, "ms": ms, "ci_ms": None, "samples": 5, "error": error,
            "sm_clock_mhz": None, "mem_clock_mhz": None, "compile_s": None, "source": source}


def _tune_result(kernel="_k", key=("1024", "torch.float32")):
    trials = [_trial({"BLOCK": 64, "num_warps": 4}, ms=2.0), _trial({"BLOCK": 128, "num_warps": 4}, ms=1.0),
              _trial({"BLOCK": 256, "num_warps": 4}, "failed", error="OutOfResources: shared memory"),
              _trial({"BLOCK": 512, "num_warps": 4}, ms=4.0), _trial({"BLOCK": 1024, "num_warps": 4}, ms=3.0),
              _trial({"BLOCK": 32, "num_warps": 4}, "wrong", error="max abs difference 0.5"),
              _trial({"BLOCK": 16, "num_warps": 2}, "pruned", error="too small")]
    return {"kernel": kernel, "key": list(key), "strategy": "brute_force", "tuning_s": 1.5,
            "winner": "BLOCK=128,num_warps=4", "trials": trials}


def _vector_add_map(arg="x_ptr", n=1000, block=256, oob=True, access="load"):
    progs = -(-n // block)
    acc = [(p, access, fixtures._line(p * block, block if oob else min(block, n - p * block)))
           for p in range(progs)]
    return access_map(arg, [n], "float32", acc, programs=progs)


# ------------------------------------------------------------------------------------------- the page

@pytest.fixture(scope="module")
def fixture_page():
    """(report, parsed page) of tests/data/doctor/report.json, rendered once."""
    report = load("report.json")
    return report, parse(render_report(report))


def test_fixture_page_summary_counts_match_the_findings(fixture_page):
    report, root = fixture_page
    expected = Counter(f["kind"] for f in report["check"]["findings"])
    summary = root.find("section", id="summary")
    rows = summary.find("table", cls="kinds").find_all("tr")
    shown = {r.find("span", cls="badge").text(): int(r.find("td", cls="num").text()) for r in rows}
    assert shown == dict(expected)
    assert summary.find("p", cls="big").text() == str(len(report["check"]["findings"]))
    # every finding has its card, numbered in order, with its message
    cards = root.find("section", id="findings").find_all("article", cls="finding")
    assert len(cards) == len(report["check"]["findings"])
    for card, f in zip(cards, report["check"]["findings"]):
        assert card.find("h3", cls="message").text() == f["message"]
        assert card.find("span", cls="badge").text() == f["kind"]
    # slowest kernels: slowest first, with their bound
    kernels = sorted(report["profile"]["kernels"], key=lambda k: -k["total_ms"])
    names = [r.find("td", cls="name").text() for r in summary.find_all("table", cls="mini")[0].find_all("tr")[1:]]
    assert names == [k["name"] for k in kernels]
    # steps with their status
    steps = summary.find("ul", cls="steps").text()
    assert "ran" in steps and "check" in steps and "profile" in steps


def test_fixture_page_has_heatmaps_per_argument_roofline_and_tuning_charts(fixture_page):
    report, root = fixture_page
    memory = root.find("section", id="memory")
    launches = memory.find_all("article", cls="launch")
    with_maps = [r for r in report["check"]["launch_records"] if r.get("access_maps")]
    assert len(launches) == len(with_maps)
    for art, rec in zip(launches, with_maps):
        figs = art.find_all("figure", cls="heatmap")
        assert [f.find("div", cls="arg-name").text() for f in figs] == [m["arg"] for m in rec["access_maps"]]
        for fig, m in zip(figs, rec["access_maps"]):
            imgs = fig.find_all("img")
            assert imgs and all(i.attrs["src"].startswith("data:image/png;base64,") for i in imgs)
            caption = fig.find("figcaption").text()
            assert m["dtype"] in caption and "[" + ", ".join(map(str, m["shape"])) + "]" in caption
            assert ("has-oob" in fig.classes) == bool(m["oob"])
    # the 1-D maps say they are wrapped, the downsampled one says so
    text = memory.text()
    assert "wrapped row-major into 32 x 32 cells" in text
    assert "8 x 16 elements (downsampled)" in text
    profile = root.find("section", id="profile")
    alts = [i.attrs["alt"] for i in profile.find_all("img")]
    assert any(a.startswith("roofline") for a in alts) and any(a.startswith("GPU time") for a in alts)
    assert all(i.attrs["src"].startswith("data:image/svg+xml;base64,") for i in profile.find_all("img"))
    tuning = root.find("section", id="tuning")
    assert len(tuning.find_all("article", cls="tune")) == len(report["tune"]["results"])
    assert len(tuning.find_all("img")) == len(report["tune"]["results"])


def test_marked_source_line_is_the_finding_line(tmp_path):
    src = tmp_path / "kern.py"
    lines = [f"line_{i} = {i}" for i in range(1, 21)]
    lines[9] = "x = tl.load(x_ptr + offsets)  # the bad one"
    src.write_text("\n".join(lines) + "\n")
    report = {"check": {"findings": [_finding("out_of_bounds", "k", str(src), 10, source="stale text"),
                                     _finding("data_race", "k", str(tmp_path / "gone.py"), 3,
                                              source="tl.store(p, v)  # from the finding")]}}
    root = parse(render_report(report))
    first, second = root.find_all("article", cls="finding")
    rows = first.find_all("tr", cls="src-line")
    assert [int(r.find("td", cls="ln").text().lstrip(">")) for r in rows] == list(range(6, 15))  # +-4 lines
    marked = first.find_all("tr", cls="marked")
    assert len(marked) == 1
    assert marked[0].find("td", cls="ln").text() == ">10"
    assert marked[0].find("pre").text() == "x = tl.load(x_ptr + offsets)  # the bad one"
    # a file that is gone: the finding's own line, marked, and a note saying so
    marked = second.find_all("tr", cls="marked")
    assert len(marked) == 1 and marked[0].find("pre").text() == "tl.store(p, v)  # from the finding"
    assert "could not be read" in second.text()


def test_user_text_is_escaped_and_no_script_appears(tmp_path):
    src = tmp_path / "evil.py"
    src.write_text('a = 1\nif a < b && c > d: s = "</textarea><script>alert(2)</script>"\nb = 2\n')
    report = {
        "command": "python run.py --name '<b>bold</b>' && echo done", "device": "GPU <i>",
        "versions": {"triton": "<script>v</script>"},
        "steps": [{"name": "check", "status": "ran", "why": "</textarea>"},
                  {"name": "tune", "status": "ran", "why": ""}, {"name": "profile", "status": "ran", "why": ""}],
        "check": {"findings": [_finding("out_of_bounds", EVIL, str(src), 2, message="bad </textarea> & <b>",
                                        hint="<img src=x onerror=alert(3)>")],
                  "launch_records": [{"kernel": EVIL, "grid": [4, 1, 1], "programs": 4,
                                      "config": "<script>c</script>", "access_maps": [_vector_add_map(arg=EVIL)]}]},
        "tune": {"results": [_tune_result(kernel=EVIL, key=["<script>k</script>"])]},
        "profile": {"peaks": fixtures.H100_PEAKS, "ceiling": None,
                    "kernels": [fixtures._kernel(EVIL, 10, 0.5, bytes_=1 << 30, flops=1 << 34, dtype="fp16",
                                                 bound="memory", reason="<script>r</script>")]},
    }
    page = render_report(report)
    root = parse(page)
    assert root.find_all("script") == []  # the template emits none, and no user text became one
    assert "<script>" not in page and "<b>bold</b>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&amp;&amp;" in page and "&lt;/textarea&gt;" in page
    # the names are text: in the finding, the launch, the tuning run and the kernel table
    assert root.find("code", cls="kernel").text() == EVIL
    assert root.find("article", cls="launch").find("h3").find("code").text() == EVIL
    assert root.find("article", cls="tune").find("h3").find("code").text() == EVIL
    assert root.find("table", cls="kernels").find("td", cls="name").text() == EVIL
    assert root.find("tr", cls="marked").find("pre").text() == \
        'if a < b && c > d: s = "</textarea><script>alert(2)</script>"'
    # charts are images: the SVG text inside them is escaped as well (matplotlib), never a <script> element
    svgs = [base64.b64decode(i.attrs["src"].split(",", 1)[1]).decode("utf-8") for i in root.find_all("img")
            if i.attrs["src"].startswith("data:image/svg+xml")]
    assert len(svgs) == 3  # roofline, time breakdown, tuning landscape
    for svg in svgs:
        assert "<script" not in svg.lower()
        assert parse(svg).find_all("script") == []
    assert any("&lt;script&gt;" in svg for svg in svgs)  # the kernel's name is in a chart, escaped


def test_page_is_self_contained_and_small_with_twenty_heatmaps():
    report = {"check": {"findings": [], "launch_records": [
        {"kernel": f"k{i}", "grid": [16, 1, 1], "programs": 16,
         "access_maps": [_vector_add_map("x_ptr", n=4000 + 100 * i), _vector_add_map("y_ptr", n=4000, oob=False),
                         access_map("z_ptr", [300, 200], "float16",
                                    [(p, "store", fixtures._tile(p * 20, 20, 0, 200)) for p in range(16)],
                                    bins=(2, 2), programs=16)]} for i in range(7)]}}
    page = render_report(report)
    root = parse(page)
    assert len(root.find_all("figure", cls="heatmap")) == 21
    assert len(root.find_all("img")) >= 21
    assert len(page.encode("utf-8")) < 5_000_000
    for node in root.iter():
        for attr in ("src", "href", "srcset", "data", "action", "poster"):
            value = (node.attrs.get(attr) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "ftp:")), (node.tag, attr, value[:80])
        if node.tag == "img":
            assert node.attrs["src"].startswith("data:image/")
        if node.tag == "a" and node.attrs.get("href"):
            assert node.attrs["href"].startswith("#")
    assert root.find_all("link") == [] and root.find_all("script") == [] and root.find_all("iframe") == []
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", page)  # no CSS fetch either
    assert "@import" not in page


def test_missing_parts_say_what_was_skipped_and_why():
    report = load("check_only.json")
    root = parse(render_report(report))
    why = "no GPU here (torch.cuda.is_available() is False)"
    for section in ("profile", "tuning"):
        assert why in root.find("section", id=section).find("p", cls="skipped").text()
    cards = {c.find("h3").text(): c for c in root.find("section", id="summary").find_all("div", cls="card")}
    assert why in cards["Slowest kernels"].text() and why in cards["What tuning gained"].text()
    assert [b.text() for b in cards["Steps"].find_all("span", cls="badge")] == ["ran", "skipped", "skipped"]
    assert len(root.find_all("article", cls="finding")) == 3
    assert root.find("section", id="profile").find_all("img") == []
    # and a report with nothing at all still renders, saying nothing ran
    root = parse(render_report({}))
    assert "not in the report" in root.find("section", id="findings").text()
    assert root.find_all("img") == []


def test_broken_parts_are_reported_not_fatal():
    bad_map = _vector_add_map()
    bad_map["reads"] = [[1, 2, 3]]  # not ceil(rows / bin_rows) x ceil(cols / bin_cols)
    report = {"check": {"findings": [{"kind": "made_up_kind"}], "launch_records": [
        {"kernel": "k", "access_maps": [bad_map, _vector_add_map("ok_ptr")]}]},
              "profile": {"kernels": [{"name": "k", "total_ms": 1.0}], "peaks": None}}
    root = parse(render_report(report))
    figs = root.find_all("figure", cls="heatmap")
    assert "could not draw" in figs[0].find("p", cls="error").text()
    assert figs[1].find_all("img")
    assert "no device peaks" in root.find("section", id="profile").text()
    assert root.find("article", cls="finding").find("span", cls="badge").attrs["class"] == "badge kind-other"
    with pytest.raises(TypeError):
        render_report(["not", "a", "dict"])


def test_many_findings_and_launches_are_capped_and_counted():
    from tritonkit.report.html import MAX_FINDINGS, MAX_MAP_LAUNCHES
    n = MAX_FINDINGS + 5
    findings = [_finding("out_of_bounds" if i % 2 else "data_race", f"k{i}", "nowhere.py", i + 1) for i in range(n)]
    records = [{"kernel": f"k{i}", "access_maps": [_vector_add_map(oob=(i == MAX_MAP_LAUNCHES + 3))]}
               for i in range(MAX_MAP_LAUNCHES + 4)]
    root = parse(render_report({"check": {"findings": findings, "launch_records": records}}))
    assert len(root.find_all("article", cls="finding")) == MAX_FINDINGS
    assert len(root.find("details", cls="more-findings").find_all("li")) == 5
    assert root.find("section", id="summary").find("p", cls="big").text() == str(n)
    launches = root.find_all("article", cls="launch")
    assert len(launches) == MAX_MAP_LAUNCHES
    # the one launch with out-of-bounds lanes is drawn although it comes last
    assert launches[-1].find("h3").find("code").text() == f"k{MAX_MAP_LAUNCHES + 3}"
    assert f"{MAX_MAP_LAUNCHES} of {MAX_MAP_LAUNCHES + 4} launches" in root.find("section", id="memory").text()


def test_kernel_table_shortens_mangled_names_and_keeps_the_full_one():
    mangled = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEESt5arrayIPcLm1EEEEviT0_T1_"
    report = {"profile": {"peaks": fixtures.H100_PEAKS, "kernels": [
        fixtures._kernel(mangled, 10, 0.5, bytes_=1 << 20, bound="memory", reason="50% of the bandwidth peak")]}}
    root = parse(render_report(report))
    cell = root.find("table", cls="kernels").find("td", cls="name")
    assert cell.text() == "vectorized_elementwise_kernel<FillFunctor>" and cell.attrs["title"] == mangled
    assert root.find("code", cls="full-name").text() == mangled


def test_write_report_writes_the_rendered_page(tmp_path):
    report = load("check_only.json")
    path = tmp_path / "doctor.html"
    write_report(report, str(path))
    assert path.read_text(encoding="utf-8") == render_report(report)
    assert [p.name for p in tmp_path.iterdir()] == ["doctor.html"]  # no temporary file left


# -------------------------------------------------------------------------------------------- tuning

def test_tuning_gain_compares_the_winner_with_median_slowest_and_first():
    result = _tune_result()
    data = tuning_landscape_data(result)
    assert [b.ms for b in data.bars] == [1.0, 2.0, 3.0, 4.0]
    assert data.winner == "BLOCK=128,num_warps=4" and data.winner_ms == 1.0
    assert (data.median_ms, data.worst_ms, data.first_ms) == (2.5, 4.0, 2.0)
    assert [m.status for m in data.misses] == ["failed", "wrong", "pruned"]
    assert data.counts == {"ok": 4, "failed": 1, "wrong": 1, "pruned": 1}
    view = build_page({"tune": {"results": [result]}}).tunes[0]
    assert (view.gain_x, view.gain_worst, view.gain_first) == ("2.50x", "4.00x", "2.00x")
    assert "2.50x faster than the median correct config (2.5 ms)" in view.gain
    root = parse(render_report({"tune": {"results": [result]}}))
    tune = root.find("article", cls="tune")
    rows = tune.find_all("table", cls="configs")[0].find("tbody").find_all("tr")
    assert rows[0].classes == ["winner"] and rows[0].find("code").text() == "BLOCK=128,num_warps=4"
    misses = tune.find("details", cls="misses")
    assert [b.text() for b in misses.find_all("span", cls="badge")] == ["failed", "wrong", "pruned"]
    assert "OutOfResources: shared memory" in misses.text()
    # the winner named by the result wins even where a cached time is lower
    result2 = copy.deepcopy(result)
    result2["trials"].append(_trial({"BLOCK": 8, "num_warps": 1}, ms=0.5, source="cache"))
    data2 = tuning_landscape_data(result2)
    assert data2.bars[0].cached and not data2.bars[0].winner and data2.winner_ms == 1.0


def test_tuning_without_correct_configs_says_so():
    result = {"kernel": "k", "key": [], "trials": [_trial({"B": 1}, "crashed", error="illegal address")]}
    view = build_page({"tune": {"results": [result]}}).tunes[0]
    assert view.winner == "-" and "no config ran correctly" in view.gain
    assert tuning_landscape_chart(result) is not None


# ------------------------------------------------------------------------------------------ heatmaps

def _has_color(img, rgb):
    return bool((img[..., :3] == np.array(rgb, dtype=np.uint8)).all(axis=-1).any())


def test_heatmap_1d_wraps_into_a_square_and_marks_oob_cells():
    data = hm.heatmap_data(_vector_add_map())
    assert data.layout == "1d" and data.grid_shape == (32, 32) and data.wrap_width == 32
    assert data.first == (0, 0) and not data.downsampled
    # elements 1000..1023 are out of bounds: row 31, columns 8..31 of the wrapped grid
    oob = np.argwhere(data.oob_reads > 0)
    assert oob.tolist() == [[31, c] for c in range(8, 32)]
    assert int(data.oob_reads.sum()) == 24 and not data.oob_writes.any()
    assert not data.inside[31, 8:].any() and data.inside[31, :8].all()
    assert data.read_program[0, 0] == 0 and data.read_program[31, 7] == 3  # element 999: program 3
    assert data.reads_total == 1000 and data.oob_lanes == 24
    assert _has_color(hm.heatmap_rgba(data, "reads"), OOB_RGB)
    assert not _has_color(hm.heatmap_rgba(data, "reads")[:31 * 7], OOB_RGB)  # only the last row is red
    assert "out of bounds" in [e.label for e in data.legend]
    assert "wrapped row-major into 32 x 32 cells" in data.caption and "elements 1,000..1,023" in data.caption


def test_heatmap_without_oob_uses_no_oob_colour():
    data = hm.heatmap_data(_vector_add_map(oob=False, access="store"))
    assert not data.has_oob and data.oob_lanes == 0
    assert data.panels() == ["writes"]  # one lane per element: the density panel would repeat it
    for panel in hm.PANELS:
        assert not _has_color(hm.heatmap_rgba(data, panel), OOB_RGB)
    assert "out of bounds" not in [e.label for e in data.legend]
    assert "no out-of-bounds lanes" in data.caption
    # 1000 elements wrap into 32 x 32 cells: the 24 cells after the end are transparent padding
    assert int(data.pad.sum()) == 24 and (hm.heatmap_rgba(data, "writes", scale=1)[..., 3] == 0).sum() == 24


def test_heatmap_2d_extends_the_canvas_to_the_oob_coordinates():
    m = access_map("a", [6, 5], "float32",
                   [(0, "load", fixtures._tile(0, 3, 0, 5)), (1, "load", fixtures._tile(3, 3, 0, 5)),
                    (1, "store", np.array([[6, 2]] * 3)), (0, "load", np.array([[2, -1]]))], programs=2)
    data = hm.heatmap_data(m)
    assert data.layout == "2d" and data.grid_shape == (7, 6) and data.first == (0, -1)
    assert data.oob_writes[6, 3] == 3 and int(data.oob_writes.sum()) == 3
    assert data.oob_reads[2, 0] == 1 and int(data.oob_reads.sum()) == 1
    assert data.inside[:6, 1:].all() and not data.inside[6].any() and not data.inside[:, 0].any()
    assert data.read_program[0, 1] == 0 and data.read_program[5, 5] == 1
    reads, writes = hm.heatmap_rgba(data, "reads", scale=1), hm.heatmap_rgba(data, "writes", scale=1)
    assert tuple(reads[2, 0, :3]) == OOB_RGB and tuple(writes[6, 3, :3]) == OOB_RGB
    assert tuple(reads[6, 3, :3]) != OOB_RGB  # a store out of bounds is not a read
    assert tuple(reads[1, 2, :3]) == hm._rgb(hm.PROGRAM_PALETTE[0])  # inner cells: the program's colour
    assert tuple(reads[4, 4, :3]) == hm._rgb(hm.PROGRAM_PALETTE[1])
    assert tuple(reads[0, 1, :3]) == hm._rgb(hm.EDGE_COLOR)  # the tensor's outline next to the extension
    assert "rows 2..6, columns -1..2" in data.caption
    # small cells: a red halo around the out-of-bounds cell, on the extended canvas only
    big = hm.heatmap_rgba(data, "writes", scale=3)
    assert tuple(big[6 * 3 + 1, 2 * 3 + 2, :3]) == OOB_RGB  # the cell left of it, outside the tensor
    assert tuple(big[5 * 3 + 1, 3 * 3 + 1, :3]) != OOB_RGB  # the tensor cell above it keeps its colour


def test_heatmap_downsampled_keeps_totals_and_says_so():
    rows, cols = 1000, 600
    acc = [(p, "load", fixtures._tile(p * 100, 100, 0, cols)) for p in range(10)]
    m = access_map("big", [rows, cols], "bfloat16", acc, bins=(4, 4), programs=10)
    data = hm.heatmap_data(m, max_side=64)
    h, w = data.grid_shape
    assert h <= 64 and w <= 64
    assert (data.cell_rows, data.cell_cols) == (16, 12)  # 4 x 4 bins merged 4 x 3 times
    assert int(data.elements.sum()) == rows * cols and data.reads_total == rows * cols
    assert int(data.reads.sum()) == rows * cols
    assert data.downsampled and "16 x 12 elements (downsampled)" in data.caption
    assert data.read_program.max() == 9 and data.read_program.min() == 0


def test_heatmap_far_oob_is_drawn_at_the_edge_and_counted():
    m = _vector_add_map(n=100, block=100, oob=False)
    m["oob"] = [[0, -(10 ** 9), "load", 5], [0, 100, "store", 2]]
    m["oob_lanes"] = 7
    data = hm.heatmap_data(m)
    assert data.oob_clipped == 5 and data.oob_drawn == 7
    assert int(data.oob_reads.sum()) == 5 and int(data.oob_writes.sum()) == 2
    assert "drawn at the canvas' edge" in data.caption


def test_heatmap_many_programs_legend_cycles_the_palette_and_avoids_red():
    n = 64 * 100
    acc = [(p, "store", fixtures._line(p * 64, 64)) for p in range(100)]
    data = hm.heatmap_data(access_map("o", [n], "float32", acc, programs=100))
    cycle = [e for e in data.legend if e.colors]
    assert len(cycle) == 1 and list(cycle[0].colors) == list(hm.PROGRAM_PALETTE)
    assert hm.OOB_COLOR not in hm.PROGRAM_PALETTE
    for c in hm.PROGRAM_PALETTE:  # no palette colour is near the OOB red
        assert sum(abs(a - b) for a, b in zip(hm._rgb(c), OOB_RGB)) > 120


def test_heatmap_rejects_a_malformed_map():
    m = _vector_add_map()
    m["writes"] = [[0] * 10]
    with pytest.raises(ValueError, match="writes"):
        hm.heatmap_data(m)
    with pytest.raises(ValueError):
        hm.heatmap_data({**m, "rows": 0})
    with pytest.raises(ValueError):
        hm.heatmap_rgba(hm.heatmap_data(_vector_add_map()), "nope")
    png = hm.heatmap_png(hm.heatmap_data(_vector_add_map()), "reads")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
