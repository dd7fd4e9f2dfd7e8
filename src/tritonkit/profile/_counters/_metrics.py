"""Which hardware counters ``--counters`` reads, and how they become FLOPs.

FLOP counting (:data:`FLOP_METRICS`, summed per operand width in bits; the widths match Proton's
``flops8/16/32/64``). Checked on an H100 with ncu 2025.3.1 (``--clock-control none``): Triton
kernels over 2**20 elements and M=N=K=1024 matmuls, counts in ``tests/profile/test_counters.py``.

* CUDA cores: ``sm__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum`` count
  executed (predicated-on) SASS instructions per thread. 32- and 64-bit: an add or a multiply is
  1 FLOP, a fused multiply-add 2, as in Nsight Compute's own roofline sections
  (``derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2`` = FFMA count x 2; NVIDIA developer
  forum, "About the flops in ncu report",
  https://forums.developer.nvidia.com/t/about-the-flops-in-ncu-report/215350/6). Measured: fp32
  ``x * y + z`` over n elements -> n FFMA, fp64 -> n DFMA. 16-bit: the instructions are packed
  (HADD2/HMUL2/HFMA2, fp16 and bf16 alike), each counted once for two lanes: fp16 and bf16
  ``x * y + z`` over n elements -> n/2 HFMA. So an HADD/HMUL counts 2 FLOPs and an HFMA 4 (Nsight
  Compute's half-precision roofline weighs HFMA by 2 only, which halves such kernels' FLOPs; a
  scalar half instruction, one lane used, is over-counted by 2 here).
* Tensor cores: ``sm__ops_path_tensor_src_<type>[_dst_<type>].sum`` count the "math ops executed in
  Tensor path" by source type; NVIDIA's answer to "How many FLOPs does one tensor_op_hmma instruction
  do?" (https://forums.developer.nvidia.com/t/how-many-flops-does-one-tensor-op-hmma-instruction-do/285256)
  points to them instead of per-instruction factors, which differ per MMA shape and architecture.
  One op is one FLOP, a multiply-add two. Measured: a 1024^3 matmul counts exactly 2 * 1024**3 =
  2,147,483,648 with bf16 (``src_bf16_dst_fp32``), fp16 (``src_fp16``), tf32
  (``src_tf32_dst_fp32``), fp8 e4m3 (``src_fp8``) in Triton (wgmma) and fp64 in cuBLAS (``src_fp64``).
  Widths: TF32 -> 32, FP8 -> 8, FP64 (DMMA) -> 64, fp16/bf16 -> 16.

The older way, ``sm__inst_executed_pipe_tensor_op_hmma.sum`` times a per-architecture factor (512
on Volta, 2048/4096 on Ampere by MMA shape), is not used: the factor depends on the instruction
shape, which the counter does not say, and Hopper's ``wgmma`` has counters of its own
(``sm__ops_path_tensor_op_hgmma_*``).

Metrics a device does not have are left out of the command (``ncu --query-metrics``, see
:func:`available_metrics`), so older or newer GPUs still give time and bytes.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

#: GPU time of one launch (ns).
TIME_METRIC = "gpu__time_duration.sum"
#: DRAM bytes read / written by one launch.
DRAM_READ_METRIC = "dram__bytes_read.sum"
DRAM_WRITE_METRIC = "dram__bytes_write.sum"
#: DRAM bytes read + written (used only when the read/write pair is absent).
DRAM_METRIC = "dram__bytes.sum"
#: the SM clock during the launch (Hz): shows whether the clocks were locked.
CLOCK_METRIC = "sm__cycles_elapsed.avg.per_second"

#: (metric, FLOP width in bits, FLOPs per count). See the module docstring for the sources.
FLOP_METRICS: Tuple[Tuple[str, int, int], ...] = (
    ("sm__sass_thread_inst_executed_op_dadd_pred_on.sum", 64, 1),
    ("sm__sass_thread_inst_executed_op_dmul_pred_on.sum", 64, 1),
    ("sm__sass_thread_inst_executed_op_dfma_pred_on.sum", 64, 2),
    ("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 32, 1),
    ("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 32, 1),
    ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 32, 2),
    # 16-bit SASS instructions are packed (HADD2/HMUL2/HFMA2, fp16 and bf16 alike): 2 lanes each
    ("sm__sass_thread_inst_executed_op_hadd_pred_on.sum", 16, 2),
    ("sm__sass_thread_inst_executed_op_hmul_pred_on.sum", 16, 2),
    ("sm__sass_thread_inst_executed_op_hfma_pred_on.sum", 16, 4),
    ("sm__ops_path_tensor_src_fp64.sum", 64, 1),
    ("sm__ops_path_tensor_src_tf32_dst_fp32.sum", 32, 1),
    ("sm__ops_path_tensor_src_fp16.sum", 16, 1),
    ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", 16, 1),
    ("sm__ops_path_tensor_src_fp8.sum", 8, 1),
    # GPUs without the fp16 roll-up (it covers both accumulator types on the H100)
    ("sm__ops_path_tensor_src_fp16_dst_fp16.sum", 16, 1),
    ("sm__ops_path_tensor_src_fp16_dst_fp32.sum", 16, 1),
)

#: a metric -> the metrics that stand in for it where a GPU lacks it (never collected or counted
#: together with it, which would count the same operations twice).
ALTERNATIVES: Dict[str, Tuple[str, ...]] = {
    "sm__ops_path_tensor_src_fp16.sum": ("sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                                         "sm__ops_path_tensor_src_fp16_dst_fp32.sum"),
}
_STAND_INS = {alt: main for main, alts in ALTERNATIVES.items() for alt in alts}

#: what every ``--counters`` run asks for: time, DRAM bytes, the SM clock, then the FLOP counters
#: (all present on the H100 with ncu 2025.3; stand-ins come in only through :func:`select_metrics`).
DEFAULT_METRICS: Tuple[str, ...] = (TIME_METRIC, DRAM_READ_METRIC, DRAM_WRITE_METRIC, CLOCK_METRIC) + tuple(
    m for m, _, _ in FLOP_METRICS if m not in _STAND_INS)


def parse_query_metrics(text: str) -> set:
    """The metric names in ``ncu --query-metrics`` output (the first word of each table row)."""
    names = set()
    for ln in text.splitlines():
        word = ln.strip().split(None, 1)[0] if ln.strip() else ""
        if re.match(r"^[a-z0-9]+__[A-Za-z0-9_]+$", word):
            names.add(word)
    return names


def select_metrics(available: Optional[set], metrics: Sequence[str] = DEFAULT_METRICS) -> List[str]:
    """``metrics`` narrowed to what a GPU has.

    Args:
        available: base metric names (before the first ``.``) the GPU has (:func:`available_metrics`);
            None: unknown, keep ``metrics`` as they are.
        metrics: the wanted metrics.

    Returns:
        The wanted metrics the GPU has, in order; one it lacks is replaced by its
        :data:`ALTERNATIVES` that it has (or dropped).
    """
    if available is None:
        return list(metrics)
    out: List[str] = []
    for m in metrics:
        for cand in ((m,) if m.split(".", 1)[0] in available else ALTERNATIVES.get(m, ())):
            if cand.split(".", 1)[0] in available and cand not in out:
                out.append(cand)
    return out
