"""``tritonkit doctor``: the workflow in one command: check first, then tune, then profile, and one
HTML report (see :func:`run_doctor` and :func:`build_report`; the command is :mod:`tritonkit.cli.doctor`)."""
from ._run import STEPS, StepResult, build_report, gpu_present, run_doctor

__all__ = ["STEPS", "StepResult", "build_report", "gpu_present", "run_doctor"]
