"""The Typer application every command registers on: each command lives in its own
`cli/<topic>.py` module, imported by `cli/__init__.py` in the order --help lists them."""

import typer

from prfaas_plan.cli.failures import CliGroup

app = typer.Typer(
    cls=CliGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Capacity planner for Prefill-as-a-Service (PrfaaS) + PD-disaggregated LLM serving.",
)
