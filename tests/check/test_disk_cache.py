"""The check's disk cache: a kernel's rewritten code and its bytes per program, learned by one
process, spare the next process's first launch the rewrite and the probe batch; whatever the
directory holds (garbage, truncated entries, directories, no permission), the check runs the same,
and several processes may fill it at once."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * FACTOR, mask=offs < n + EXTRA)
'''

_CHILD = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import torch
    from triton.runtime import interpreter
    import tritonkit
    if sys.argv[2] == "no-rewrite":  # the rewrite must come from the disk cache
        def refuse(self):
            raise AssertionError("rewritten again")
        interpreter.FunctionRewriter.rewrite_ast = refuse
    from tritonkit.check.engine import batched
    probes = []
    probe = batched._probe
    batched._probe = lambda *args: probes.append(1) or probe(*args)
    from kernel_mod import scale
    x = torch.arange(1000, dtype=torch.float32)
    out = torch.zeros(1000)
    with tritonkit.checking() as session:
        scale[(8,)](x, out, 1000, BLOCK=128)
    print(json.dumps({"out": out[:3].tolist(), "batches": session.launches[-1].batches, "probes": len(probes),
                      "findings": sorted(f.kind for f in session.findings)}))
''')


def _write_kernel(folder, factor=2, extra=0):
    (folder / "kernel_mod.py").write_text(_KERNEL.replace("FACTOR", str(factor)).replace("EXTRA", str(extra)))


def _child(folder, cache, mode="plain", **env):
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(folder), mode], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TRITONKIT_CACHE_DIR": str(cache / "tune"), **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _entries(cache, kind):
    folder = cache / "check"
    return sorted(p for p in folder.glob(f"{kind}-*")) if folder.is_dir() else []


def test_a_second_process_reuses_the_rewrite_and_skips_the_probe(tmp_path):
    _write_kernel(tmp_path)
    first = _child(tmp_path, tmp_path)
    assert first["out"] == [0.0, 2.0, 4.0] and first["findings"] == []
    # no loop to cut, so no probe: a first batch of 4 programs measures, then the other 4
    assert first["probes"] == 0 and first["batches"] == 2
    assert _entries(tmp_path, "code") and _entries(tmp_path, "batch")
    second = _child(tmp_path, tmp_path, "no-rewrite")
    assert second == {**first, "batches": 1}


def test_an_edited_kernel_is_rewritten_again(tmp_path):
    _write_kernel(tmp_path)
    assert _child(tmp_path, tmp_path)["findings"] == []
    _write_kernel(tmp_path, factor=3, extra=8)  # now it also stores past the end
    edited = _child(tmp_path, tmp_path)
    assert edited["out"] == [0.0, 3.0, 6.0]
    assert edited["findings"] == ["out_of_bounds"]


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated", "directory", "json-string", "fifo"])
def test_a_damaged_entry_is_a_miss_and_is_written_again(tmp_path, damage):
    _write_kernel(tmp_path)
    clean = _child(tmp_path, tmp_path)
    for path in _entries(tmp_path, "code") + _entries(tmp_path, "batch"):
        data = path.read_bytes()
        path.unlink()
        if damage == "garbage":
            path.write_bytes(b"\xe3\x00\xff" * 50)
        elif damage == "empty":
            path.write_bytes(b"")
        elif damage == "truncated":
            path.write_bytes(data[: len(data) // 2])
        elif damage == "directory":
            path.mkdir()
        elif damage == "fifo":
            os.mkfifo(path)
        else:
            path.write_text(json.dumps("1e9"))
    again = _child(tmp_path, tmp_path)  # a read that blocked would stop here (the child's timeout)
    assert again["out"] == clean["out"] and again["findings"] == clean["findings"]
    if damage in ("garbage", "truncated", "json-string", "empty"):
        # written again: a third process reads it back
        assert _child(tmp_path, tmp_path, "no-rewrite")["batches"] == 1


def test_a_directory_that_cannot_be_made_leaves_the_check_as_it_is(tmp_path):
    _write_kernel(tmp_path)
    (tmp_path / "check").write_text("a file where the cache directory would be")
    out = _child(tmp_path, tmp_path)
    assert out["out"] == [0.0, 2.0, 4.0] and out["findings"] == []
    assert (tmp_path / "check").read_text().startswith("a file")


def test_it_can_be_turned_off(tmp_path):
    _write_kernel(tmp_path)
    out = _child(tmp_path, tmp_path, TRITONKIT_CHECK_CACHE="0")
    assert out["out"] == [0.0, 2.0, 4.0]
    assert not (tmp_path / "check").exists()


def test_processes_filling_the_cache_at_once_all_succeed(tmp_path):
    _write_kernel(tmp_path)
    env = {**os.environ, "TRITONKIT_CACHE_DIR": str(tmp_path / "tune")}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path), "plain"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    results = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    assert all(r["out"] == [0.0, 2.0, 4.0] and r["findings"] == [] for r in results)
    assert not list((tmp_path / "check").glob(".*.tmp-*"))  # no temporary file left behind
    assert _child(tmp_path, tmp_path, "no-rewrite")["batches"] == 1


def test_reading_an_entry_allocates_about_its_size(tmp_path, monkeypatch):
    """An entry is read by its size (a read up to the 16 MiB limit allocated the whole limit, which
    showed as a 16 MiB peak in the launches of a warm cache)."""
    import tracemalloc
    from tritonkit.check.interp import disk_cache
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "tune"))
    disk_cache.store_code("k" * 40, _child.__code__)
    tracemalloc.start()
    try:
        code = disk_cache.load_code("k" * 40)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code is not None and code.co_name == "_child"
    assert peak < 1 << 20
