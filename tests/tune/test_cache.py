"""The persistent tuning cache (tritonkit.tune._cache: its format, files, crash journal and store) and
``tritonkit cache`` (tritonkit.cli.cache)."""
import argparse
import io
import json
import multiprocessing
import os
import sys
import time
import warnings

import pytest
from rich.console import Console

from tritonkit.cli import cache as cache_cmd
from tritonkit.cli import main
from tritonkit.tune._cache import (KernelId, TuneCache, TuneCacheError, TuneCacheWarning, _files, _journal,
                                   default_cache_dir, source_hash)
from tritonkit.tune._result import Trial

KID = KernelId("matmul", source_hash("def matmul(): pass"), "3.6.0", "NVIDIA H100 80GB HBM3")
OTHER = KernelId("softmax", source_hash("def softmax(): pass"), "3.6.0", "NVIDIA H100 80GB HBM3")
KEY = ["1024", "1024", "torch.float16"]


def P(bm, warps=4, stages=3):
    return {"BM": bm, "num_warps": warps, "num_stages": stages}


def ok(point, ms):
    return Trial(point=point, status="ok", ms=ms, ci_ms=(ms * 0.99, ms * 1.01), samples=25)


def _mp():
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


# ----------------------------------------------------------------------------- round trips


def test_record_lookup_round_trip(tmp_path):
    c = TuneCache(tmp_path)
    assert c.lookup(KID, KEY, P(64)) is None
    assert not os.path.exists(tmp_path / "x")  # nothing created by a read
    c.record(KID, KEY, ok(P(64), 0.125))
    c.record(KID, KEY, Trial(point=P(256, 8), status="failed", error="out of resources: shared memory"))
    got = c.lookup(KID, KEY, {"num_stages": 3, "BM": 64, "num_warps": 4, "num_ctas": 1})  # same config, other spelling
    assert got is not None and got.source == "cache"
    assert (got.status, got.ms, got.samples, got.point) == ("ok", 0.125, 25, P(64))
    assert got.ci_ms == pytest.approx((0.12375, 0.12625))
    bad = c.lookup(KID, KEY, P(256, 8))
    assert bad.status == "failed" and bad.error.startswith("out of resources") and bad.ms == float("inf")
    # a fresh object (another process) reads the same from disk
    again = TuneCache(tmp_path)
    assert [t.key for t in again.trials(KID, KEY)] == ["BM=64,num_stages=3,num_warps=4",
                                                       "BM=256,num_stages=3,num_warps=8"]
    assert again.keys(KID) == [KEY]
    assert again.winner(KID, KEY).key == "BM=64,num_stages=3,num_warps=4"
    doc = json.loads(open(c.path_for(KID)).read())
    assert (doc["format"], doc["units"], doc["kernel"], doc["triton"]) == (1, "ms", "matmul", "3.6.0")
    assert "tritonkit" in doc and doc["source_hash"] == KID.source_hash


def test_adding_configs_keeps_older_entries_and_replaces_same_config(tmp_path):
    c = TuneCache(tmp_path)
    c.record_many(KID, KEY, [ok(P(32), 0.3), ok(P(64), 0.2)])
    c2 = TuneCache(tmp_path)  # a later run with a larger space
    c2.record_many(KID, KEY, [ok(P(128), 0.1), ok(P(64), 0.25)])
    got = {t.key: t.ms for t in c.trials(KID, KEY)}
    assert got == {"BM=32,num_stages=3,num_warps=4": 0.3, "BM=64,num_stages=3,num_warps=4": 0.25,
                   "BM=128,num_stages=3,num_warps=4": 0.1}


def test_identity_parts_are_separate(tmp_path):
    c = TuneCache(tmp_path)
    c.record(KID, KEY, ok(P(64), 1.0))
    variants = [KernelId(KID.name, source_hash("edited"), KID.triton_version, KID.device),
                KernelId(KID.name, KID.source_hash, "3.7.0", KID.device),
                KernelId(KID.name, KID.source_hash, KID.triton_version, "NVIDIA A100-SXM4-80GB"),
                KernelId("matmul2", KID.source_hash, KID.triton_version, KID.device)]
    for v in variants:
        assert c.lookup(v, KEY, P(64)) is None
        assert c.path_for(v) != c.path_for(KID)
    assert c.lookup(KID, ["2048", "1024", "torch.float16"], P(64)) is None
    assert c.lookup(KID, KEY, P(64)).ms == 1.0
    for i, v in enumerate(variants):
        c.record(v, KEY, ok(P(64), 2.0 + i))
    assert [c.lookup(v, KEY, P(64)).ms for v in variants] == [2.0, 3.0, 4.0, 5.0]
    assert c.lookup(KID, KEY, P(64)).ms == 1.0


def test_file_names_are_safe_and_default_dir_env(tmp_path, monkeypatch):
    c = TuneCache(tmp_path)
    evil = KernelId("../../etc/pass wd:*?", "h", "3", "dev/0")
    path = c.path_for(evil)
    assert os.path.dirname(path) == str(tmp_path)
    name = os.path.basename(path)
    assert name.endswith(".json") and "/" not in name and " " not in name and ":" not in name
    c.record(evil, KEY, ok(P(16), 0.5))
    assert c.lookup(evil, KEY, P(16)).ms == 0.5
    monkeypatch.setenv("TRITONKIT_CACHE_DIR", str(tmp_path / "envdir"))
    assert default_cache_dir() == str(tmp_path / "envdir") and TuneCache().directory == str(tmp_path / "envdir")
    monkeypatch.delenv("TRITONKIT_CACHE_DIR")
    assert default_cache_dir().endswith(os.path.join(".cache", "tritonkit", "tune"))
    assert source_hash("x") == source_hash("x") != source_hash("y") and len(source_hash("x")) == 16


def test_non_finite_values_are_written_as_strict_json(tmp_path):
    c = TuneCache(tmp_path)
    t = Trial(point=P(64), status="ok", ms=0.5, ci_ms=(float("nan"), 0.6), sm_clock_mhz=float("nan"))
    c.record(KID, KEY, t)
    text = open(c.path_for(KID)).read()
    assert "NaN" not in text and "Infinity" not in text
    got = c.lookup(KID, KEY, P(64))
    assert got.ms == 0.5 and got.ci_ms is None and got.sm_clock_mhz is None
    with pytest.raises(TypeError, match="cannot store"):
        c.record(KID, KEY, Trial(point={"BM": object()}, status="ok", ms=1.0))
    assert len(c.trials(KID, KEY)) == 1


# ----------------------------------------------------------------------------- concurrency


def _writer(directory, worker, n):
    c = TuneCache(directory)
    for i in range(n):
        c.record(KID, KEY, ok({"BM": i, "W": worker, "num_warps": 4, "num_stages": 3}, 0.001 * (i + 1)))
    c.record_many(OTHER, [str(worker)], [ok({"X": worker, "i": j}, 1.0) for j in range(5)])


def test_concurrent_writers_keep_every_trial(tmp_path):
    workers, n = 4, 40
    ctx = _mp()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, n)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    doc = json.loads(open(TuneCache(tmp_path).path_for(KID)).read())  # valid JSON
    keys = set(doc["entries"][json.dumps(KEY, separators=(",", ":"))])
    assert keys == {f"BM={i},W={w},num_stages=3,num_warps=4" for i in range(n) for w in range(workers)}
    c = TuneCache(tmp_path)
    assert sorted(c.keys(OTHER)) == [[str(w)] for w in range(workers)]
    assert all(len(c.trials(OTHER, [str(w)])) == 5 for w in range(workers))
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]


# ----------------------------------------------------------------------------- corruption


@pytest.mark.parametrize("content,why", [
    (b"\x00\xffgarbage{{", "not valid JSON"),
    (b"[1, 2, 3]", "JSON list"),
    (json.dumps({"format": 1, "units": "ms", "kernel": "matmul", "source_hash": "h", "triton": "3", "device": "d",
                 "entries": {"[\"1\"]": {"BM=1": {"point": {"BM": 1}, "status": "exploded"}}}}).encode(),
     "unknown status"),
    (json.dumps({"format": 1, "units": "ms", "kernel": "matmul", "entries": []}).encode(), "header"),
    (json.dumps({"format": 99, "units": "ms", "entries": {}}).encode(), "format version 99"),
])
def test_corrupt_file_is_moved_aside(tmp_path, content, why):
    c = TuneCache(tmp_path)
    c.record(OTHER, KEY, ok(P(1), 1.0))
    other_path = c.path_for(OTHER)
    other_bytes = open(other_path, "rb").read()
    path = c.path_for(KID)
    with open(path, "wb") as f:
        f.write(content)
    with pytest.warns(TuneCacheWarning) as rec:
        assert c.lookup(KID, KEY, P(64)) is None
    msg = str(rec[0].message)
    assert path in msg and why in msg and ".corrupt-" in msg
    aside = [f for f in os.listdir(tmp_path) if f.startswith(os.path.basename(path) + ".corrupt-")]
    assert len(aside) == 1 and os.path.join(str(tmp_path), aside[0]) in msg
    assert open(tmp_path / aside[0], "rb").read() == content  # the bad copy is kept as it was
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fresh file works without more warnings
        c.record(KID, KEY, ok(P(64), 0.5))
        assert c.lookup(KID, KEY, P(64)).ms == 0.5
        assert [e.kernel for e in c.entries()] == ["matmul", "softmax"]
    assert open(other_path, "rb").read() == other_bytes
    assert c.lookup(OTHER, KEY, P(1)).ms == 1.0


def test_corrupt_file_found_by_a_write_is_replaced(tmp_path):
    c = TuneCache(tmp_path)
    path = c.path_for(KID)
    os.makedirs(tmp_path, exist_ok=True)
    with open(path, "w") as f:
        f.write('{"format": 1, "units": "ms"')  # truncated
    with pytest.warns(TuneCacheWarning, match="not valid JSON"):
        c.record(KID, KEY, ok(P(64), 0.5))
    assert c.lookup(KID, KEY, P(64)).ms == 0.5
    assert len([f for f in os.listdir(tmp_path) if ".corrupt-" in f]) == 1


# ----------------------------------------------------------------------------- atomicity


@pytest.mark.parametrize("target", ["json.dump", "os.replace", "os.fsync"])
def test_crash_during_write_keeps_previous_file(tmp_path, monkeypatch, target):
    c = TuneCache(tmp_path, durable=True)
    c.record(KID, KEY, ok(P(64), 0.5))
    path = c.path_for(KID)
    before = open(path, "rb").read()

    def boom(*a, **k):
        raise OSError(28, "No space left on device") if target != "json.dump" else RuntimeError("killed mid-write")

    module, name = target.split(".")
    monkeypatch.setattr(_files.json if module == "json" else _files.os, name, boom)
    with pytest.raises((RuntimeError, TuneCacheError)) as e:
        c.record(KID, KEY, ok(P(128), 0.25))
    if target != "json.dump":
        assert "TRITONKIT_CACHE_DIR" in str(e.value) and "No space left" in str(e.value)
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert sorted(f for f in os.listdir(tmp_path) if not f.endswith(".lock")) == ["CACHEDIR.TAG",
                                                                                  os.path.basename(path)]
    fresh = TuneCache(tmp_path)
    assert fresh.lookup(KID, KEY, P(64)).ms == 0.5 and fresh.lookup(KID, KEY, P(128)) is None


def test_unusable_cache_directory_says_how_to_choose_another(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the directory should be")
    c = TuneCache(blocker / "tune")
    with pytest.raises(TuneCacheError, match="TRITONKIT_CACHE_DIR"):
        c.record(KID, KEY, ok(P(64), 0.5))

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    c = TuneCache(tmp_path / "cache")
    monkeypatch.setattr(_files.os, "listdir", denied)
    with pytest.raises(TuneCacheError, match="Permission denied.*TRITONKIT_CACHE_DIR"):
        list(c.entries())


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions")
def test_unreadable_cache_directory(tmp_path):
    d = tmp_path / "locked"
    d.mkdir()
    TuneCache(d).record(KID, KEY, ok(P(64), 0.5))
    os.chmod(d, 0)
    try:
        with pytest.raises(TuneCacheError, match="TRITONKIT_CACHE_DIR"):
            TuneCache(d).lookup(KID, KEY, P(64))
    finally:
        os.chmod(d, 0o755)


# ----------------------------------------------------------------------------- journal


def _begin_then_die(directory, point):
    TuneCache(directory).begin(KID, KEY, point)
    os._exit(3)  # as if the config took the process down


def _begin_then_wait(directory, point, started, release):
    TuneCache(directory).begin(KID, KEY, point)
    started.set()
    release.wait(30)


def test_journal_recovers_a_dead_process_as_crashed(tmp_path):
    ctx = _mp()
    p = ctx.Process(target=_begin_then_die, args=(str(tmp_path), P(512, 16)))
    p.start()
    p.join(30)
    assert p.exitcode == 3
    c = TuneCache(tmp_path)
    c.begin(KID, KEY, P(32))  # this (live) process's own marker
    assert c.lookup(KID, KEY, P(512, 16)) is None  # in flight is not a result
    assert [e.in_flight for e in c.entries()] == [2]
    rec = c.recover()
    assert len(rec) == 1
    r = rec[0]
    assert (r.kernel_id, r.key, r.pid) == (KID, KEY, p.pid)
    assert r.trial.status == "crashed" and r.trial.error == f"the process died while this config ran (pid {p.pid})"
    got = c.lookup(KID, KEY, P(512, 16))
    assert got.status == "crashed" and got.point == P(512, 16)
    assert c.recover() == []  # recovered once
    c.end(KID, KEY, P(32), ok(P(32), 0.7))
    assert [e.in_flight for e in c.entries()] == [0] and c.lookup(KID, KEY, P(32)).ms == 0.7


def test_journal_leaves_live_processes_alone(tmp_path):
    ctx = _mp()
    started, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_begin_then_wait, args=(str(tmp_path), P(64), started, release))
    p.start()
    try:
        assert started.wait(30)
        c = TuneCache(tmp_path)
        assert c.recover() == []
        assert c.lookup(KID, KEY, P(64)) is None and [e.in_flight for e in c.entries()] == [1]
    finally:
        release.set()
        p.join(30)
    assert [r.trial.point for r in TuneCache(tmp_path).recover()] == [P(64)]  # exited without end()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="zombies are read from /proc")
def test_journal_recovers_an_unreaped_child(tmp_path):
    ctx = _mp()
    p = ctx.Process(target=_begin_then_die, args=(str(tmp_path), P(64)))
    p.start()
    deadline = time.time() + 30
    while time.time() < deadline:  # wait for the zombie without reaping it
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.01)
    try:
        assert [r.pid for r in TuneCache(tmp_path).recover()] == [p.pid]
    finally:
        p.join(30)


def test_journal_leaves_markers_of_other_hosts(tmp_path):
    c = TuneCache(tmp_path)
    c.begin(KID, KEY, P(64))
    path = c.path_for(KID)
    doc = json.load(open(path))
    marker = doc["in_flight"][json.dumps(KEY, separators=(",", ":"))]["BM=64,num_stages=3,num_warps=4"]
    marker["host"], marker["pid"] = "some-other-host", 999999999
    json.dump(doc, open(path, "w"))
    assert c.recover() == []
    marker["host"] = _journal.socket.gethostname()
    json.dump(doc, open(path, "w"))
    assert [r.trial.status for r in c.recover()] == ["crashed"]


# ----------------------------------------------------------------------------- clear / listing


def _fill(c):
    c.record_many(KID, KEY, [ok(P(64), 0.5), ok(P(128), 0.25),
                             Trial(point=P(256), status="failed", error="out of resources"),
                             Trial(point=P(512), status="crashed", error="illegal memory access")])
    c.record(KID, ["2048"], ok(P(64), 2.0))
    c.record(OTHER, ["4096"], ok({"BLOCK": 1024}, 0.01))


def test_clear_and_summaries(tmp_path):
    c = TuneCache(tmp_path)
    _fill(c)
    summaries = list(c.entries())
    assert [(e.kernel, e.key, e.configs, e.failures, e.winner, e.winner_ms) for e in summaries] == [
        ("matmul", ("1024", "1024", "torch.float16"), 4, 2, "BM=128,num_stages=3,num_warps=4", 0.25),
        ("matmul", ("2048",), 1, 0, "BM=64,num_stages=3,num_warps=4", 2.0),
        ("softmax", ("4096",), 1, 0, "BLOCK=1024", 0.01)]
    assert [t.status for t in summaries[0].trials] == ["ok", "ok", "failed", "crashed"]
    c.set_winner(KID, KEY, P(64), 0.5)
    assert c.winner(KID, KEY).key == "BM=64,num_stages=3,num_warps=4"
    assert [e.kernel for e in c.show("mat")] == ["matmul", "matmul"]  # prefix
    assert c.show("nope") == []
    assert c.clear("matmul", failures_only=True) == 2
    assert sorted(t.status for t in c.trials(KID, KEY)) == ["ok", "ok"]
    assert c.clear("soft") == 1
    assert [e.kernel for e in c.entries()] == ["matmul", "matmul"]
    assert c.clear() == 3 and list(c.entries()) == []


# ----------------------------------------------------------------------------- CLI


def _cli(argv):
    p = argparse.ArgumentParser(prog="tritonkit")
    cache_cmd.add_parser(p.add_subparsers(dest="command"))
    ns = p.parse_args(argv)
    buf = io.StringIO()
    status = cache_cmd.run(ns, console=Console(file=buf, width=200, color_system=None))
    return status, buf.getvalue()


def test_cli_list_show_clear(tmp_path, capsys):
    _fill(TuneCache(tmp_path))
    d = str(tmp_path)
    status, out = _cli(["cache", "list", "--dir", d])
    assert status == 0
    for word in ("kernel", "device", "triton", "key", "configs", "winner", "ms", "matmul", "softmax",
                 "1024, 1024, torch.float16", "BM=128,num_stages=3,num_warps=4", "0.2500", "NVIDIA H100"):
        assert word in out, word
    status, out = _cli(["cache", "show", "matmul", "--dir", d])
    assert status == 0
    assert "BM=128,num_stages=3,num_warps=4 *" in out and "out of resources" in out and "crashed" in out
    assert out.index("BM=128") < out.index("BM=64") < out.index("BM=256")  # fastest first, failures last
    assert _cli(["cache", "show", "nope", "--dir", d])[0] == 1
    status, out = _cli(["cache", "clear", "matmul", "--failures", "--dir", d])
    assert status == 0 and "removed 2" in out
    _, out = _cli(["cache", "show", "matmul", "--dir", d])
    assert "BM=128" in out and "BM=64" in out and "BM=256" not in out and "illegal memory" not in out
    status, out = _cli(["cache", "clear", "--dir", d])
    assert status == 0 and "removed 4" in out
    _, out = _cli(["cache", "list", "--dir", d])
    assert "empty" in out and "matmul" not in out
    assert main(["cache"]) == 2  # no action
    with pytest.raises(SystemExit) as e:
        main(["cache", "show"])  # missing KERNEL: argparse says so
    assert e.value.code == 2
    assert main(["cache", "list", "--dir", d]) == 0
    assert "empty" in capsys.readouterr().out


def test_cli_unusable_dir_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["cache", "list", "--dir", str(blocker)]) == 2
    assert "TRITONKIT_CACHE_DIR" in capsys.readouterr().err
