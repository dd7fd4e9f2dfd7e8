"""Fixtures of the report tests: the recorded H100 profile (tests/data/proton), the doctor-report
fixtures (tests/data/doctor), and builders of the checked interpreter's access maps from simulated
blocked accesses, of profile kernels and of the H100's peaks as the JSON holds them.

The access-map builder is the one of ``tests/data/doctor/make_fixtures.py`` (the script that writes the
doctor fixtures), loaded from its file, so that tests build maps the same way the fixtures were built."""
import copy
import importlib.util
import json
import os
import subprocess
import sys
import pytest

from tritonkit.profile import analyze, identify, peaks_by_name, read_proton

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


# ------------------------------------------------------------------------------------------ profile

@pytest.fixture(scope="module")
def prof():
    """The Proton tree file recorded on the H100, parsed."""
    return read_proton(os.path.join(DATA, "proton", "workload_h100.hatchet"))


@pytest.fixture(scope="module")
def peaks(prof):
    """The recorded device's datasheet peaks (H100 SXM5)."""
    return identify(prof.device_info())


@pytest.fixture(scope="module")
def reports(prof, peaks):
    """The recorded profile's kernel reports, slowest first."""
    return analyze(prof.kernels, peaks)


@pytest.fixture(scope="session")
def h100_peaks():
    """The H100 SXM5's peaks as ``DevicePeaks.to_dict()`` gives them (GB/s, TFLOP/s)."""
    return peaks_by_name("H100").to_dict()


@pytest.fixture
def kernel_dict():
    """``kernel_dict(name, launches, share, ...)``: a ``KernelReport.to_dict()`` whose GPU time gives
    ``share`` of the H100's bandwidth peak (memory-bound) or of the dtype's peak (compute-bound);
    ``mean_us`` where neither is known (the builder the doctor's fixtures are made with)."""
    return _BUILDERS._kernel


# ------------------------------------------------------------------------------- optional libraries

_HIDE = """
import sys

HIDDEN = {hidden!r}

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ImportError(f"{{name}} is hidden by the test")
        return None

sys.meta_path.insert(0, Hide())
"""


@pytest.fixture(scope="session")
def run_without():
    """``run_without(hidden, code, *args)``: run ``code`` in a fresh Python (``sys.argv[1:]`` =
    ``args``) where the top-level modules ``hidden`` cannot be imported; returns its output, failing
    the test where it exits non-zero."""
    def run(hidden, code, *args):
        done = subprocess.run([sys.executable, "-c", _HIDE.format(hidden=tuple(hidden)) + code, *args],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout
    return run


# ------------------------------------------------------------------------------------------- doctor

@pytest.fixture(scope="session")
def doctor_data_dir():
    """tests/data/doctor: the doctor-report fixtures (``report.json``, ``check_only.json``)."""
    return os.path.join(DATA, "doctor")


@pytest.fixture(scope="session")
def doctor_json(doctor_data_dir):
    """``doctor_json(name)``: a fresh copy of a doctor-report fixture's JSON data."""
    cache = {}

    def load(name):
        if name not in cache:
            with open(os.path.join(doctor_data_dir, name)) as fh:
                cache[name] = json.load(fh)
        return copy.deepcopy(cache[name])
    return load


# -------------------------------------------------------------------------------------- access maps

def _fixture_builders():
    """``tests/data/doctor/make_fixtures.py`` (the script that makes the doctor's fixtures), loaded
    from its file: its access-map builder is the one these tests use too."""
    path = os.path.join(DATA, "doctor", "make_fixtures.py")
    spec = importlib.util.spec_from_file_location("make_fixtures", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


_BUILDERS = _fixture_builders()
_access_map, _line, _tile = _BUILDERS.access_map, _BUILDERS._line, _BUILDERS._tile


@pytest.fixture(scope="session")
def access_map():
    """``access_map(arg, shape, dtype, accesses, bins=(1, 1), programs=1, max_oob=4096)``: an access map
    as the checked interpreter records it, from simulated accesses ``(program id, "load" | "store" |
    "atomic_add", element coordinates on the 2-D canvas, an int array (n, 2))``; coordinates outside
    the canvas are out of bounds."""
    return _access_map


@pytest.fixture(scope="session")
def line():
    """``line(start, n)``: the canvas coordinates of elements ``start .. start + n - 1`` of a 1-D tensor."""
    return _line


@pytest.fixture(scope="session")
def tile():
    """``tile(r0, nr, c0, nc)``: the canvas coordinates of rows ``r0 ..`` by columns ``c0 ..``."""
    return _tile


@pytest.fixture(scope="session")
def vector_add_map():
    """``vector_add_map(arg="x_ptr", n=1000, block=256, oob=True, access="load")``: one argument of a
    vector add over ``n`` elements in blocks of ``block``, with (``oob``) or without a mask."""
    def make(arg="x_ptr", n=1000, block=256, oob=True, access="load"):
        progs = -(-n // block)
        acc = [(p, access, _line(p * block, block if oob else min(block, n - p * block))) for p in range(progs)]
        return _access_map(arg, [n], "float32", acc, programs=progs)
    return make
