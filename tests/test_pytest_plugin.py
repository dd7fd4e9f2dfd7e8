"""``pytest --tritonkit``: each test of a suite runs checked; a test whose launches have findings
fails with them, xfail/markers/-k/-x/xdist work, child processes' findings count for their test,
the terminal summary and the JSON keyed by node id, and bad input gets a clear message. Each run is
a fresh pytest process (``pytester.runpytest_subprocess``), without ``TRITON_INTERPRET`` unless a
test says so: checked launches do not need it."""
import json
import sys
import textwrap

import pytest

from tritonkit import pytest_plugin

pytest_plugins = ["pytester"]

KERNELS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def copy_kernel(x_ptr, out_ptr, n, B: tl.constexpr, MASK: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        if MASK:
            m = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
        else:
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))  # BUG: no mask


    def copy(x, mask=True):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), B=64, MASK=mask)
        return out
''')

TESTS = textwrap.dedent('''
    import torch
    from kern import copy


    def test_clean():
        x = torch.randn(100)
        assert torch.equal(copy(x), x)


    def test_buggy():
        copy(torch.randn(100), mask=False)
''')


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(kern=KERNELS)
    pytester.syspathinsert()
    return pytester


def _bug_line(pytester) -> int:
    text = (pytester.path / "kern.py").read_text()
    return next(i for i, line in enumerate(text.splitlines(), 1) if "# BUG" in line)


def _run(pytester, *args):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)
    return result, "\n".join(result.outlines + result.errlines)


def _json(pytester, name="tk.json"):
    return json.loads((pytester.path / name).read_text())


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one_process", "xdist"])
def test_the_buggy_test_fails_with_its_finding_and_the_clean_one_passes(suite, workers):
    suite.makepyfile(test_two=TESTS)
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "tk.json", *workers)
    result.assert_outcomes(passed=1, failed=1)
    assert "FAILED test_two.py::test_buggy" in out and "test_clean" not in out.split("short test summary")[-1]
    assert "out_of_bounds: copy_kernel" in out and "x_ptr[100:128]" in out
    bug_line = _bug_line(suite)
    assert any(line.replace(" ", "").startswith(f">{bug_line}") for line in result.outlines)  # the line marked
    assert "2 tests checked: 2 launches of 1 kernel; 2 findings (2 out_of_bounds) in 1 test" in out
    data = _json(suite)
    assert set(data["tests"]) == {"test_two.py::test_clean", "test_two.py::test_buggy"}
    buggy, clean = data["tests"]["test_two.py::test_buggy"], data["tests"]["test_two.py::test_clean"]
    assert buggy["outcome"] == "failed" and clean["outcome"] == "passed" and clean["findings"] == []
    assert {(f["kind"], f["arg"], f["line"]) for f in buggy["findings"]} == \
        {("out_of_bounds", "x_ptr", bug_line), ("out_of_bounds", "out_ptr", bug_line)}
    assert data["summary"]["tests_with_findings"] == 1 and data["summary"]["launches"] == 2


def test_xfail_markers_parametrize_and_selection(suite, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # for the unchecked test, as on any machine without a GPU
    suite.makepyfile(test_marks=TESTS + textwrap.dedent('''
        import pytest


        @pytest.mark.xfail(reason="known bug")
        def test_known():
            copy(torch.randn(100), mask=False)


        @pytest.mark.tritonkit_off
        def test_off():
            copy(torch.randn(128), mask=False)  # in bounds here; unchecked anyway


        @pytest.mark.tritonkit(checks=["data_race"])
        def test_only_races():
            copy(torch.randn(100), mask=False)


        @pytest.mark.tritonkit(checks="bogus")
        def test_bad_marker():
            pass


        @pytest.mark.parametrize("n", [64, 100])
        def test_sizes(n):
            copy(torch.randn(n), mask=False)


        def test_own_failure():
            copy(torch.randn(100), mask=False)
            assert False, "the test's own assertion"
    '''))
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "tk.json")
    result.assert_outcomes(passed=4, failed=3, xfailed=1, errors=1)
    assert "test_marks.py::test_known" not in [ln.split(" ")[1] for ln in result.outlines if ln.startswith("FAILED")]
    assert "unknown check bogus" in out
    assert "AssertionError: the test's own assertion" in out and "tritonkit findings" in out
    tests = _json(suite)["tests"]
    assert tests["test_marks.py::test_known"]["outcome"] == "xfailed" and tests["test_marks.py::test_known"]["findings"]
    assert "test_marks.py::test_off" not in tests
    assert tests["test_marks.py::test_only_races"]["summary"]["checks"] == ["data_race"]
    assert tests["test_marks.py::test_sizes[64]"]["findings"] == [] and tests["test_marks.py::test_sizes[100]"]["findings"]
    assert len(tests["test_marks.py::test_own_failure"]["findings"]) == 2

    result, out = _run(suite, "--tritonkit", "-k", "sizes", "--tritonkit-json", "tk.json")
    result.assert_outcomes(passed=1, failed=1)
    assert set(_json(suite)["tests"]) == {"test_marks.py::test_sizes[64]", "test_marks.py::test_sizes[100]"}
    result, out = _run(suite, "--tritonkit", "-x", "test_marks.py")
    assert "stopping after 1 failures" in out


def test_fixtures_setup_and_teardown_are_checked(suite):
    suite.makepyfile(test_fix=textwrap.dedent('''
        import pytest
        import torch
        from kern import copy


        @pytest.fixture
        def made_in_setup():
            return copy(torch.randn(100), mask=False)


        @pytest.fixture
        def made_in_teardown():
            yield
            copy(torch.randn(100), mask=False)


        def test_setup_launch(made_in_setup):
            pass


        def test_teardown_launch(made_in_teardown):
            pass
    '''))
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "tk.json")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert "FAILED test_fix.py::test_setup_launch" in out and "ERROR test_fix.py::test_teardown_launch" in out
    tests = _json(suite)["tests"]
    assert len(tests["test_fix.py::test_setup_launch"]["findings"]) == 2
    assert tests["test_fix.py::test_teardown_launch"]["outcome"] == "error"


def test_a_test_that_skips_after_a_finding_fails_with_it(suite):
    """Issue 45: ``pytest.skip()`` after a launch with findings (in the body or in a fixture's setup)
    does not hide them; a plain skip still skips, an imperative xfail still xfails."""
    suite.makepyfile(test_skips=textwrap.dedent('''
        import pytest
        import torch
        from kern import copy


        @pytest.fixture
        def skips_in_setup():
            copy(torch.randn(100), mask=False)
            pytest.skip("no GPU today")


        def test_finding_then_skip():
            copy(torch.randn(100), mask=False)
            pytest.skip("not today")


        def test_fixture_finding_then_skip(skips_in_setup):
            pass


        def test_plain_skip():
            pytest.skip("nothing launched")


        def test_finding_then_xfail():
            copy(torch.randn(100), mask=False)
            pytest.xfail("known")
    '''))
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "tk.json")
    result.assert_outcomes(failed=1, errors=1, skipped=1, xfailed=1)
    assert result.ret != 0
    assert "FAILED test_skips.py::test_finding_then_skip" in out
    assert "ERROR test_skips.py::test_fixture_finding_then_skip" in out
    tests = _json(suite)["tests"]
    assert tests["test_skips.py::test_finding_then_skip"]["outcome"] == "failed"
    assert len(tests["test_skips.py::test_finding_then_skip"]["findings"]) == 2


def test_a_child_process_finding_counts_for_its_test(suite):
    suite.makepyfile(test_child=textwrap.dedent('''
        import os
        import subprocess
        import sys


        def test_child():
            code = "import torch; from kern import copy; copy(torch.randn(100), mask=False)"
            subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.getcwd()
                           + os.pathsep + os.environ.get("PYTHONPATH", "")})


        def test_after():
            pass
    '''))
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "tk.json")
    result.assert_outcomes(passed=1, failed=1)
    tests = _json(suite)["tests"]
    found = tests["test_child.py::test_child"]["findings"]
    assert len(found) == 2 and all(f["process"]["pid"] for f in found)
    assert "process   pid" in out


def test_without_the_flag_the_plugin_does_nothing(suite, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton's own interpreter, unchecked
    suite.makepyfile(test_two=TESTS)
    result, out = _run(suite, "-k", "clean")
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if line.startswith("=") and "tritonkit" in line]
    assert "tests checked" not in out


@pytest.mark.parametrize("args,message", [
    (["--tritonkit=bogus"], "--tritonkit=bogus: not a list of checks"),
    (["--tritonkit-json", "x.json"], "--tritonkit-json goes with --tritonkit"),
    (["--tritonkit", "--tritonkit-timeout", "0"], "--tritonkit-timeout must be a positive number"),
    (["-p", "no:xdist", "--tritonkit", "-n", "2"], "pytest-xdist, which is not installed"),
    (["--tritonkit", "--tritonkit-batch-memory", "0"], "--tritonkit-batch-memory MB: a positive number of MiB"),
    (["--tritonkit", "--tritonkit-timeout", "nan"], "--tritonkit-timeout must be a positive number"),
    (["--tritonkit", "--tritonkit-gpu-above", "lots"], "--tritonkit-gpu-above: 'lots' is not a number of elements"),
])
def test_bad_input_gets_a_clear_message(suite, args, message):
    suite.makepyfile(test_two=TESTS)
    result, out = _run(suite, *args)
    assert result.ret != 0 and message in out


def test_the_engine_options_reach_the_check_session(suite):
    suite.makepyfile(test_opts=textwrap.dedent('''
        from tritonkit.check.launch.active import active_session


        def test_options():
            s = active_session()
            assert s is not None and s.batch_memory == 8 << 20 and s.engine == "sequential"
            assert s.gpu_above == 1 << 30  # the default: launches over 2^30 elements on CUDA tensors on the GPU
    '''))
    result, out = _run(suite, "--tritonkit", "--tritonkit-batch-memory", "8", "--tritonkit-engine", "sequential")
    result.assert_outcomes(passed=1)


def test_a_bare_flag_before_a_path_is_the_flag_and_the_path(suite):
    suite.makepyfile(test_two=TESTS, test_other="def test_other():\n    pass\n")
    result, out = _run(suite, "--tritonkit", "test_two.py")
    result.assert_outcomes(passed=1, failed=1)  # test_other.py not collected: the path was taken


def test_a_worker_that_dies_leaves_its_findings_to_the_controller(suite):
    suite.makepyfile(test_crash=textwrap.dedent('''
        import os
        import signal
        import torch
        from kern import copy


        def test_dies():
            copy(torch.randn(100), mask=False)
            os.kill(os.getpid(), signal.SIGKILL)
    '''))
    result, out = _run(suite, "--tritonkit", "-n", "1", "--tritonkit-json", "tk.json")
    assert "crashed while running" in out
    test = _json(suite)["tests"]["test_crash.py::test_dies"]
    assert test["outcome"] == "crashed" and len(test["findings"]) == 2
    assert "out_of_bounds: copy_kernel" in out


def test_old_pytest_is_refused_with_what_to_do():
    with pytest.raises(pytest.UsageError, match=r"needs pytest 8.0 or newer; this is pytest 7.4.0.*pip install"):
        pytest_plugin.require_pytest("7.4.0")
    pytest_plugin.require_pytest("8.0.0")
    pytest_plugin.require_pytest("9.1.dev3")


def test_the_plugin_module_is_light():
    """pytest imports the plugin in every run of every project where tritonkit is installed."""
    import subprocess
    code = ("import sys, tritonkit.pytest_plugin; heavy = [m for m in ('torch', 'triton', 'numpy', 'rich') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_json_directory_is_made_and_a_failed_write_is_not_a_green_run(suite):
    """``--tritonkit-json reports/run1/tk.json`` makes the missing directories (as --junitxml does);
    a write that fails at the end (its directory gone) is said and makes the run fail (status 3)."""
    suite.makepyfile(test_one="def test_nothing():\n    pass\n")
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "reports/run1/tk.json")
    assert result.ret == 0, out
    assert _json(suite, "reports/run1/tk.json")["tests"]["test_one.py::test_nothing"]["outcome"] == "passed"
    suite.makepyfile(test_one=textwrap.dedent('''
        import shutil


        def test_removes_the_reports():
            shutil.rmtree("gone")
            open("gone", "w").close()  # a file where the JSON's directory was
    '''))
    result, out = _run(suite, "--tritonkit", "--tritonkit-json", "gone/tk.json")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, out
    assert "tritonkit: cannot write --tritonkit-json" in out


@pytest.mark.parametrize("name,message", [
    ("conftest.py", "an existing Python source file; writing it would overwrite it"),
    ("sub", "it is a directory"),
    ("/proc/tk.json", "cannot be written: cannot write in its directory /proc"),
])
def test_a_json_path_that_cannot_or_must_not_be_written_is_refused_before_the_tests(suite, name, message):
    if name.startswith("/proc") and not sys.platform.startswith("linux"):
        pytest.skip("no /proc")
    suite.makeconftest("X = 1\n")
    (suite.path / "sub").mkdir()
    suite.makepyfile(test_one="def test_nothing():\n    print('THE TEST RAN')\n")
    result, out = _run(suite, "--tritonkit", "-s", "--tritonkit-json", name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and message in out, out
    assert "THE TEST RAN" not in out and (suite.path / "conftest.py").read_text().strip() == "X = 1"
