"""Bytes and FLOPs from hardware counters, through Nsight Compute (``tritonkit profile --counters``).

A kernel with no ``launch_metadata`` has a time in Proton's profile but no bytes or FLOPs, so no
roofline. ``--counters`` runs the program again under ``ncu`` for the kernels that lack them, reads
DRAM bytes and executed floating-point operations from the hardware counters, and fills them in
(``work_source="ncu"``) as a per-launch average times Proton's launch count.

The package, by concept:

* :mod:`._metrics`: which counters are read and how they become FLOPs (the sources are there);
* :mod:`._csv`: ncu's CSV output, with its units, as :class:`CounterRecord` per launch;
* :mod:`._ncu`: the ncu command line and running it (:func:`run_ncu`, :class:`CountersUnavailable`);
* :mod:`._merge`: per-kernel totals filled into Proton's kernels, and Proton's times against ncu's.
"""
from ._csv import CounterRecord, parse_ncu_csv, parse_value, unit_factor
from ._merge import (ACCURACY_MIN_US, ACCURACY_TOLERANCE, CounterTotals, TimeComparison, aggregate, apply_counters,
                     kernels_needing_counters, match_totals, time_accuracy)
from ._metrics import (ALTERNATIVES, CLOCK_METRIC, DEFAULT_METRICS, DRAM_METRIC, DRAM_READ_METRIC, DRAM_WRITE_METRIC,
                       FLOP_METRICS, TIME_METRIC, parse_query_metrics, select_metrics)
from ._ncu import CountersUnavailable, available_metrics, function_name, kernel_regex, ncu_command, run_ncu

__all__ = ["ACCURACY_MIN_US", "ACCURACY_TOLERANCE", "ALTERNATIVES", "CLOCK_METRIC", "DEFAULT_METRICS", "DRAM_METRIC",
           "DRAM_READ_METRIC", "DRAM_WRITE_METRIC", "FLOP_METRICS", "TIME_METRIC", "CounterRecord", "CounterTotals",
           "CountersUnavailable", "TimeComparison", "aggregate", "apply_counters", "available_metrics",
           "function_name", "kernel_regex", "kernels_needing_counters", "match_totals", "ncu_command",
           "parse_ncu_csv", "parse_query_metrics", "parse_value", "run_ncu", "select_metrics", "time_accuracy",
           "unit_factor"]
