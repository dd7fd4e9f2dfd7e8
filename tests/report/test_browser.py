"""The doctor's HTML page in a real browser: headless Chromium loads it from a file, and the DOM it builds
(and a screenshot) show the findings, heatmaps and kernel names, with hostile names kept as text.

Skipped where /usr/bin/chromium is absent, unless TRITONKIT_REQUIRE_BROWSER=1 (``make test`` sets it
once it has installed chromium), where a missing browser fails instead.
"""
import html
import json
import os
import shutil
import subprocess

import pytest

from tritonkit.doctor import DoctorReport
from tritonkit.report.html import write_report

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_S = 60
# A name that would act if it were markup: it would mark <body>, which the DOM check looks for.
HOSTILE = "<script>document.body.setAttribute('data-pwned','script')</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"


@pytest.fixture(scope="module")
def chromium():
    """The browser's path: /usr/bin/chromium, else ``chromium`` on PATH."""
    if os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    if shutil.which("chromium"):
        return shutil.which("chromium")
    if os.environ.get("TRITONKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TRITONKIT_REQUIRE_BROWSER=1 but {CHROMIUM} is missing: install chromium "
                    "(apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); set TRITONKIT_REQUIRE_BROWSER=1 to fail instead")


def _run(chromium, tmp_path, *args):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def page(tmp_path_factory, doctor_json):
    """The fixture report, with a kernel and a tuned kernel renamed to hostile names, written to a file."""
    report = doctor_json("report.json")
    report["check"]["findings"][0]["kernel"] = HOSTILE
    report["check"]["findings"][1]["message"] = HOSTILE_IMG
    report["profile"]["kernels"][0]["name"] = HOSTILE
    report["tune"]["results"][1]["kernel"] = HOSTILE_IMG
    path = tmp_path_factory.mktemp("doctor") / "doctor.html"
    write_report(DoctorReport.from_dict(report), str(path))
    return report, path


def test_browser_dom_shows_the_report_and_runs_no_user_text(chromium, page, tmp_path):
    report, path = page
    dom = _run(chromium, tmp_path, "--dump-dom", path.as_uri()).stdout
    assert "<body" in dom and "tritonkit doctor" in dom
    # nothing ran: no <script> element, no attribute set by a hostile name
    assert "data-pwned=" not in dom
    assert "<script" not in dom.lower()
    # the hostile names are in the DOM as text (serialized escaped)
    assert "&lt;script&gt;document.body.setAttribute('data-pwned','script')&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=" in dom
    # the findings, the heatmap captions, the kernels
    for f in report["check"]["findings"][2:]:
        assert f["kind"] in dom and f["kernel"] in dom and html.escape(f["message"], quote=False) in dom
    assert "store past the end of `out_ptr`: 24 lanes in 1 program" in dom
    assert "wrapped row-major into 32 x 32 cells" in dom
    assert "out of bounds: 24 lanes at elements 1,000..1,023" in dom
    for k in report["profile"]["kernels"][1:]:
        assert k["name"] in dom
    assert dom.count('class="heatmap') == sum(len(r.get("access_maps") or []) for r in
                                               report["check"]["launch_records"])


def test_browser_screenshot_is_a_real_picture(chromium, page, tmp_path):
    _, path = page
    shot = tmp_path / "shot.png"
    _run(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1400,3000", path.as_uri())
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    from PIL import Image
    import numpy as np

    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape == (3000, 1400, 3)
    # not blank: the dark contents bar on the left, white cards and the red finding badges are all there
    assert (img[:, :200].mean() < 80) and (img[:, 400:].max() == 255)
    red = (img[..., 0] > 200) & (img[..., 1] < 60) & (img[..., 2] < 60)
    assert red.sum() > 500


def test_the_doctors_own_report_of_a_buggy_example_opens_in_the_browser(chromium, tmp_path):
    """End to end: `tritonkit doctor` on an example with a data race (CPU: check only), its page in Chromium."""
    import sys
    out = tmp_path / "doc"
    example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "histogram.py")
    proc = subprocess.run([sys.executable, "-m", "tritonkit", "doctor", "--out", str(out), "--", "python", example,
                           "--bug", "plain_store"], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((out / "doctor.json").read_text())
    dom = _run(chromium, tmp_path, "--dump-dom", (out / "report.html").as_uri()).stdout
    races = [f for f in data["check"]["findings"] if f["kind"] == "data_race"]
    assert races and "data_race" in dom
    for race in races:
        assert race["kernel"] in dom and f'histogram.py:{race["line"]}' in dom
    maps = sum(len(r["access_maps"]) for r in data["check"]["launch_records"])
    assert maps >= 2 and dom.count('class="heatmap') == maps
    assert "no CUDA GPU" in dom  # tune and profile say why they were skipped
