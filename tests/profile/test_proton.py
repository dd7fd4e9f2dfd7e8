"""Reading Proton's tree files without llnl-hatchet: kernels, scopes and devices of the profile
recorded on the H100, and the scope tree through JSON (a file that is not Proton's: test_profile_cli.py)."""
import json

import pytest

from tritonkit.profile import ScopeNode


def test_kernels_scopes_and_devices_are_read(prof, raw):
    by_name = {k.name: k for k in prof.kernels}
    add = by_name["add_kernel n=16777216"]
    assert add.scope == ("vector_add",) and add.launches == 5 and add.work_source == "launch_metadata"
    assert add.bytes == 5 * 3 * (1 << 24) * 4  # 3 float32 vectors per launch, summed over 5 launches
    mm = by_name["matmul_kernel M=4096 N=4096 K=4096"]
    assert mm.flops == {16: 5 * 2.0 * 4096 ** 3}
    cublas = [k for k in prof.kernels if k.scope == ("torch_matmul",)]
    assert len(cublas) == 1 and cublas[0].work_source == "scope" and cublas[0].flops == {16: 5 * 2.0 * 4096 ** 3}
    assert by_name["add_kernel_plain"].work_source is None
    assert prof.devices == {"CUDA:0": raw[1]["CUDA"]["0"]}
    # inclusive time of the root is every kernel's time
    assert prof.tree.inclusive_ns == pytest.approx(sum(k.time_ns for k in prof.kernels))


def test_scope_tree_round_trips_through_json(prof):
    data = json.loads(json.dumps(prof.tree.to_dict()))
    tree = ScopeNode.from_dict(data)
    assert tree == prof.tree and tree.to_dict() == data
    assert tree.inclusive_ns == pytest.approx(prof.tree.inclusive_ns)


def test_scope_tree_from_dict_is_tolerant():
    node = ScopeNode.from_dict({"name": "root", "children": [
        {"name": "k", "kernel": True, "launches": 2, "time_ns": 1000.0, "metrics": {"count": 2}},
        "not a node", {"launches": "many", "time_ns": None, "children": "none"}]})
    assert [c.name for c in node.children] == ["k", "?"]
    assert node.children[0].kernel and node.children[0].launches == 2 and node.inclusive_ns == 1000.0
    assert node.children[1] == ScopeNode("?")
    assert ScopeNode.from_dict({}) == ScopeNode("?")
    with pytest.raises(TypeError):
        ScopeNode.from_dict([1, 2])
