"""``tritonkit profile -- python SCRIPT.py`` (and ``--from FILE.hatchet``): every GPU kernel's time,
throughput, % of peak and bound, from Proton, with a scope tree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional

EXIT_OK, EXIT_USAGE, EXIT_SCRIPT_FAILED = 0, 2, 3

#: host time per launch is measured on at most this many launches of each kernel ...
SAMPLES_PER_KERNEL = 50
#: ... and only among the first this many launches in all; then the timer takes itself out.
MAX_TIMED = 2000


def add_profile_parser(sub) -> None:
    """Add the ``profile`` subcommand to an argparse subparsers object."""
    p = sub.add_parser("profile", help="profile every GPU kernel of a script with Proton: time, GB/s, TFLOP/s, "
                                       "% of peak, bound",
                       usage="tritonkit profile [--json FILE] [--from FILE.hatchet] [--counters] [--tuned] "
                             "[--interpret-limit MB] [--min-share F] -- python SCRIPT.py [ARGS...]",
                       description="Run SCRIPT (unchanged) under Proton with Triton's launch hook and print a table "
                                   "per kernel (launches, GPU time, host time per launch, GB/s, TFLOP/s, % of the "
                                   "device's peak, bound) and the time tree by scope. Bytes and FLOPs come from "
                                   "each kernel's launch_metadata, or from a proton.scope's metrics, or with "
                                   "--counters from Nsight Compute, or else from replaying its first launches in "
                                   "tritonkit's checked interpreter (small launches, see --interpret-limit). "
                                   "--from reads "
                                   "a Proton tree file instead (works without a GPU).")
    p.add_argument("--json", metavar="FILE", help="also write the kernels, the tree and the peaks as JSON, and next "
                                                  "to it the roofline and time-breakdown charts (PNG and SVG) and "
                                                  "Proton's own file (FILE's stem + .hatchet)")
    p.add_argument("--from", dest="from_file", metavar="FILE.hatchet", help="analyze this Proton tree file")
    p.add_argument("--counters", action="store_true",
                   help="also run the script under Nsight Compute (ncu, clocks unlocked) for the kernels without "
                        "launch_metadata, and take their bytes and FLOPs from its hardware counters; also prints "
                        "Proton's kernel times against ncu's")
    p.add_argument("--tuned", action="store_true",
                   help="let tritonkit's autotuner stand in for @triton.autotune in the script (as `tritonkit tune` "
                        "does): keys tuned before come from the tuning cache with no trial, so the profile shows "
                        "the tuned kernels, not the tuning")
    p.add_argument("--interpret-limit", type=float, default=64, metavar="MB",
                   help="for kernels with neither launch_metadata nor counters, count bytes and FLOPs by replaying "
                        "their first launches on the CPU in tritonkit's checked interpreter, when their tensor "
                        "arguments take at most this many MiB (default 64; 0: never)")
    p.add_argument("--device", metavar="NAME", help="the device's name for its peaks (default: the current "
                                                    "device, or what the profile's attributes identify)")
    p.add_argument("--min-share", type=float, default=0.001, metavar="F",
                   help="leave out tree nodes under this share of the total GPU time (default 0.001)")
    p.add_argument("target", nargs="*", help="python SCRIPT.py ARGS... | python -m MODULE ARGS...")


def run_profile_command(ns, resolve_target: Callable, console=None) -> int:
    """Run ``tritonkit profile``; returns the exit status (0, 2 usage or no GPU, 3 the script failed)."""
    from rich.console import Console

    from ._devices import identify
    from ._proton import read_proton
    from ._roofline import analyze
    from ..report.profile import kernel_table, scope_tree
    console = console or Console()

    def error(msg: str) -> int:
        print(f"tritonkit profile: error: {msg}", file=sys.stderr)
        return EXIT_USAGE

    if ns.json and not os.path.isdir(os.path.dirname(os.path.abspath(ns.json))):
        return error(f"cannot write --json {ns.json}: no directory {os.path.dirname(os.path.abspath(ns.json))}")
    host: Dict[str, float] = {}
    resources: Dict[str, Dict[str, float]] = {}
    interpreted: Dict[str, dict] = {}
    device_name = ns.device
    status = EXIT_OK
    work = None
    if ns.from_file:
        if ns.target:
            return error("give either --from FILE or a script, not both")
        path = ns.from_file
    else:
        if not ns.target:
            return error("nothing to profile: give a script (`tritonkit profile -- python my_script.py`) or "
                         "--from FILE.hatchet")
        kind, what, argv = resolve_target(ns.target)
        try:
            import torch
            gpu = torch.cuda.is_available()
        except ImportError:  # pragma: no cover
            gpu = False
        if not gpu:
            return error("no CUDA GPU here (torch.cuda.is_available() is False): profiling needs one. Without a "
                         "GPU, `tritonkit check` runs kernels on the CPU, and `tritonkit profile --from FILE.hatchet` "
                         "analyzes a profile recorded elsewhere. (--counters through Nsight Compute needs a GPU too.)")
        work = tempfile.mkdtemp(prefix="tritonkit-profile-")
        path = os.path.join(work, "profile.hatchet")
        if ns.interpret_limit < 0:
            return error("--interpret-limit is a size in MiB, 0 or more")
        env = dict(os.environ, TRITONKIT_PROFILE_INTERPRET_MB=str(ns.interpret_limit))
        if getattr(ns, "tuned", False):
            env["TRITONKIT_PROFILE_TUNED"] = "1"
        proc = subprocess.run([sys.executable, "-m", "tritonkit.profile._child", work, kind, what, *argv[1:]], env=env)
        if proc.returncode != 0:
            status = EXIT_SCRIPT_FAILED
            console.print(f"[red]tritonkit profile: the script exited with status {proc.returncode}[/red]")
        meta_path = os.path.join(work, "meta.json")
        if os.path.exists(meta_path):
            with open(meta_path) as fh:
                meta = json.load(fh)
            host = meta.get("host_us", {})
            resources = meta.get("resources", {})
            interpreted = meta.get("interpreted", {})
            device_name = device_name or meta.get("device")
        if not os.path.exists(path):
            shutil.rmtree(work, ignore_errors=True)
            return error("Proton wrote no profile (did the script launch anything on the GPU?)") if status == 0 \
                else status
    try:
        try:
            prof = read_proton(path)
        except (OSError, ValueError) as e:
            return error(str(e))
        if not prof.kernels:
            console.print("tritonkit profile: no GPU kernel ran (the profile has no kernel launches)")
            return status or EXIT_OK
        if getattr(ns, "counters", False):
            prof.kernels = _with_counters(prof.kernels, ns, resolve_target, console)
        if interpreted:
            from ._interpret import apply_interpreted
            counted = _by_report(prof.kernels, interpreted)
            prof.kernels = apply_interpreted(prof.kernels, counted)
            for k in prof.kernels:
                why = counted.get(k.name, {}).get("why_not") if k.work_source is None else None
                if why:
                    console.print(f"[dim]{k.name}: no bytes or FLOPs (no launch_metadata; interpreter: {why})[/dim]")
        peaks = identify(prof.device_info(prof.kernels[0].device), device_name)
        from ._calibrate import load
        ceiling = load(device_name) if device_name else None
        reports = analyze(prof.kernels, peaks, ceiling, host_us=_by_report(prof.kernels, host),
                          resources=_by_report(prof.kernels, resources))
        console.print(kernel_table(reports, peaks))
        console.print(scope_tree(prof.tree, ns.min_share))
        if ns.json:
            from .._io import atomic_write_text
            from ..report.charts import roofline_chart, save_figure, time_breakdown_chart
            stem = os.path.splitext(ns.json)[0]
            if work:  # keep Proton's own file next to the JSON: `tritonkit profile --from` reads it again
                kept = stem + ".hatchet"
                shutil.copyfile(path, kept)
                path = kept
            charts = save_figure(roofline_chart(reports, peaks, ceiling), stem + "_roofline") + \
                save_figure(time_breakdown_chart(reports), stem + "_time")
            atomic_write_text(ns.json, json.dumps({"peaks": peaks.to_dict(), "ceiling": vars(ceiling) if ceiling
                                                   else None, "kernels": [r.to_dict() for r in reports],
                                                   "tree": prof.tree.to_dict(), "source": path, "charts": charts},
                                                  indent=1) + "\n")
            console.print("charts: " + ", ".join(charts))
        return status
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)


def _with_counters(kernels, ns, resolve_target, console):
    """Fill bytes and FLOPs of kernels without ``launch_metadata`` from an ncu run of the same
    script; on any reason ncu cannot (not installed, no permission, no GPU) say so and go on."""
    from ._counters import (CountersUnavailable, aggregate, apply_counters, kernels_needing_counters, run_ncu,
                            time_accuracy)
    if ns.from_file:
        console.print("[yellow]--counters needs the script to run again under ncu; with --from there is none: "
                      "skipped[/yellow]")
        return kernels
    need = kernels_needing_counters(kernels)
    if not need:
        return kernels
    kind, what, argv = resolve_target(ns.target)
    program = ([what] if kind == "script" else [sys.executable, "-m", what]) + list(argv[1:])
    try:
        records = run_ncu(program, need)
    except CountersUnavailable as e:
        console.print(f"[yellow]--counters: {e}[/yellow]")
        return kernels
    for name, proton_us, ncu_us, rel in time_accuracy(kernels, records):
        console.print(f"kernel time {name[:60]}: Proton {proton_us:.1f} us, ncu {ncu_us:.1f} us ({rel * 100:+.1f}%)")
    return apply_counters(kernels, aggregate(records))


def _by_report(kernels, by_function: Dict[str, object]) -> Dict[str, object]:
    """Figures by Triton function name (host us, resources) re-keyed by the profile's kernel names
    (:func:`~tritonkit.profile._proton.match_name`: ``"add_kernel n=4096"`` takes ``add_kernel``'s)."""
    from ._proton import match_name
    out = {}
    for k in kernels:
        key = match_name(k.name, by_function)
        if key is not None:
            out[k.name] = by_function[key]
    return out


def _resources_of(kernel) -> Dict[str, float]:
    """Registers, spills, shared memory (bytes), num_warps and num_stages of a compiled kernel."""
    meta = getattr(kernel, "metadata", None)
    out = {}
    for key, value in (("registers", getattr(kernel, "n_regs", None)), ("spills", getattr(kernel, "n_spills", None)),
                       ("shared", getattr(meta, "shared", None)), ("num_warps", getattr(meta, "num_warps", None)),
                       ("num_stages", getattr(meta, "num_stages", None))):
        if isinstance(value, (int, float)):
            out[key] = value
    return out


def add_calibrate_parser(sub) -> None:
    """Add the ``calibrate`` subcommand."""
    p = sub.add_parser("calibrate", help="measure this GPU's bandwidth and matmul TFLOP/s (the ceilings "
                                         "tritonkit profile compares with)",
                       description="Time a 1 GiB device-to-device copy and torch.matmul at 8192^3 in bf16, fp16, "
                                   "fp32 and tf32 with triton.testing.do_bench, show them next to the datasheet "
                                   "peaks, and keep them for tritonkit profile's % of ceiling.")
    p.add_argument("--json", metavar="FILE", help="also write the measurement as JSON")


def run_calibrate_command(ns, console=None) -> int:
    """Run ``tritonkit calibrate``; returns the exit status (2 without a GPU)."""
    from rich.console import Console

    from ._calibrate import measure, save
    from ._devices import current_peaks
    from ..report.profile import ceiling_table
    console = console or Console()
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError
    except (ImportError, RuntimeError):
        print("tritonkit calibrate: error: no CUDA GPU here: calibrate measures the GPU it runs on",
              file=sys.stderr)
        return EXIT_USAGE
    ceiling = measure()
    peaks = current_peaks()
    path = save(torch.cuda.get_device_name(), ceiling)
    console.print(ceiling_table(ceiling, peaks))
    console.print(f"kept in {path}; tritonkit profile now shows % of these ceilings")
    if ns.json:
        from .._io import atomic_write_text
        atomic_write_text(ns.json, json.dumps({"device": torch.cuda.get_device_name(), "peaks": peaks.to_dict(),
                                               "ceiling": vars(ceiling)}, indent=1) + "\n")
    return EXIT_OK


class HostTimer:
    """Host time per launch of the profiled script's Triton kernels, sampled.

    :attr:`run` is a plain function that stands in for ``JITFunction.run``: it times at most
    :data:`SAMPLES_PER_KERNEL` launches of each kernel, notes every launch for the interpreter's
    count (``capture``), keeps each kernel's compiled resources, and after :data:`MAX_TIMED`
    launches in all calls ``restore`` (which puts ``original`` back), so that nothing of tritonkit's
    is on the launch path for the rest of the script.

    Args:
        original: the ``JITFunction.run`` it wraps.
        restore: puts ``original`` back in place.
        capture: a :class:`~tritonkit.profile._interpret.LaunchCapture` (or anything with its
            ``on_launch``).
    """

    def __init__(self, original, restore: Callable[[], None], capture) -> None:
        import time
        self.samples: Dict[str, List[float]] = {}
        self.resources: Dict[str, Dict[str, float]] = {}
        self.launches = 0
        samples, resources = self.samples, self.resources

        def run(jit, *args, **kwargs):
            self.launches += 1
            if self.launches >= MAX_TIMED:
                restore()
            name = jit.fn.__name__
            if not kwargs.get("warmup"):
                capture.on_launch(jit, args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")},
                                  kwargs.get("grid"))
            seen = samples.get(name)
            if kwargs.get("warmup") or (seen is not None and len(seen) >= SAMPLES_PER_KERNEL):
                return original(jit, *args, **kwargs)
            t0 = time.perf_counter()
            kernel = None
            try:
                kernel = original(jit, *args, **kwargs)
                return kernel
            finally:
                samples.setdefault(name, []).append((time.perf_counter() - t0) * 1e6)
                if kernel is not None and name not in resources:
                    resources[name] = _resources_of(kernel)
        self.run = run

    def host_us(self) -> Dict[str, float]:
        """Kernel name -> median host time per launch, us (the first launch, which compiles, left out;
        kernels launched once have none)."""
        import statistics
        return {name: statistics.median(v[1:]) for name, v in self.samples.items() if len(v) > 1}


def child_main(argv: Optional[List[str]] = None) -> int:
    """The profiled process: Proton around the script, host time of every Triton launch."""
    import triton.profiler as proton
    from triton.runtime.jit import JITFunction

    from .._target import run_target

    argv = list(sys.argv[1:] if argv is None else argv)
    work, kind, what, rest = argv[0], argv[1], argv[2], argv[3:]
    original = JITFunction.run
    from ._interpret import LaunchCapture
    capture = LaunchCapture(launch_limit=int(float(os.environ.get("TRITONKIT_PROFILE_INTERPRET_MB", "64")) * 2**20))

    def restore() -> None:
        JITFunction.run = original
    timer = HostTimer(original, restore, capture)
    if os.environ.get("TRITONKIT_PROFILE_TUNED"):
        from ..tune import install_patch
        install_patch()
    JITFunction.run = timer.run
    proton.start(os.path.join(work, "profile"), hook="triton")
    # the profiler's own objects (tritonkit, rich, numpy, ...) go to the permanent generation: the
    # script's garbage collections then scan what the script made, as they would without tritonkit
    import gc
    gc.collect()
    gc.freeze()
    try:
        status = run_target(kind, what, rest)
    finally:
        proton.finalize()
        JITFunction.run = original
        import torch
        host = timer.host_us()
        try:
            interpreted = {name: c.to_dict() for name, c in capture.count().items()}
        except Exception as e:  # counting is a bonus: never lose the profile for it
            print(f"tritonkit profile: counting bytes and FLOPs in the interpreter failed: {e}", file=sys.stderr)
            interpreted = {}
        with open(os.path.join(work, "meta.json"), "w") as fh:
            json.dump({"host_us": host, "resources": timer.resources, "interpreted": interpreted,
                       "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None}, fh)
    return status
