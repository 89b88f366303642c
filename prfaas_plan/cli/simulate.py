"""`simulate` and `compare-policies`: the planned deployment under load, event by event."""

from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import ArrivalProcess, RoutingPolicy
from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import (
    BandwidthOpt,
    DataDirOpt,
    FormatOpt,
    ModeOpt,
    OutputFormat,
    OutputOpt,
    ScenarioArg,
    Sets,
    float_list,
    source,
)
from prfaas_plan.cli.output import emit, load_problem, progress_bar
from prfaas_plan.sim.defaults import COMPARISON_REQUESTS, LOAD_FRACTION, SEED
from prfaas_plan.use_cases.field_docs import describe


@app.command(cls=CliCommand)
def simulate(
    scenario: ScenarioArg = None,
    load: Annotated[
        str | None,
        typer.Option(
            "--load",
            help=describe("SimulateRequest", "load"),
        ),
    ] = None,
    rate_rps: Annotated[
        float | None,
        typer.Option("--rate-rps", help=describe("SimulateRequest", "rate_rps")),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option("--requests", help=describe("SimulateRequest", "requests")),
    ] = None,
    duration_s: Annotated[
        float | None,
        typer.Option("--duration-s", help=describe("SimulateRequest", "duration_s")),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help=describe("SimulateRequest", "seed")),
    ] = None,
    arrivals: Annotated[
        ArrivalProcess | None,
        typer.Option(
            "--arrivals",
            help=describe("SimulateRequest", "arrivals"),
        ),
    ] = None,
    burst_cv: Annotated[
        float | None,
        typer.Option(
            "--burst-cv",
            help=describe("SimulateRequest", "burst_cv"),
        ),
    ] = None,
    period_s: Annotated[
        float | None,
        typer.Option("--period-s", help=describe("SimulateRequest", "period_s")),
    ] = None,
    amplitude: Annotated[
        float | None,
        typer.Option(
            "--amplitude",
            help=describe("SimulateRequest", "amplitude"),
        ),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help=describe("SimulateRequest", "trace"),
            callback=source("arrivals.trace"),
        ),
    ] = None,
    policy: Annotated[
        RoutingPolicy | None,
        typer.Option("--policy", help=describe("SimulateRequest", "policy")),
    ] = None,
    link_latency_s: Annotated[
        float | None,
        typer.Option("--link-latency-s", help=describe("SimulateRequest", "link_latency_s")),
    ] = None,
    dip_start_s: Annotated[
        float | None,
        typer.Option("--dip-start-s", help=describe("SimulateRequest", "dip_start_s")),
    ] = None,
    dip_duration_s: Annotated[
        float | None,
        typer.Option("--dip-duration-s", help=describe("SimulateRequest", "dip_duration_s")),
    ] = None,
    dip_fraction: Annotated[
        float | None,
        typer.Option(
            "--dip-fraction",
            help=describe("SimulateRequest", "dip_fraction"),
        ),
    ] = None,
    mode: ModeOpt = None,
    threshold_tokens: Annotated[
        float | None,
        typer.Option("--threshold-tokens", help=describe("SimulateRequest", "threshold_tokens")),
    ] = None,
    sustainable: Annotated[
        bool,
        typer.Option(
            "--sustainable",
            help=describe("SimulateRequest", "sustainable"),
        ),
    ] = False,
    bandwidth_gbps: BandwidthOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Discrete-event simulation of the planned deployment: throughput, TTFT under load, queues,
    utilisation and link load, next to the closed-form model."""
    from prfaas_plan.render.simulation import simulation_json, simulation_view
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import build
    from prfaas_plan.use_cases.simulate_request import SimulateRequest

    request = build(
        SimulateRequest, load=list(float_list(load, "--load")) if load is not None else None,
        rate_rps=rate_rps, requests=requests, duration_s=duration_s, seed=seed,
        arrivals=arrivals, burst_cv=burst_cv, period_s=period_s, amplitude=amplitude,
        trace=trace, policy=policy, link_latency_s=link_latency_s, dip_start_s=dip_start_s,
        dip_duration_s=dip_duration_s, dip_fraction=dip_fraction, mode=mode,
        threshold_tokens=threshold_tokens, sustainable=sustainable,
    )  # fmt: skip
    request.spec()  # refused before the scenario is read, as every flag
    problem, catalog = load_problem(scenario, data_dir, bandwidth_gbps)
    with progress_bar("simulating") as step:
        report = calls.simulate(problem, request, catalog, progress=step)
    emit(simulation_view(report), simulation_json(report), fmt, output)


@app.command("compare-policies", cls=CliCommand)
def compare_policies_command(
    scenario: ScenarioArg = None,
    load: Annotated[
        float,
        typer.Option("--load", help="Offered load as a fraction of the plan's exact-mode Λ_max."),
        Sets("comparison.load_fraction"),
    ] = LOAD_FRACTION,
    requests: Annotated[
        int,
        typer.Option("--requests", help="Requests per stress scenario."),
        Sets("comparison.requests"),
    ] = COMPARISON_REQUESTS,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed."), Sets("comparison.seed")
    ] = SEED,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Mooncake JSONL trace: enables the prefix-aware policy.",
            callback=source("arrivals.trace"),
        ),
        Sets("arrivals.trace"),
    ] = None,
    mode: ModeOpt = None,
    bandwidth_gbps: BandwidthOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Scheduler policies under stress: a burst, a bandwidth dip and an output-length drift,
    each with the static, adaptive, re-balancing, dual-timescale (and prefix-aware) policies."""
    from prfaas_plan.render.simulation import comparison_json, comparison_view
    from prfaas_plan.use_cases.simulate import compare_policies_for
    from prfaas_plan.use_cases.simulation_spec import ComparisonSpec

    problem, _ = load_problem(scenario, data_dir, bandwidth_gbps)
    spec = ComparisonSpec(load_fraction=load, requests=requests, seed=seed, trace=trace)
    with progress_bar("comparing policies") as step:
        planned = {} if mode is None else {"plan_mode": mode}  # else the use-case's default
        report = compare_policies_for(problem, spec, progress=step, **planned)
    emit(comparison_view(report), comparison_json(report), fmt, output)
