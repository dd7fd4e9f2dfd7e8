"""The terminal tables of ``tritonkit profile`` (``tritonkit.report.profile``): the kernel table and
the scope tree of the recorded H100 profile."""
from rich.console import Console

from tritonkit.profile import analyze, identify
from tritonkit.report.profile import kernel_table, scope_tree


def test_rendering(prof):
    peaks = identify(prof.device_info())
    console = Console(width=220, record=True)
    console.print(kernel_table(analyze(prof.kernels, peaks), peaks))
    console.print(scope_tree(prof.tree, min_share=0.05))
    text = console.export_text()
    assert "matmul_kernel M=4096 N=4096 K=4096" in text and "compute" in text and "memory" in text
    assert "triton_matmul" in text and "NVIDIA H100 datasheet" in text
    assert "softmax_kernel" not in text.split("GPU time")[1]  # under 5% of the time: left out of the tree
