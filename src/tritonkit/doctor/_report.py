"""What ``tritonkit doctor`` found: one :class:`StepResult` per step and the :class:`DoctorReport`
that ``doctor.json`` holds and ``report.html`` shows, both through ``to_dict`` / ``from_dict``."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional

from ..check import CheckReport
from ..profile import ProfileReport
from ..tune import TuneReport


def _number(x: Any) -> Optional[float]:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _text(x: Any, default: str = "") -> str:
    return default if x is None or x == "" else str(x)


def _require_mapping(d: Any, what: str) -> Mapping:
    if not isinstance(d, Mapping):
        raise TypeError(f"{what} is a JSON object, not {type(d).__name__}")
    return d


@dataclasses.dataclass
class StepResult:
    """What one step of the doctor did.

    Attributes:
        name: ``"check"``, ``"tune"`` or ``"profile"``.
        status: ``"ran"`` (it finished; findings or a failing script are its results, not its
            status), ``"skipped"`` (not run: ``why`` says why) or ``"failed"`` (it ran but wrote no
            results: ``why`` has the exit status).
        why: the reason for ``skipped``/``failed``; "" when it ran.
        json: the path of the JSON it wrote, or None.
        seconds: wall time of the step, s.
        exit_code: the step's command's exit status (None when skipped).
        command: the command line it ran ("" when skipped).
    """

    name: str
    status: str
    why: str = ""
    json: Optional[str] = None
    seconds: float = 0.0
    exit_code: Optional[int] = None
    command: str = ""

    def to_dict(self) -> dict:
        """Plain JSON data (the attributes above)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StepResult":
        """The inverse of :meth:`to_dict`; missing or malformed fields take their defaults (name and
        status ``"?"``), unknown keys are ignored.

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = _require_mapping(d, "a doctor step")
        code = _number(d.get("exit_code"))
        return cls(_text(d.get("name"), "?"), _text(d.get("status"), "?"), _text(d.get("why")),
                   None if d.get("json") in (None, "") else str(d["json"]), _number(d.get("seconds")) or 0.0,
                   None if code is None else int(code), _text(d.get("command")))


@dataclasses.dataclass
class DoctorReport:
    """One ``tritonkit doctor`` run: the facts of the run, what each step did and each step's results.

    Attributes:
        command: the script and its arguments, as one shell line.
        created: when the report was made (ISO 8601, local time).
        versions: package -> version (tritonkit, triton, python, torch).
        device: the GPU's name, or None without one.
        steps: what each step did, in order (:class:`StepResult`).
        check: what ``tritonkit check --json`` wrote (:class:`~tritonkit.check.CheckReport`: findings,
            kernels, launch records with their access maps, summary, versions, script), or None.
        tune: what ``tritonkit tune --json`` wrote (:class:`~tritonkit.tune.TuneReport`), or None.
        profile: what ``tritonkit profile --json`` wrote (:class:`~tritonkit.profile.ProfileReport`),
            or None.
    """

    command: str = ""
    created: str = ""
    versions: Dict[str, str] = dataclasses.field(default_factory=dict)
    device: Optional[str] = None
    steps: List[StepResult] = dataclasses.field(default_factory=list)
    check: Optional[CheckReport] = None
    tune: Optional[TuneReport] = None
    profile: Optional[ProfileReport] = None

    def to_dict(self) -> dict:
        """Plain JSON data (``doctor.json``): ``{"command", "created", "versions", "device", "steps",
        "check", "tune", "profile"}``, each step's results through its own ``to_dict`` (None where
        missing)."""
        return {"command": self.command, "created": self.created, "versions": dict(self.versions),
                "device": self.device, "steps": [s.to_dict() for s in self.steps],
                "check": self.check.to_dict() if self.check is not None else None,
                "tune": self.tune.to_dict() if self.tune is not None else None,
                "profile": self.profile.to_dict() if self.profile is not None else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DoctorReport":
        """The inverse of :meth:`to_dict`, tolerant: a part that is missing or not an object is None
        (its step then says why), steps that are not objects are left out, versions that are None
        are dropped, and each part reads its own malformed fields with defaults
        (:meth:`CheckReport.from_dict <tritonkit.check.CheckReport.from_dict>`,
        :meth:`TuneReport.from_dict <tritonkit.tune.TuneReport.from_dict>`,
        :meth:`ProfileReport.from_dict <tritonkit.profile.ProfileReport.from_dict>`).

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        d = _require_mapping(d, "a doctor report")
        versions = d.get("versions") if isinstance(d.get("versions"), Mapping) else {}
        steps = d.get("steps") if isinstance(d.get("steps"), list) else []
        return cls(command=_text(d.get("command")), created=_text(d.get("created")),
                   versions={str(k): str(v) for k, v in versions.items() if v is not None},
                   device=None if d.get("device") in (None, "") else str(d["device"]),
                   steps=[StepResult.from_dict(s) for s in steps if isinstance(s, Mapping)],
                   **read_parts(d))


def read_parts(parts: Mapping[str, Any]) -> Dict[str, Any]:
    """``{"check", "tune", "profile"}``: each step's results read from its JSON data in ``parts``
    through its ``from_dict``; None where a part is missing, not an object, or cannot be read at all."""
    return {name: _read(cls.from_dict, parts.get(name))
            for name, cls in (("check", CheckReport), ("tune", TuneReport), ("profile", ProfileReport))}


def _read(from_dict, value: Any):
    if not isinstance(value, Mapping):
        return None
    try:
        return from_dict(dict(value))
    except (TypeError, ValueError):
        return None
