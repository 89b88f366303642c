"""The console script runs a group of the one command its first argument names
(cli/application.py `command_line`), so typer builds that command's options alone: the group must
parse, help, fail and exit exactly as the whole app does for that command. Each case runs the
same arguments through both, in process, and compares exit code, stdout and stderr."""

import json

import pytest
import typer

from prfaas_plan.cli import app, command_line
from prfaas_plan.cli.application import COMMANDS, _name

NAMES = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
# the default suite's: a command with a required option, one named apart from its function and
# one with a positional argument and list values; every other command's with the slow checks
FIRST = ("evaluate", "compare-policies", "simulate")


def run(runnable: object, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple:
    with pytest.raises(SystemExit) as exit:
        runnable(args=args, prog_name="prfaas-plan")  # type: ignore[operator]
    out, err = capsys.readouterr()
    return exit.value.code, out, err


def both(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[tuple, tuple]:
    alone = command_line(args)
    assert alone is not app
    assert list(alone.commands) == [args[0]]  # type: ignore[attr-defined]
    return run(alone, args, capsys), run(app, args, capsys)


def test_the_command_map_names_each_commands_module():
    """COMMANDS (which module a command line imports) maps every command the modules register
    to its module, and nothing else (--help's order: tests/project/test_docs.py against docs/commands.md)."""
    registered = {_name(c): c.callback.__module__ for c in app.registered_commands}
    assert registered == {name: f"prfaas_plan.cli.{module}" for name, module in COMMANDS.items()}


@pytest.mark.parametrize(
    "name", [n if n in FIRST else pytest.param(n, marks=pytest.mark.slow) for n in NAMES]
)
def test_each_commands_help_is_the_whole_apps(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    alone, whole = both([name, "--help"], capsys)
    assert alone == whole
    assert alone[0] == 0 and f"prfaas-plan {name}" in alone[1]


@pytest.mark.parametrize(
    "args",
    [
        ["optimize", "--threshold-tokens", "abc"],  # a value typer refuses
        ["optimize", "--no-such-flag"],  # an unknown option
        ["evaluate"],  # a required option missing
        ["optimize", "--bandwidth-gbps", "-3"],  # a value the library refuses
        ["optimize", "--mode", "exact", "--mode", "simple"],  # a flag given twice
        ["procure", "--target-rps", "1", "--budget-usd-per-hour", "1"],  # two targets
    ],
)
def test_refusals_are_the_whole_apps(args, capsys):
    alone, whole = both(args, capsys)
    assert alone == whole
    assert alone[0] != 0 and alone[2].startswith("error: ")


def test_a_plan_is_the_whole_apps(capsys):
    alone, whole = both(["optimize", "-f", "json"], capsys)
    assert alone == whole
    assert alone[0] == 0 and json.loads(alone[1])["plan"]["threshold_tokens"] > 0


@pytest.mark.parametrize("args", [[], ["--help"], ["optimze"], ["--data-dir", "x", "optimize"]])
def test_anything_but_a_command_name_first_is_the_whole_app(args):
    assert command_line(args) is app


def test_shell_completion_gets_the_whole_app(monkeypatch):
    monkeypatch.setenv("_PRFAAS_PLAN_COMPLETE", "bash_complete")
    assert command_line(["optimize"]) is app
