"""A checked program as processes: the program itself (the *root*, which ``tritonkit check`` runs in a
child process of its own) and every Python process it starts, each checking its own launches and
writing what it finds to its journal in the run's directory (:mod:`.journal`).

* :func:`run_root` runs the program checked, journaled, with its descendants set up to be checked
  too, and writes how it ended.
* Python children: :func:`install` puts the run's directory and options in the environment and
  ``tritonkit/check/_boot`` first on ``PYTHONPATH``; its ``sitecustomize`` calls
  :func:`start_child` when the child imports Triton. ``subprocess`` children that are not Python
  get the environment without tritonkit's variables; a shell keeps them (it may start Python).
  ``TRITON_INTERPRET`` is never touched: checking does not need it.
* Forks: a process forked from a checked one (``multiprocessing`` with ``fork``) writes to a
  journal of its own from the fork on, with only what it finds itself.
* What the report is told besides the journals: each Python child a checked process starts
  through ``subprocess`` is noted in the run's directory (``c<pid>-<ns>.json``), and the start-up
  hook marks each process it reaches (``b<pid>``), so that a child it never reached (``python
  -I``) is named (:func:`unchecked_children`); checked children that outlive the program are
  found by :func:`still_running`.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import re
import shutil
import sys
import threading
from typing import Any, Dict, List, Optional

from .journal import RUN_DIR_ENV, Journal

#: the environment variable with a run's :class:`CheckOptions` (JSON), for child processes
OPTIONS_ENV = "TRITONKIT_CHECK_OPTIONS"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot")
#: the directory ``import tritonkit`` finds this tritonkit in (on children's PYTHONPATH too)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the environment variable with the values tritonkit's variables had before it set them (JSON)
BEFORE_ENV = "TRITONKIT_ENV_BEFORE"
_SET_FOR_CHILDREN = ("PYTHONPATH",)
_TRITONKIT_VARS = (RUN_DIR_ENV, OPTIONS_ENV, BEFORE_ENV) + _SET_FOR_CHILDREN
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[a-z]?$")
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish"}


@dataclasses.dataclass
class CheckOptions:
    """How a run checks (what ``tritonkit check``'s options say), for every process of the run.

    Attributes:
        checks: finding kinds to check, or None for the defaults.
        nan: add ``nan_inf`` to the defaults.
        stop_on_first, timeout, pdb, engine, batch_memory: as :func:`tritonkit.check.checking`
            takes them (``timeout`` in seconds, ``batch_memory`` in bytes; child processes never
            open pdb).
        access_maps: launches of each kernel that get access maps (0: no byte counts or maps).
        children: check the program's Python child processes too.
        outputs: ``"checked"`` or ``"gpu"``, as :func:`tritonkit.check.checking` takes it.
        stall_polls: as :func:`tritonkit.check.checking` takes it (None: its default).
        workers: processes checking an autotuned kernel's configs at once, as
            :func:`tritonkit.check.checking` takes it (None: the cores this process may use).
        gpu_above: launches on CUDA tensors of more elements than this are checked on the GPU, as
            :func:`tritonkit.check.checking` takes it (None: every launch in the interpreter).
        repro: the directory each launch with a finding gets a reproducer folder in (None: none;
            see :mod:`tritonkit.check.repro`); ``repro_self_contained``: the kernel's source is
            copied into every folder; ``repro_max_bytes``: a storage larger than this (bytes; None:
            256 MiB) is saved in part.
    """

    checks: Optional[List[str]] = None
    nan: bool = False
    stop_on_first: bool = False
    timeout: Optional[float] = None
    pdb: bool = False
    engine: str = "auto"
    batch_memory: Optional[int] = None
    access_maps: int = 0
    children: bool = True
    outputs: str = "checked"
    stall_polls: Optional[int] = None
    workers: Optional[int] = None
    gpu_above: Optional[int] = None
    repro: Optional[str] = None
    repro_self_contained: bool = False
    repro_max_bytes: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "CheckOptions":
        """The inverse of :meth:`to_dict` (unknown keys ignored).

        Raises:
            TypeError: ``d`` is not a mapping.
        """
        from .findings import read_fields
        return cls(**read_fields(cls, d))

    def check_list(self) -> Optional[list]:
        """The ``checks`` argument of :func:`~tritonkit.check.checking`: the kinds (or the defaults),
        plus an :class:`~tritonkit.check.checks.AccessMap` where ``access_maps`` asks for one."""
        if not self.access_maps:
            return None if self.checks is None else list(self.checks)
        from .checks import AccessMap, default_checks
        kinds = list(self.checks) if self.checks is not None else [c.kind for c in default_checks(nan=self.nan)]
        return [*kinds, AccessMap(maps_per_kernel=self.access_maps)]

    def kinds(self) -> List[str]:
        """The finding kinds of the checks this run makes."""
        from .checks import default_checks, make_checks
        checks = self.check_list()
        return [c.kind for c in (default_checks(nan=self.nan) if checks is None else make_checks(checks))]

    def session_kwargs(self, child: bool = False) -> Dict[str, Any]:
        """The keyword arguments of :func:`~tritonkit.check.checking` (``child``: no pdb there)."""
        return dict(checks=self.check_list(), nan=self.nan, stop_on_first=self.stop_on_first, timeout=self.timeout,
                    pdb=self.pdb and not child, engine=self.engine, batch_memory=self.batch_memory,
                    outputs=self.outputs, stall_polls=self.stall_polls, workers=self.workers,
                    gpu_above=self.gpu_above)


# ------------------------------------------------------------------------------------ the environment

_installed: Optional[Dict[str, Optional[str]]] = None  # the variables install() changed, and their old values
_popen_init = None
_fork_hook = False
#: whether a process forked from this one checks and journals on its own (False: ``--no-children``)
_forks_checked = True
_lock = threading.Lock()


def child_env(run_dir: str, options: CheckOptions, base: Optional[Dict[str, str]] = None,
              before: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, str]:
    """``base`` (default ``os.environ``) with what a Python child needs to be checked: the run's
    directory, its options, the bootstrap first on ``PYTHONPATH``, and the value ``PYTHONPATH`` had
    before tritonkit set it (``before``; default: ``base``'s own, or what ``base`` says it was), so
    that a child that is not Python gets it back."""
    env = dict(os.environ if base is None else base)
    if before is None:
        before = _before(env)
    paths = [BOOT_DIR, PACKAGE_PARENT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                          if p and p not in (BOOT_DIR, PACKAGE_PARENT)]
    env.update({RUN_DIR_ENV: run_dir, OPTIONS_ENV: json.dumps(options.to_dict()),
                "PYTHONPATH": os.pathsep.join(paths), BEFORE_ENV: json.dumps(before)})
    return env


def _before(env) -> Dict[str, Optional[str]]:
    """The values of the variables tritonkit sets for its children, as they were before it did:
    what ``env`` says they were (it is a checked process's), else ``env``'s own."""
    try:
        said = json.loads(env[BEFORE_ENV])
        if isinstance(said, dict):
            return {k: said.get(k) for k in _SET_FOR_CHILDREN}
    except (KeyError, ValueError):
        pass
    return {k: env.get(k) for k in _SET_FOR_CHILDREN}


def install(run_dir: str, options: CheckOptions, before: Optional[Dict[str, Optional[str]]] = None) -> None:
    """Set this process up so that its children are checked: the environment (:func:`child_env`;
    ``before``: ``{"PYTHONPATH": value}`` before tritonkit set it, by default the environment's now), a journal of their own for forks, and ``subprocess``
    keeping tritonkit's variables from children that are not Python. Idempotent; :func:`uninstall`
    undoes it."""
    global _installed, _popen_init
    import subprocess
    with _lock:
        if _installed is None:
            new = child_env(run_dir, options, before=before)
            _installed = {k: os.environ.get(k) for k in _TRITONKIT_VARS}
            os.environ.update({k: new[k] for k in _TRITONKIT_VARS})
        if _popen_init is None:
            _popen_init = subprocess.Popen.__init__
            subprocess.Popen.__init__ = _checked_popen_init
    watch_forks(True)


def watch_forks(checked: bool) -> None:
    """From now on, a process forked from this one while a journaled session is active checks on its
    own, with a journal of its own (``checked``), or stops journaling (its findings are not
    reported: ``--no-children``); either way it never writes into this process's journal."""
    global _fork_hook, _forks_checked
    _forks_checked = checked
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook = True


def uninstall() -> None:
    """Put back what :func:`install` changed (the fork hook stays, doing nothing)."""
    global _installed, _popen_init
    import subprocess
    with _lock:
        if _installed is not None:
            _restore(os.environ, _installed)
            _installed = None
        if _popen_init is not None:
            subprocess.Popen.__init__ = _popen_init
            _popen_init = None


def _restore(env, old: Dict[str, Optional[str]]) -> None:
    for k, v in old.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v


def is_python(program: str) -> bool:
    """Whether ``program`` (a path or a name on ``PATH``) runs Python: this interpreter, a
    ``pythonX.Y``, or a script whose first line names python."""
    path = shutil.which(program) or program
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    if real == os.path.realpath(sys.executable) or _PYTHON.match(os.path.basename(path)) \
            or _PYTHON.match(os.path.basename(real)):
        return True
    from .._io import python_shebang
    return python_shebang(real)


def _checked_popen_init(self, *args, **kw):
    """``subprocess.Popen.__init__``: a child that is not Python (nor a shell, which may start
    Python) gets the environment without tritonkit's variables; a Python child given an ``env`` of
    its own gets them added, and is noted in the run's directory (:func:`unchecked_children`)."""
    python = None
    try:
        import inspect
        bound = inspect.signature(_popen_init).bind(self, *args, **kw)
        a = bound.arguments
        python = _python_program(a["args"], a.get("executable"), a.get("shell", False))
        env = _child_env_for(a["args"], a.get("executable"), a.get("shell", False), a.get("env"))
        if env is not None:
            a["env"] = env
            args, kw = bound.args[1:], bound.kwargs
    except Exception:  # never stand in the way of the program's own process creation
        pass
    _popen_init(self, *args, **kw)
    if python is not None:
        _note_spawn(self.pid, python)


def _program(args, executable) -> str:
    if executable is not None:
        return os.fsdecode(executable)
    if isinstance(args, (str, bytes, os.PathLike)):
        return os.fsdecode(args)
    return os.fsdecode(list(args)[0])


def _python_program(args, executable, shell: bool) -> Optional[List[str]]:
    """The command line of a ``subprocess`` child that runs Python (None: not Python, or a shell)."""
    if _installed is None or shell or not is_python(_program(args, executable)):
        return None
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    return [os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else str(a) for a in args]


def _child_env_for(args, executable, shell: bool, env) -> Optional[Dict[str, str]]:
    """The environment a ``subprocess`` child should get instead of ``env`` (None: leave it). A
    Python child whose ``env`` lacks tritonkit's start-up hook on ``PYTHONPATH`` (``PYTHONPATH``
    removed, or set to the program's own) gets it back, or it would run unchecked."""
    installed = _installed
    if installed is None or shell:
        return None
    program = _program(args, executable)
    if os.path.basename(program) in _SHELLS:
        return None
    if is_python(program):
        if env is None or (RUN_DIR_ENV in env and BOOT_DIR in env.get("PYTHONPATH", "").split(os.pathsep)):
            return None
        before = _before(os.environ)
        if env.get("PYTHONPATH") != os.environ.get("PYTHONPATH"):  # the program's own choice: its for grandchildren
            before = {"PYTHONPATH": env.get("PYTHONPATH")}
        return child_env(os.environ[RUN_DIR_ENV], CheckOptions.from_dict(json.loads(os.environ[OPTIONS_ENV])),
                         base=env, before=before)
    clean = dict(os.environ if env is None else env)
    before = _before(clean)
    for key in (RUN_DIR_ENV, OPTIONS_ENV, BEFORE_ENV):
        clean.pop(key, None)
    _restore(clean, before)
    return clean


# ------------------------------------------------------------------------- processes the report waits for

#: a file the start-up hook makes in the run's directory as a Python child starts: ``b<pid>``
BOOTED_PREFIX = "b"
#: a file a checked process makes for each Python child it starts through ``subprocess``: ``c<pid>-<ns>.json``
SPAWNED_PREFIX = "c"


def _note_spawn(pid: int, argv: List[str]) -> None:
    """Note in the run's directory that this process started the Python child ``pid`` (so that one
    the start-up hook never reached is named in the report)."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    if not run_dir:
        return
    import time
    try:
        with open(os.path.join(run_dir, f"{SPAWNED_PREFIX}{pid}-{time.time_ns()}.json"), "w",
                  encoding="utf-8") as fh:
            json.dump({"pid": pid, "argv": argv, "parent": os.getpid(), "at": time.time()}, fh)
    except (OSError, ValueError):
        pass


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (not ended, not a zombie waiting to be reaped)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's: it exists
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def still_running(runs) -> list:
    """The checked child processes of ``runs`` (:class:`~.journal.ProcessRun`, e.g. a
    :class:`~.journal.RunWatcher`'s) that are still running: no ``exit`` line in their journal and
    their process alive."""
    return [r for r in runs if r.role == "child" and r.exit is None and alive(r.pid)]


def unchecked_children(run_dir: str, runs) -> List[Dict[str, Any]]:
    """The Python children started through ``subprocess`` by a checked process of the run in
    ``run_dir`` that tritonkit's start-up hook never reached (``python -I``/``-E``/``-S``, another
    interpreter, ...): ``[{"pid", "argv", "running"}]``; what they launched was not checked. A child
    that wrote a journal (``runs``) was reached, whatever the files say."""
    import glob
    journaled = {r.pid for r in runs}
    out = []
    for path in sorted(glob.glob(os.path.join(run_dir, f"{SPAWNED_PREFIX}*.json"))):
        try:
            with open(path, encoding="utf-8") as fh:
                rec = json.load(fh)
            pid = int(rec["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid in journaled or os.path.exists(os.path.join(run_dir, f"{BOOTED_PREFIX}{pid}")):
            continue
        out.append({"pid": pid, "argv": [str(a) for a in rec.get("argv") or []], "running": alive(pid)})
    return out


# ---------------------------------------------------------------------------------- checked processes

def run_root(target, options: CheckOptions, run_dir: str, prog: str = "tritonkit check") -> int:
    """Run the program ``target`` (a :class:`~tritonkit.cli._target.Target`: anything with
    ``run(prog, passthrough)``) in this process, checked, journaled in ``run_dir``, its Python child
    processes too where ``options.children`` says so; write how it ended to the journal.

    A program that ends normally (or raises, or exits non-zero) stays checked until the interpreter
    exits: launches from its ``atexit`` handlers and from its threads that run on are checked too,
    and the journal's ``exit`` line is written last. One stopped by tritonkit (Ctrl-C, a usage error,
    a launch that could not finish) ends checking at once.

    Returns:
        0 the program ended normally; 3 it raised or exited non-zero; 2 a launch could not be checked
        as given (a usage error, printed) or tritonkit failed (its traceback printed); 130 interrupted.

    Raises:
        ValueError: a bad ``TRITONKIT_DEVICE_MODEL`` (checking cannot start); what the program
        raised that is not an ``Exception`` and none of the above (a ``GeneratorExit``), after
        journaling.
    """
    from . import session as _session
    from .errors import CheckAborted, InternalError, UsageError

    journal = Journal(run_dir, "root", options.kinds(), options.engine)
    before = _before(os.environ)
    os.environ.pop(RUN_DIR_ENV, None)  # the parent's note to this process, not for its children
    if options.children:
        install(run_dir, options, before)
    else:
        watch_forks(False)
    outcome: Dict[str, Any] = {"status": 0, "failed": False, "interrupted": False, "internal": None}
    from . import repro
    repro.configure(options.repro, options.repro_self_contained, options.repro_max_bytes)
    context = _session.checking(journal=journal, **options.session_kwargs())
    pid, ended = os.getpid(), []

    def finish(*exc) -> None:
        """End checking (``exc``: what stopped the program, if anything) and journal how it ended;
        at exit, after the program's own ``atexit`` handlers (registered later: run first)."""
        if ended:
            return
        ended.append(True)
        if os.getpid() != pid:  # a fork of this process exiting normally: its own journal, no exit line
            try:
                context.__exit__(None, None, None)
            except BaseException:  # noqa: B036 - at exit, nothing to raise to
                pass
            return
        try:
            context.__exit__(*(exc or (None, None, None)))
        except CheckAborted:
            pass  # a launch of an atexit handler could not finish: its finding is journaled
        except Exception as e:  # noqa: BLE001 - tritonkit failed closing the session: said, journaled
            import traceback
            traceback.print_exc()
            outcome.update(status=2, internal=str(e))
        finally:
            if options.children:
                uninstall()
            journal.exit(outcome["status"], outcome["failed"], outcome["interrupted"], outcome["internal"])
            journal.close()

    try:
        context.__enter__()
    except BaseException:
        if options.children:
            uninstall()
        raise
    atexit.register(finish)
    try:
        status = target.run(prog, passthrough=(UsageError,))
        outcome.update(status=status, failed=status != 0)
    except BaseException as e:  # noqa: B036 - each stops checking now; the unknown ones go on up
        if isinstance(e, InternalError):
            import traceback
            traceback.print_exc()
            outcome.update(status=2, internal=str(e))
        elif isinstance(e, KeyboardInterrupt):
            outcome.update(status=130, interrupted=True)
        elif isinstance(e, UsageError):
            print(f"{prog}: error: {e}", file=sys.stderr)
            outcome.update(status=2, internal=f"usage: {e}")
        finish(type(e), e, e.__traceback__)
        if not isinstance(e, (InternalError, CheckAborted, KeyboardInterrupt, UsageError)):
            raise
    return outcome["status"]


def start_child() -> None:
    """Check this process, a child of a checked program (its environment names the run and the
    options, see :func:`install`), until it exits; its findings go to a journal of its own.

    Raises:
        OSError: the journal cannot be created; ValueError: the options cannot be read.
    """
    from .session import checking

    run_dir = os.environ[RUN_DIR_ENV]
    options = CheckOptions.from_dict(json.loads(os.environ.get(OPTIONS_ENV) or "{}"))
    journal = Journal(run_dir, "child", options.kinds(), options.engine)
    install(run_dir, options)
    from . import repro
    repro.configure(options.repro, options.repro_self_contained, options.repro_max_bytes)
    context = checking(journal=journal, **options.session_kwargs(child=True))
    session = context.__enter__()
    _quiet_stop()

    def finish() -> None:
        try:
            context.__exit__(None, None, None)
        except BaseException:  # noqa: B036 - at exit, a session that cannot close must not hide the exit
            pass
        if session.journal is not None:  # this process's own (a fork has its own since the fork)
            session.journal.exit(0, False)
    atexit.register(finish)


def _quiet_stop() -> None:
    """In a checked child process: where checking stops it (``--stop-on-first``, a launch that could not
    finish), say so in one line instead of a traceback through tritonkit's own frames (the finding is in
    the report); any other uncaught exception is shown as before."""
    from .errors import CheckAborted
    previous = sys.excepthook

    def hook(kind, value, tb):
        if isinstance(value, CheckAborted):
            print(f"tritonkit: checking stopped this process: {value} (see the report)", file=sys.stderr)
            return
        previous(kind, value, tb)
    sys.excepthook = hook


def _after_fork_in_child() -> None:
    """In a process just forked from a checked one: from now on, its own journal with only its own
    findings and launches (the parent's stay the parent's)."""
    from .findings import FindingLog
    from . import forks
    from .launch.active import active_session
    from .checks import KINDS

    if forks.IN_WORKER_FORK:  # a worker (configs or a launch share): its results go back to this process
        return

    session = active_session()
    if session is None or session.journal is None:
        return
    if not _forks_checked:
        session.journal = None
        return
    parent = os.getppid()
    run_dir = os.path.dirname(session.journal.path)
    try:
        session.journal = Journal(run_dir, "child", [c.kind for c in session.checks], session.engine,
                                  fork_of=parent)
    except OSError:
        session.journal = None
    session._log = FindingLog(KINDS)
    session.launches = []
