"""tritonkit._io: atomic writes keep the old file on failure and give new files the usual mode, and
never replace what is not a regular file (a FIFO, a device, a symlink: written through)."""
import os

import pytest

from tritonkit._io import atomic_write, atomic_write_text, file_mode, output_problem, output_target, python_source


def test_new_files_get_the_umask_mode_and_old_files_keep_theirs(tmp_path):
    path = str(tmp_path / "report.json")
    atomic_write_text(path, "{}\n")
    mask = os.umask(0o022)
    os.umask(mask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600
    os.chmod(path, 0o640)
    atomic_write_text(path, "[]\n")
    assert os.stat(path).st_mode & 0o777 == 0o640 and open(path).read() == "[]\n"
    assert file_mode(path) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = str(tmp_path / "a.bin")
    atomic_write(path, lambda fh: fh.write(b"old"), binary=True, durable=True)

    def boom(fh):
        fh.write(b"half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        atomic_write(path, boom, binary=True)
    assert open(path, "rb").read() == b"old" and os.listdir(tmp_path) == ["a.bin"]


# ----------------------------------------------------------- what is not a regular file is never replaced


def test_a_fifo_is_written_through_not_replaced(tmp_path):
    import stat
    import threading
    fifo = str(tmp_path / "out.fifo")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    atomic_write_text(fifo, '{"findings": []}\n')
    reader.join(10)
    assert got == [b'{"findings": []}\n']
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["out.fifo"]


def test_a_symlink_keeps_being_a_link_and_its_target_is_written_atomically(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "report.json"
    link.symlink_to(os.path.join("real", "report.json"))
    atomic_write_text(str(link), "new")
    assert os.readlink(link) == os.path.join("real", "report.json") and target.read_text() == "new"
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == ["real", "report.json"] and os.listdir(tmp_path / "real") == ["report.json"]
    dangling = tmp_path / "later.json"
    dangling.symlink_to(os.path.join("real", "made.json"))  # a link to nothing yet: its target is made
    atomic_write_text(str(dangling), "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "made.json").read_text() == "made"


def test_a_character_device_is_written_through(tmp_path):
    """A terminal we own stands for a device (/dev/null, /dev/stdout on a terminal): what is written
    reaches it; nothing is created or renamed beside it."""
    import pty
    master, slave = pty.openpty()
    try:
        name = os.ttyname(slave)
        assert output_target(name) == (name, True)
        atomic_write_text(name, "through the device\n")
        assert b"through the device" in os.read(master, 1024)
    finally:
        os.close(master)
        os.close(slave)
    assert output_target("/dev/null") == ("/dev/null", True)  # asked only: never written by a test
    assert output_problem("/dev/null") is None


def test_a_link_to_an_open_file_through_proc_writes_that_file(tmp_path):
    """``--json /dev/stdout`` with stdout redirected to a file: the file the shell opened is written
    (a replace would leave the shell's open file unlinked, and the JSON elsewhere)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc")
    out = tmp_path / "redirected.txt"
    with open(out, "w") as fh:
        ino = os.fstat(fh.fileno()).st_ino
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{fh.fileno()}")
        assert output_target(str(link)) == (str(link), True)
        atomic_write_text(str(link), "json\n")
        assert os.stat(out).st_ino == ino and out.read_text() == "json\n"


def test_a_directory_or_a_socket_is_refused_and_left_as_it_was(tmp_path):
    import socket
    with pytest.raises(IsADirectoryError):
        atomic_write_text(str(tmp_path), "x")
    path = str(tmp_path / "s.sock")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
        with pytest.raises(OSError, match="not a regular file"):
            atomic_write_text(path, "x")
        import stat
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert "not a regular file" in output_problem(path)
    finally:
        s.close()


def test_output_problem_and_python_source(tmp_path):
    assert output_problem(str(tmp_path / "new.json")) is None and os.listdir(tmp_path) == []  # the probe is gone
    assert output_problem(str(tmp_path / "no" / "new.json")) == f"no directory {tmp_path / 'no'}"
    (tmp_path / "m.py").write_text("x = 1\n")
    (tmp_path / "S.PYI").write_text("x: int\n")
    (tmp_path / "tool").write_text("#!/usr/bin/python3 -u\nprint(1)\n")
    (tmp_path / "data.json").write_text("{}")
    assert [python_source(str(tmp_path / n)) for n in ("m.py", "S.PYI", "tool", "data.json", "gone.py")] == \
        [True, True, True, False, False]
