"""`optimize` and `evaluate`: the plan of a scenario, or one given configuration."""

from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import Solver
from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import (
    BandwidthOpt,
    DataDirOpt,
    FormatOpt,
    ModeOpt,
    OutputFormat,
    OutputOpt,
    RangeOpt,
    ScenarioArg,
    Sets,
    TtftLoadRpsOpt,
    TtftPercentileOpt,
    TtftTargetOpt,
    check_distinct_outputs,
    plot_name,
    plot_target,
)
from prfaas_plan.cli.output import emit, load_problem, spinner
from prfaas_plan.cli.pricing import (
    CostModelOpt,
    GpuPriceOpt,
    LinkOfferingOpt,
    UtilizationOpt,
    gpu_prices,
)
from prfaas_plan.use_cases.field_docs import describe


@app.command(cls=CliCommand)
def optimize(
    scenario: ScenarioArg = None,
    mode: ModeOpt = None,
    threshold_tokens: Annotated[
        float | None,
        typer.Option(
            "--threshold-tokens",
            help=describe("PlanRequest", "threshold_tokens"),
        ),
    ] = None,
    bandwidth_gbps: BandwidthOpt = None,
    target_rps: Annotated[
        float | None,
        typer.Option(
            "--target-rps",
            help=describe("PlanRequest", "target_rps"),
        ),
    ] = None,
    max_prfaas_gpus: Annotated[
        int | None,
        typer.Option(
            "--max-prfaas-gpus",
            help=describe("PlanRequest", "max_prfaas_gpus"),
        ),
        Sets("max_prfaas_instances"),
    ] = None,
    solver: Annotated[
        Solver | None, typer.Option("--solver", help=describe("PlanRequest", "solver"))
    ] = None,
    out_of_range: RangeOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw the threshold-balance figure (.png/.svg/.pdf).",
            callback=plot_target,
            parser=plot_name,
        ),
    ] = None,
    ttft_target_s: TtftTargetOpt = None,
    ttft_percentile: TtftPercentileOpt = None,
    ttft_load: Annotated[
        float | None,
        typer.Option(
            "--ttft-load",
            help=describe("PlanRequest", "ttft_load"),
        ),
    ] = None,
    ttft_load_rps: TtftLoadRpsOpt = None,
    gpu_prices_usd_per_gpu_hour: GpuPriceOpt = None,
    link_offering: LinkOfferingOpt = None,
    cost_model: CostModelOpt = None,
    utilization: UtilizationOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Choose the threshold t and the PD prefill/decode split (or size the PrfaaS cluster) and
    compare with the homogeneous PD and naive heterogeneous baselines."""
    from prfaas_plan.render.plan import plan_to_json, plan_view
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest, build

    check_distinct_outputs(output, plot)
    request = build(
        PlanRequest, mode=mode, threshold_tokens=threshold_tokens, target_rps=target_rps,
        max_prfaas_gpus=max_prfaas_gpus, solver=solver, out_of_range=out_of_range,
        ttft_target_s=ttft_target_s, ttft_percentile=ttft_percentile, ttft_load=ttft_load,
        ttft_load_rps=ttft_load_rps, gpu_prices_usd_per_gpu_hour=gpu_prices(gpu_prices_usd_per_gpu_hour),
        link_offering=link_offering, cost_model=cost_model, utilization=utilization,
    )  # fmt: skip
    problem, catalog = load_problem(scenario, data_dir, bandwidth_gbps)
    sizing = target_rps is not None or max_prfaas_gpus is not None
    with spinner(
        sizing and fmt is OutputFormat.TABLE and output is None, "solving the sizing MILP…"
    ):
        report = calls.optimize(problem, request, catalog)
    if plot is not None:
        from prfaas_plan.render.plot import plot_threshold_balance

        plot_threshold_balance(report, plot)
    emit(plan_view(report), plan_to_json(report), fmt, output)


@app.command(cls=CliCommand)
def evaluate(
    threshold_tokens: Annotated[
        float,
        typer.Option("--threshold-tokens", help=describe("EvaluateRequest", "threshold_tokens")),
    ],
    pd_prefill_instances: Annotated[
        int,
        typer.Option(
            "--pd-prefill-instances", help=describe("EvaluateRequest", "pd_prefill_instances")
        ),
    ],
    scenario: ScenarioArg = None,
    prfaas_instances: Annotated[
        int | None,
        typer.Option("--prfaas-instances", help=describe("EvaluateRequest", "prfaas_instances")),
    ] = None,
    mode: ModeOpt = None,
    bandwidth_gbps: BandwidthOpt = None,
    out_of_range: RangeOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    gpu_prices_usd_per_gpu_hour: GpuPriceOpt = None,
    link_offering: LinkOfferingOpt = None,
    cost_model: CostModelOpt = None,
    utilization: UtilizationOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Evaluate one given configuration (t, N_p, N_d = rest of the PD cluster) without optimising."""
    from prfaas_plan.render.plan import evaluation_to_json, evaluation_view
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import EvaluateRequest, build

    request = build(
        EvaluateRequest, threshold_tokens=threshold_tokens,
        pd_prefill_instances=pd_prefill_instances, prfaas_instances=prfaas_instances, mode=mode,
        out_of_range=out_of_range, gpu_prices_usd_per_gpu_hour=gpu_prices(gpu_prices_usd_per_gpu_hour),
        link_offering=link_offering, cost_model=cost_model, utilization=utilization,
    )  # fmt: skip
    problem, catalog = load_problem(scenario, data_dir, bandwidth_gbps)
    report = calls.evaluate(problem, request, catalog)
    emit(evaluation_view(report), evaluation_to_json(report), fmt, output)
