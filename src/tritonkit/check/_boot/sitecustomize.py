"""Started by Python at start-up in every child process of a program that ``tritonkit check`` (or
``pytest --tritonkit``) checks, through ``PYTHONPATH``. It runs the ``sitecustomize`` it stands in
front of, if any; then, the moment the process imports ``triton``, it starts checking there
(:func:`tritonkit.check.process.start_child`). A child that never imports Triton pays nothing; one
where tritonkit cannot be imported is warned about and runs unchecked."""
import os
import sys


def _run_the_next_sitecustomize() -> None:
    """Run the ``sitecustomize.py`` that the same name on ``sys.path`` after this one would have been."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == here:
            continue
        path = os.path.join(entry or os.curdir, "sitecustomize.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_sitecustomize_behind_tritonkit", path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as e:  # as Python's site module does: warn, go on
                sys.stderr.write(f"Error in sitecustomize ({path}); set PYTHONVERBOSE for traceback:\n"
                                 f"{type(e).__name__}: {e}\n")
            return


def _start_checking() -> None:
    try:
        from tritonkit.check.process import start_child
    except Exception as e:
        sys.stderr.write(f"tritonkit: warning: {sys.executable} (pid {os.getpid()}) cannot import tritonkit "
                         f"({type(e).__name__}: {e}): this child process runs unchecked\n")
        return
    try:
        start_child()
    except Exception as e:
        sys.stderr.write(f"tritonkit: warning: checking could not start in pid {os.getpid()} "
                         f"({type(e).__name__}: {e}): this child process runs unchecked\n")


class _WhenTritonIsImported:
    """A meta-path finder that lets ``triton`` import as usual, then starts checking."""

    def find_spec(self, name, path=None, target=None):
        if name != "triton":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_check(module):
            exec_module(module)
            sys.modules[name] = module
            _start_checking()
        try:
            loader.exec_module = exec_then_check
        except (AttributeError, TypeError):
            return spec
        return spec


def _booted() -> None:
    """Say in the run's directory that this process was reached (``b<pid>``: a Python child the
    run saw started without it ran unchecked, and the report names it)."""
    try:
        os.close(os.open(os.path.join(os.environ["TRITONKIT_RUN_DIR"], f"b{os.getpid()}"),
                         os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o644))
    except (OSError, ValueError):
        pass


if os.environ.get("TRITONKIT_RUN_DIR"):
    _booted()
    _run_the_next_sitecustomize()
    if "triton" in sys.modules:
        _start_checking()
    else:
        sys.meta_path.insert(0, _WhenTritonIsImported())
else:
    _run_the_next_sitecustomize()
