"""tritonkit._io: atomic writes keep the old file on failure and give new files the usual mode."""
import os

import pytest

from tritonkit._io import atomic_write, atomic_write_text, file_mode


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
