"""The Typer application every command registers on: each command lives in its own
`cli/<topic>.py` module, imported by `cli/__init__.py` in the order --help lists them."""

import os
from collections.abc import Callable, Sequence
from typing import Any

import typer
import typer.main

from prfaas_plan.cli.failures import CliGroup


def _application() -> typer.Typer:
    """An application with the command line's settings, and no command yet."""
    return typer.Typer(
        cls=CliGroup,
        add_completion=False,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        help="Capacity planner for Prefill-as-a-Service (PrfaaS) + PD-disaggregated LLM serving.",
    )


app = _application()


def command_line(args: Sequence[str]) -> Callable[[], Any]:
    """What runs the command line whose arguments are `args`: when the first names a command,
    a group of that command alone; else (help, an unknown name, shell completion) the whole app.

    typer builds every command's options (signatures, annotations, parameter types) before the
    group runs: ~79M instructions for the 15 commands, 5% of an `optimize`, of which the one
    run needs ~8M. A group of one command parses, helps, fails and exits as the whole app does
    for that command (tests/cli/test_command_line.py)."""
    named = [c for c in app.registered_commands if args and _name(c) == args[0]]
    if not named or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return app
    alone = _application()
    alone.registered_commands = named
    # a group even of one command (typer.Typer would make a lone command the program itself)
    return typer.main.get_group(alone)


def _name(command: typer.models.CommandInfo) -> str:
    """The command's name on the command line, as typer derives it."""
    if command.name is not None:
        return command.name
    assert command.callback is not None  # every command here is a decorated function
    return typer.main.get_command_name(command.callback.__name__)
