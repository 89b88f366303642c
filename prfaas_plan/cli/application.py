"""The Typer application every command registers on: each command lives in its own
`cli/<topic>.py` module, imported in the order --help lists them.

`whole_app` imports every module (COMMANDS); a command line imports only the module of the
command it runs (`command_line`)."""

import os
from collections.abc import Callable, Sequence
from functools import cache
from importlib import import_module
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

# each command's name on the command line -> its module in cli/, in the order --help lists them
# (tests/cli/test_command_line.py checks it against the commands the modules register)
COMMANDS = {
    "optimize": "plan", "evaluate": "plan", "kv": "catalog", "egress": "catalog",
    "simulate": "simulate", "compare-policies": "simulate", "check": "check",
    "explain": "explain", "import-profile": "import_profile", "procure": "procure",
    "sensitivity": "sensitivity", "serve": "serve", "sweep": "sweep", "sweep-report": "sweep",
    "export": "export",
}  # fmt: skip


def _import_command(module: str) -> None:
    import_module(f"prfaas_plan.cli.{module}")  # registers its commands on `app`


@cache
def whole_app() -> typer.Typer:
    """`app` with every command registered, listed in COMMANDS' order whichever of their
    modules was imported first."""
    for module in dict.fromkeys(COMMANDS.values()):
        _import_command(module)
    order = list(COMMANDS)
    app.registered_commands.sort(key=lambda command: order.index(_name(command)))
    return app


def command_line(args: Sequence[str]) -> Callable[[], Any]:
    """What runs the command line whose arguments are `args`: when the first names a command,
    a group of that command alone, its module the only one of cli/'s commands imported; else
    (help, an unknown name, shell completion) the whole app.

    typer builds every command's options (signatures, annotations, parameter types) before the
    group runs: ~79M instructions for the 15 commands, 5% of an `optimize`, of which the one
    run needs ~8M; importing the other commands' modules is 28M more. A group of one command
    parses, helps, fails and exits as the whole app does for that command
    (tests/cli/test_command_line.py)."""
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
    if not args or args[0] not in COMMANDS or completing:
        return whole_app()
    _import_command(COMMANDS[args[0]])
    named = [c for c in app.registered_commands if _name(c) == args[0]]
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
