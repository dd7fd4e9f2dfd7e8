"""``--width N`` of ``tritonkit check``, ``tune``, ``profile`` and ``doctor``: the console is N columns wide (the
doctor's steps too), and a width under 40 is refused with a usage error that says what to give."""
import argparse
import os

import pytest

from tritonkit.cli import build_parser, main
from tritonkit.cli._console import MIN_WIDTH, make_console

HATCHET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "proton",
                       "workload_h100.hatchet")


@pytest.mark.parametrize("command", ["check", "tune", "profile", "doctor"])
def test_width_is_an_option_of_the_commands_that_print_tables(command):
    parser, _ = build_parser()
    assert parser.parse_args([command, "--width", "100"]).width == 100
    assert parser.parse_args([command]).width is None


@pytest.mark.parametrize("command", ["check", "tune", "profile", "doctor"])
@pytest.mark.parametrize("width, says", [("10", "10 columns is too narrow for the tables: give --width 40 or more"),
                                         ("39", "39 columns is too narrow"),
                                         ("wide", "'wide' is not a number of columns")])
def test_a_width_under_40_is_refused_with_what_to_give(command, width, says, tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit('the script ran')\n")
    with pytest.raises(SystemExit) as e:
        main([command, "--width", width, "--", "python", str(script)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"tritonkit {command}: error: argument --width: {says}" in err and "usage:" in err


def test_check_prints_its_report_as_wide_as_width(tmp_path, capfd):
    script = tmp_path / "s.py"
    script.write_text("import torch, triton, triton.language as tl\n"
                      "@triton.jit\n"
                      "def k(x_ptr, B: tl.constexpr):\n"
                      "    tl.store(x_ptr + tl.arange(0, B), 1.0)\n"
                      "k[(1,)](torch.empty(4), B=8)\n")
    for width in (100, 60):
        assert main(["check", "--width", str(width), "--", "python", str(script)]) == 1
        lines = capfd.readouterr().out.splitlines()
        rule = next(line for line in lines if "tritonkit check summary" in line)
        assert len(rule) == width and max(len(line) for line in lines) <= width


def test_profile_prints_its_tables_as_wide_as_width(capsys):
    assert main(["profile", "--width", "100", "--from", HATCHET]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) == 100  # the table takes the room it is given, no more
    rows = [line for line in lines if line.startswith("│")]
    assert rows and all(len(line) <= 100 for line in rows)
    assert main(["profile", "--width", "40", "--from", HATCHET]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 40


def test_make_console_takes_the_width_and_refuses_a_narrow_one(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert make_console(100).width == 100  # --width before COLUMNS
    assert make_console().width == 200
    with pytest.raises(ValueError, match="under the least, 40"):
        make_console(MIN_WIDTH - 1)


def test_the_doctors_width_reaches_its_steps(tmp_path, monkeypatch):
    from tritonkit.doctor import run_doctor
    monkeypatch.delenv("COLUMNS", raising=False)
    seen = []

    def run(cmd, timeout=None, env=None):
        seen.append(env.get("COLUMNS"))
        raise KeyboardInterrupt  # the one step is enough

    ns = argparse.Namespace(out=str(tmp_path), skip="", nan=False, no_children=False, access_maps=2, budget=None,
                            timeout=None, width=100)
    run_doctor(ns, ["python", "x.py"], gpu=False, run=run, log=lambda m: None)
    ns.width = None
    run_doctor(ns, ["python", "x.py"], gpu=False, run=run, log=lambda m: None)
    assert seen == ["100", None]  # without --width, each step finds its own (80 where piped)
