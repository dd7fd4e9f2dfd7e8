"""Nothing the user owns is touched, and no finding is lost on the way out (issue 45): a folder that
is not a tuning cache, an empty kernel name, an output path that is a device, a FIFO, a symlink or
a Python source file, an output path that cannot be written, a reader that closes stdout early."""
import json
import os
import stat
import subprocess
import sys

import pytest

from tritonkit._io import output_target
from tritonkit.cli import main

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

OVERRUN = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


k[(1,)](torch.zeros(8), BLOCK=16)
'''


def tree(top) -> dict:
    """Every entry under ``top``: its bytes (a file) or None (anything else), by relative path."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, top)] = open(p, "rb").read() if os.path.isfile(p) else None
    return out


@pytest.fixture
def project(tmp_path):
    """A project folder: what a mistyped TRITONKIT_CACHE_DIR or ``--dir`` points at."""
    d = tmp_path / "project"
    d.mkdir()
    (d / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    (d / "config.json").write_text("{ not json, the user's own format }\n")
    (d / "matmul-0123456789ab.json").write_text("{truncated")  # even one named like a cache file
    (d / "README.md").write_text("# app\n")
    return d


@pytest.fixture
def cache_dir(tmp_path):
    from tritonkit.tune import Trial, TuneCache
    from tritonkit.tune._cache import KernelId
    d = tmp_path / "cache"
    for name in ("alpha", "beta"):
        TuneCache(d).record(KernelId(name, "h" + name, "3.9", "cpu"), ["n=1"], Trial(point={"B": 16}, ms=1.0))
    return d


# --------------------------------------------------------------------- a folder that is not a cache


@pytest.mark.parametrize("argv", [["clear"], ["clear", "matmul"], ["clear", "--failures"], ["list"],
                                  ["show", "matmul"]])
@pytest.mark.parametrize("how", ["--dir", "env"])
def test_a_folder_that_is_not_a_cache_is_refused_and_left_as_it_was(project, argv, how, capsys, monkeypatch):
    before = tree(project)
    if how == "env":
        monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(project))
        status = main(["cache", *argv])
    else:
        status = main(["cache", *argv, "--dir", str(project)])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{project} is not a tritonkit tuning cache" in err and "TRITONKIT_CACHE_DIR" in err
    assert tree(project) == before  # nothing renamed, removed or locked


def test_the_tuner_refuses_a_folder_that_is_not_a_cache(project):
    """The autotuner's reads (crash recovery, lookups that move a corrupt entry aside) and writes
    never touch a folder that is not a cache: the error says how to choose another."""
    from tritonkit.tune import Trial, TuneCache
    from tritonkit.tune._cache import KernelId, TuneCacheError
    before = tree(project)
    cache = TuneCache(project)
    with pytest.raises(TuneCacheError, match="not a tritonkit tuning cache.*TRITONKIT_CACHE_DIR"):
        cache.recover()
    with pytest.raises(TuneCacheError, match="not a tritonkit tuning cache"):
        cache.record(KernelId("k", "h", "3.9", "cpu"), ["1"], Trial(point={"B": 1}, ms=1.0))
    # a corrupt file at an entry's own name in a folder that is not a cache: not moved aside
    with pytest.raises(TuneCacheError, match="left as it is"):
        cache._disk.read(str(project / "matmul-0123456789ab.json"))
    assert tree(project) == before


@pytest.mark.parametrize("how", ["--cache-dir", "env"])
def test_tune_and_distill_refuse_a_folder_that_is_not_a_cache_before_running(project, tmp_path, capfd, how,
                                                                             monkeypatch):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    before = tree(project)
    given = ["--cache-dir", str(project)] if how == "--cache-dir" else []
    if how == "env":
        monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(project))
    monkeypatch.setenv("TRITONKIT_TUNE_ON_CPU", "1")
    assert main(["tune", *given, "--", "python", str(script)]) == 2
    assert main(["distill", "matmul", *given, "--out", str(tmp_path / "h.py")]) == 2
    captured = capfd.readouterr()
    assert captured.err.count("is not a tritonkit tuning cache") == 2 and "ran" not in captured.out
    assert tree(project) == before


def test_user_files_inside_a_cache_are_never_moved_or_removed(cache_dir, capsys):
    (cache_dir / "package.json").write_text('{"name": "app"}\n')
    (cache_dir / "config.json").write_text("{ the user's own format }\n")
    assert main(["cache", "clear", "--dir", str(cache_dir)]) == 0
    out = capsys.readouterr().out
    assert "removed 2 cached config(s)" in out
    assert "left alone: package.json" in out and "left alone: config.json" in out
    assert sorted(n for n in os.listdir(cache_dir) if not n.endswith(".lock")) == ["CACHEDIR.TAG", "config.json",
                                                                                  "package.json"]
    assert not os.path.exists(cache_dir / "package.json.lock")  # not even locked
    assert (cache_dir / "package.json").read_text() == '{"name": "app"}\n'
    assert (cache_dir / "config.json").read_text() == "{ the user's own format }\n"


# --------------------------------------------------------------------------- an empty kernel name


@pytest.mark.parametrize("action", ["clear", "show"])
@pytest.mark.parametrize("name", ["", "  ", "\t"])
def test_an_empty_kernel_name_is_refused_not_taken_for_every_kernel(cache_dir, capsys, action, name):
    before = tree(cache_dir)
    assert main(["cache", action, name, "--dir", str(cache_dir)]) == 2
    assert "is empty: give a kernel name" in capsys.readouterr().err
    assert tree(cache_dir) == before


def test_the_cache_api_and_distill_refuse_an_empty_kernel_name(cache_dir, tmp_path, capsys, monkeypatch):
    from tritonkit.tune import TuneCache
    cache = TuneCache(cache_dir)
    for name in ("", " "):
        with pytest.raises(ValueError, match="cannot be empty"):
            cache.clear(name)
        with pytest.raises(ValueError, match="cannot be empty"):
            cache.show(name)
    assert len(list(cache.entries())) == 2
    monkeypatch.chdir(tmp_path)
    assert main(["distill", "", "--cache-dir", str(cache_dir)]) == 2
    assert "is empty" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "_heuristics.py")


# ------------------------------------------------------------- output paths that are Python source


@pytest.fixture
def package(tmp_path, monkeypatch):
    """``pkg`` (run as ``python -m pkg``), a module it imports and a stub, in the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text("import helper\nprint('ran')\n")
    (tmp_path / "pkg" / "tool.py").write_text("print('ran')\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "helper.pyi").write_text("X: int\n")
    (tmp_path / "runme").write_text("#!/usr/bin/env python3\nprint('ran')\n")
    return tmp_path


@pytest.mark.parametrize("path,module,why", [
    ("pkg/__main__.py", "pkg", "a file of the module pkg"),
    ("pkg/__init__.py", "pkg", "a file of the module pkg"),
    ("pkg/tool.py", "pkg.tool", "a file of the module pkg.tool"),
    ("helper.py", "pkg", "an existing Python source file"),
    ("helper.pyi", "pkg", "an existing Python source file"),
    ("runme", "pkg", "an existing Python source file"),
])
def test_an_output_path_that_is_python_source_is_refused_before_anything_runs(package, capfd, path, module, why):
    before = tree(package)
    assert main(["check", "--json", path, "--", "python", "-m", module]) == 2
    captured = capfd.readouterr()
    assert why in captured.err and "writing it would overwrite it" in captured.err
    assert "ran" not in captured.out
    assert tree(package) == before


def test_the_module_files_are_found_without_importing_the_module(package):
    from tritonkit.cli._target import module_files
    (package / "pkg" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    files = [os.path.relpath(f, package) for f in module_files("pkg")]
    assert files == ["pkg/__init__.py", "pkg/__main__.py"]
    assert [os.path.relpath(f, package) for f in module_files("pkg.tool")] == ["pkg/__init__.py", "pkg/tool.py"]
    assert module_files("no_such_module_here") == []
    assert "pkg" not in sys.modules


# ------------------------------------------------------------------ output paths that cannot be written


@pytest.fixture
def unwritable_dir(tmp_path):
    """A directory no file can be made in, even by root (where permissions are not enforced)."""
    if not ROOT:
        d = tmp_path / "ro"
        d.mkdir()
        os.chmod(d, 0o555)
        yield str(d)
        os.chmod(d, 0o755)
        return
    if not os.path.isdir("/proc/self"):
        pytest.skip("root without /proc: no directory here refuses new files")
    yield "/proc"


@pytest.mark.parametrize("command", ["check", "profile", "tune"])
def test_an_output_that_cannot_be_written_is_refused_before_the_script_runs(tmp_path, capfd, command,
                                                                             unwritable_dir):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    out = os.path.join(unwritable_dir, "findings.json")
    assert main([command, "--json", out, "--", "python", str(script)]) == 2
    captured = capfd.readouterr()
    assert f"cannot write --json {out}: cannot write in its directory" in captured.err
    assert "ran" not in captured.out and not os.path.exists(out)
    missing = tmp_path / "nope" / "f.json"
    assert main([command, "--json", str(missing), "--", "python", str(script)]) == 2
    assert f"no directory {tmp_path / 'nope'}" in capfd.readouterr().err


# --------------------------------------------------------------- devices, FIFOs and symlinks as --json


def test_json_to_dev_null_writes_through_it(tmp_path, capfd, monkeypatch):
    """``--json /dev/null``: written through, never replaced (as root a rename would destroy it). The
    command runs only where the writer says it writes /dev/null in place, and every rename onto
    /dev/null fails the test instead of happening, so a broken writer fails here without touching
    /dev/null."""
    assert output_target("/dev/null") == ("/dev/null", True)
    real_replace, real_rename = os.replace, os.rename

    def never_onto_dev_null(real):
        def guarded(src, dst, *a, **k):
            assert os.path.realpath(dst) != "/dev/null", "a rename onto /dev/null"
            return real(src, dst, *a, **k)
        return guarded

    monkeypatch.setattr(os, "replace", never_onto_dev_null(real_replace))  # the safety net if the writer breaks
    monkeypatch.setattr(os, "rename", never_onto_dev_null(real_rename))
    before = os.stat("/dev/null")
    script = tmp_path / "s.py"
    script.write_text(OVERRUN)
    assert main(["check", "--json", "/dev/null", "--", "python", str(script)]) == 1
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev, after.st_mode) == \
        (before.st_ino, before.st_rdev, before.st_mode)
    assert "out_of_bounds" in capfd.readouterr().out


def test_json_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path, capfd):
    script = tmp_path / "s.py"
    script.write_text(OVERRUN)
    (tmp_path / "reports").mkdir()
    real = tmp_path / "reports" / "latest.json"
    real.write_text("old")
    link = tmp_path / "findings.json"
    link.symlink_to(os.path.join("reports", "latest.json"))
    assert main(["check", "--json", str(link), "--", "python", str(script)]) == 1
    assert link.is_symlink() and os.readlink(link) == os.path.join("reports", "latest.json")
    assert json.loads(real.read_text())["findings"][0]["kind"] == "out_of_bounds"


# ----------------------------------------------------------------- a reader that closes stdout early


def test_a_closed_stdout_loses_no_finding_and_prints_no_traceback(tmp_path, capfd, monkeypatch):
    """``tritonkit check --json F -- python s.py | head -1``: F is written before the report is
    printed, the report stops quietly where the reader went, and the status is the findings'."""
    script = tmp_path / "s.py"
    script.write_text(OVERRUN)
    out = tmp_path / "f.json"
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is printed
    closed = open(w, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        status = main(["check", "--json", str(out), "--", "python", str(script)])
    finally:
        monkeypatch.undo()
        closed.close()  # its fd now points at os.devnull: closing flushes nothing into a broken pipe
    assert status == 1
    assert json.loads(out.read_text())["findings"][0]["kind"] == "out_of_bounds"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_head_of_the_report_in_a_shell_pipe(tmp_path):
    """The same in a real process: no "Exception ignored ... BrokenPipeError" at exit either."""
    script = tmp_path / "s.py"
    script.write_text(OVERRUN)
    out = tmp_path / "f.json"
    proc = subprocess.Popen([sys.executable, "-m", "tritonkit", "check", "--json", str(out), "--", "python",
                             str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(240) == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err
    assert json.loads(out.read_text())["findings"][0]["kind"] == "out_of_bounds"


@pytest.mark.parametrize("argv", [["cache", "clear", "--dir", ""], ["cache", "list", "--dir", " "],
                                  ["distill", "k", "--cache-dir", ""], ["tune", "--cache-dir", "", "--", "x.py"]])
def test_an_empty_cache_directory_is_refused_not_taken_for_the_default(argv, cache_dir, capsys, monkeypatch):
    """``--dir "$DIR"`` with DIR unset would clear the default cache (or use the working directory)."""
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(cache_dir))
    before = tree(cache_dir)
    assert main(argv) == 2
    assert "is empty: give the cache directory" in capsys.readouterr().err
    assert tree(cache_dir) == before
    from tritonkit.tune import TuneCache
    with pytest.raises(ValueError, match="cache directory is empty"):
        TuneCache("")
