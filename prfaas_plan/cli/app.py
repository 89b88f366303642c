"""The Typer application every command registers on: `cli/__init__.py` holds the original commands,
newer ones live in their own `cli/<command>.py` module, imported by `cli/__init__.py`."""

import typer

from prfaas_plan.cli.failures import PlanGroup

app = typer.Typer(
    cls=PlanGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Capacity planner for Prefill-as-a-Service (PrfaaS) + PD-disaggregated LLM serving.",
)
