"""Command-line interface: the commands, each parsing its flags, calling one use-case
(commands/) and handing the result to a view (render/).

Data goes to stdout (or --output, written atomically), messages to stderr; how failures are shown
is cli/failures.py, the shared options cli/options.py, loading and writing cli/output.py. Heavy
modules are imported inside the commands so `--help` stays fast.
"""

import sys
from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import ArrivalProcess, Mode, RangePolicy, RoutingPolicy, Solver
from prfaas_plan.cli.app import app
from prfaas_plan.cli.failures import PlanCommand
from prfaas_plan.cli.options import (
    BandwidthOpt,
    DataDirOpt,
    FormatOpt,
    ModeOpt,
    OutputFormat,
    OutputOpt,
    RangeOpt,
    ScenarioArg,
    TtftLoadRpsOpt,
    TtftPercentileOpt,
    TtftTargetOpt,
    check_distinct_outputs,
    float_list,
    given,
    percentile,
    plot_name,
    plot_target,
    source,
    token_counts,
)
from prfaas_plan.cli.output import emit, load_problem, progress_bar, spinner
from prfaas_plan.cli.pricing import (
    CostModelOpt,
    GpuPriceOpt,
    LinkOfferingOpt,
    UtilizationOpt,
    load_pricing,
)
from prfaas_plan.commands.simulation_spec import (
    ArrivalSpec,
    ComparisonSpec,
    LoadSpec,
    PolicySpec,
    SimulationRequest,
    StressSpec,
    refuse_unused,
)
from prfaas_plan.errors import ConfigError

__all__ = ["app", "main"]


@app.command(cls=PlanCommand)
def optimize(
    scenario: ScenarioArg = None,
    mode: ModeOpt = Mode.PAPER,
    threshold_tokens: Annotated[
        float | None,
        typer.Option(
            "--threshold-tokens",
            help="Fix the routing threshold t (tokens); only the PD split is optimised.",
        ),
    ] = None,
    bandwidth_gbps: BandwidthOpt = None,
    target_rps: Annotated[
        float | None,
        typer.Option(
            "--target-rps",
            help="Size the PrfaaS cluster: fewest instances reaching this Λ_max (req/s).",
        ),
    ] = None,
    max_prfaas_gpus: Annotated[
        int | None,
        typer.Option(
            "--max-prfaas-gpus",
            help="Size the PrfaaS cluster: at most this many "
            "GPUs (best Λ_max under the cap, or the cap on a --target-rps search).",
        ),
    ] = None,
    solver: Annotated[
        Solver | None, typer.Option("--solver", help="MILP solver for sizing [highs].")
    ] = None,
    out_of_range: RangeOpt = RangePolicy.EXTRAPOLATE,
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
            help="Load for the target, as a fraction of the unconstrained plan's exact-mode Λ_max.",
        ),
    ] = None,
    ttft_load_rps: TtftLoadRpsOpt = None,
    gpu_price: GpuPriceOpt = None,
    link_offering: LinkOfferingOpt = None,
    cost_model: CostModelOpt = None,
    utilization: UtilizationOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Choose the threshold t and the PD prefill/decode split (or size the PrfaaS cluster) and
    compare with the homogeneous PD and naive heterogeneous baselines."""
    from prfaas_plan.commands.plan import plan, ttft_target
    from prfaas_plan.render.plan import plan_to_json, plan_view

    check_distinct_outputs(output, plot)
    chosen = percentile(ttft_percentile) if ttft_percentile is not None else None
    ttft = ttft_target(ttft_target_s, chosen, ttft_load_rps, ttft_load)
    problem = load_problem(scenario, data_dir, bandwidth_gbps)
    pricing = load_pricing(problem, data_dir, gpu_price, link_offering, cost_model, utilization)
    sizing = target_rps is not None or max_prfaas_gpus is not None
    with spinner(
        sizing and fmt is OutputFormat.TABLE and output is None, "solving the sizing MILP…"
    ):
        report = plan(
            problem, mode=mode, threshold_tokens=threshold_tokens, target_rps=target_rps,
            max_prfaas_gpus=max_prfaas_gpus, solver=solver, range_policy=out_of_range, ttft=ttft,
            pricing=pricing,
        )  # fmt: skip
    if plot is not None:
        from prfaas_plan.render.plot import plot_threshold_balance

        plot_threshold_balance(report, plot)
    emit(plan_view(report), plan_to_json(report), fmt, output)


@app.command(cls=PlanCommand)
def evaluate(
    threshold_tokens: Annotated[
        float, typer.Option("--threshold-tokens", help="Routing threshold t (tokens).")
    ],
    pd_prefill_instances: Annotated[
        int, typer.Option("--pd-prefill-instances", help="N_p; the other PD instances decode.")
    ],
    scenario: ScenarioArg = None,
    prfaas_instances: Annotated[
        int | None, typer.Option("--prfaas-instances", help="Override prfaas_cluster.instances.")
    ] = None,
    mode: ModeOpt = Mode.PAPER,
    bandwidth_gbps: BandwidthOpt = None,
    out_of_range: RangeOpt = RangePolicy.EXTRAPOLATE,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    gpu_price: GpuPriceOpt = None,
    link_offering: LinkOfferingOpt = None,
    cost_model: CostModelOpt = None,
    utilization: UtilizationOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Evaluate one given configuration (t, N_p, N_d = rest of the PD cluster) without optimising."""
    from prfaas_plan.commands.plan import evaluate_configuration
    from prfaas_plan.render.plan import evaluation_to_json, evaluation_view

    problem = load_problem(scenario, data_dir, bandwidth_gbps)
    pricing = load_pricing(problem, data_dir, gpu_price, link_offering, cost_model, utilization)
    report = evaluate_configuration(
        problem,
        threshold_tokens=threshold_tokens,
        pd_prefill_instances=pd_prefill_instances,
        prfaas_instances=prfaas_instances,
        mode=mode,
        range_policy=out_of_range,
        pricing=pricing,
    )
    emit(evaluation_view(report), evaluation_to_json(report), fmt, output)


@app.command(cls=PlanCommand)
def kv(
    models: Annotated[
        list[str] | None, typer.Argument(help="Catalog models (default: every model).")
    ] = None,
    lengths: Annotated[
        str, typer.Option("--lengths", help="Input lengths in tokens, comma-separated.")
    ] = "1024,8192,32768,131072",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype.")] = "bf16",
    state_dtype: Annotated[
        str, typer.Option("--state-dtype", help="Linear-attention recurrent state dtype.")
    ] = "fp32",
    gpu: Annotated[str, typer.Option("--gpu", help="Reference GPU for Φ_kv.")] = "h200",
    gpus_per_instance: Annotated[int, typer.Option("--gpus-per-instance")] = 8,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Draw Φ_kv against length (.png/.svg/.pdf).",
            callback=plot_target,
            parser=plot_name,
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """KV footprint per model from its architecture: bytes per token, fixed state, S_kv and
    Φ_kv at chosen lengths, and what full attention everywhere would cost."""
    from prfaas_plan.commands.kv import kv_report
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.render.catalog import kv_json, kv_view

    check_distinct_outputs(output, plot)
    report = kv_report(
        Catalog.open(data_dir), models, token_counts(lengths, "--lengths"), kv_dtype=kv_dtype,
        state_dtype=state_dtype, gpu=gpu, gpus_per_instance=gpus_per_instance,
    )  # fmt: skip
    if plot is not None:
        from prfaas_plan.render.plot import plot_kv_throughput

        plot_kv_throughput(report, plot)
    emit(kv_view(report), kv_json(report), fmt, output)


@app.command(cls=PlanCommand)
def egress(
    models: Annotated[
        list[str] | None,
        typer.Argument(help="Catalog models (default: every model with a prefill profile)."),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="Take model, PrfaaS cluster, link and length "
            "distribution from a scenario; L_avg = E[L | L > t].",
            callback=source("scenario"),
        ),
    ] = None,
    prfaas_gpus: Annotated[
        int | None, typer.Option("--prfaas-gpus", help="N, GPUs in the prefill cluster [512].")
    ] = None,
    gpus_per_instance: Annotated[
        int | None, typer.Option("--gpus-per-instance", help="P, GPUs per instance [8].")
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Prefill GPU [h200].")] = None,
    mean_tokens: Annotated[
        float | None,
        typer.Option(
            "--mean-tokens",
            help="Without --scenario: L_avg, mean offloaded length (tokens) [32768].",
        ),
    ] = None,
    threshold_tokens: Annotated[
        float | None,
        typer.Option("--threshold-tokens", help="With --scenario: routing threshold t [0]."),
    ] = None,
    link_gbps: Annotated[
        float | None, typer.Option("--link-gbps", help="Link to test, 10^9 bit/s [100].")
    ] = None,
    mode: Annotated[
        Mode | None,
        typer.Option("--mode", help="With --scenario: service-time mode, paper or exact [paper]."),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """The bandwidth wall: KV egress a saturated prefill cluster needs (reference eq. 2),
    whether a link carries it and, for a scenario, the smallest threshold that fits."""
    from prfaas_plan.commands.egress import egress_report
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.render.catalog import egress_json, egress_view

    report = egress_report(
        Catalog.open(data_dir), models=models, scenario=scenario, prfaas_gpus=prfaas_gpus,
        gpus_per_instance=gpus_per_instance, gpu=gpu, mean_tokens=mean_tokens,
        threshold_tokens=threshold_tokens, link_gbps=link_gbps, mode=mode,
    )  # fmt: skip
    emit(egress_view(report), egress_json(report), fmt, output)


@app.command(cls=PlanCommand)
def simulate(
    scenario: ScenarioArg = None,
    load: Annotated[
        str | None,
        typer.Option(
            "--load",
            help="Arrival rate as fractions of the plan's exact-mode Λ_max, "
            f"comma-separated for a sweep [{LoadSpec.fractions[0]:g}].",
        ),
    ] = None,
    rate_rps: Annotated[
        float | None,
        typer.Option("--rate-rps", help="Absolute arrival rate (req/s) instead of --load."),
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", help=f"Requests per run [{ArrivalSpec.requests}].")
    ] = None,
    duration_s: Annotated[
        float | None,
        typer.Option("--duration-s", help="Simulated arrival window (s) instead of --requests."),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed (same seed, same result).")
    ] = ArrivalSpec.seed,
    arrivals: Annotated[
        ArrivalProcess | None,
        typer.Option(
            "--arrivals", help=f"Arrival process [{ArrivalSpec.process}; with --trace: trace]."
        ),
    ] = None,
    burst_cv: Annotated[
        float | None,
        typer.Option(
            "--burst-cv",
            help=f"gamma: coefficient of variation of inter-arrivals [{ArrivalSpec.burst_cv:g}].",
        ),
    ] = None,
    period_s: Annotated[
        float | None,
        typer.Option("--period-s", help=f"sinusoidal: period (s) [{ArrivalSpec.period_s:g}]."),
    ] = None,
    amplitude: Annotated[
        float | None,
        typer.Option(
            "--amplitude",
            help=f"sinusoidal: rate swing as a fraction of the mean [{ArrivalSpec.amplitude:g}].",
        ),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Replay a trace: Mooncake JSONL (timestamp, input_length, output_length, "
            "hash_ids), or an Azure LLM inference or BurstGPT CSV (told by its header); with "
            "--load/--rate-rps it is sped up to that rate.",
            callback=source("arrivals.trace"),
        ),
    ] = None,
    policy: Annotated[
        RoutingPolicy, typer.Option("--policy", help="Routing policy.")
    ] = PolicySpec.kind,
    link_latency_s: Annotated[
        float, typer.Option("--link-latency-s", help="Extra latency per KV transfer (s).")
    ] = SimulationRequest.link_latency_s,
    dip_start_s: Annotated[
        float | None, typer.Option("--dip-start-s", help="Bandwidth dip: start (s).")
    ] = None,
    dip_duration_s: Annotated[
        float | None, typer.Option("--dip-duration-s", help="Bandwidth dip: duration (s).")
    ] = None,
    dip_fraction: Annotated[
        float | None,
        typer.Option(
            "--dip-fraction",
            help=f"Bandwidth dip: remaining share of the link [{StressSpec.dip_fraction:g}].",
        ),
    ] = None,
    mode: ModeOpt = Mode.PAPER,
    threshold_tokens: Annotated[
        float | None,
        typer.Option("--threshold-tokens", help="Simulate this t instead of the planned one."),
    ] = None,
    sustainable: Annotated[
        bool,
        typer.Option(
            "--sustainable",
            help="Also find the highest rate the simulated deployment "
            "sustains and compare it with the exact- and paper-mode Λ_max (~10 runs).",
        ),
    ] = False,
    bandwidth_gbps: BandwidthOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Discrete-event simulation of the planned deployment: throughput, TTFT under load, queues,
    utilisation and link load, next to the closed-form model."""
    from prfaas_plan.commands.simulate import run_simulations
    from prfaas_plan.commands.simulation_spec import validate
    from prfaas_plan.render.simulation import simulation_json, simulation_view

    if arrivals is None:
        arrivals = ArrivalProcess.TRACE if trace is not None else ArrivalSpec.process
    refuse_unused(
        arrivals, burst_cv, period_s, amplitude, dip_fraction, dip_start_s, dip_duration_s
    )
    # without --load: the default fraction, unless a rate is given or a trace replays as is
    default_load = () if trace or rate_rps else LoadSpec.fractions
    sized = requests is not None or duration_s is not None or trace is not None
    request = SimulationRequest(
        arrivals=ArrivalSpec(
            process=arrivals, requests=requests if sized else ArrivalSpec.requests,
            duration_s=duration_s, seed=seed, trace=trace,
            **given(burst_cv=burst_cv, period_s=period_s, amplitude=amplitude),
        ),
        load=LoadSpec(
            fractions=float_list(load, "--load") if load is not None else default_load,
            rate_rps=rate_rps,
        ),
        stress=StressSpec(dip_start_s, dip_duration_s, **given(dip_fraction=dip_fraction)),
        policy=PolicySpec(policy),
        link_latency_s=link_latency_s,
    )  # fmt: skip
    validate(request)
    problem = load_problem(scenario, data_dir, bandwidth_gbps)
    with progress_bar("simulating") as step:
        report = run_simulations(
            problem, request, plan_mode=mode, threshold_tokens=threshold_tokens,
            find_sustainable=sustainable, progress=step,
        )  # fmt: skip
    emit(simulation_view(report), simulation_json(report), fmt, output)


@app.command("compare-policies", cls=PlanCommand)
def compare_policies_command(
    scenario: ScenarioArg = None,
    load: Annotated[
        float,
        typer.Option("--load", help="Offered load as a fraction of the plan's exact-mode Λ_max."),
    ] = ComparisonSpec.load_fraction,
    requests: Annotated[
        int, typer.Option("--requests", help="Requests per stress scenario.")
    ] = ComparisonSpec.requests,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = ComparisonSpec.seed,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Mooncake JSONL trace: enables the prefix-aware policy.",
            callback=source("arrivals.trace"),
        ),
    ] = None,
    mode: ModeOpt = Mode.PAPER,
    bandwidth_gbps: BandwidthOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Scheduler policies under stress: a burst, a bandwidth dip and an output-length drift,
    each with the static, adaptive, re-balancing, dual-timescale (and prefix-aware) policies."""
    from prfaas_plan.commands.simulate import compare_policies_for
    from prfaas_plan.render.simulation import comparison_json, comparison_view

    problem = load_problem(scenario, data_dir, bandwidth_gbps)
    spec = ComparisonSpec(load_fraction=load, requests=requests, seed=seed, trace=trace)
    with progress_bar("comparing policies") as step:
        report = compare_policies_for(problem, spec, plan_mode=mode, progress=step)
    emit(comparison_view(report), comparison_json(report), fmt, output)


@app.command("check", cls=PlanCommand)
def check_command(
    data_dir: Annotated[
        Path | None,
        typer.Argument(
            help="Data directory to check (default: the shipped data/).",
            callback=source("data directory"),
        ),
    ] = None,
    update: Annotated[
        bool,
        typer.Option(
            "--update", help="Rewrite <data>/golden/expectations.yaml from the current data."
        ),
    ] = False,
    scenario: Annotated[
        list[Path] | None,
        typer.Option(
            "--scenario",
            help="Golden scenario (repeatable; default: the shipped examples).",
            callback=source("scenario"),
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
) -> None:
    """CI regression check: validate every table against schema and physics, re-plan the golden
    scenarios and compare with the committed expectations. Exits 8 when anything fails."""
    from prfaas_plan.commands.check import check
    from prfaas_plan.errors import CHECK_FAILED_EXIT_CODE
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.resources import is_installed_copy
    from prfaas_plan.render.catalog import check_json, check_view

    catalog = Catalog.open(data_dir)
    if update and is_installed_copy(catalog.data_dir):
        raise ConfigError(
            f"--update would rewrite the installed package's data ({catalog.data_dir}); "
            "pass the data directory of your checkout, e.g. prfaas-plan check data --update"
        )
    report = check(catalog, scenario or None, update=update)
    emit(check_view(report), check_json(report), fmt, output)
    if not report.ok:
        raise typer.Exit(CHECK_FAILED_EXIT_CODE)


# commands defined in their own modules register on `app` when imported (one line each)
from prfaas_plan.cli import explain as _explain  # noqa: E402, F401  (registers its commands)
from prfaas_plan.cli import export as _export  # noqa: E402, F401  (registers its commands)
from prfaas_plan.cli import import_profile as _import_profile  # noqa: E402, F401  (registers its commands)
from prfaas_plan.cli import procure as _procure  # noqa: E402, F401  (registers its commands)
from prfaas_plan.cli import sensitivity as _sensitivity  # noqa: E402, F401  (registers its commands)
from prfaas_plan.cli import serve as _serve  # noqa: E402, F401  (registers its commands)
from prfaas_plan.cli import sweep as _sweep  # noqa: E402, F401  (registers its commands)


def main() -> None:
    """The console script `prfaas-plan`: the app, and an interrupt before it starts."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
