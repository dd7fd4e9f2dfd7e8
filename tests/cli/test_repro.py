"""``tritonkit check --repro DIR``: every launch with a finding gets a folder whose ``repro.py``
launches the kernel again with the launch's exact arguments, and ``tritonkit check -- python
repro.py`` shows the same findings (kind, line, argument, elements, programs)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tritonkit.check.repro import skeleton
from tritonkit.cli import main

SCRIPT = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    SCALE = 2.0


    @triton.jit
    def read_past(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)  # LOAD: reads past the view, into its neighbour in the storage
        tl.store(out_ptr + offs, x * SCALE, mask=offs < n)


    @triton.jit
    def write_past(out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 1.0)  # STORE


    base = torch.arange(64, dtype=torch.float32)
    view = base[8:40]                       # a view: 32 elements with neighbours on both sides
    out = torch.zeros(40)
    read_past[(2,)](view, out, 32, BLOCK=32)   # reads base[40:72]: 24 inside the storage, 8 past it
    w = torch.zeros(50)[10:30]
    write_past[(1,)](w, 20, BLOCK=32)
''')

MODULE = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def tuned_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n))  # TUNED: the store has no mask
''')

USER = textwrap.dedent('''
    import torch
    import triton
    from kernels_mod import tuned_copy

    if __name__ == "__main__":
        x = torch.randn(40)
        out = torch.empty(40)
        tuned_copy[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, out, 40)
''')


def _facts(path):
    with open(path) as fh:
        data = json.load(fh)
    return sorted((f["kind"], f["line"], f["arg"], f["elements"], json.dumps(f["program_ids"]), f["reason"])
                  for f in data["findings"])


def _check(args, cwd):
    """``tritonkit check`` in a fresh process from ``cwd`` (the repro is a separate run, as a user's)."""
    return subprocess.run([sys.executable, "-m", "tritonkit", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_each_launch_with_a_finding_gets_a_repro_that_shows_the_same_findings(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    run = _check(["--repro", "repro", "--json", "orig.json", "--", "python", "script.py"], tmp_path)
    assert run.returncode == 1, run.stderr
    folders = sorted(os.listdir(tmp_path / "repro"))
    assert folders == ["001-read_past", "002-write_past"]
    orig = _facts(tmp_path / "orig.json")
    again = []
    for name in folders:
        folder = tmp_path / "repro" / name
        assert {"repro.py", "launch.pt", "README.md", "kernel_source.py"} <= set(os.listdir(folder))
        rerun = _check(["--json", str(folder / "again.json"), "--", "python", str(folder / "repro.py")], tmp_path)
        assert rerun.returncode == 1, rerun.stdout + rerun.stderr
        again += _facts(folder / "again.json")
    assert sorted(again) == orig
    kinds = {(k, line, arg) for k, line, arg, *_ in orig}
    assert len(kinds) == 2 and all(k == "out_of_bounds" for k, *_ in kinds)


def test_the_capture_is_the_whole_storage_as_it_was_before_the_launch(tmp_path):
    """The view's storage offset and its neighbours are kept, and the values are the inputs, not
    what the kernel wrote."""
    (tmp_path / "script.py").write_text(SCRIPT)
    assert _check(["--repro", "repro", "--", "python", "script.py"], tmp_path).returncode == 1
    state = torch.load(tmp_path / "repro" / "001-read_past" / "launch.pt", weights_only=False)
    x = state["args"]["x_ptr"]
    assert (x["shape"], x["stride"], x["offset"]) == ((32,), (1,), 8)
    assert torch.equal(x["storage"], torch.arange(64, dtype=torch.float32))
    assert torch.equal(state["args"]["out_ptr"]["storage"], torch.zeros(40))  # before the launch wrote it
    assert state["args"]["n"] == 32 and state["args"]["BLOCK"] == 32 and state["grid"] == [2]
    readme = (tmp_path / "repro" / "001-read_past" / "README.md").read_text()
    line = next(i for i, t in enumerate(SCRIPT.splitlines(), 1) if "# LOAD" in t)
    assert f"out_of_bounds at line {line}, argument x_ptr" in readme and "storage offset 8" in readme


def test_an_autotuned_kernel_of_a_module_is_imported_by_path_with_its_config(tmp_path):
    (tmp_path / "kernels_mod.py").write_text(MODULE)
    (tmp_path / "user.py").write_text(USER)
    run = _check(["--repro", "repro", "--json", "orig.json", "--", "python", "user.py"], tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    folders = sorted(os.listdir(tmp_path / "repro"))
    assert folders and all(f.endswith("tuned_copy") for f in folders)
    blocks = set()
    for name in folders:
        folder = tmp_path / "repro" / name
        assert "kernel_source.py" not in os.listdir(folder)  # imported from kernels_mod.py itself
        state = torch.load(folder / "launch.pt", weights_only=False)
        blocks.add(state["args"]["BLOCK"])
        assert "autotune config BLOCK=" in (folder / "README.md").read_text()
        rerun = _check(["--json", "again.json", "--", "python", str(folder / "repro.py")], tmp_path)
        assert rerun.returncode == 1, rerun.stdout + rerun.stderr
        (f,) = json.loads((tmp_path / "again.json").read_text())["findings"]
        tuned = next(i for i, t in enumerate(MODULE.splitlines(), 1) if "# TUNED" in t)
        assert (f["kind"], f["line"], f["arg"]) == ("out_of_bounds", tuned, "out_ptr")
    assert blocks == {16, 32}  # each config that made the finding, with its own meta-parameters


def test_self_contained_copies_the_kernels_file_without_its_top_level_code(tmp_path):
    (tmp_path / "kernels_mod.py").write_text(MODULE)
    (tmp_path / "user.py").write_text(USER)
    assert _check(["--repro", "repro", "--repro-self-contained", "--", "python", "user.py"], tmp_path).returncode == 1
    folder = tmp_path / "repro" / sorted(os.listdir(tmp_path / "repro"))[0]
    copied = (folder / "kernel_source.py").read_text()
    assert copied.splitlines() == MODULE.splitlines()  # all definitions: kept whole, lines unchanged
    elsewhere = tmp_path / "elsewhere"
    os.rename(folder, elsewhere)
    os.remove(tmp_path / "kernels_mod.py")  # the folder alone reproduces it
    rerun = _check(["--json", "again.json", "--", "python", str(elsewhere / "repro.py")], tmp_path)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr


def test_skeleton_keeps_definitions_at_their_lines_and_drops_what_runs():
    src = textwrap.dedent('''
        import torch
        N = 4
        CFG = dict(a=1)

        def helper():
            return 1
        x = torch.zeros(N)
        out = helper()
        kernel[(1,)](x)
        print("ran")
        if __name__ == "__main__":
            main()
    ''')
    out = skeleton(src).splitlines()
    src_lines = src.splitlines()
    assert len(out) == len(src_lines)
    kept = [i for i, line in enumerate(out) if line]
    assert [src_lines[i] for i in kept] == ["import torch", "N = 4", "CFG = dict(a=1)", "def helper():",
                                            "    return 1", "x = torch.zeros(N)"]


@pytest.mark.parametrize("argv, said", [(["--repro-self-contained"], "go with --repro"),
                                        (["--repro-max-bytes", "1M"], "go with --repro"),
                                        (["--repro", "r", "--repro-max-bytes", "0"], "positive size"),
                                        (["--repro", "r", "--repro-max-bytes", "lots"], "not a size"),
                                        (["--repro", "afile"], "not a directory")])
def test_bad_repro_options_are_refused(tmp_path, monkeypatch, capfd, argv, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "s.py").write_text("pass\n")
    assert main(["check", *argv, "--", "python", "s.py"]) == 2
    assert said in capfd.readouterr().err


UNINIT = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def accumulate(acc_ptr, x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        acc = tl.load(acc_ptr + offs, mask=m)  # UNINIT: reads the output before anything wrote it
        tl.store(acc_ptr + offs, acc + tl.load(x_ptr + offs, mask=m), mask=m)


    buf = torch.zeros(48)
    buf[16:] = 1.0
    acc = torch.empty(32)                     # never written
    accumulate[(1,)](acc, buf, 32, BLOCK=32)
''')


def test_an_uninitialized_read_reproduces(tmp_path):
    """The elements tritonkit tracks as never written are saved with the capture and marked again."""
    (tmp_path / "script.py").write_text(UNINIT)
    assert _check(["--repro", "repro", "--json", "orig.json", "--", "python", "script.py"], tmp_path).returncode == 1
    (folder,) = os.listdir(tmp_path / "repro")
    state = torch.load(tmp_path / "repro" / folder / "launch.pt", weights_only=False)
    assert state["args"]["acc_ptr"]["uninitialized"] == [[0, 32]] and state["args"]["x_ptr"]["uninitialized"] == []
    rerun = _check(["--json", "again.json", "--", "python", str(tmp_path / "repro" / folder / "repro.py")], tmp_path)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr
    assert _facts(tmp_path / "again.json") == _facts(tmp_path / "orig.json")
    assert {f[0] for f in _facts(tmp_path / "orig.json")} == {"uninitialized_read"}


def test_a_storage_over_the_size_cap_is_saved_in_part_and_its_findings_still_reproduce(tmp_path):
    """Over --repro-max-bytes only the elements the view spans are saved (the rest is 0 when the
    reproducer runs, which its README says): the addresses, so the out-of-bounds findings, are the
    same."""
    (tmp_path / "script.py").write_text(SCRIPT)
    run = _check(["--repro", "repro", "--repro-max-bytes", "100", "--json", "orig.json", "--", "python", "script.py"],
                 tmp_path)
    assert run.returncode == 1, run.stderr
    folder = tmp_path / "repro" / "001-read_past"
    x = torch.load(folder / "launch.pt", weights_only=False)["args"]["x_ptr"]
    assert (x["storage_numel"], x["saved_from"]) == (64, 8)
    assert torch.equal(x["storage"], torch.arange(8, 40, dtype=torch.float32))  # the view's 32 elements only
    assert "saved exactly, the rest of the storage is 0" in (folder / "README.md").read_text()
    again = []
    for name in sorted(os.listdir(tmp_path / "repro")):
        rerun = _check(["--json", "again.json", "--", "python", str(tmp_path / "repro" / name / "repro.py")],
                       tmp_path)
        assert rerun.returncode == 1, rerun.stdout + rerun.stderr
        again += _facts(tmp_path / "again.json")
    assert sorted(again) == _facts(tmp_path / "orig.json")


def test_a_kernel_of_a_package_is_imported_with_its_package(tmp_path):
    """``mylib.ops.copy`` imports ``mylib.ops.util``: the reproducer imports the module by its name
    from the tree it was in, so its package's own imports resolve there (not to another copy)."""
    ops = tmp_path / "src" / "mylib" / "ops"
    ops.mkdir(parents=True)
    (tmp_path / "src" / "mylib" / "__init__.py").write_text("")
    (ops / "__init__.py").write_text("from mylib.ops.copy import copy_kernel  # noqa: F401\n")
    (ops / "util.py").write_text("BLOCK = 32\n")
    (ops / "copy.py").write_text(textwrap.dedent('''
        import triton
        import triton.language as tl
        from mylib.ops.util import BLOCK


        @triton.jit
        def copy_kernel(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))  # PKG
    '''))
    (tmp_path / "run.py").write_text("import sys, torch\nsys.path.insert(0, 'src')\n"
                                     "from mylib.ops.copy import copy_kernel, BLOCK\n"
                                     "copy_kernel[(1,)](torch.ones(20), torch.empty(20), 20, B=BLOCK)\n")
    assert _check(["--repro", "repro", "--json", "orig.json", "--", "python", "run.py"], tmp_path).returncode == 1
    (folder,) = os.listdir(tmp_path / "repro")
    state = torch.load(tmp_path / "repro" / folder / "launch.pt", weights_only=False)
    assert (state["module"], state["import_root"]) == ("mylib.ops.copy", str(tmp_path / "src"))
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    rerun = _check(["--json", "again.json", "--", "python", str(tmp_path / "repro" / folder / "repro.py")], elsewhere)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr
    assert _facts(elsewhere / "again.json") == _facts(tmp_path / "orig.json")


def test_a_reproducer_that_cannot_be_written_is_said_and_the_run_goes_on(tmp_path):
    """The script puts a file where DIR was (any user, root included, then cannot make folders in
    it): each launch's reproducer fails, said on stderr; the findings and the run are as without."""
    (tmp_path / "script.py").write_text("import os, shutil\nshutil.rmtree('repro')\nopen('repro', 'w').close()\n"
                                        + SCRIPT + "\nprint('the script ended')\n")
    run = _check(["--repro", "repro", "--json", "orig.json", "--", "python", "script.py"], tmp_path)
    assert run.returncode == 1, run.stderr  # the findings, as without --repro
    assert "the script ended" in run.stdout
    assert "could not write the reproducer of read_past" in run.stderr
    assert "could not write the reproducer of write_past" in run.stderr
    assert len(json.loads((tmp_path / "orig.json").read_text())["findings"]) == 2
