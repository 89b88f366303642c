"""`prfaas-plan procure`: flags -> commands/procure.py -> render/procure.py."""

from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import Mode
from prfaas_plan.cli.app import app
from prfaas_plan.cli.failures import PlanCommand
from prfaas_plan.cli.options import (
    DataDirOpt,
    FormatOpt,
    ModeOpt,
    OutputFormat,
    OutputOpt,
    ScenarioArg,
)
from prfaas_plan.cli.output import emit, load_problem, spinner
from prfaas_plan.cli.pricing import CostModelOpt, GpuPriceOpt, load_pricing


@app.command("procure", cls=PlanCommand)
def procure_command(
    scenario: ScenarioArg = None,
    target_rps: Annotated[
        float | None,
        typer.Option("--target-rps", help="Cheapest deployment reaching this Λ (req/s)."),
    ] = None,
    budget_usd_per_hour: Annotated[
        float | None,
        typer.Option("--budget-usd-per-hour", help="Highest Λ within this budget ($/h)."),
    ] = None,
    max_instances_per_site: Annotated[
        int | None,
        typer.Option(
            "--max-instances-per-site", help="Instances a site may hold [32, or the scenario's]."
        ),
    ] = None,
    mode: ModeOpt = Mode.PAPER,
    gpu_price: GpuPriceOpt = None,
    cost_model: CostModelOpt = None,
    export_model: Annotated[
        Path | None,
        typer.Option("--export-model", help="Also write the procurement MILP (.mps or .lp)."),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Cheapest deployment (PrfaaS sites x GPU type x link offering, instance counts, PD split,
    threshold) reaching --target-rps, or the highest throughput within --budget-usd-per-hour.
    Each site brings its own link offering (procurement.sites), so there is no --link-offering."""
    from prfaas_plan.commands.procure import procure
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.pricing import parse_gpu_prices
    from prfaas_plan.render.procure import procure_to_json, procure_view

    problem = load_problem(scenario, data_dir, None)
    pricing = load_pricing(problem, data_dir, gpu_price, None, cost_model, None)
    if pricing is None:
        from prfaas_plan.errors import ConfigError

        raise ConfigError(
            "procure needs prices: give --gpu-price for each GPU", parameter="gpu_price"
        )
    with spinner(fmt is OutputFormat.TABLE and output is None, "solving the procurement MILP…"):
        report = procure(
            Catalog.open(data_dir), problem, pricing, target_rps=target_rps,
            budget_usd_per_hour=budget_usd_per_hour, gpu_prices=parse_gpu_prices(gpu_price or []),
            max_instances_per_site=max_instances_per_site, mode=mode, export_model=export_model,
        )  # fmt: skip
    emit(procure_view(report), procure_to_json(report), fmt, output)
