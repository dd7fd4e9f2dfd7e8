"""Host code that asks Triton's driver for the device, its properties or a compiled kernel's
metadata runs unmodified under check on a machine without a GPU."""
import os

import pytest
import torch
import triton

import tritonkit
from tritonkit.cli import main
from tritonkit.check.launch.cpu_driver import DEVICE_MODELS

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU driver is active here: nothing is replaced")
HERE = os.path.dirname(os.path.abspath(__file__))


def _active():
    return triton.runtime.driver.active


def test_the_driver_answers_for_the_cpu_during_a_session_and_is_put_back_after():
    with pytest.raises(RuntimeError, match="active drivers"):
        _active()
    with tritonkit.checking():
        assert _active().get_active_torch_device() == torch.device("cpu")
        props = _active().utils.get_device_properties(0)
        assert props == DEVICE_MODELS["h100"] and props["multiprocessor_count"] == 132
        assert _active().get_current_target().arch == 90
    with pytest.raises(RuntimeError, match="active drivers"):
        _active()


def test_another_device_model_can_be_picked_and_a_bad_name_is_refused(monkeypatch):
    monkeypatch.setenv("TRITONKIT_DEVICE_MODEL", "a100")
    with tritonkit.checking():
        assert _active().utils.get_device_properties(0)["multiprocessor_count"] == 108
    monkeypatch.setenv("TRITONKIT_DEVICE_MODEL", "b999")
    with pytest.raises(ValueError, match="unknown device model; choose from h100, a100"):
        with tritonkit.checking():
            pass


def test_the_fused_softmax_tutorial_runs_unmodified(tmp_path, capfd):
    out = tmp_path / "f.json"
    assert main(["check", "--json", str(out), "--", "python", os.path.join(HERE, "_tutorial_softmax.py")]) == 0
    printed = capfd.readouterr().out
    diff = float(printed.split("max diff")[1].split()[0])
    assert diff < 1e-6
    import json
    (record,) = json.loads(out.read_text())["launch_records"]
    # min(rows, 132 SMs x occupancy 8 (65536 registers / (32 registers x 32 lanes x 8 warps)))
    assert record["grid"] == [min(300, 132 * 8), 1, 1]
