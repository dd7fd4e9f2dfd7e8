"""Device peaks: the datasheet table, peaks from driver attributes, occupancy, and the peaks' JSON."""
import pytest

from tritonkit.profile import DevicePeaks, identify, peaks_by_name, peaks_from_attributes


def test_device_peaks_from_the_table_and_from_attributes(prof):
    info = prof.device_info()
    assert identify(info).name == "NVIDIA H100 SXM5 80GB"
    assert identify({**info, "bus_width": 6144}).bandwidth_gbps == 4800.0  # an H200
    assert peaks_by_name("NVIDIA H100 80GB HBM3").tflops["bf16"] == 989.4
    assert peaks_by_name("NVIDIA H100 PCIe").bandwidth_gbps == 2000.0
    assert peaks_by_name("NVIDIA A100-SXM4-40GB").bandwidth_gbps == 1555.0
    assert peaks_by_name("Some Future GPU") is None
    computed = peaks_from_attributes(info)
    assert computed.bandwidth_gbps == pytest.approx(2 * info["memory_clock_rate"] * 1e3 * info["bus_width"] / 8 / 1e9)
    assert computed.tflops["fp32"] == pytest.approx(info["num_sms"] * 128 * 2 * info["clock_rate"] * 1e3 / 1e12)
    assert "bf16" not in computed.tflops  # tensor-core peaks are not guessed
    assert abs(computed.bandwidth_gbps / 3350 - 1) < 0.01 and abs(computed.tflops["fp32"] / 67 - 1) < 0.01
    a100 = peaks_from_attributes({"arch": "80", "num_sms": 108, "clock_rate": 1410000, "memory_clock_rate": 1593000,
                                  "bus_width": 5120})
    assert a100.tflops["fp32"] == pytest.approx(19.49, rel=0.01)  # 64 FP32 lanes per SM on sm_80
    with pytest.raises(ValueError, match="num_sms"):
        peaks_from_attributes({"arch": "90"})


def test_peaks_round_trip_through_json():
    for _, peaks in __import__("tritonkit.profile._devices", fromlist=["TABLE"]).TABLE:
        assert DevicePeaks.from_dict(peaks.to_dict()) == peaks
    computed = peaks_from_attributes({"arch": "89", "num_sms": 142, "clock_rate": 2520000,
                                      "memory_clock_rate": 9001000, "bus_width": 384})
    assert DevicePeaks.from_dict(computed.to_dict()) == computed


def test_peaks_from_dict_takes_defaults_and_needs_a_bandwidth():
    got = DevicePeaks.from_dict({"bandwidth_gbps": 1000, "tflops": {"fp32": 10, "bf16": "fast"}, "sms": "many",
                                 "unknown": 1})
    assert got == DevicePeaks("?", 1000.0, {"fp32": 10.0})
    for bad in ({}, {"name": "X"}, {"name": "X", "bandwidth_gbps": "fast"}):
        with pytest.raises(ValueError, match="bandwidth_gbps"):
            DevicePeaks.from_dict(bad)
    with pytest.raises(TypeError):
        DevicePeaks.from_dict(None)
