"""Corrupt and hostile tuning-cache directories against ``tritonkit cache list|show|clear``.

Each case plants one bad thing in (or as) a cache directory that also holds two good kernel files
(``alpha`` and ``beta``): broken or mistyped JSON, a file that is not a file (a directory, a FIFO),
symlinks out of the cache, a symlinked lock, names with control characters or undecodable bytes,
strings in a valid document that are terminal commands. Every case runs against every command, in
process, with stdout and stderr strict UTF-8 streams (a lone surrogate written raw fails there, as
it does on a real UTF-8 terminal) and warnings shown the way the command line shows them.

For every (case, command): the exit status is the documented one (``_status.OK``, ``NOT_FOUND``
or ``USAGE``), there is no traceback and no "internal error", the bad file is named (escaped as
:func:`tritonkit.report.terminal.safe` documents it) where there is one, and the output holds no
raw control character but newline and tab. ``list`` and ``show`` leave the cache byte for byte
as it was (names, types, sizes, contents, mtimes, symlink targets, the directory's own mtime: no
lock or temporary file made even for a moment); no command touches a file outside the cache
(symlink targets), ``clear`` included, and ``clear`` never destroys the bytes of a corrupt file
(it moves it aside) nor leaves a good file behind.
"""
from __future__ import annotations

import io
import json
import os
import stat
import sys
import warnings
from dataclasses import dataclass
from typing import Optional

import pytest

from tritonkit.cli import _status, main

from _text import escaped, raw_controls, squash  # this folder is on sys.path (pytest prepends it)

COMMANDS = ("list", "show", "clear")
GOOD = ("alpha", "beta")
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# ------------------------------------------------------------------------------------ helpers


def snapshot(top) -> dict:
    """Everything about the tree at ``top`` (not following symlinks): per entry (bytes of its path)
    its type, mode, size, mtime, and the content of a file or the target of a link."""
    top = os.fsencode(str(top))
    out = {}

    def one(path, rel):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            out[rel] = None
            return
        item = {"mode": st.st_mode, "size": st.st_size, "mtime": st.st_mtime_ns, "ino": st.st_ino}
        if stat.S_ISLNK(st.st_mode):
            item["target"] = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            try:
                with open(path, "rb") as f:
                    item["bytes"] = f.read()
            except PermissionError:
                item["bytes"] = "unreadable"
        out[rel] = item
        if stat.S_ISDIR(st.st_mode):
            try:
                names = os.listdir(path)
            except PermissionError:
                return
            for n in names:
                one(os.path.join(path, n), os.path.join(rel, n))

    one(top, b".")
    return out


def run_cli(argv, monkeypatch):
    """``main(argv)`` with strict UTF-8 stdout/stderr and warnings shown as the command line shows
    them (to stderr); returns (status, stdout, stderr)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="")

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with monkeypatch.context() as m, warnings.catch_warnings():
        m.setattr(sys, "stdout", out)
        m.setattr(sys, "stderr", err)
        warnings.simplefilter("default")
        warnings.showwarning = show
        status = main(argv)
        out.flush()
        err.flush()
    # strict decoding: what was written is valid UTF-8 (no surrogate slipped through errors=...)
    return status, out.buffer.getvalue().decode("utf-8"), err.buffer.getvalue().decode("utf-8")


def good_doc(kernel: str, **trial_changes) -> dict:
    """A valid cache document as tritonkit writes it: one key, an ok and a failed config."""
    ok = {"point": {"BLOCK": 16}, "status": "ok", "ms": 1.0, "ci_ms": None, "samples": 5, "error": "",
          "sm_clock_mhz": None, "mem_clock_mhz": None, "compile_s": None, "source": "gpu", "recorded": 1.0}
    bad = dict(ok, point={"BLOCK": 32}, status="failed", ms=None, error="out of resources")
    ok.update(trial_changes)
    return {"format": 1, "units": "ms", "tritonkit": "0.1.0", "kernel": kernel, "source_hash": "h" + kernel,
            "triton": "3.9", "device": "cpu", "created": 1.0, "updated": 1.0,
            "entries": {'["n=1"]': {"BLOCK=16": ok, "BLOCK=32": bad}}, "winners": {}, "in_flight": {}}


def write(path, data) -> bytes:
    raw = data if isinstance(data, bytes) else (data if isinstance(data, str) else json.dumps(data)).encode("utf-8")
    with open(path, "wb") as f:
        f.write(raw)
    return raw


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    """(cache dir with alpha and beta, a folder outside the cache with a valid document and a text
    file, the directory to pass to --dir by default)."""
    from tritonkit.tune import Trial, TuneCache
    from tritonkit.tune._cache import KernelId

    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "TRITONKIT_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    d = tmp_path / "cache"
    cache = TuneCache(d)
    for name in GOOD:
        kid = KernelId(name, "h" + name, "3.9", "cpu")
        cache.record(kid, ["n=1"], Trial(point={"BLOCK": 16}, ms=1.0))
        cache.record(kid, ["n=1"], Trial(point={"BLOCK": 32}, status="failed", error="boom"))
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside / "victim.json", good_doc("victim"))
    write(outside / "victim.txt", "the user's own notes\n")
    return d, outside


def good_file(d, name):
    return next(p for p in d.iterdir() if p.name.startswith(name + "-") and p.name.endswith(".json"))


# ---------------------------------------------------------------------------------------- cases


@dataclass
class Expect:
    """What a case plants and what the commands must say about it.

    Attributes:
        named: the base name of the bad entry that ``list`` and ``show`` must name (None: none).
        clear_status: the exit status of ``clear`` (2: it says "not cleared" for the bad entry).
        keep: the bad file's bytes, which ``clear`` must keep (at its name or moved aside).
        listed: a kernel name ``list`` must show besides alpha and beta (a valid document).
        directory: the path to pass as --dir (default the cache with alpha and beta).
        dir_error: the directory itself cannot be used: every command exits 2 naming it.
        show_kernel / shown: the KERNEL given to ``show``, and the text its output must hold
            (default the kernel name).
        stays: a good kernel whose file ``clear`` cannot clear (its lock is unusable).
    """

    named: Optional[str] = None
    clear_status: int = _status.OK
    keep: Optional[bytes] = None
    listed: Optional[str] = None
    directory: Optional[str] = None
    dir_error: bool = False
    show_kernel: str = "alpha"
    shown: Optional[str] = None
    stays: Optional[str] = None


def _corrupt(name, data):
    def make(d, outside):
        return Expect(named=name, keep=write(d / name, data))
    return make


def _variant(name, **changes):
    """A document that parses but is wrong in some fields (``trial``: fields of its ok trial;
    ``_DROP``: left out)."""
    def make(d, outside):
        doc = good_doc(name.split("-")[0])
        for k, v in changes.items():
            if k == "trial":
                doc["entries"]['["n=1"]']["BLOCK=16"].update(v)
            elif v is _DROP:
                del doc[k]
            else:
                doc[k] = v
        return Expect(named=f"{name}.json", keep=write(d / f"{name}.json", doc))
    return make


_DROP = object()


def _extra_fields(d, outside):
    doc = good_doc("extra")
    doc["__proto__"] = {"polluted": True}
    doc["comment"] = "written by a newer tool"
    doc["entries"]['["n=1"]']["BLOCK=16"]["extra_field"] = [1, 2, {"x": None}]
    write(d / "extra-000000000000.json", doc)
    return Expect(listed="extra")


def _nan_and_huge(d, outside):
    text = json.dumps(good_doc("nan")).replace('"ms": 1.0', '"ms": NaN')
    text = text.replace('"samples": 5', '"samples": 1' + "0" * 40)
    text = text.replace('"ci_ms": null', '"ci_ms": [-1e999, 1e308]', 1)
    write(d / "nan-000000000000.json", text)
    return Expect(listed="nan")


def _time_as_numeric_string(d, outside):
    doc = good_doc("strms", ms="0.5")  # float("0.5") reads, but sorts next to 2.0 with a TypeError
    doc["entries"]['["n=1"]']["BLOCK=32"].update(status="ok", ms=2.0, error="")
    return Expect(named="strms-000000000000.json", keep=write(d / "strms-000000000000.json", doc))


def _error_not_a_string(d, outside):
    doc = good_doc("nullerr", error=42)
    doc["entries"]['["n=1"]']["BLOCK=32"]["error"] = None
    write(d / "nullerr-000000000000.json", doc)
    return Expect(listed="nullerr", show_kernel="nullerr")


def _huge_int_time(d, outside):
    text = json.dumps(good_doc("huge")).replace('"ms": 1.0', '"ms": 1' + "0" * 400)
    return Expect(named="huge-000000000000.json", keep=write(d / "huge-000000000000.json", text))


def _non_utf8_content(d, outside):
    raw = json.dumps(good_doc("latin")).encode("utf-8").replace(b'"out of resources"', b'"caf\xe9 \xff\xfe"')
    return Expect(named="latin-000000000000.json", keep=write(d / "latin-000000000000.json", raw))


def _byte_order_mark(d, outside):
    raw = b"\xef\xbb\xbf" + json.dumps(good_doc("bom")).encode("utf-8")
    return Expect(named="bom-000000000000.json", keep=write(d / "bom-000000000000.json", raw))


def _directory(d, outside):
    (d / "dir-000000000000.json").mkdir()
    write(d / "dir-000000000000.json" / "inside.json", good_doc("inside"))
    return Expect(named="dir-000000000000.json", clear_status=_status.USAGE)


def _fifo(d, outside):
    os.mkfifo(d / "fifo-000000000000.json")  # open() of it would block until a writer comes
    return Expect(named="fifo-000000000000.json", clear_status=_status.USAGE)


def _unreadable(d, outside):
    p = d / "locked-000000000000.json"
    write(p, good_doc("locked"))
    os.chmod(p, 0)
    try:
        with open(p, "rb"):
            readable = True
    except PermissionError:
        readable = False
    if ROOT and readable:
        os.chmod(p, 0o644)
        pytest.skip("running as root: permissions are not enforced, an unreadable file cannot be made")
    return Expect(named=p.name, clear_status=_status.USAGE)  # left as it is: "not cleared"


def _symlink_to_outside_doc(d, outside):
    os.symlink(outside / "victim.json", d / "victim-000000000000.json")
    return Expect(listed="victim")


def _symlink_to_outside_text(d, outside):
    os.symlink(outside / "victim.txt", d / "notes-000000000000.json")
    return Expect(named="notes-000000000000.json")


def _dangling_symlink(d, outside):
    os.symlink(outside / "gone.json", d / "gone-000000000000.json")
    return Expect()  # a link to nothing holds nothing: nothing to name, nothing to clear


def _symlinked_lock(d, outside):
    lock = d / (good_file(d, "alpha").name + ".lock")
    lock.unlink()
    os.symlink(outside / "victim.txt", lock)
    return Expect(clear_status=_status.USAGE, stays="alpha")


def _lock_is_a_directory(d, outside):
    lock = d / (good_file(d, "beta").name + ".lock")
    lock.unlink()
    lock.mkdir()
    return Expect(clear_status=_status.USAGE, stays="beta")


_CONTROL_NAME = "evil\x1b]0;pwned\x07\x1b[2J\r\n\x08\x9b31m-000000000000.json"


def _control_character_name(d, outside):
    return Expect(named=_CONTROL_NAME, keep=write(d / _CONTROL_NAME, "{bad"))


def _non_utf8_name(d, outside):
    raw_name = b"n\xff\xfe-000000000000.json"
    path = os.path.join(os.fsencode(str(d)), raw_name)
    return Expect(named=os.fsdecode(raw_name), keep=write(path, "[]"))


def _long_name(d, outside):
    name = "L" * 250 + ".json"  # 255 bytes: its lock file's name (+ ".lock") is too long to exist
    # not named like a cache file: clear leaves it alone, named, without even trying its lock
    return Expect(named=name, keep=write(d / name, "42"))


def _project_folder(d, outside):
    """--dir at a folder that is not a cache (a mistyped TRITONKIT_CACHE_DIR): refused, untouched,
    even its file named like a cache file."""
    project = d.parent / "project"
    project.mkdir()
    write(project / "package.json", '{"name": "app", "version": "1.0.0"}')
    write(project / "config.json", "{not json")
    write(project / "x-000000000000.json", "{bad")
    return Expect(directory=str(project), dir_error=True)


def _foreign_cachedir_tag(d, outside):
    """Another tool's cache (its CACHEDIR.TAG does not name tritonkit) is not tritonkit's."""
    other = d.parent / "pip"
    other.mkdir()
    write(other / "CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# pip's cache\n")
    write(other / "selfcheck.json", "{}")
    return Expect(directory=str(other), dir_error=True)


def _cache_without_marker(d, outside):
    """A cache made before the marker existed: known by its names, used as before."""
    (d / "CACHEDIR.TAG").unlink()
    return Expect()


def _stray_files_in_cache(d, outside):
    """A user's own JSON files inside a marked cache are named, never moved or removed."""
    write(d / "config.json", "{not json")
    return Expect(named="package.json", keep=write(d / "package.json", '{"name": "app"}'))


def _hostile_strings_document(d, outside):
    doc = good_doc("evil\x1b]0;pwned\x07[bold red]x[/]", error="\x1b[31mred[/] \udcff\ud800 \r\x08")
    doc["device"] = "\x1b[2J\x1b[1;1Hgpu"
    doc["triton"] = "[link=file:///etc/passwd]3.9[/link]"
    doc["entries"] = {'["\\r\\u009b", "\\ud800"]': {"B\x07=1": dict(doc["entries"]['["n=1"]']["BLOCK=16"])},
                      **doc["entries"]}
    write(d / "evil-000000000000.json", json.dumps(doc))  # ensure_ascii: the surrogates as \ud800 escapes
    kernel = escaped("evil\x1b]0;pwned\x07[bold red]x[/]")
    return Expect(listed=kernel, show_kernel="evil", shown=kernel)


def _directory_is_a_file(d, outside):
    f = d.parent / "cachefile\x1b]0;pwned\x07"  # named in the error message: escaped too
    write(f, "not a directory")
    return Expect(directory=str(f), dir_error=True)


def _unreadable_directory(d, outside):
    os.chmod(d, 0)
    try:
        os.listdir(d)
        listable = True
    except PermissionError:
        listable = False
    if ROOT and listable:
        os.chmod(d, 0o755)
        pytest.skip("running as root: permissions are not enforced, an unreadable directory cannot be made")
    return Expect(dir_error=True)


def _directory_with_control_characters(d, outside):
    hostile = os.fsencode(str(d.parent)) + b"/cache\x1b]0;pwned\x07\n\xeddir"  # \xed: not UTF-8
    os.rename(d, hostile)
    return Expect(directory=os.fsdecode(hostile))


def _missing_directory(d, outside):
    return Expect(directory=str(d.parent / "never\x1b[2J\rmade"))  # "... is empty", "... from DIR"


CASES = {
    "empty_file": _corrupt("empty-000000000000.json", b""),
    "random_bytes": _corrupt("random-000000000000.json", bytes(range(256)) * 3),
    "truncated_json": _corrupt("cut-000000000000.json", json.dumps(good_doc("cut"))[:150]),
    "json_list": _corrupt("list-000000000000.json", "[1, 2, 3]"),
    "json_number": _corrupt("number-000000000000.json", "42"),
    "json_null": _corrupt("null-000000000000.json", "null"),
    "json_string": _corrupt("string-000000000000.json", '"a tuning cache"'),
    "deeply_nested": _corrupt("deep-000000000000.json", "[" * 100_000 + "]" * 100_000),
    "newer_format": _corrupt("newer-000000000000.json", {"format": 99, "units": "ms"}),
    "missing_fields": _variant("missing-000000000000", kernel=_DROP, entries=_DROP),
    "wrong_typed_header": _variant("typed-000000000000", device=["gpu"], entries=[]),
    "wrong_typed_trial": _variant("trial-000000000000", trial={"ms": "fast"}),
    "wrong_typed_ci": _variant("ci-000000000000", trial={"ci_ms": [1, "x"]}),
    "unknown_status": _variant("status-000000000000", trial={"status": "great"}),
    "time_as_numeric_string": _time_as_numeric_string,
    "error_not_a_string": _error_not_a_string,
    "extra_fields": _extra_fields,
    "nan_and_huge_numbers": _nan_and_huge,
    "huge_int_time": _huge_int_time,
    "non_utf8_content": _non_utf8_content,
    "byte_order_mark": _byte_order_mark,
    "directory_named_json": _directory,
    "fifo_named_json": _fifo,
    "unreadable_file": _unreadable,
    "symlink_to_outside_document": _symlink_to_outside_doc,
    "symlink_to_outside_text": _symlink_to_outside_text,
    "dangling_symlink": _dangling_symlink,
    "symlinked_lock": _symlinked_lock,
    "lock_is_a_directory": _lock_is_a_directory,
    "control_characters_in_name": _control_character_name,
    "non_utf8_name": _non_utf8_name,
    "very_long_name": _long_name,
    "hostile_strings_in_document": _hostile_strings_document,
    "cache_dir_is_a_file": _directory_is_a_file,
    "unreadable_cache_dir": _unreadable_directory,
    "control_characters_in_cache_dir": _directory_with_control_characters,
    "missing_cache_dir": _missing_directory,
    "project_folder_as_cache_dir": _project_folder,
    "foreign_cachedir_tag": _foreign_cachedir_tag,
    "cache_without_marker": _cache_without_marker,
    "stray_files_in_cache": _stray_files_in_cache,
}


# ---------------------------------------------------------------------------------------- the test


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", list(CASES))
def test_hostile_cache(case, command, cache_env, monkeypatch):
    d, outside = cache_env
    expect = CASES[case](d, outside)
    directory = expect.directory or str(d)
    top = os.path.dirname(directory) if not os.path.isdir(directory) else directory
    before, outside_before = snapshot(top), snapshot(outside)
    argv = ["cache", command] + ([expect.show_kernel] if command == "show" else []) + ["--dir", directory]
    try:
        status, out, err = run_cli(argv, monkeypatch)
    finally:
        if case == "unreadable_cache_dir":
            os.chmod(d, 0o755)
    text = out + err

    # no crash, and nothing the terminal would act on
    assert "Traceback" not in text and "internal error" not in text, text
    assert raw_controls(out) == [] and raw_controls(err) == [], text

    # the documented exit status
    if expect.dir_error:
        assert status == _status.USAGE
        assert "TRITONKIT_CACHE_DIR" in err and "tritonkit cache: error:" in err
        assert squash(escaped(directory)) in squash(err)
    elif not os.path.isdir(directory):  # a cache that does not exist yet: empty
        assert status == {"list": _status.OK, "show": _status.NOT_FOUND, "clear": _status.OK}[command]
        assert not os.path.exists(directory)  # not even the read-only commands' nor clear's doing
    elif command == "clear":
        assert status == expect.clear_status, text
        assert (status == _status.USAGE) == ("not cleared:" in out), text
    else:
        assert status == _status.OK, text

    # the bad file is named (escaped), with why, by every command that meets it
    if expect.named is not None and not expect.dir_error:
        if command == "clear":  # "moved aside: ... NAME ..." or "not cleared: NAME: why"
            assert squash(escaped(expect.named)) in squash(text), text
        else:
            assert squash("skipped: " + escaped(expect.named)) in squash(out), out
    if not expect.dir_error:  # the directory is named (escaped): title, "is empty", "from DIR", paths
        assert squash(escaped(directory)) in squash(out), out
    if os.path.isdir(directory) and not expect.dir_error and command != "clear":
        if command == "list":
            for name in GOOD + ((expect.listed,) if expect.listed else ()):
                assert squash(f"│ {name}") in squash(out), (name, out)  # one bad file does not hide the others
        else:
            assert "BLOCK=16 *" in out and squash(expect.shown or expect.show_kernel) in squash(out), out

    # nothing outside the cache is touched, by any command
    assert snapshot(outside) == outside_before
    if command in ("list", "show") or expect.dir_error or not os.path.isdir(directory):
        assert snapshot(top) == before  # byte for byte, not even a lock file made and removed
    else:
        after = snapshot(top)
        # every good document is cleared (but one whose lock cannot be taken: named "not cleared")
        left = sorted(os.path.basename(k).split(b"-")[0].decode() for k, v in after.items()
                      if k.endswith(b".json") and v and v.get("bytes", b"").startswith(b"{") and
                      os.path.basename(k).split(b"-")[0] in (b"alpha", b"beta"))
        assert left == ([expect.stays] if expect.stays else []), sorted(after)
        if expect.stays:
            assert squash(f"not cleared: {expect.stays}-") in squash(out)
        if expect.keep is not None:
            # the corrupt file's bytes are not destroyed: left in place or moved aside
            name = os.fsencode(expect.named)
            kept = [k for k, v in after.items() if v and v.get("bytes") == expect.keep
                    and (os.path.basename(k) == name or os.path.basename(k).startswith(name + b".corrupt-"))]
            assert kept, sorted(after)
