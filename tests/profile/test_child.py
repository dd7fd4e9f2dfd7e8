"""The profiled process's parts that run on the CPU: the host timer on the launch path, and the meta
data the child hands to the parent (ChildMeta, with the interpreter's counts) through JSON."""
import json

from tritonkit.profile import ChildMeta
from tritonkit.profile._interpret import Counted


class _Jit:
    def __init__(self, name):
        import types
        self.fn = types.SimpleNamespace(__name__=name)


def test_the_host_timer_samples_then_takes_itself_off_the_launch_path():
    from tritonkit.profile._child import MAX_TIMED, SAMPLES_PER_KERNEL, HostTimer

    calls, restored, noted = [], [], []

    class Kernel:
        n_regs, n_spills = 40, 0
        metadata = type("M", (), {"shared": 1024, "num_warps": 4, "num_stages": 3})()

    def original(jit, *args, **kwargs):
        calls.append(jit.fn.__name__)
        return Kernel()

    class Capture:
        def on_launch(self, jit, args, kwargs, grid):
            noted.append((jit.fn.__name__, args, tuple(kwargs), grid))

    timer = HostTimer(original, lambda: restored.append(len(calls)), Capture())
    a, b = _Jit("a"), _Jit("b")
    timer.run(a, 1, 2, grid=(4,), BLOCK=8)
    assert noted == [("a", (1, 2), ("BLOCK",), (4,))]  # grid and warmup are not the kernel's arguments
    for _ in range(SAMPLES_PER_KERNEL + 10):
        timer.run(a, grid=(1,))
    timer.run(b, grid=(1,))
    timer.run(b, grid=(1,))
    assert len(timer.samples["a"]) == SAMPLES_PER_KERNEL and len(timer.samples["b"]) == 2
    assert set(timer.host_us()) == {"a", "b"} and all(v >= 0 for v in timer.host_us().values())
    assert timer.resources["a"] == {"registers": 40, "spills": 0, "shared": 1024, "num_warps": 4, "num_stages": 3}
    assert not restored
    while timer.launches < MAX_TIMED:
        timer.run(a, grid=(1,))
    assert restored == [MAX_TIMED - 1]  # restored on the MAX_TIMED-th launch, which still runs
    assert len(calls) == MAX_TIMED


def test_child_meta_round_trips_with_its_counts(tmp_path):
    meta = ChildMeta(host_us={"_add": 7.5}, resources={"_add": {"registers": 26, "num_warps": 4}},
                     interpreted={"_add": Counted("_add", 20, 16, 12000.0, 24000.0, {"flops32": 1024.0})},
                     device="NVIDIA H100 80GB HBM3")
    data = json.loads(json.dumps(meta.to_dict()))
    assert data["interpreted"]["_add"]["bytes"] == 12000.0
    assert ChildMeta.from_dict(data) == meta
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(data))
    assert ChildMeta.read(str(path)) == meta


def test_child_meta_reads_a_partial_or_broken_file_as_far_as_it_can(tmp_path):
    got = ChildMeta.from_dict({"host_us": {"_add": "slow", "_mul": 3.0}, "resources": {"_add": 5},
                               "interpreted": {"_add": {"counted": 2, "bytes": 8.0}, "_mul": "no"}})
    assert got.host_us == {"_mul": 3.0} and got.resources == {} and got.device is None
    assert got.interpreted == {"_add": Counted("", counted=2, bytes=8.0)}
    assert ChildMeta.from_dict({}) == ChildMeta()
    half = tmp_path / "half.json"
    half.write_text('{"host_us": {')
    assert ChildMeta.read(str(half)) is None and ChildMeta.read(str(tmp_path / "missing.json")) is None
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    assert ChildMeta.read(str(listed)) is None
