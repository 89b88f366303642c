"""`prfaas-plan procure`: flags -> a ProcureRequest (or, with --pareto, a ParetoRequest) ->
its use-case (use_cases/calls.py) -> render/procure.py."""

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import (
    DataDirOpt,
    ModeOpt,
    OutputFormat,
    OutputOpt,
    ScenarioArg,
    TtftLoadRpsOpt,
    TtftPercentileOpt,
    TtftTargetOpt,
    check_distinct_outputs,
    plot_name,
    plot_target,
)
from prfaas_plan.cli.output import emit, load_problem, spinner
from prfaas_plan.cli.pricing import CostModelOpt, GpuPriceOpt, gpu_prices
from prfaas_plan.errors import ConfigError
from prfaas_plan.use_cases.field_docs import describe

if TYPE_CHECKING:
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.scenario import Problem
    from prfaas_plan.use_cases.procure_requests import ParetoRequest


class ProcureFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"
    CSV = "csv"  # --pareto only: its frontiers, one plan a row


@app.command("procure", cls=CliCommand)
def procure_command(
    scenario: ScenarioArg = None,
    target_rps: Annotated[
        float | None,
        typer.Option("--target-rps", help=describe("ProcureRequest", "target_rps")),
    ] = None,
    budget_usd_per_hour: Annotated[
        float | None,
        typer.Option(
            "--budget-usd-per-hour", help=describe("ProcureRequest", "budget_usd_per_hour")
        ),
    ] = None,
    max_instances_per_site: Annotated[
        int | None,
        typer.Option(
            "--max-instances-per-site",
            help=describe("ProcureRequest", "max_instances_per_site"),
        ),
    ] = None,
    mode: ModeOpt = None,
    gpu_prices_usd_per_gpu_hour: GpuPriceOpt = None,
    cost_model: CostModelOpt = None,
    export_model: Annotated[
        Path | None,
        typer.Option(
            "--export-model",
            help="Also write the procurement MILP on the threshold grid (.mps or .lp).",
        ),
    ] = None,
    ttft_target_s: TtftTargetOpt = None,
    ttft_percentile: TtftPercentileOpt = None,
    ttft_load: Annotated[
        float | None,
        typer.Option(
            "--ttft-load",
            help=describe("ProcureRequest", "ttft_load"),
        ),
    ] = None,
    ttft_load_rps: TtftLoadRpsOpt = None,
    pareto: Annotated[
        bool,
        typer.Option(
            "--pareto",
            help="The non-dominated plans of cost against Λ_max and, among plans reaching "
            "--target-rps, against P90 TTFT (unloaded, or at --ttft-load-rps).",
        ),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="With --pareto: also draw the frontiers (.png/.svg/.pdf).",
            callback=plot_target,
            parser=plot_name,
        ),
    ] = None,
    fmt: Annotated[
        ProcureFormat, typer.Option("--format", "-f", help="Output format (csv: --pareto only).")
    ] = ProcureFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Cheapest deployment (PrfaaS sites x GPU type x link offering, instance counts, PD split,
    threshold) reaching --target-rps, or the highest throughput within --budget-usd-per-hour.
    Each site brings its own link offering (procurement.sites), so there is no --link-offering.
    --pareto: the cost frontiers instead (needs --target-rps for the latency frontier)."""
    from prfaas_plan.render.procure import procure_to_json, procure_view
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.procure_requests import ParetoRequest, ProcureRequest
    from prfaas_plan.use_cases.requests import build

    check_distinct_outputs(output, plot)
    if pareto and (ttft_target_s is not None or ttft_load is not None or ttft_percentile):
        raise ConfigError(
            "--pareto takes --ttft-load-rps alone (the latency frontier's load), not "
            "--ttft-target-s, --ttft-load or --ttft-percentile", parameter="pareto",
        )  # fmt: skip
    if pareto and (budget_usd_per_hour is not None or export_model is not None):
        raise ConfigError(
            "--pareto takes --target-rps (the latency frontier's load), not "
            "--budget-usd-per-hour or --export-model", parameter="pareto",
        )  # fmt: skip
    if pareto and target_rps is None:
        raise ConfigError("--pareto needs --target-rps (the latency frontier's load)",
                          parameter="target_rps")  # fmt: skip
    if not pareto and (plot is not None or fmt is ProcureFormat.CSV):
        raise ConfigError("--plot and --format csv need --pareto", parameter="pareto")
    prices = dict(
        gpu_prices_usd_per_gpu_hour=gpu_prices(gpu_prices_usd_per_gpu_hour), cost_model=cost_model
    )
    space = dict(max_instances_per_site=max_instances_per_site, mode=mode)
    if pareto:
        pareto_request = build(
            ParetoRequest, target_rps=target_rps, ttft_load_rps=ttft_load_rps, **prices, **space
        )
        _pareto(*load_problem(scenario, data_dir, None), pareto_request, plot, fmt, output)
        return
    request = build(
        ProcureRequest, target_rps=target_rps, budget_usd_per_hour=budget_usd_per_hour,
        ttft_target_s=ttft_target_s, ttft_percentile=ttft_percentile, ttft_load=ttft_load,
        ttft_load_rps=ttft_load_rps, **prices, **space,
    )  # fmt: skip
    problem, catalog = load_problem(scenario, data_dir, None)
    with spinner(fmt is ProcureFormat.TABLE and output is None, "solving the procurement MILP…"):
        report = calls.procure(problem, request, catalog, export_model)
    emit(procure_view(report), procure_to_json(report), OutputFormat(fmt.value), output)


def _pareto(problem: "Problem", catalog: "Catalog", request: "ParetoRequest", plot: Path | None,
            fmt: ProcureFormat, output: Path | None) -> None:  # fmt: skip
    import sys

    from prfaas_plan.inputs.files import write_atomically, write_text
    from prfaas_plan.render.procure import pareto_to_csv, pareto_to_json, pareto_view, plot_pareto
    from prfaas_plan.use_cases import calls

    with spinner(fmt is ProcureFormat.TABLE and output is None, "enumerating the frontier…"):
        report = calls.pareto(problem, request, catalog)
    if plot is not None:
        plot_pareto(report, plot)
    if fmt is not ProcureFormat.CSV:
        emit(pareto_view(report), pareto_to_json(report), OutputFormat(fmt.value), output)
        return
    text = pareto_to_csv(report)
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, lambda tmp: write_text(tmp, text), "output")
