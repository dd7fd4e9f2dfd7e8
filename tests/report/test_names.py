"""Short, readable kernel names for tables and charts (tritonkit.report.names): mangled C++ names as
``function<Arg>``, long names cut in the middle."""
import pytest

from tritonkit.report.names import short_name

ABS = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10AbsFunctorIfEESt5arrayIPcLm2EEEEviT0_T1_"


def test_short_names():
    assert short_name("softmax_kernel") == "softmax_kernel"
    abs_label = short_name(ABS)
    assert len(abs_label) <= 40 and "AbsFunctor" in abs_label and abs_label.startswith("vectorized_")
    long_plain = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_cublas"
    cut = short_name(long_plain)
    assert len(cut) == 40 and "…" in cut and cut.endswith("ffma_cublas")
    assert short_name("_Z6kernelPf") == "kernel"
    assert short_name("_Zbroken") == "_Zbroken"  # not parseable: kept (and cut) as is
    assert len(short_name(ABS, 20)) <= 20
    with pytest.raises(ValueError):
        short_name("x", 0)
