"""Fixtures of the profile tests: the Proton tree file recorded on the H100
(``benchmarks/profile_workload.py`` under ``python -m triton.profiler.proton -k triton``), read once."""
import json
import os

import pytest

from tritonkit.profile import read_proton

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "proton")


@pytest.fixture(scope="session")
def workload_path():
    """The recorded Proton tree file's path."""
    return os.path.join(DATA, "workload_h100.hatchet")


@pytest.fixture(scope="module")
def prof(workload_path):
    """The recorded profile, parsed (:class:`~tritonkit.profile.ProtonProfile`)."""
    return read_proton(workload_path)


@pytest.fixture(scope="module")
def raw(workload_path):
    """The recorded profile's JSON, as loaded."""
    with open(workload_path) as fh:
        return json.load(fh)
