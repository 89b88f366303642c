"""The `sensitivity` command: what binds, what one more unit of each resource buys, shadow
prices and the routing-policy upper bound (cvxpy, imported only when the command runs)."""

from typing import Annotated

import typer

from prfaas_plan.choices import Mode
from prfaas_plan.cli.app import app
from prfaas_plan.cli.failures import PlanCommand
from prfaas_plan.cli.options import (
    BandwidthOpt,
    DataDirOpt,
    FormatOpt,
    ModeOpt,
    OutputFormat,
    OutputOpt,
    ScenarioArg,
)
from prfaas_plan.cli.output import emit, load_problem, spinner


@app.command("sensitivity", cls=PlanCommand)
def sensitivity(
    scenario: ScenarioArg = None,
    mode: ModeOpt = Mode.PAPER,
    bandwidth_gbps: BandwidthOpt = None,
    bins: Annotated[
        int,
        typer.Option("--bins", help="Length bins of the routing LP (2 to 100,000)."),
    ] = 2000,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """What binds at the optimum, what one more PrfaaS instance, PD instance, 10% of link or 10%
    of decode SLO slack is worth, the capacities' shadow prices and the routing LP's upper bound
    on every length-based routing policy."""
    from prfaas_plan.commands.sensitivity import sensitivity_report
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.render.sensitivity import sensitivity_to_json, sensitivity_view

    problem = load_problem(scenario, data_dir, bandwidth_gbps)
    with spinner(fmt is OutputFormat.TABLE and output is None, "solving the routing LPs…"):
        report = sensitivity_report(problem, mode, bins, Catalog.open(data_dir))
    emit(sensitivity_view(report), sensitivity_to_json(report), fmt, output)
