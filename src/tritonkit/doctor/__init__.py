"""``tritonkit doctor``: the workflow in one command: check first, then tune, then profile, and one
HTML report (see :func:`run_doctor`)."""
from ._run import STEPS, StepResult, add_doctor_parser, build_report, run_doctor, run_doctor_command

__all__ = ["STEPS", "StepResult", "add_doctor_parser", "build_report", "run_doctor", "run_doctor_command"]
