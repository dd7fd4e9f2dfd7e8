"""``tritonkit doctor``: the workflow in one command: check first, then tune, then profile, and one
HTML report (see :func:`run_doctor` and :func:`build_report`; the command is :mod:`tritonkit.cli.doctor`).

:class:`DoctorReport` (``doctor.json``) and :class:`StepResult` round-trip through ``to_dict`` /
``from_dict``; :func:`tritonkit.report.html.render_report` draws a DoctorReport as the page."""
from ._report import DoctorReport, StepResult
from ._run import STEPS, build_report, gpu_present, run_doctor

__all__ = ["STEPS", "DoctorReport", "StepResult", "build_report", "gpu_present", "run_doctor"]
