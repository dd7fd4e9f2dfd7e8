"""tritonkit.tune distill: decision-tree heuristics from tuned winners, their held-out regret, the
generated module (exec'd, and accepted by triton.heuristics) and the ``distill`` command."""
import argparse
import io
import itertools
import json
import math
import random

import pytest

pytest.importorskip("sklearn")

from tritonkit.cli import distill as distill_cmd  # noqa: E402
from tritonkit.cli._status import BadUsage  # noqa: E402
from tritonkit.tune._distill import Distilled, Regret, distill, evaluate, render_source  # noqa: E402
from tritonkit.tune._result import Trial, TuneResult  # noqa: E402
from tritonkit.tune._space import point_key  # noqa: E402

CONFIGS = [dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
           for bm, bn, w, s in itertools.product((32, 64, 128), (64, 128), (4, 8), (2, 3))]


def rule_m(M, N, K, dtype):
    """BLOCK_M 64 is best below M=1024, 128 from there (32 for float32)."""
    return 32 if dtype == "torch.float32" else (64 if M < 1024 else 128)


def rule_ratio(M, N, K, dtype):
    """BLOCK_M 128 is best where M >= 2 N (tall outputs), else 64."""
    return 128 if M >= 2 * N else 64


def _time(M, N, K, c, rng, dtype="torch.float16", rule=rule_m):
    """A made-up timing model: BLOCK_M as ``rule`` says; BLOCK_N 128 and 8 warps are a little
    better; num_stages is a near-tie (noise only)."""
    best_bm = rule(M, N, K, dtype)
    f = 1.0 + 0.25 * abs(math.log2(c["BLOCK_M"] / best_bm))
    f *= 1.0 + (0.0 if c["BLOCK_N"] == 128 else 0.08)
    f *= 1.0 + (0.0 if c["num_warps"] == 8 else 0.06)
    f *= 1.0 + rng.uniform(0, 0.01)
    return (M * N * K * 1e-9 + 0.01) * f


def synthetic(n_keys=36, seed=0, dtypes=("torch.float16",), kernel="mm", rule=rule_m, out_dtype=None):
    """Tuning results at ``n_keys`` random shapes; the key is [M, N, K, dtype of a] (+ [dtype of c])."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_keys):
        M = max(16, int(round(2 ** rng.uniform(4, 13) / 16)) * 16)
        N = rng.choice([256, 512, 1024, 2048, 4096])
        K = rng.choice([256, 1024, 4096])
        dt = rng.choice(dtypes)
        trials = [Trial(point=c, ms=_time(M, N, K, c, rng, dt, rule), source="fake") for c in CONFIGS]
        key = [str(M), str(N), str(K), dt] + ([out_dtype] if out_dtype else [])
        out.append(TuneResult(kernel=kernel, key=key, trials=trials))
    return out


class FakeTensor:
    def __init__(self, dtype):
        self.dtype = dtype


@pytest.fixture(scope="module")
def mm():
    return synthetic(), distill(synthetic(), ["M", "N", "K"])


def _exec(source):
    ns = {}
    exec(compile(source, "<distilled>", "exec"), ns)
    return ns


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_recovers_the_rule_and_reaches_the_goal(mm):
    results, d = mm
    assert d.n_keys == 36 and d.key_names == ["M", "N", "K"]
    assert d.held_out.speed_geomean >= 0.95 and d.meets_goal
    assert d.held_out.n_known == d.held_out.n == 36 and not d.held_out.unknown and not d.held_out.failed
    # better than one config for every key, which the rule makes ~10% slower
    assert d.held_out.speed_geomean > d.baseline.speed_geomean
    assert 1 <= d.depth <= 4 and d.leaves >= 2
    assert {c["BLOCK_M"] for c in d.configs} == {64, 128}
    ns = _exec(d.source)
    for N, K in itertools.product((256, 4096), (256, 4096)):
        for M, bm in ((16, 64), (100, 64), (500, 64), (2000, 128), (8192, 128), (30000, 128)):
            args = {"M": M, "N": N, "K": K}
            assert ns["choose_config"](args)["BLOCK_M"] == bm, (M, N, K)
            assert d.choose_config(args)["BLOCK_M"] == bm
    assert d.splits_on() == ["M"] and "if args['M'] <= " in d.source  # a readable split on M, a number


def test_generated_source_matches_the_model(mm):
    results, d = mm
    ns = _exec(d.source)
    rng = random.Random(1)
    keys = [r.key for r in results] + [[str(rng.randint(1, 40000)), str(rng.choice([1, 300, 8192])),
                                        str(rng.randint(1, 9000)), "torch.float16"] for _ in range(200)]
    for key in keys:
        args = {"M": int(key[0]), "N": int(key[1]), "K": int(key[2])}
        want = d.predict(key)
        assert ns["choose_config"](args) == want == d.choose_config(args)
    # on the training keys, what the final tree picks is what the training regret records
    for rec in d.training.per_key:
        assert point_key(d.predict(rec["key"])) == rec["chosen"]
    # every config the function returns is one of the configs used, num_warps/num_stages included
    assert ns["META_PARAMETERS"] == ("BLOCK_M", "BLOCK_N")
    assert "num_warps" in d.source and "num_stages" in d.source
    assert "training key(s)" in d.source
    json.dumps(d.to_dict())


def test_dtype_and_ratio_features_exec_like_the_model():
    # float32 keys want BLOCK_M 32 whatever M is: the tree must read the dtype of the tensor args
    # the key ends with the dtypes of a (float16 or float32) and c (always float32), as triton.autotune builds it
    results = synthetic(n_keys=48, seed=3, dtypes=("torch.float16", "torch.float32"), out_dtype="torch.float32")
    d = distill(results, ["M", "N", "K"])
    assert "dtype0 == 'torch.float16'" in d.features and "M/N" in d.features
    assert "_dtypes(args)[0]" in d.source and not d.ratios  # M alone does it: no ratio
    assert d.held_out.speed_geomean >= 0.95
    ns = _exec(d.source)
    rng = random.Random(2)
    for _ in range(200):
        key = [str(rng.randint(1, 40000)), str(rng.choice([1, 300, 8192])), str(rng.randint(1, 9000)),
               rng.choice(["torch.float16", "torch.float32"]), "torch.float32"]
        # a heuristics args dict: every kernel argument by name; tensors carry the dtype
        args = {"a_ptr": FakeTensor(key[3]), "c_ptr": FakeTensor(key[4]), "M": int(key[0]), "N": int(key[1]),
                "K": int(key[2])}
        assert ns["choose_config"](args) == d.predict(key) == d.choose_config(args)
        if key[3] == "torch.float32":
            assert d.predict(key)["BLOCK_M"] == 32


def test_triton_heuristics_accepts_the_generated_dict(mm):
    triton = pytest.importorskip("triton")
    import triton.language as tl

    _, d = mm
    ns = _exec(d.source)

    @triton.jit
    def kernel(x_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pass

    wrapped = triton.heuristics(ns["HEURISTICS"])(kernel)
    assert set(wrapped.values) == {"BLOCK_M", "BLOCK_N"}

    # what Heuristics.run does at a launch, without a GPU: it fills in the meta-parameters
    seen = {}

    class FakeJit:
        arg_names = ["x_ptr", "M", "N", "K", "BLOCK_M", "BLOCK_N"]

        def run(self, *args, **kwargs):
            seen.update(kwargs)

    h = triton.heuristics(ns["HEURISTICS"])(FakeJit())
    h.run(FakeTensor("torch.float16"), 4096, 1024, 512, grid=(1,), warmup=False)
    cfg = ns["choose_config"]({"M": 4096, "N": 1024, "K": 512})
    assert seen["BLOCK_M"] == cfg["BLOCK_M"] == 128 and seen["BLOCK_N"] == cfg["BLOCK_N"]
    assert "num_warps" not in seen  # a launch option, passed by the user (see the module's comment)


def _tiny():
    """3 keys, configs A/B/C; C is not measured at the third key and fails at the second."""
    A = {"BLOCK": 64, "num_warps": 4, "num_stages": 3}
    B = {"BLOCK": 128, "num_warps": 4, "num_stages": 3}
    C = {"BLOCK": 256, "num_warps": 8, "num_stages": 3}
    table = {("128",): {"A": 1.0, "B": 1.5, "C": 2.0},
             ("1024",): {"A": 3.0, "B": 2.0, "C": None},   # C measured, failed
             ("8192",): {"A": 9.0, "B": 6.0}}               # C not measured
    pts = {"A": A, "B": B, "C": C}
    results = []
    for key, times in table.items():
        trials = [Trial(point=pts[n], ms=ms) if ms is not None else Trial(point=pts[n], status="failed",
                                                                           error="out of resources")
                  for n, ms in times.items()]
        results.append(TuneResult(kernel="tiny", key=list(key), trials=trials))
    return results, table, pts


def test_regret_hand_checkable():
    results, table, pts = _tiny()
    # a key tuned twice is one key; a config measured twice there counts with its best time
    results.append(TuneResult("tiny", ["128"], [Trial(pts["A"], ms=table[("128",)]["A"] * 1.5)]))
    r = evaluate(lambda key: pts["A"], results)
    speeds = [min(v for v in t.values() if v) / t["A"] for t in table.values()]
    assert r.n == r.n_known == 3
    assert r.speed_geomean == pytest.approx(_geomean(speeds))
    assert r.speed_worst == pytest.approx(min(speeds))
    assert r.slowdown_mean == pytest.approx(sum(1 / s - 1 for s in speeds) / 3)
    assert r.slowdown_worst == pytest.approx(max(1 / s - 1 for s in speeds))
    assert [p["winner"] for p in r.per_key] == [point_key(pts[n]) for n in ("A", "B", "B")]


def test_missing_and_failed_measurements_are_reported_not_zero():
    results, table, pts = _tiny()
    r = evaluate(lambda key: pts["C"], results)
    assert r.n == 3 and r.n_known == 1
    assert r.unknown == [["8192"]] and r.failed == [["1024"]]
    assert r.speed_geomean == pytest.approx(table[("128",)]["A"] / table[("128",)]["C"])
    statuses = {tuple(p["key"]): (p["status"], p["speed"]) for p in r.per_key}
    assert statuses[("8192",)] == ("unknown", None) and statuses[("1024",)] == ("failed", None)


def test_distill_with_sparse_measurements_reports_unknown():
    # A wins at the five small keys and is not measured at the large one, where only B ran
    A = {"BLOCK": 64, "num_warps": 4, "num_stages": 3}
    B = {"BLOCK": 128, "num_warps": 4, "num_stages": 3}
    results = [TuneResult("k", [str(m)], [Trial(A, ms=m * 1e-3), Trial(B, ms=m * 2e-3)]) for m in (16, 32, 64, 128, 256)]
    results.append(TuneResult("k", ["65536"], [Trial(B, ms=1.0)]))
    d = distill(results, ["M"], folds=None)
    assert d.held_out.method == "leave-one-out"
    # held out, the large key gets A (all other keys are A's), which was never measured there
    assert ["65536"] in d.held_out.unknown
    assert d.held_out.n_known == d.held_out.n - len(d.held_out.unknown) - len(d.held_out.failed)
    rec = next(p for p in d.held_out.per_key if p["key"] == ["65536"])
    assert rec["status"] == "unknown" and rec["speed"] is None
    assert any("not measured at every key" in n for n in d.notes)
    # the final function still uses B for large M, where it is the only config measured
    assert d.predict(["65536"])["BLOCK"] == 128 and d.predict(["16"])["BLOCK"] == 64


def test_held_out_statistics_follow_from_the_trials(mm):
    results, d = mm
    by_key = {tuple(r.key): {t.key: t.ms for t in r.trials if t.ok} for r in results}
    speeds, slow = [], []
    for p in d.held_out.per_key:
        times = by_key[tuple(p["key"])]
        winner = min(times.values())
        assert p["winner_ms"] == winner and p["chosen_ms"] == times[p["chosen"]]
        speeds.append(winner / times[p["chosen"]])
        slow.append(times[p["chosen"]] / winner - 1)
    assert d.held_out.speed_geomean == pytest.approx(_geomean(speeds))
    assert d.held_out.speed_worst == pytest.approx(min(speeds))
    assert d.held_out.slowdown_mean == pytest.approx(sum(slow) / len(slow))
    assert d.held_out.slowdown_worst == pytest.approx(max(slow))


def test_too_few_keys():
    with pytest.raises(ValueError, match=r"at least 4 tuned keys.*got 3.*Tune more shapes"):
        distill(synthetic(n_keys=3), ["M", "N", "K"])


def test_keys_without_a_successful_trial_are_skipped():
    results = synthetic(n_keys=8)
    dead = [TuneResult("mm", ["777", "512", "256", "torch.float16"],
                       [Trial(c, status="failed", error="out of resources") for c in CONFIGS])]
    d = distill(results + dead, ["M", "N", "K"])
    assert d.n_keys == 8 and any("skipped 1 key" in n and "777" in n for n in d.notes)
    with pytest.raises(ValueError, match="got 3"):
        distill(results[:3] + dead, ["M", "N", "K"])


def test_key_names_must_fit_the_keys():
    results = synthetic(n_keys=6)
    with pytest.raises(ValueError, match="names 5 key arguments"):
        distill(results, ["M", "N", "K", "x", "y"])
    with pytest.raises(ValueError, match="not a dtype"):
        distill(results, ["M"])
    d = distill(results)  # no names: key0.. with a note
    assert d.key_names == ["key0", "key1", "key2"] and any("no key names" in n for n in d.notes)


def _parse(argv):
    p = argparse.ArgumentParser(prog="tritonkit")
    distill_cmd.add_parser(p.add_subparsers(dest="command"))
    return p.parse_args(argv)


def test_cli_writes_module_and_json(mm, tmp_path):
    from rich.console import Console

    results, _ = mm
    out, js = tmp_path / "mm_heur.py", tmp_path / "mm.json"
    ns = _parse(["distill", "mm", "--key-names", "M,N,K", "--out", str(out), "--json", str(js)])
    buf = io.StringIO()
    asked = []
    rc = distill_cmd.run(ns, console=Console(file=buf, width=200), load=lambda k: asked.append(k) or results)
    text = buf.getvalue()
    assert rc == 0 and asked == ["mm"]
    assert "depth" in text and "splitting on M" in text and "held out" in text and "BLOCK_M=128" in text and f"wrote {out}" in text
    assert _exec(out.read_text())["choose_config"]({"M": 8192, "N": 512, "K": 512})["BLOCK_M"] == 128
    data = json.loads(js.read_text())
    assert data["held_out"]["speed_geomean"] >= 0.95 and data["source"] == out.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_cli_errors(tmp_path):
    ns = _parse(["distill", "mm", "--out", str(tmp_path / "x.py")])
    with pytest.raises(BadUsage, match="at least 4 tuned keys"):
        distill_cmd.run(ns, load=lambda k: synthetic(n_keys=2))
    with pytest.raises(BadUsage, match="no tuning results"):
        distill_cmd.run(ns, load=lambda k: [])
    ns = _parse(["distill", "mm", "--out", str(tmp_path / "missing" / "x.py")])
    with pytest.raises(BadUsage, match="no directory"):
        distill_cmd.run(ns, load=lambda k: synthetic())
    assert not (tmp_path / "x.py").exists()


def test_ratio_feature_where_it_helps():
    results = synthetic(n_keys=48, seed=4, rule=rule_ratio)
    d = distill(results, ["M", "N", "K"])
    assert d.ratios and "M/N" in d.splits_on() and "_ratio(args['M'], args['N']) <= " in d.source
    assert d.held_out.speed_geomean >= 0.95
    ns = _exec(d.source)
    rng = random.Random(5)
    for _ in range(300):
        M, N, K = rng.randint(0, 40000), rng.choice([0, 1, 300, 8192]), rng.randint(1, 9000)
        args = {"M": M, "N": N, "K": K}
        assert ns["choose_config"](args) == d.choose_config(args) == d.predict([str(M), str(N), str(K), "torch.float16"])
    assert ns["choose_config"]({"M": 64, "N": 4096, "K": 64})["BLOCK_M"] == 64
    assert ns["choose_config"]({"M": 16384, "N": 256, "K": 64})["BLOCK_M"] == 128


def _sparse():
    """Six keys: A wins at the five small ones and is not measured at the large one, where only B ran."""
    A = {"BLOCK": 64, "num_warps": 4, "num_stages": 3}
    B = {"BLOCK": 128, "num_warps": 4, "num_stages": 3}
    results = [TuneResult("k", [str(m)], [Trial(A, ms=m * 1e-3), Trial(B, ms=m * 2e-3)])
               for m in (16, 32, 64, 128, 256)]
    return results + [TuneResult("k", ["65536"], [Trial(B, ms=1.0)])]


@pytest.mark.parametrize("case", ["numbers", "ratio", "dtypes", "sparse"])
def test_distilled_round_trips_through_its_json(case, mm):
    """What ``tritonkit distill --json`` writes reads back (Distilled.from_dict) as the same result,
    with a tree that picks the same configs and renders the same module."""
    if case == "numbers":
        results, d = mm
    elif case == "ratio":
        results = synthetic(n_keys=48, seed=4, rule=rule_ratio)
        d = distill(results, ["M", "N", "K"])
        assert d.ratios and "M/N" in d.splits_on()
    elif case == "dtypes":
        results = synthetic(n_keys=48, seed=3, dtypes=("torch.float16", "torch.float32"), out_dtype="torch.float32")
        d = distill(results, ["M", "N", "K"])
        assert "dtype0 == 'torch.float16'" in d.splits_on()
    else:
        results = _sparse()
        d = distill(results, ["M"], folds=None)
    data = json.loads(json.dumps(d.to_dict(), indent=1, default=str))  # as the command writes it
    back = Distilled.from_dict(data)
    assert back == d
    assert back.to_dict() == d.to_dict()
    assert back.splits_on() == d.splits_on() and back.leaf_counts() == d.leaf_counts()
    assert back.meets_goal == d.meets_goal
    assert render_source(back) == d.source
    rng = random.Random(7)
    keys = [r.key for r in results]
    if case != "sparse":
        for _ in range(100):
            key = [str(rng.randint(1, 40000)), str(rng.choice([1, 300, 8192])), str(rng.randint(1, 9000)),
                   rng.choice(["torch.float16", "torch.float32"])]
            keys.append(key + (["torch.float32"] if case == "dtypes" else []))
    for key in keys:
        assert back.predict(key) == d.predict(key)
        if case == "sparse":
            args = {"M": int(key[0])}
        else:
            args = {"a_ptr": FakeTensor(key[3]), "M": int(key[0]), "N": int(key[1]), "K": int(key[2])}
            if case == "dtypes":
                args["c_ptr"] = FakeTensor(key[4])
        assert back.choose_config(args) == d.choose_config(args)


def test_regret_round_trips(mm):
    _, d = mm
    for r in (d.held_out, d.baseline, d.training):
        assert Regret.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_distilled_without_a_tree_keeps_its_fields_but_cannot_predict(mm):
    _, d = mm
    data = d.to_dict()
    data["tree"] = None
    bare = Distilled.from_dict(data)
    assert bare == d  # every plain field
    assert bare.splits_on() == [] and bare.leaf_counts() == {}
    with pytest.raises(ValueError, match="no tree"):
        bare.predict(["1024", "1024", "1024", "torch.float16"])
    with pytest.raises(ValueError, match="no tree"):
        bare.choose_config({"M": 1024, "N": 1024, "K": 1024})
