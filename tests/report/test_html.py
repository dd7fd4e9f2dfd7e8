"""The doctor's HTML page (tritonkit.report.html) from a DoctorReport: content, counts, escaping,
self-containment, missing and broken parts, and the tuning section's figures. CPU only, no browser."""
import base64
import copy
import re
from collections import Counter
from html.parser import HTMLParser

import pytest

from tritonkit.doctor import DoctorReport
from tritonkit.report.charts import tuning_landscape_chart, tuning_landscape_data
from tritonkit.report.html import build_page, render_report, write_report

EVIL = "<script>alert(1)</script>"


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


# ------------------------------------------------------------------------------------------- the page

@pytest.fixture(scope="module")
def fixture_page(doctor_json):
    """(report, parsed page) of tests/data/doctor/report.json, rendered once."""
    report = doctor_json("report.json")
    return report, parse(render_report(DoctorReport.from_dict(report)))


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


def test_marked_source_line_is_the_finding_line(tmp_path, line):
    src = tmp_path / "kern.py"
    lines = [f"line_{i} = {i}" for i in range(1, 21)]
    lines[9] = "x = tl.load(x_ptr + offsets)  # the bad one"
    src.write_text("\n".join(lines) + "\n")
    report = {"check": {"findings": [_finding("out_of_bounds", "k", str(src), 10, source="stale text"),
                                     _finding("data_race", "k", str(tmp_path / "gone.py"), 3,
                                              source="tl.store(p, v)  # from the finding")]}}
    root = parse(render_report(DoctorReport.from_dict(report)))
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


def test_user_text_is_escaped_and_no_script_appears(tmp_path, vector_add_map, h100_peaks, kernel_dict):
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
                                      "config": "<script>c</script>", "access_maps": [vector_add_map(arg=EVIL)]}]},
        "tune": {"results": [_tune_result(kernel=EVIL, key=["<script>k</script>"])]},
        "profile": {"peaks": h100_peaks, "ceiling": None,
                    "kernels": [kernel_dict(EVIL, 10, 0.5, bytes_=1 << 30, flops=1 << 34, dtype="fp16",
                                                 bound="memory", reason="<script>r</script>")]},
    }
    page = render_report(DoctorReport.from_dict(report))
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


def test_page_is_self_contained_and_small_with_twenty_heatmaps(access_map, tile, vector_add_map):
    report = {"check": {"findings": [], "launch_records": [
        {"kernel": f"k{i}", "grid": [16, 1, 1], "programs": 16,
         "access_maps": [vector_add_map("x_ptr", n=4000 + 100 * i), vector_add_map("y_ptr", n=4000, oob=False),
                         access_map("z_ptr", [300, 200], "float16",
                                    [(p, "store", tile(p * 20, 20, 0, 200)) for p in range(16)],
                                    bins=(2, 2), programs=16)]} for i in range(7)]}}
    page = render_report(DoctorReport.from_dict(report))
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


def test_missing_parts_say_what_was_skipped_and_why(doctor_json):
    report = doctor_json("check_only.json")
    root = parse(render_report(DoctorReport.from_dict(report)))
    why = "no GPU here (torch.cuda.is_available() is False)"
    for section in ("profile", "tuning"):
        assert why in root.find("section", id=section).find("p", cls="skipped").text()
    cards = {c.find("h3").text(): c for c in root.find("section", id="summary").find_all("div", cls="card")}
    assert why in cards["Slowest kernels"].text() and why in cards["What tuning gained"].text()
    assert [b.text() for b in cards["Steps"].find_all("span", cls="badge")] == ["ran", "skipped", "skipped"]
    assert len(root.find_all("article", cls="finding")) == 3
    assert root.find("section", id="profile").find_all("img") == []
    # and a report with nothing at all still renders, saying nothing ran
    root = parse(render_report(DoctorReport.from_dict({})))
    assert "not in the report" in root.find("section", id="findings").text()
    assert root.find_all("img") == []


def test_broken_parts_are_reported_not_fatal(vector_add_map):
    bad_map = vector_add_map()
    bad_map["reads"] = [[1, 2, 3]]  # not ceil(rows / bin_rows) x ceil(cols / bin_cols)
    report = {"check": {"findings": [{"kind": "made_up_kind"}], "launch_records": [
        {"kernel": "k", "access_maps": [bad_map, vector_add_map("ok_ptr")]}]},
              "profile": {"kernels": [{"name": "k", "total_ms": 1.0}], "peaks": None}}
    root = parse(render_report(DoctorReport.from_dict(report)))
    figs = root.find_all("figure", cls="heatmap")
    assert "could not draw" in figs[0].find("p", cls="error").text()
    assert figs[1].find_all("img")
    assert "no device peaks" in root.find("section", id="profile").text()
    assert root.find("article", cls="finding").find("span", cls="badge").attrs["class"] == "badge kind-other"
    with pytest.raises(TypeError):
        render_report(["not", "a", "dict"])


def test_many_findings_and_launches_are_capped_and_counted(vector_add_map):
    from tritonkit.report.html import MAX_FINDINGS, MAX_MAP_LAUNCHES
    n = MAX_FINDINGS + 5
    findings = [_finding("out_of_bounds" if i % 2 else "data_race", f"k{i}", "nowhere.py", i + 1) for i in range(n)]
    records = [{"kernel": f"k{i}", "access_maps": [vector_add_map(oob=(i == MAX_MAP_LAUNCHES + 3))]}
               for i in range(MAX_MAP_LAUNCHES + 4)]
    root = parse(render_report(DoctorReport.from_dict({"check": {"findings": findings, "launch_records": records}})))
    assert len(root.find_all("article", cls="finding")) == MAX_FINDINGS
    assert len(root.find("details", cls="more-findings").find_all("li")) == 5
    assert root.find("section", id="summary").find("p", cls="big").text() == str(n)
    launches = root.find_all("article", cls="launch")
    assert len(launches) == MAX_MAP_LAUNCHES
    # the one launch with out-of-bounds lanes is drawn although it comes last
    assert launches[-1].find("h3").find("code").text() == f"k{MAX_MAP_LAUNCHES + 3}"
    assert f"{MAX_MAP_LAUNCHES} of {MAX_MAP_LAUNCHES + 4} launches" in root.find("section", id="memory").text()


def test_kernel_table_shortens_mangled_names_and_keeps_the_full_one(h100_peaks, kernel_dict):
    mangled = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEESt5arrayIPcLm1EEEEviT0_T1_"
    report = {"profile": {"peaks": h100_peaks, "kernels": [
        kernel_dict(mangled, 10, 0.5, bytes_=1 << 20, bound="memory", reason="50% of the bandwidth peak")]}}
    root = parse(render_report(DoctorReport.from_dict(report)))
    cell = root.find("table", cls="kernels").find("td", cls="name")
    assert cell.text() == "vectorized_elementwise_kernel<FillFunctor>" and cell.attrs["title"] == mangled
    assert root.find("code", cls="full-name").text() == mangled


def test_write_report_writes_the_rendered_page(tmp_path, doctor_json):
    report = doctor_json("check_only.json")
    path = tmp_path / "doctor.html"
    write_report(DoctorReport.from_dict(report), str(path))
    assert path.read_text(encoding="utf-8") == render_report(DoctorReport.from_dict(report))
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
    view = build_page(DoctorReport.from_dict({"tune": {"results": [result]}})).tunes[0]
    assert (view.gain_x, view.gain_worst, view.gain_first) == ("2.50x", "4.00x", "2.00x")
    assert "2.50x faster than the median correct config (2.5 ms)" in view.gain
    root = parse(render_report(DoctorReport.from_dict({"tune": {"results": [result]}})))
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
    view = build_page(DoctorReport.from_dict({"tune": {"results": [result]}})).tunes[0]
    assert view.winner == "-" and "no config ran correctly" in view.gain
    assert tuning_landscape_chart(result) is not None


# ------------------------------------------------------------------------------- optional libraries

def test_without_jinja2_the_page_names_the_extra_and_without_matplotlib_the_charts_say_why(run_without,
                                                                                            doctor_data_dir):
    code = """
import json, os, sys
from tritonkit._imports import MissingDependency
from tritonkit.doctor import DoctorReport
from tritonkit.report.html import build_page, render_report
with open(os.path.join(sys.argv[1], "report.json")) as fh:
    report = DoctorReport.from_dict(json.load(fh))
if "jinja2" in sys.argv[2:]:
    try:
        render_report(report)
    except MissingDependency as e:
        print("missing", "tritonkit[report]" in str(e))
else:
    page = build_page(report)
    errors = [c.error for c in [page.roofline, page.breakdown] + [t.chart for t in page.tunes]]
    maps = [a.error for launch in page.launches for a in launch.args]
    print(len(errors), all("matplotlib" in e and "tritonkit[report]" in e for e in errors),
          len(maps), all("Pillow" in e for e in maps), "<html" in render_report(report))
"""
    assert run_without(("jinja2",), code, doctor_data_dir, "jinja2").split() == ["missing", "True"]
    out = run_without(("matplotlib", "PIL"), code, doctor_data_dir).split()
    assert out[1] == "True" and out[3] == "True" and out[4] == "True" and int(out[0]) == 4 and int(out[2]) > 0

