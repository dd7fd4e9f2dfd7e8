"""``tritonkit``'s command line as a whole: every subcommand is a module of ``tritonkit.cli`` (a new
module is a new subcommand), errors become exit statuses with a message, and the user's program
is taken the same way by every command (:class:`~tritonkit.cli._target.Target`)."""
import sys
import textwrap

import pytest

import tritonkit.cli as cli
from tritonkit import _imports
from tritonkit.cli import _status, main
from tritonkit.cli._target import Target


def test_help_lists_every_subcommand_in_order(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    names = ["check", "tune", "profile", "calibrate", "doctor", "cache", "distill"]
    assert all(f"    {n}" in out for n in names)
    assert [out.index(f"    {n}") for n in names] == sorted(out.index(f"    {n}") for n in names)
    assert main([]) == _status.USAGE


def test_a_module_added_to_the_package_is_a_new_subcommand(tmp_path, monkeypatch, capsys):
    (tmp_path / "hello.py").write_text(textwrap.dedent('''
        NAME = "hello"
        ORDER = 99

        def add_parser(sub):
            p = sub.add_parser("hello", help="say hello")
            p.add_argument("--who", default="world")
            return p

        def run(args):
            print(f"hello, {args.who}")
            return 0
    '''))
    monkeypatch.setattr(cli, "__path__", list(cli.__path__) + [str(tmp_path)])
    monkeypatch.delitem(sys.modules, "tritonkit.cli.hello", raising=False)
    assert main(["hello", "--who", "kernels"]) == 0
    assert capsys.readouterr().out == "hello, kernels\n"


@pytest.mark.parametrize("raised, status, text", [
    (cli.BadUsage("give a kernel name"), _status.USAGE, "tritonkit cache: error: give a kernel name"),
    (_imports.MissingDependency("distill needs scikit-learn: pip install 'tritonkit[distill]'"), _status.USAGE,
     "tritonkit[distill]"),
    (KeyboardInterrupt(), _status.INTERRUPTED, "tritonkit cache: interrupted"),
    (ZeroDivisionError("a bug of tritonkit's"), _status.USAGE, "internal error"),
])
def test_what_a_command_raises_becomes_a_status_and_a_message(monkeypatch, capsys, raised, status, text):
    from tritonkit.cli import cache

    def run(args, console=None):
        raise raised
    monkeypatch.setattr(cache, "run", run)
    assert main(["cache", "list"]) == status
    assert text in capsys.readouterr().err


def test_require_names_the_extra_for_a_missing_library():
    with pytest.raises(_imports.MissingDependency, match=r"pip install 'tritonkit\[report\]'.*matplotlib"):
        _imports.require("matplotlib.not_a_module_of_it", "drawing a roofline")
    assert _imports.require("json", "reading") is sys.modules["json"]


def test_targets_parse_and_travel_to_a_child_process(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    t = Target.parse(["python3", str(script), "--n", "5"])
    assert (t.kind, t.name, t.args, t.argv) == ("script", str(script), ("--n", "5"), [str(script), "--n", "5"])
    assert Target.from_words(t.words()) == t and t.program() == [str(script), "--n", "5"]
    m = Target.parse(["--", "-m", "pkg.mod", "x"])
    assert (m.kind, m.name, m.args) == ("module", "pkg.mod", ("x",)) and m.program()[1:3] == ["-m", "pkg.mod"]
    for words, message in (([], "nothing to run"), (["python", "-m"], "needs a module name"),
                           (["python", "-c", "1"], "unsupported python option"), ([str(tmp_path)], "is a directory")):
        with pytest.raises(cli.BadUsage, match=message):
            Target.parse(words)


def test_a_target_runs_as_main_and_says_how_it_ended(tmp_path, capsys):
    def status_of(body):
        script = tmp_path / "t.py"
        script.write_text(body)
        return Target.parse([str(script), "arg"]).run("tritonkit test")
    assert status_of("import sys\nassert __name__ == '__main__' and sys.argv[1:] == ['arg']\n") == _status.OK
    assert status_of("raise SystemExit(0)\n") == _status.OK
    assert status_of("raise SystemExit(4)\n") == _status.SCRIPT_FAILED
    assert "tritonkit test: the script exited with status 4" in capsys.readouterr().err
    assert status_of("def f():\n    raise ValueError('in the script')\nf()\n") == _status.SCRIPT_FAILED
    err = capsys.readouterr().err
    assert "ValueError: in the script" in err and 'line 3, in <module>' in err and "runpy" not in err
    with pytest.raises(KeyboardInterrupt):
        status_of("raise KeyboardInterrupt\n")
