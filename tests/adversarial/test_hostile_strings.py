"""Hostile strings through every report of a checked run: the terminal (``print_report``,
``findings_text``: rich, through ``safe()``), the JSON (``write_json`` as ``tritonkit check --json``
writes it), the doctor's HTML page (``write_report``), and ``tritonkit check --json`` end to end on a
script whose kernel's ``tl.device_assert`` messages are the hostile strings and whose folder name is
hostile too.

Each string (terminal escape sequences, C0/C1 controls, bidi overrides, zero-width characters, lone
surrogates and undecodable bytes, HTML/script injection, rich markup, Jinja syntax, format
specifiers, a 100,000-character string, ...) is put in every field a user controls: kernel name,
file path, source line, argument name, message, hint, elements, configs, call stack, facts, child
process argv, the other side of a race, examples, launch records (config, fallback reason, access
map argument), the run's summary, and in the HTML also the command, device, steps and a tuning run
(kernel, key, config names, errors).

Asserted, per (string, renderer): nothing raises; the terminal output is valid UTF-8 with no raw
C0/C1 control character but newline and tab (no colour: a non-terminal console) and shows the text
escaped as ``safe()`` documents it (``\\xNN`` for controls, ``\\uXXXX`` for lone surrogates), rich
markup literally; the JSON is standard (no NaN), parses, and gives back every string exactly (lone
surrogates are written as ``\\udXXX`` escapes, which Python reads back as the same code point); the
HTML is valid UTF-8 (lone surrogates written as ``\\udXXX`` text), has no ``<script>`` element, no
``on*=`` attribute and no tag the template does not make, and holds the text HTML-escaped.
"""
from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from markupsafe import escape as html_escape
from rich.console import Console

from tritonkit.check import CheckReport, Finding
from tritonkit.check.findings import write_json
from tritonkit.check.results import KernelSummary, LaunchRecord, summarize
from tritonkit.doctor import DoctorReport
from tritonkit.report.html import write_report
from tritonkit.report.terminal import findings_text, print_report, render_finding, safe

from _text import escaped, raw_controls, squash  # this folder is on sys.path (pytest prepends it)

HOSTILE = {
    "osc_retitle": "\x1b]0;pwned\x07",
    "csi_clear_screen": "\x1b[2J\x1b[H\x1b[31mred\x1b[0m",
    "carriage_return": "ok\rFAKE: no findings",
    "backspaces": "secret\x08\x08\x08\x08\x08\x08public",
    "nul": "a\x00b",
    "bell_and_del": "ding\x07\x7f",
    "c1_controls": "\x9b2J\x9d0;title\x9c\x85",
    "bidi_override": "\u202eyp.lenrek\u202c",
    "zero_width": "ad\u200bmin\u200d\u2060\ufeff",
    "lone_surrogates": "\ud800 high, low \udfff",
    "surrogateescape_bytes": b"caf\xe9 \xff\xfe.py".decode("utf-8", "surrogateescape"),
    "script_injection": "</script><script>alert(1)</script>",
    "attribute_injection": "\"><img src=x onerror=alert(1)>",
    "single_quote_attribute": "' onmouseover='alert(1)' x='",
    "rich_markup": "[bold red]x[/]",
    "rich_link": "[link=file:///etc/passwd]click[/link]",
    "rich_unbalanced": "[/] [/bold] [",
    "jinja_expression": "{{ 7*7 }}",
    "jinja_statement": "{% raw %}{% endraw %}{# c #}{%",
    "format_specifiers": "%s %d %(x)s %% %n",
    "braces": "{0} {} {x!r:>{y}} }{",
    "windows_path": "C:\\Users\\admin\\new\\table\\x1b.py",
    "newlines": "line1\nline2\r\nline3\n",
    "tab": "a\tb",
    "mathtext": "$\\frac{1}{$ $x^$",
    "html_entities": "&amp; &lt;script&gt; &#x3c;",
    "very_long": "A" * 100_000 + "<END>",
}
RENDERERS = ("terminal", "json", "html", "check_cli")
# matplotlib warns that DejaVu has no glyph for a control character of a chart's label: expected here
pytestmark = pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


# ------------------------------------------------------------------------------------ helpers


def strict_console():
    """A console like the command line's on a pipe (no colour), writing strict UTF-8: a lone
    surrogate that reached it would raise, as on a real UTF-8 terminal."""
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
    return Console(file=stream, width=160, force_terminal=False, color_system=None), stream


def written(stream) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # strict: valid UTF-8 or a failure here


def source_file(tmp_path, h: str) -> str:
    """A kernel file whose line 2 is ``h`` (undecodable bytes kept as the bytes they came from)."""
    text = "import triton\n" + h + "\nx = 1\n"
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte decodes to
        raw = text.encode("utf-8", "backslashreplace")
    path = tmp_path / "kernel_src.py"
    path.write_bytes(raw)
    return str(path)


@pytest.fixture(scope="module")
def access_map():
    """A real access map (the doctor fixture's first one), to carry a hostile argument name."""
    with open(os.path.join(DATA, "doctor", "report.json"), encoding="utf-8") as fh:
        report = json.load(fh)
    return report["check"]["launch_records"][0]["access_maps"][0]


def hostile_report(h: str, src: str, access_map: dict) -> CheckReport:
    """A checked run with ``h`` in every string field a user controls: one finding with it
    everywhere (its file a path that cannot be read), one whose source line in ``src`` is ``h``."""
    everywhere = Finding(
        kind="out_of_bounds", kernel=h, file="/no/such/dir/" + h + ".py", line=2, source=h, arg=h,
        tensor={"shape": [1000], "dtype": "float32", "strides": [1]}, access="load", masked=False, count=24,
        program_ids=[[3]], num_programs=1, elements=h, num_elements=24, reason=h, reasons={h: 20, "past_end": 4},
        configs=[h, "BLOCK=128"], occurrences=1, launches=1, hint=h,
        call_stack=[{"file": h, "line": 1, "function": h}, {"file": "/k.py", "line": 2, "function": h}],
        message=h, examples=[{"program_id": [3], "values": {h: [h]}}],
        other={"file": h, "line": 3, "source": h, "function": h, "access": h, "program_ids": [[1]]},
        facts=[["values", h]], process={"pid": 4242, "argv": ["python", h]})  # labels are the checks' own
    source_line = Finding(kind="assert_failed", kernel="k", file=src, line=2, source=h, access="device_assert",
                          count=1, program_ids=[[0]], num_programs=1, message="see the source line")
    record = LaunchRecord(kernel=h, grid=(4, 1, 1), programs=4, config=h, engine="sequential", fallback=h,
                          access_maps=[dict(copy.deepcopy(access_map), arg=h)])
    findings = [everywhere, source_line]
    return CheckReport(findings=findings, launches=1,
                       kernels=[KernelSummary(h, launches=1, programs=4, configs=[h], findings=1)],
                       launch_records=[record],
                       summary=summarize([record], findings, checks=["out_of_bounds"], engine="auto", aborted=h),
                       versions={"tritonkit": "0", "triton": "3"}, script={"target": ["python", h], "failed": False})


def tune_result(h: str) -> dict:
    def trial(point, status="ok", ms=None, error=""):
        return {"point": point, "status": status, "ms": ms, "ci_ms": None, "samples": 5, "error": error,
                "sm_clock_mhz": None, "mem_clock_mhz": None, "compile_s": None, "source": "gpu"}
    trials = [trial({"BLOCK": 64, h: 1}, ms=2.0), trial({"BLOCK": 128, h: 1}, ms=1.0),
              trial({"BLOCK": 256, h: 1}, "failed", error=h), trial({"BLOCK": 32, h: 1}, "wrong", error=h)]
    return {"kernel": h, "key": [h, "torch.float32"], "strategy": h, "tuning_s": 1.5,
            "winner": f"BLOCK=128,{h}=1", "trials": trials}


class _Tags(HTMLParser):
    """Every start tag and attribute of a page, as a browser's tokenizer would see them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.extend((tag, k, v or "") for k, v in attrs)

    handle_startendtag = handle_starttag


def tags_of(page: str) -> _Tags:
    t = _Tags()
    t.feed(page)
    t.close()
    return t


def html_page(h: str, tmp_path, access_map) -> str:
    report = hostile_report(h, source_file(tmp_path, h), access_map)
    doc = {"command": f"python run.py {h}", "created": h, "device": h, "versions": {"triton": h, h: "1"},
           "steps": [{"name": "check", "status": "ran", "why": h, "json": h},
                     {"name": "tune", "status": "ran", "why": ""}, {"name": "profile", "status": "skipped", "why": h}],
           "check": json.loads(json.dumps(report.to_dict())),  # as the doctor reads it: through JSON
           "tune": {"results": [tune_result(h)]}}
    path = tmp_path / "report.html"
    write_report(DoctorReport.from_dict(doc), str(path))
    return path.read_bytes().decode("utf-8")  # strict


@pytest.fixture(scope="module")
def baseline_tags(tmp_path_factory, access_map):
    """The tags the page is made of, for a report whose strings are plain."""
    return tags_of(html_page("plain_name", tmp_path_factory.mktemp("baseline"), access_map)).tags


# ------------------------------------------------------------------------ the end-to-end run

_SCRIPT = '''
import torch
import triton
import triton.language as tl


@triton.jit
def hostile_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
{asserts}


hostile_kernel[(1,)](torch.zeros(16), BLOCK=16)
'''


@pytest.fixture(scope="module")
def check_cli(tmp_path_factory):
    """``tritonkit check --json`` on a script in a folder with a hostile name, whose kernel fails one
    ``tl.device_assert`` per hostile string (the string is its message): (status, stdout, stderr,
    JSON data), stdout and stderr strict UTF-8 as on a UTF-8 terminal."""
    base = os.fsencode(str(tmp_path_factory.mktemp("e2e")))
    folder = os.path.join(base, b"dir \x1b]0;pwned\x07 <script>\xff")
    os.mkdir(folder)
    script = os.path.join(folder, b"hostile.py")
    asserts = "\n".join(f"    tl.device_assert(x > 1, {h!r})" for h in HOSTILE.values())
    with open(script, "w", encoding="utf-8") as fh:
        fh.write(_SCRIPT.format(asserts=asserts))
    out_json = os.path.join(base, b"findings.json")
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict", COLUMNS="160")
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "check", "--json", os.fsdecode(out_json), "--",
                           "python", os.fsdecode(script)], capture_output=True, env=env, timeout=300)
    with open(out_json, "rb") as fh:
        data = json.loads(fh.read().decode("utf-8"), parse_constant=_no_constant)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"), data, os.fsdecode(script)


def _no_constant(name):
    raise AssertionError(f"non-standard JSON constant {name}")


# ---------------------------------------------------------------------------------- the test


def check_terminal(h, tmp_path, access_map):
    assert safe(h) == escaped(h)  # the escaping is the documented one
    report = hostile_report(h, source_file(tmp_path, h), access_map)
    console, stream = strict_console()
    print_report(report, console)
    out = written(stream)
    assert raw_controls(out) == []
    # the text is there, escaped, in full: the message line is never cut
    assert squash("E" + escaped(h)) in squash(out)
    # the facts show it too (a table cell may cut a 100,000-character word with an ellipsis)
    for label in ("argument", "elements", "values", "process", "configs", "hint"):
        head = escaped(h)[:60] if label != "process" else "pid 4242: python " + escaped(h)[:40]
        assert squash(label + head) in squash(out), label
    # the source line read from the kernel's file (where it decodes and is one line)
    console, stream = strict_console()
    console.print(render_finding(report.findings[1]))
    src = written(stream)
    assert raw_controls(src) == []
    if "\r" not in h and not any(0xD800 <= ord(c) < 0xE000 for c in h):
        assert squash(">2" + escaped(h.rstrip("\n"))) in squash(src)
    # the plain-text form (pytest failures) is as clean
    text = findings_text(report.findings, width=120)
    assert raw_controls(text) == [] and squash(escaped(h)) in squash(text)
    text.encode("utf-8")


def check_json(h, tmp_path, access_map):
    report = hostile_report(h, source_file(tmp_path, h), access_map)
    path = tmp_path / "check.json"
    write_json(str(path), report.to_dict())
    raw = path.read_bytes().decode("utf-8")
    data = json.loads(raw, parse_constant=_no_constant)
    for c in {c for c in h if 0xD800 <= ord(c) < 0xE000}:  # JSON's only way to hold a lone surrogate
        assert "\\u%04x" % ord(c) in raw
    back = CheckReport.from_dict(data)
    f = back.findings[0]
    assert [f.kernel, f.source, f.arg, f.message, f.hint, f.elements, f.reason, f.configs[0]] == [h] * 8
    assert f.file == "/no/such/dir/" + h + ".py" and back.findings[1].source == h
    assert [fr["function"] for fr in f.call_stack] == [h, h] and f.call_stack[0]["file"] == h
    assert f.facts == [["values", h]] and f.process["argv"] == ["python", h] and f.reasons[h] == 20
    assert f.other["source"] == h and f.other["function"] == h and f.examples[0]["values"] == {h: [h]}
    assert back.kernels[0].name == h and back.kernels[0].configs == [h]
    r = back.launch_records[0]
    assert (r.kernel, r.config, r.fallback, r.access_maps[0]["arg"]) == (h, h, h, h)
    assert back.summary["aborted"] == h and back.summary["fallbacks"][0]["reason"] == h
    assert back.script["target"] == ["python", h]


def check_html(h, tmp_path, access_map, baseline_tags):
    page = html_page(h, tmp_path, access_map)
    tags = tags_of(page)
    assert "script" not in tags.tags and "<script" not in page.lower()
    assert not [a for a in tags.attrs if a[1].lower().startswith("on")], "an event handler came from the data"
    assert not [a for a in tags.attrs if a[2].strip().lower().startswith("javascript:")]
    assert tags.tags <= baseline_tags, tags.tags - baseline_tags  # the data made no element
    assert "<img src=x" not in page
    # the text is on the page, HTML-escaped (a lone surrogate as its \\udXXX escape)
    text = str(html_escape(h)).encode("utf-8", "backslashreplace").decode("utf-8")
    assert text in page
    assert f"<code class=\"kernel\">{text}</code>" in page  # the finding's kernel is text in its element


def check_cli_run(h, check_cli):
    status, out, err, data, script = check_cli
    assert status == 1, err  # findings
    assert "Traceback" not in err and "internal error" not in err, err
    assert raw_controls(out) == [] and raw_controls(err) == []
    message = "device_assert failed: " + h
    mine = [f for f in data["findings"] if f["message"] == message]  # the JSON has it exactly
    assert len(mine) == 1, [f["message"][:80] for f in data["findings"]]
    assert mine[0]["file"] == script and mine[0]["kind"] == "assert_failed"
    assert squash("E" + escaped(message)) in squash(out)
    assert squash(escaped(script)) in squash(out)  # the folder's name, escaped too


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_string(name, renderer, tmp_path, access_map, request):
    h = HOSTILE[name]
    if renderer == "terminal":
        check_terminal(h, tmp_path, access_map)
    elif renderer == "json":
        check_json(h, tmp_path, access_map)
    elif renderer == "html":
        check_html(h, tmp_path, access_map, request.getfixturevalue("baseline_tags"))
    else:
        check_cli_run(h, request.getfixturevalue("check_cli"))


def test_rich_markup_in_data_is_shown_not_interpreted(tmp_path, access_map):
    """Markup in a kernel name stays text: no style, no hyperlink (OSC 8), and a stray ``[/]``
    does not raise a MarkupError, even on a console that emits colour."""
    h = "[bold red]x[/] [link=file:///etc/passwd]click[/link] [/]"
    report = hostile_report(h, source_file(tmp_path, h), access_map)
    buf = io.StringIO()
    print_report(report, Console(file=buf, width=160, force_terminal=True, color_system="truecolor"))
    out = buf.getvalue()
    assert "\x1b]8;" not in out  # no hyperlink escape made from the data
    assert "[bold red]x[/]" in out and "[link=file:///etc/passwd]click[/link]" in out


@pytest.mark.parametrize("error", ["[/]", "[bold red]boom[/]", "\x1b]0;pwned\x07 \x1b[2J", "\ud800 and [link=file:///etc/passwd]x[/link]"])
def test_a_tuning_trials_error_is_shown_literally_in_the_results_table(error):
    """``tritonkit tune``'s table lists the first wrong or crashed configs with their error text,
    which comes from the config's own run: markup in it (``[/]`` made rich raise MarkupError) and
    control characters are shown as text."""
    import io

    from rich.console import Console

    from tritonkit.report.tune import render_results
    from tritonkit.tune._result import Trial, TuneResult
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False, color_system=None)
    result = TuneResult(kernel="k", key=["n=1"], trials=[Trial(point={"BLOCK": 64}, status="ok", ms=1.0),
                                                         Trial(point={"BLOCK": 128}, status="crashed", error=error)])
    render_results([result], console)
    out = buf.getvalue()
    assert "crashed" in out
    assert "\x1b" not in out and "\ud800" not in out
    visible = error.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\ud800", "\\ud800")
    assert visible in out
