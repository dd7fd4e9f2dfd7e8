"""tritonkit.profile's hardware counters (``--counters``) on the CPU: ncu's CSV recorded on the H100
(benchmarks/profile_workload.py under ``ncu --csv``), unit handling, the command line, merging into
Proton's kernels, the accuracy check, and ncu's failures with a faked ``ncu``."""
import os
import subprocess
import sys

import pytest

from tritonkit.profile import KernelStats, read_proton
from tritonkit.profile import _counters as C
from tritonkit.profile._counters import _ncu
from tritonkit.profile._counters import (CounterRecord, CountersUnavailable, aggregate, apply_counters,
                                         kernel_regex, kernels_needing_counters, match_totals, ncu_command,
                                         parse_ncu_csv, parse_query_metrics, run_ncu, select_metrics,
                                         time_accuracy, unit_factor)

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "proton")
NCU_CSV = os.path.join(DATA, "ncu_workload_h100.csv")
WORKLOAD = os.path.join(DATA, "workload_h100.hatchet")

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


#: an excerpt of ncu's CSV on the H100 (ncu 2025.3.1, --clock-control none, the metrics of
#: DEFAULT_METRICS) over Triton kernels: ``x * y + z`` on 2**20 elements in fp16 (ID 6), bf16 (14), fp32 (19),
#: fp64 (27); M=N=K=1024 ``tl.dot`` in bf16 (33), fp16 (38), fp32/tf32 (41), fp8 e4m3 (47); cuBLAS's fp64
#: 1024^3 matmul (49). Rows of zero counts were left out.
H100_FLOPS_CSV = """\
==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, profiling results may be inconsistent.
==PROF== Connected to process 537 (/usr/bin/python3.12)
==PROF== Disconnected from process 537
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"6","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","6,294,272"
"6","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","5,152"
"6","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_hfma_pred_on.sum","inst","524,288"
"14","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","6,294,528"
"14","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","5,088"
"14","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_hfma_pred_on.sum","inst","524,288"
"19","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","12,586,240"
"19","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","7,360"
"19","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_ffma_pred_on.sum","inst","1,048,576"
"27","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","25,171,456"
"27","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,288"
"27","537","python3.12","127.0.0.1","hfma_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_dfma_pred_on.sum","inst","1,048,576"
"33","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","4,210,176"
"33","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","11,360"
"33","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","sm__ops_path_tensor_src_bf16_dst_fp32.sum","","2,147,483,648"
"38","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","4,210,176"
"38","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","11,456"
"38","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","sm__ops_path_tensor_src_fp16.sum","","2,147,483,648"
"41","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","8,406,784"
"41","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","63,040"
"41","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","sm__ops_path_tensor_src_tf32_dst_fp32.sum","","2,147,483,648"
"47","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","2,113,024"
"47","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","36,288"
"47","537","python3.12","127.0.0.1","mm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","sm__ops_path_tensor_src_fp8.sum","","2,147,483,648"
"49","537","python3.12","127.0.0.1","sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x32_stage3_warpsize4x2x1_tensor16x8x16_execute_kernel__5x_cublas","1","7","(256, 1, 1)","(8, 16, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","8,425,216"
"49","537","python3.12","127.0.0.1","sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x32_stage3_warpsize4x2x1_tensor16x8x16_execute_kernel__5x_cublas","1","7","(256, 1, 1)","(8, 16, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","42,912"
"49","537","python3.12","127.0.0.1","sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x32_stage3_warpsize4x2x1_tensor16x8x16_execute_kernel__5x_cublas","1","7","(256, 1, 1)","(8, 16, 1)","0","9.0","Command line profiler metrics","sm__ops_path_tensor_src_fp64.sum","","2,147,483,648"
"49","537","python3.12","127.0.0.1","sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x32_stage3_warpsize4x2x1_tensor16x8x16_execute_kernel__5x_cublas","1","7","(256, 1, 1)","(8, 16, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_dmul_pred_on.sum","inst","1,048,576"
"""


def row(i, name, metric, unit, value, block="(128, 1, 1)", grid="(64, 1, 1)"):
    return (f'"{i}","7","python3","127.0.0.1","{name}","1","7","{block}","{grid}","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


@pytest.fixture(scope="module")
def text():
    with open(NCU_CSV) as fh:
        return fh.read()


@pytest.fixture(scope="module")
def records(text):
    return parse_ncu_csv(text)


def _value(text, kernel, metric):
    """The value printed for (kernel, metric) in the CSV text, read without the parser."""
    for ln in text.splitlines():
        if f'"{kernel}"' in ln and f'"{metric}"' in ln:
            return float(ln.rsplit('","', 1)[1].rstrip('"').replace(",", ""))
    raise KeyError((kernel, metric))


# ------------------------------------------------------------------------------------------------ parsing


def test_recorded_csv_gives_add_kernel_time_and_bytes(text, records):
    assert [r.name for r in records] == ["add_kernel", "add_kernel_plain", "softmax_kernel", "matmul_kernel"]
    add = records[0]
    assert add.launch_id == 0 and add.grid == (16384, 1, 1) and add.block == (128, 1, 1)
    assert add.time_ns == 63136.0 == _value(text, "add_kernel", "gpu__time_duration.sum")
    assert add.dram_bytes == 134225152 + 49324288
    assert add.dram_bytes == (_value(text, "add_kernel", "dram__bytes_read.sum")
                              + _value(text, "add_kernel", "dram__bytes_write.sum"))
    assert add.sm_clock_hz == pytest.approx(1587299518.88)
    assert add.metrics["dram__bytes_read.sum"] == 134225152.0 and add.units["gpu__time_duration.sum"] == "ns"
    assert add.flops == {}  # no FLOP counters in this recording
    mm = records[3]
    assert mm.time_ns == _value(text, "matmul_kernel", "gpu__time_duration.sum") == 240544.0
    assert mm.block == (256, 1, 1) and mm.grid == (1024, 1, 1)


def test_prof_lines_and_program_output_are_skipped(text):
    assert text.startswith("==PROF==")  # the recording has them before the header
    noisy = "\n".join(["==PROF== Connected to process 1 (/usr/bin/python3)", "==WARNING== something", "hello",
                       HEADER, row(0, "k", "gpu__time_duration.sum", "ns", "1,000"),
                       "==PROF== Disconnected from process 1", "program output after",
                       row(0, "k", "dram__bytes_read.sum", "byte", "4,096")])
    recs = parse_ncu_csv(noisy)
    assert len(recs) == 1 and recs[0].time_ns == 1000.0 and recs[0].dram_bytes == 4096.0
    assert parse_ncu_csv("==PROF== Connected\n==WARNING== No kernels were profiled.\n") == []


@pytest.mark.parametrize("unit,value,expect", [
    ("ns", "63,136", 63136.0), ("nsecond", "5", 5.0), ("us", "63.136", 63136.0), ("usecond", "2", 2000.0),
    ("ms", "1.5", 1.5e6), ("msecond", "0.25", 2.5e5), ("second", "1", 1e9),
])
def test_time_units_become_ns(unit, value, expect):
    recs = parse_ncu_csv("\n".join([HEADER, row(0, "k", "gpu__time_duration.sum", unit, value)]))
    assert recs[0].time_ns == pytest.approx(expect)


@pytest.mark.parametrize("unit,value,expect", [
    ("byte", "134,225,152", 134225152.0), ("Kbyte", "2", 2e3), ("Mbyte", "134.23", 134.23e6),
    ("Gbyte", "1.5", 1.5e9), ("KiB", "2", 2048.0),
])
def test_byte_units_become_bytes(unit, value, expect):
    recs = parse_ncu_csv("\n".join([HEADER, row(0, "k", "dram__bytes_read.sum", unit, value),
                                    row(0, "k", "dram__bytes_write.sum", "byte", "0")]))
    assert recs[0].dram_bytes == pytest.approx(expect)


def test_clock_and_count_units():
    assert unit_factor("hz") == 1 and unit_factor("Ghz") == 1e9 and unit_factor("MHz") == 1e6
    assert unit_factor("cycle/nsecond") == 1e9 and unit_factor("cycle/usecond") == 1e6
    assert unit_factor("Kinst") == 1e3 and unit_factor("inst") == 1 and unit_factor("%") == 1
    assert unit_factor("Gbyte/second") == 1e9
    recs = parse_ncu_csv("\n".join([HEADER, row(0, "k", "sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "1.98"),
                                    row(0, "k", "gpu__time_duration.sum", "ns", "n/a")]))
    assert recs[0].sm_clock_hz == pytest.approx(1.98e9) and recs[0].time_ns is None


def test_flops_by_width_from_counters():
    s = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
    text = "\n".join([HEADER,
                      row(0, "k", s.format("ffma"), "inst", "1,000"), row(0, "k", s.format("fadd"), "inst", "10"),
                      row(0, "k", s.format("fmul"), "inst", "1"), row(0, "k", s.format("hfma"), "inst", "5"),
                      row(0, "k", s.format("hadd"), "inst", "7"), row(0, "k", s.format("dfma"), "inst", "3"),
                      row(0, "k", "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "", "2,147,483,648"),
                      row(0, "k", "sm__ops_path_tensor_src_fp8.sum", "", "8"),
                      row(1, "j", "gpu__time_duration.sum", "ns", "5")])
    k, j = parse_ncu_csv(text)
    # FFMA 2, FADD/FMUL 1; packed HFMA2 4, HADD2 2; tensor ops 1 each
    assert k.flops == {32: 2 * 1000 + 10 + 1, 16: 4 * 5 + 2 * 7 + 2 * 1024 ** 3, 64: 6, 8: 8}
    assert j.flops == {}  # no FLOP metric collected -> no width at all


def test_fp16_rollup_and_its_stand_ins_are_not_counted_twice():
    both = "\n".join([HEADER, row(0, "k", "sm__ops_path_tensor_src_fp16.sum", "", "100"),
                       row(0, "k", "sm__ops_path_tensor_src_fp16_dst_fp32.sum", "", "100")])
    assert parse_ncu_csv(both)[0].flops == {16: 100.0}
    parts = "\n".join([HEADER, row(0, "k", "sm__ops_path_tensor_src_fp16_dst_fp16.sum", "", "30"),
                        row(0, "k", "sm__ops_path_tensor_src_fp16_dst_fp32.sum", "", "70")])
    assert parse_ncu_csv(parts)[0].flops == {16: 100.0}


def test_h100_counters_give_the_flops_of_each_dtype():
    """Counts recorded on the H100 against the FLOPs the kernels do: the metric -> FLOP weights."""
    recs = {r.launch_id: r for r in parse_ncu_csv(H100_FLOPS_CSV)}
    n, mm = 1 << 20, 2 * 1024 ** 3
    assert recs[6].name == "hfma_kernel" and recs[6].flops[16] == 2 * n  # fp16 x*y+z: n/2 packed HFMA2
    assert recs[14].flops[16] == 2 * n  # bf16 likewise
    assert recs[19].flops[32] == 2 * n and recs[27].flops[64] == 2 * n  # fp32 FFMA, fp64 DFMA
    assert recs[33].flops[16] == mm  # bf16 wgmma
    assert recs[38].flops[16] == mm  # fp16
    assert recs[41].flops[32] == mm  # tf32
    assert recs[47].flops[8] == mm  # fp8 e4m3
    assert recs[49].name.startswith("sm90_xmma_gemm_f64") and recs[49].flops[64] >= mm  # DMMA (+ a few DMULs)
    assert max(recs[33].flops, key=recs[33].flops.get) == 16
    assert recs[6].time_ns == 5152.0 and recs[33].sm_clock_hz is None  # clock rows not in the excerpt
    assert recs[33].metrics["dram__bytes_read.sum"] > 0


def test_raw_page_layout():
    text = "\n".join(['==PROF== Disconnected', '"ID","Kernel Name","Grid Size","Block Size","dram__bytes_read.sum",'
                      '"dram__bytes_write.sum","gpu__time_duration.sum"',
                      '"","","","","Mbyte","byte","us"',
                      '"0","add_kernel","(16384, 1, 1)","(128, 1, 1)","134.23","1,000","63.14"'])
    (r,) = parse_ncu_csv(text)
    assert r.name == "add_kernel" and r.grid == (16384, 1, 1)
    assert r.dram_bytes == pytest.approx(134.23e6 + 1000) and r.time_ns == pytest.approx(63140.0)


def test_bad_csv_is_refused():
    with pytest.raises(ValueError, match="Kernel Name"):
        parse_ncu_csv('"ID","Something"\n"0","x"')
    with pytest.raises(ValueError, match="not a number"):
        parse_ncu_csv("\n".join([HEADER, row(0, "k", "gpu__time_duration.sum", "ns", "fast")]))


# ------------------------------------------------------------------------------------------------ command line


def test_command_line_unlocks_clocks_and_escapes_names():
    cmd = ncu_command(["python", "run.py", "--n", "4"], ["add_kernel n=4096", "my.kernel$1", "add_kernel"],
                      launch_count=20, output_csv="/tmp/out.csv")
    assert cmd[0] == "ncu"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--cache-control") + 1] == "none"  # caches as the program left them, as Proton sees
    assert "--csv" in cmd and cmd[cmd.index("--print-units") + 1] == "base"
    # named by symbol, as Proton names kernels (a Triton kernel's symbol is its function name)
    assert cmd[cmd.index("--print-kernel-base") + 1] == "mangled" and cmd[cmd.index("--kernel-name-base") + 1] == "mangled"
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "gpu__time_duration.sum" in metrics and "dram__bytes_read.sum" in metrics
    assert "sm__ops_path_tensor_src_bf16_dst_fp32.sum" in metrics
    assert cmd[cmd.index("-k") + 1] == r"regex:^(add_kernel|my\.kernel\$1)$"
    assert cmd[cmd.index("--launch-count") + 1] == "20" and cmd[cmd.index("--log-file") + 1] == "/tmp/out.csv"
    assert cmd[-4:] == ["python", "run.py", "--n", "4"]
    plain = ncu_command(["bench.py"], None, metrics=["gpu__time_duration.sum"])
    assert "-k" not in plain and "--kernel-name-base" not in plain and "--launch-count" not in plain and plain[-2:] == [sys.executable, "bench.py"]
    assert plain[plain.index("--metrics") + 1] == "gpu__time_duration.sum"
    with pytest.raises(ValueError):
        ncu_command(["x.py"], launch_count=0)
    with pytest.raises(ValueError):
        ncu_command([])


def test_anchored_regex_selects_only_the_named_kernels():
    import re
    rx = re.compile(kernel_regex(["add_kernel n=16777216", "softmax_kernel"])[len("regex:"):])
    assert rx.search("add_kernel") and rx.search("softmax_kernel")
    assert not rx.search("add_kernel_plain") and not rx.search("fused_softmax_kernel")


def test_metrics_narrowed_to_what_the_gpu_has():
    query = ("Device NVIDIA H100 80GB HBM3 (GH100)\n---------------------------\n"
             "Metric Name                     Metric Type  Metric Unit  Metric Description\n"
             "dram__bytes_read                Counter      byte         # of bytes read from DRAM\n"
             "gpu__time_duration              Counter      nsecond      total duration\n"
             "sm__ops_path_tensor_src_bf16_dst_fp32 Counter         # of math ops executed in Tensor path\n")
    names = parse_query_metrics(query)
    assert names == {"dram__bytes_read", "gpu__time_duration", "sm__ops_path_tensor_src_bf16_dst_fp32"}
    assert select_metrics(names) == ["gpu__time_duration.sum", "dram__bytes_read.sum",
                                     "sm__ops_path_tensor_src_bf16_dst_fp32.sum"]
    assert select_metrics(None) == list(C.DEFAULT_METRICS)
    # a GPU without the fp16 roll-up gets its two stand-ins; one with it, never both
    older = names | {"sm__ops_path_tensor_src_fp16_dst_fp16", "sm__ops_path_tensor_src_fp16_dst_fp32"}
    assert select_metrics(older) == ["gpu__time_duration.sum", "dram__bytes_read.sum",
                                     "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
                                     "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
                                     "sm__ops_path_tensor_src_bf16_dst_fp32.sum"]
    newer = older | {"sm__ops_path_tensor_src_fp16"}
    chosen = select_metrics(newer)
    assert "sm__ops_path_tensor_src_fp16.sum" in chosen and not any("dst_fp16" in m for m in chosen)
    assert "sm__ops_path_tensor_src_fp16.sum" in C.DEFAULT_METRICS
    assert not any("src_fp16_dst" in m for m in C.DEFAULT_METRICS)


# ------------------------------------------------------------------------------------------------ merging


def test_aggregate_sums_launches():
    recs = [CounterRecord("k", 0, time_ns=100.0, dram_bytes=1000.0, flops={32: 10.0}),
            CounterRecord("k", 1, time_ns=300.0, dram_bytes=3000.0, flops={32: 30.0}),
            CounterRecord("j", 2, time_ns=50.0)]
    tot = aggregate(recs)
    assert tot["k"].launches == 2 and tot["k"].time_ns == 400.0 and tot["k"].bytes == 4000.0
    assert tot["k"].flops == {32: 40.0} and tot["k"].mean_us == pytest.approx(0.2)
    assert tot["k"].bytes_per_launch == 2000.0 and tot["k"].flops_per_launch == {32: 20.0}
    assert tot["j"].bytes is None and tot["j"].bytes_per_launch is None


def test_apply_counters_fills_kernels_without_metadata_only(records):
    prof = read_proton(WORKLOAD)
    totals = aggregate(records)
    before = {k.name: k for k in prof.kernels}
    after = {k.name: k for k in apply_counters(prof.kernels, totals)}
    assert len(after) == len(before)
    # launch_metadata kernels keep what their author declared, although ncu measured them too
    for name in ("add_kernel n=16777216", "matmul_kernel M=4096 N=4096 K=4096"):
        assert after[name] is before[name] and after[name].work_source == "launch_metadata"
    assert after["add_kernel n=16777216"].bytes == 5 * 3 * (1 << 24) * 4
    # kernels without it get ncu's per-launch bytes x Proton's 5 launches
    plain = after["add_kernel_plain"]
    assert plain.work_source == "ncu" and plain.launches == 5
    assert plain.bytes == pytest.approx(5 * (134221056 + 47226624))
    soft = after["softmax_kernel"]
    assert soft.work_source == "ncu" and soft.bytes == pytest.approx(5 * (16782848 + 8704))
    assert before["add_kernel_plain"].work_source is None and before["add_kernel_plain"].bytes is None  # not mutated
    # the scope-metrics kernel (cuBLAS under torch_matmul) is left alone, and unprofiled ones stay unknown
    cublas = [k for k in after.values() if k.scope == ("torch_matmul",)][0]
    assert cublas.work_source == "scope"
    assert all(k.work_source is None for k in after.values() if k.name.startswith("_ZN2at"))


def test_apply_counters_scales_flops_and_matches_metadata_names():
    k = KernelStats("mm_kernel BLOCK=128", ("s",), launches=3, time_ns=3000.0)
    other = KernelStats("mm_kernel_v2", (), launches=1, time_ns=10.0)
    totals = aggregate([CounterRecord("mm_kernel", 0, time_ns=1000.0, dram_bytes=10.0, flops={16: 100.0, 32: 0.0}),
                        CounterRecord("mm_kernel", 1, time_ns=1000.0, dram_bytes=30.0, flops={16: 300.0, 32: 0.0})])
    new, same = apply_counters([k, other], totals)
    assert new.work_source == "ncu" and new.bytes == pytest.approx(3 * 20.0) and new.flops == {16: 3 * 200.0}
    assert same is other and same.work_source is None  # "mm_kernel" is not a word prefix of "mm_kernel_v2"
    assert match_totals("mm_kernel", totals).name == "mm_kernel" and match_totals("mm", totals) is None


def test_kernels_needing_counters():
    prof = read_proton(WORKLOAD)
    names = kernels_needing_counters(prof.kernels)
    assert "add_kernel_plain" in names and "softmax_kernel" in names
    assert "add_kernel" not in names and "matmul_kernel" not in names  # they have launch_metadata
    assert len(names) == len(set(names))


def test_time_accuracy_against_recorded_ncu(records):
    prof = read_proton(WORKLOAD)
    rows = {c.name: c for c in time_accuracy(prof.kernels, records)}
    # softmax (11.7 us under ncu) is below the 50 us floor
    assert set(rows) == {"add_kernel", "add_kernel_plain", "matmul_kernel"}
    add = rows["add_kernel"]
    assert add.proton_mean_us == pytest.approx(323334 / 5 / 1e3) and add.ncu_mean_us == pytest.approx(63.136)
    assert add.rel_diff == pytest.approx((323334 / 5) / 63136 - 1)
    assert abs(add.rel_diff) <= C.ACCURACY_TOLERANCE
    # this recording ran with ncu's locked base clocks (1.34 GHz for the matmul): Proton's 1.98 GHz time is
    # far shorter, which is what --clock-control none avoids
    assert rows["matmul_kernel"].rel_diff < -C.ACCURACY_TOLERANCE
    assert "softmax_kernel" in {c.name for c in time_accuracy(prof.kernels, records, min_us=0)}


# ------------------------------------------------------------------------------------------------ running ncu


class FakeRun:
    """Stands in for subprocess.run: writes ``log`` to ncu's --log-file, returns the given output."""

    def __init__(self, log="", stdout="", stderr="", returncode=0, raises=None):
        self.log, self.stdout, self.stderr, self.returncode, self.raises = log, stdout, stderr, returncode, raises
        self.calls = []

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        if self.raises:
            raise self.raises
        if "--log-file" in cmd:
            with open(cmd[cmd.index("--log-file") + 1], "w") as fh:
                fh.write(self.log)
        return subprocess.CompletedProcess(cmd, self.returncode, self.stdout, self.stderr)


@pytest.fixture
def fake_ncu(monkeypatch):
    monkeypatch.setattr(_ncu.shutil, "which", lambda name: "/opt/nsight/ncu" if name == "ncu" else None)
    monkeypatch.delenv("TRITONKIT_NCU", raising=False)

    def install(run):
        monkeypatch.setattr(_ncu.subprocess, "run", run)
        return run
    return install


def test_run_ncu_reads_the_log(fake_ncu, text):
    run = fake_ncu(FakeRun(log=text, stdout="workload done\n"))
    recs = run_ncu(["bench.py"], ["add_kernel_plain", "softmax_kernel"], metrics=["gpu__time_duration.sum"])
    assert [r.name for r in recs][:2] == ["add_kernel", "add_kernel_plain"]
    cmd = run.calls[0]
    assert cmd[0] == "/opt/nsight/ncu" and cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("-k") + 1] == "regex:^(add_kernel_plain|softmax_kernel)$"


def test_run_ncu_queries_metrics_first(fake_ncu):
    query = "dram__bytes_read   Counter  byte  x\ngpu__time_duration  Counter  nsecond  y\n"
    csv_text = "\n".join([HEADER, row(0, "k", "gpu__time_duration.sum", "ns", "10")])

    def run(cmd, **kw):
        if "--query-metrics" in cmd:
            return subprocess.CompletedProcess(cmd, 0, query, "")
        return FakeRun(log=csv_text)(cmd)
    calls = []
    fake_ncu(lambda cmd, **kw: calls.append(cmd) or run(cmd, **kw))
    (rec,) = run_ncu(["bench.py"], None)
    assert rec.time_ns == 10.0
    assert calls[1][calls[1].index("--metrics") + 1] == "gpu__time_duration.sum,dram__bytes_read.sum"


def test_no_ncu_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(_ncu.shutil, "which", lambda name: None)
    monkeypatch.delenv("TRITONKIT_NCU", raising=False)
    with pytest.raises(CountersUnavailable) as e:
        run_ncu(["bench.py"], ["k"])
    msg = str(e.value)
    assert "ncu" in msg and "not on PATH" in msg and "Nsight Compute" in msg and "--counters" in msg
    assert "launch_metadata" in msg


def test_permission_error_says_how_to_enable(fake_ncu):
    err = ("==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
           "NVIDIA GPU Performance Counters on the target device 0.\n")
    fake_ncu(FakeRun(stdout=err, returncode=0))
    with pytest.raises(CountersUnavailable) as e:
        run_ncu(["bench.py"], ["k"], metrics=["gpu__time_duration.sum"])
    msg = str(e.value)
    assert "ERR_NVGPUCTRPERM" in msg and "NVreg_RestrictProfilingToAdminUsers=0" in msg and "root" in msg
    assert "falls back to launch_metadata" in msg


def test_nonzero_exit_and_no_gpu_and_timeout(fake_ncu):
    # as ncu 2025.3.1 ends when the program exits with 3 (the CSV of the launches so far still follows)
    out = "\n".join(["==PROF== Connected to process 1174 (/usr/bin/python3.12)",
                     "==PROF== Disconnected from process 1174",
                     "==ERROR== The application returned an error code (3).", HEADER,
                     row(0, "k", "gpu__time_duration.sum", "ns", "3,776")])
    fake_ncu(FakeRun(stdout=out, returncode=3))
    with pytest.raises(CountersUnavailable, match=r"status 3(.|\n)*application returned an error code \(3\)"):
        run_ncu(["bench.py"], ["k"], metrics=["gpu__time_duration.sum"])
    fake_ncu(FakeRun(stderr="RuntimeError: Found no NVIDIA driver on your system.", returncode=1))
    with pytest.raises(CountersUnavailable, match="no GPU"):
        run_ncu(["bench.py"], ["k"], metrics=["gpu__time_duration.sum"])
    fake_ncu(FakeRun(raises=subprocess.TimeoutExpired(["ncu"], 5)))
    with pytest.raises(CountersUnavailable, match="did not finish within 5 s"):
        run_ncu(["bench.py"], ["k"], timeout_s=5, metrics=["gpu__time_duration.sum"])


def test_no_kernel_profiled_names_the_kernels(fake_ncu):
    # as ncu 2025.3.1 prints it when -k matches nothing (exit status 0)
    out = "\n".join(["==PROF== Connected to process 1120 (/usr/bin/python3.12)", "x",
                     "==PROF== Disconnected from process 1120", "==WARNING== No kernels were profiled.",
                     "Available Kernels:", "1. vectorized_elementwise_kernel", "2. add_kernel_plain"])
    fake_ncu(FakeRun(stdout=out))
    with pytest.raises(CountersUnavailable) as e:
        run_ncu(["bench.py"], ["add_kernel n=4", "typo_kernel"], metrics=["gpu__time_duration.sum"])
    msg = str(e.value)
    assert "no kernel matching add_kernel, typo_kernel" in msg
    assert "ncu saw these kernels: vectorized_elementwise_kernel, add_kernel_plain." in msg
