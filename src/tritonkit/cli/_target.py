"""The user's program, as every command takes it after ``--``: ``python SCRIPT.py ARGS`` or
``python -m MODULE ARGS`` (``python`` may be left out), run in this process as ``__main__`` or
handed to a child process."""
from __future__ import annotations

import dataclasses
import os
import re
import runpy
import shutil
import sys
import traceback
from typing import List, Optional, Sequence, Tuple, Type

from . import _status
from ._status import BadUsage

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_TRITONKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Target:
    """A script or module to run, with its arguments.

    Attributes:
        kind: ``"script"`` (``name`` is a path) or ``"module"`` (``name`` is a module name).
        name: the script's path or the module's name.
        args: the arguments after it.
    """

    kind: str
    name: str
    args: Tuple[str, ...] = ()

    @property
    def argv(self) -> List[str]:
        """``sys.argv`` as the program sees it: ``[name, *args]``."""
        return [self.name, *self.args]

    @classmethod
    def parse(cls, words: Sequence[str]) -> "Target":
        """The target in ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` / ``SCRIPT ARGS``.

        A script must exist and be Python source (it is compiled once here to say so now, before
        anything runs).

        Raises:
            BadUsage: nothing to run, an unsupported ``python`` option, a missing script, a
                directory, a binary file or a file with a syntax error.
        """
        words = list(words)
        if words and words[0] == "--":
            words = words[1:]
        if words and (_PYTHON.match(os.path.basename(words[0])) or words[0] == sys.executable):
            _other_python(words[0])
            words = words[1:]
        if not words:
            raise BadUsage("nothing to run: give a script, e.g. `tritonkit check -- python my_kernel.py`")
        if words[0] == "-m":
            if len(words) < 2:
                raise BadUsage("`-m` needs a module name")
            return cls("module", words[1], tuple(words[2:]))
        if words[0].startswith("-"):
            raise BadUsage(f"unsupported python option {words[0]!r}: give a script path or -m MODULE")
        script = words[0]
        if not os.path.exists(script):
            if shutil.which(script) and not script.endswith(".py"):
                raise BadUsage(f"{script} is a program, not a Python script: tritonkit runs a Python script or module "
                               f"(`-- python SCRIPT.py ARGS` or `-- python -m MODULE ARGS`); for the Python processes a "
                               f"shell script starts, run their Python command under tritonkit instead")
            raise BadUsage(f"no such script: {script}")
        if os.path.isdir(script):
            raise BadUsage(f"{script} is a directory: give a Python script (or -m MODULE)")
        with open(script, "rb") as fh:
            raw = fh.read()
        if not os.path.isfile(script):
            # a pipe (`/dev/stdin`, `<(...)`) or a FIFO can be read once: run what was read now
            script = _saved_copy(script, raw)
        if b"\x00" in raw:
            raise BadUsage(f"{script} is not a Python script (it is a binary file)")
        try:
            compile(raw, script, "exec")
        except SyntaxError as e:
            raise BadUsage(f"{script} is not a Python script: SyntaxError at line {e.lineno}: {e.msg}") from None
        except ValueError as e:
            raise BadUsage(f"{script} is not a Python script: {e}") from None
        return cls("script", script, tuple(words[1:]))

    def words(self) -> List[str]:
        """The target as arguments of a child process: ``[kind, name, *args]`` (see :meth:`from_words`)."""
        return [self.kind, self.name, *self.args]

    @classmethod
    def from_words(cls, words: Sequence[str]) -> "Target":
        """The inverse of :meth:`words` (no checks: the parent checked)."""
        return cls(words[0], words[1], tuple(words[2:]))

    def program(self) -> List[str]:
        """A command line that runs the target on its own (a script as given, a module through this
        Python), for tools that launch it themselves (Nsight Compute)."""
        head = [self.name] if self.kind == "script" else [sys.executable, "-m", self.name]
        return head + list(self.args)

    def run(self, prog: str, passthrough: Tuple[Type[BaseException], ...] = ()) -> int:
        """Run the target as ``__main__`` in this process, with ``sys.argv`` set to :attr:`argv` and
        its directory (a module: the working directory) first on ``sys.path``; both are restored.

        Args:
            prog: the command's name for messages, e.g. ``"tritonkit check"``.
            passthrough: exceptions to re-raise instead of reporting them as the script's failure.

        Returns:
            :data:`~tritonkit.cli._status.OK` when it ends normally or with ``sys.exit(0)``;
            :data:`~tritonkit.cli._status.SCRIPT_FAILED` when it raises (its traceback is printed,
            without runpy's and tritonkit's frames) or exits with another status (said on stderr).

        Raises:
            what is in ``passthrough``, and every ``BaseException`` that is not an ``Exception`` or
            ``SystemExit`` (``KeyboardInterrupt``; tritonkit's own ``CheckAborted``).
        """
        old_argv, old_path = sys.argv, list(sys.path)
        sys.argv = self.argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(self.name)) if self.kind == "script" else os.getcwd())
        try:
            if self.kind == "script":
                runpy.run_path(self.name, run_name="__main__")
            else:
                runpy.run_module(self.name, run_name="__main__", alter_sys=True)
        except SystemExit as e:
            if e.code in (None, 0):
                return _status.OK
            if isinstance(e.code, int):
                print(f"{prog}: the script exited with status {e.code}", file=sys.stderr)
            else:  # sys.exit("message"): Python prints the message and exits with status 1
                print(e.code, file=sys.stderr)
                print(f"{prog}: the script exited with status 1 (sys.exit with a message)", file=sys.stderr)
            return _status.SCRIPT_FAILED
        except passthrough:
            raise
        except Exception as e:
            print_script_traceback(e)
            return _status.SCRIPT_FAILED
        finally:
            sys.argv = old_argv
            sys.path[:] = old_path
        return _status.OK


def _other_python(word: str) -> None:
    """Say on stderr, where the command names a Python interpreter by path that is not the one
    tritonkit runs in (``-- /usr/bin/python3 x.py``), that the script runs in tritonkit's: the
    checked program must import the tritonkit (and Triton, torch) of this interpreter."""
    if os.sep not in word:  # `python`, `python3`: whichever comes first on PATH, as usual
        return
    if os.path.abspath(word) == os.path.abspath(sys.executable) or \
            os.path.realpath(word) == os.path.realpath(sys.executable) and sys.prefix == sys.base_prefix:
        return
    print(f"tritonkit: the script runs in the Python tritonkit is installed in ({sys.executable}), not {word}: "
          f"to check it with that interpreter's packages, install tritonkit there and run `{word} -m tritonkit ...`",
          file=sys.stderr)


def print_script_traceback(exc: BaseException) -> None:
    """Print ``exc``'s traceback to stderr without runpy's and tritonkit's own frames (runpy's are
    ``<frozen runpy>`` where the standard library is frozen, Python >= 3.11)."""
    te = traceback.TracebackException.from_exception(exc)
    runpy_files = {os.path.abspath(runpy.__file__), "<frozen runpy>"}
    te.stack = traceback.StackSummary.from_list(
        [fs for fs in te.stack if not os.path.abspath(fs.filename).startswith(_TRITONKIT_DIR + os.sep)
         and os.path.abspath(fs.filename) not in runpy_files and fs.filename not in runpy_files])
    sys.stderr.write("".join(te.format()))


def _saved_copy(name: str, raw: bytes) -> str:
    """The source read from ``name`` (a pipe or FIFO, readable only once), saved in a file of its
    own that lives until this process exits; its path."""
    import atexit
    import shutil
    import tempfile
    directory = tempfile.mkdtemp(prefix="tritonkit-script-")
    atexit.register(shutil.rmtree, directory, True)
    base = re.sub(r"[^\w.-]", "_", os.path.basename(name)) or "script"
    path = os.path.join(directory, base if base.endswith(".py") else base + ".py")
    with open(path, "wb") as fh:
        fh.write(raw)
    return path


def writable_path(path: str, option: str, target: Optional["Target"] = None, inputs: Sequence[str] = (),
                  source_ok: bool = False) -> None:
    """Raise :class:`BadUsage` unless ``path`` can be written at the end of the run without harm,
    said now, before anything runs, not after it.

    Refused: a missing directory; a directory; a path that cannot be written now (tried with
    :func:`tritonkit._io.output_problem`: an unwritable directory, a read-only file, a socket); an
    existing Python source file (``*.py``/``*.pyi``, a ``python`` shebang: a module the script
    imports), unless ``source_ok`` (an output that is Python source itself); and any file the run
    reads: ``inputs``, ``target``'s script, the files of its ``-m`` module (found without
    importing it) and every argument of it that names an existing file (``--json victim.py --
    python victim.py`` would overwrite the script). A device, a FIFO or a symlink is allowed: it is
    written through, never replaced (:func:`tritonkit._io.atomic_write`).

    Raises:
        BadUsage: for each of the above, saying what to do.
    """
    from .._io import output_problem, python_source
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise BadUsage(f"cannot write {option} {path}: no directory {directory}; create it first")
    if os.path.isdir(path):
        raise BadUsage(f"cannot write {option} {path}: it is a directory; give a file name")
    if os.path.exists(path):
        named = [(n, "an input of the run") for n in inputs]
        if target is not None and target.kind == "script":
            named.append((target.name, "the script"))
        elif target is not None:
            named += [(f, f"a file of the module {target.name}") for f in module_files(target.name)]
        named += [(n, "an input of the run") for n in (target.args if target is not None else ())]
        for name, what in named:
            try:
                same = os.path.isfile(name) and os.path.samefile(name, path)
            except OSError:
                same = False
            if same:
                raise BadUsage(f"{option} {path} is {what} ({name}): writing it would overwrite it; give another "
                               f"path")
        if not source_ok and python_source(path):
            raise BadUsage(f"{option} {path} is an existing Python source file: writing it would overwrite it; give "
                           f"another path (a name ending .json)")
    problem = output_problem(path)
    if problem is not None:
        raise BadUsage(f"cannot write {option} {path}: {problem}; give another path")


def module_files(name: str) -> List[str]:
    """The files ``python -m name`` runs from the working directory: each package's ``__init__``
    on the way, the module's own file, and a package's ``__main__``; found the way the import
    system finds them, without importing (running) anything. Empty where it is not found; nothing
    is raised (a search path that cannot be read is skipped)."""
    from importlib.machinery import PathFinder
    search: Optional[List[str]] = [os.getcwd(), *sys.path]
    parts = name.split(".")
    files: List[str] = []
    for i in range(len(parts)):
        try:
            spec = PathFinder.find_spec(".".join(parts[:i + 1]), search)
        except (ImportError, ValueError, OSError):
            spec = None
        if spec is None:
            return files
        if spec.origin and os.path.isfile(spec.origin):
            files.append(spec.origin)
        search = list(spec.submodule_search_locations or [])
        if not search:
            return files
    try:
        main = PathFinder.find_spec(name + ".__main__", search)
    except (ImportError, ValueError, OSError):
        main = None
    if main is not None and main.origin and os.path.isfile(main.origin):
        files.append(main.origin)
    return files
