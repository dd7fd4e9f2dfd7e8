"""Findings of an autotuned kernel's configs checked in workers are journaled as they are made:
when the checked process ends hard while its workers run (an out-of-memory kill), the run's journals
still hold every finding a serial run makes, and when it does not, none twice."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tritonkit.check.journal import merge, read_run

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")

SCRIPT = textwrap.dedent('''
    import os, sys
    import torch, triton, triton.language as tl
    import tritonkit
    from tritonkit.check.journal import Journal
    from tritonkit.check.launch import parallel

    run_dir, workers, die = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "die"
    if die:  # the parent ends hard after its workers finished, before it takes their results
        def finish(self):
            for pid, _ in self.children.values():
                os.waitpid(pid, 0)
            os._exit(9)
        parallel.Pool.finish = finish

    configs = [triton.Config({"BLOCK": b, "KEPT": int(k == 0)}, num_warps=w)
               for k, (b, w) in enumerate([(b, w) for b in (32, 64, 128, 256, 512) for w in (2, 4)])]

    @triton.autotune(configs=configs, key=["n"])
    @triton.jit
    def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, KEPT: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        if KEPT == 1:  # the kept config (the first): the parent runs it while the workers run others
            tl.store(out_ptr + offs, x, mask=offs < n + 1)  # LINE kept
        elif BLOCK == 64:  # configs 2 and 3: the parent's own share
            tl.store(out_ptr + offs, x, mask=offs < n + 2)  # LINE parent
        elif BLOCK == 512:  # configs 8 and 9: the last worker's share
            tl.store(out_ptr + offs, x, mask=offs < n + 3)  # LINE worker
        else:
            tl.store(out_ptr + offs, x, mask=offs < n)

    journal = Journal(run_dir, "root", ["out_of_bounds"], "auto")
    x, out = torch.arange(1000, dtype=torch.float32), torch.zeros(1000)
    with tritonkit.checking(workers=workers, journal=journal) as session:
        copy[lambda m: (triton.cdiv(1000, m["BLOCK"]),)](x, out, 1000)
    print(len(session.findings))
''')


def _lines():
    return {name: k + 1 for k, text in enumerate(SCRIPT.splitlines()) for name in ("kept", "parent", "worker")
            if text.endswith(f"# LINE {name}")}


def _run(tmp_path, name, workers, die):
    run_dir = tmp_path / name
    run_dir.mkdir()
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TRITONKIT_CHECK_CACHE="0")
    proc = subprocess.run([sys.executable, str(script), str(run_dir), str(workers), "die" if die else "live"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == (9 if die else 0), proc.stderr[-3000:]
    report = merge(read_run(str(run_dir)))
    return run_dir, [(f.kind, f.line, str(f.arg), tuple(f.configs)) for f in report.findings]


def test_a_parent_that_ends_hard_loses_no_finding_of_its_workers_or_its_held_kept_config(tmp_path):
    _, serial = _run(tmp_path, "serial", 1, False)
    lines = _lines()
    # serial order: the configs after the first, then the kept one
    assert [(k, line) for k, line, _, _ in serial] == [("out_of_bounds", lines[n]) for n in ("parent", "worker", "kept")]
    run_dir, died = _run(tmp_path, "died", 3, True)
    assert sorted(died) == sorted(serial)
    # the workers' and the kept config's findings were read from side journals no one settled
    sides = [p for p in os.listdir(run_dir) if p.startswith("s")]
    assert len(sides) == 3
    owner = [p for p in os.listdir(run_dir) if p.startswith("p")]
    assert len(owner) == 1 and '"settled"' not in (run_dir / owner[0]).read_text()


def test_a_parent_that_takes_its_workers_results_settles_their_side_journals(tmp_path):
    _, serial = _run(tmp_path, "serial", 1, False)
    run_dir, parallel = _run(tmp_path, "parallel", 3, False)
    assert parallel == serial  # the same findings, in the same order, none twice
    owner = [p for p in os.listdir(run_dir) if p.startswith("p")]
    settled = [json.loads(line)["journal"] for line in (run_dir / owner[0]).read_text().splitlines()
               if '"settled"' in line]
    assert sorted(settled) == sorted(p for p in os.listdir(run_dir) if p.startswith("s"))
    assert len(settled) == 3
