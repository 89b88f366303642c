"""Command-line interface: parse, call one use-case (commands/), hand the result to a view
(render/).

Data goes to stdout (or --output, written atomically), messages to stderr. Expected failures
print one line `error: ...` and exit with the code of their class (see errors.py), whether the
app runs as the console script (`main`) or through typer's CliRunner (`app`); a usage error
(exit 2) prints one `error:` line and one usage line. A repeated `--load` is refused (click
keeps the last one; a sweep is one comma-separated list). The library names
its parameters (`max_prfaas_gpus`); `PARAMETER_FLAGS` maps them to this CLI's flags. Heavy
modules are imported inside the commands so `--help` stays fast.
"""

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.exceptions import UsageError  # typer vendors click: no public name for it
from typer.core import TyperCommand, TyperGroup, TyperOption

from prfaas_plan.choices import ArrivalProcess, Mode, RangePolicy, RoutingPolicy, Solver
from prfaas_plan.commands.simulation_spec import (
    ArrivalSpec,
    ComparisonSpec,
    LoadSpec,
    PolicySpec,
    SimulationRequest,
    StressSpec,
)
from prfaas_plan.errors import ConfigError, PlanError, ResourceLimitError

if TYPE_CHECKING:
    from prfaas_plan.inputs.scenario import Problem
    from prfaas_plan.render.views import Document, View

# library parameter (as errors name it) -> the flag that sets it
PARAMETER_FLAGS: dict[str, str] = {
    # optimize / evaluate (commands/plan.py, solve/sizing.py, inputs/scenario.py)
    "threshold_tokens": "--threshold-tokens",
    "bandwidth_gbps": "--bandwidth-gbps",
    "target_rps": "--target-rps",
    "max_prfaas_gpus": "--max-prfaas-gpus",
    "max_prfaas_instances": "--max-prfaas-gpus",
    "solver": "--solver",
    "range_policy": "--out-of-range",
    "plot_path": "--plot",
    "ttft.target_s": "--ttft-target-s",
    "ttft.percentile": "--ttft-percentile",
    "ttft.load_fraction": "--ttft-load",
    "ttft.load_rps": "--ttft-load-rps",
    "pd_prefill_instances": "--pd-prefill-instances",
    "prfaas_instances": "--prfaas-instances",
    "mode": "--mode",
    "output": "--output",
    "data_dir": "--data-dir",
    # kv / egress (commands/kv.py, commands/plan.py)
    "lengths_tokens": "--lengths",
    "kv_dtype": "--kv-dtype",
    "state_dtype": "--state-dtype",
    "gpu": "--gpu",
    "gpus_per_instance": "--gpus-per-instance",
    "scenario": "--scenario",
    "prfaas_gpus": "--prfaas-gpus",
    "mean_tokens": "--mean-tokens",
    "link_gbps": "--link-gbps",
    # check (commands/check.py)
    "update": "--update",
    "link_bandwidth_bytes_per_s": "--bandwidth-gbps",
    # simulate / compare-policies (commands/simulation_spec.py: spec fields)
    "load.fractions": "--load",
    "load.rate_rps": "--rate-rps",
    "arrivals.requests": "--requests",
    "arrivals.duration_s": "--duration-s",
    "arrivals.process": "--arrivals",
    "arrivals.seed": "--seed",
    "comparison.seed": "--seed",
    "arrivals.burst_cv": "--burst-cv",
    "arrivals.period_s": "--period-s",
    "arrivals.amplitude": "--amplitude",
    "arrivals.trace": "--trace",
    "stress.dip_start_s": "--dip-start-s",
    "stress.dip_duration_s": "--dip-duration-s",
    "stress.dip_fraction": "--dip-fraction",
    "link_latency_s": "--link-latency-s",
    "policy.kind": "--policy",
    "comparison.load_fraction": "--load",
    "comparison.requests": "--requests",
    "sustainable": "--sustainable",
}


def _name_pattern(name: str, field_guard: bool = True) -> re.Pattern[str]:
    """`name` as a whole identifier: not part of a file field (`link.bandwidth_gbps`), a file
    name (`trace.jsonl`) or a flag; with `field_guard`, not a `field:` prefix either
    (`scenario.yaml: kv_dtype: ...`)."""
    tail = r"(?![\w:]|\.\w)" if field_guard else r"(?!\w|\.\w)"
    return re.compile(r"(?<![\w.\-])" + re.escape(name) + tail)


# identifier-like names (`target_rps`, `arrivals.requests`) are translated wherever they appear,
# longest first; a plain word (`scenario`, `output`) only when the error is about it, as the
# same word is also English
_IDENTIFIERS = [
    (_name_pattern(name), flag)
    for name, flag in sorted(PARAMETER_FLAGS.items(), key=lambda kv: -len(kv[0]))
    if "_" in name or "." in name
]
# `<file>: ...` or `<file>:<line>: ...`: a message about a file, whose words are its fields
_ABOUT_A_FILE = re.compile(r"^\S*(/|\.(yaml|yml|csv|jsonl|json))\S*?(:\d+)?: ")


def error_message(exc: PlanError) -> str:
    """The one-line message for the terminal: the library's, with the parameters it names
    written as their flags. A message about a file that is not about a parameter is left as it
    is: its words are the file's fields (`meta.yaml: gpus_per_instance must be 8`)."""
    text = str(exc)
    if exc.parameter in PARAMETER_FLAGS:
        own = _name_pattern(exc.parameter, field_guard=False)
        # a plain word (`output`) is the flag where the message names it first, English after
        # (`--output: cannot write x: Input/output error`)
        plain = "_" not in exc.parameter and "." not in exc.parameter
        text = own.sub(PARAMETER_FLAGS[exc.parameter], text, count=1 if plain else 0)
    elif _ABOUT_A_FILE.match(text):
        return text
    for pattern, flag in _IDENTIFIERS:
        text = pattern.sub(flag, text)
    return text


def _fail(message: str, exit_code: int) -> typer.Exit:
    sys.stderr.write(f"error: {message}\n")
    return typer.Exit(exit_code)


def _usage_error(exc: UsageError) -> typer.Exit:
    """click's usage error as one `error:` line and one usage line (not rich's boxed panel)."""
    message = " ".join(exc.format_message().split())
    sys.stderr.write(f"error: {message}\n")
    if exc.ctx is not None:
        sys.stderr.write(f"{exc.ctx.get_usage()}  (see {exc.ctx.command_path} --help)\n")
    return typer.Exit(exc.exit_code)


def _is_help(exc: UsageError) -> bool:
    """`no_args_is_help`: click shows the help through this exception; it stays as it is."""
    return type(exc).__name__ == "NoArgsIsHelpError"


# options a repeat of which reads as a list (`--load 0.5 --load 0.8`: a sweep?) although click
# keeps only the last: refused when repeated. Any other option given twice keeps click's rule,
# the last one wins, on which the example scripts rely (their own arguments, then "$@").
_NOT_REPEATABLE = frozenset({"--load"})


class _PlanCommand(TyperCommand):
    """A command that refuses an option of _NOT_REPEATABLE given more than once."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            try:
                _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            except UsageError:
                order = []  # super() reports it
            flags = [max(p.opts, key=len) for p in order if isinstance(p, TyperOption)]
            for flag in _NOT_REPEATABLE.intersection(flags):
                if flags.count(flag) > 1:
                    sweep = (
                        ", a sweep as one list: --load 0.5,0.8" if self.name == "simulate" else ""
                    )
                    raise ConfigError(
                        f"{flag} given more than once (only the last would count); "
                        f"give it once{sweep}"
                    )
        try:
            return super().parse_args(ctx, args)
        except UsageError as exc:
            exc.ctx = (
                exc.ctx or ctx
            )  # click leaves it out of some (a missing value): the usage line
            raise


class _PlanGroup(TyperGroup):
    """Every command's expected failure becomes one stderr line and its exit code, also under
    typer's CliRunner (which calls `app`, not `main`); so does a usage error."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            if _is_help(exc):
                raise
            raise _usage_error(exc) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            if _is_help(exc):
                raise
            raise _usage_error(exc) from None
        except PlanError as exc:
            raise _fail(error_message(exc), exc.exit_code) from None
        except MemoryError:
            raise _fail(
                "out of memory; ask for a smaller run (fewer requests, instances or lengths)",
                ResourceLimitError.exit_code,
            ) from None
        except KeyboardInterrupt:
            sys.stderr.write("interrupted\n")
            raise typer.Exit(130) from None


app = typer.Typer(
    cls=_PlanGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Capacity planner for Prefill-as-a-Service (PrfaaS) + PD-disaggregated LLM serving.",
)


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"


ScenarioArg = Annotated[
    Path | None,
    typer.Argument(
        help="Scenario YAML; default: the paper's case study (examples/case_study.yaml)."
    ),
]
ModeOpt = Annotated[
    Mode,
    typer.Option(
        "--mode",
        help="paper: service time at the representative length (as the paper); "
        "exact: conditional mean service time.",
    ),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]


def _output_target(value: Path | None) -> Path | None:
    """--output is checked before any work (inputs/files.py: a regular file or a new path)."""
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "output")
    return value


def _plot_target(value: Path | None) -> Path | None:
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "plot_path")
    return value


OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the result to this file (atomically).",
        callback=_output_target,
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Profile/GPU data directory (default: the shipped data/)."),
]
BandwidthOpt = Annotated[
    float | None,
    typer.Option("--bandwidth-gbps", help="Override link.bandwidth_gbps (10^9 bit/s)."),
]
RangeOpt = Annotated[
    RangePolicy,
    typer.Option(
        "--out-of-range",
        help="Lengths outside a profile table: extrapolate the fit (reported) or refuse.",
    ),
]


def _load(scenario: Path | None, data_dir: Path | None, bandwidth_gbps: float | None) -> "Problem":
    from prfaas_plan.inputs.scenario import open_problem

    return open_problem(scenario, data_dir, bandwidth_gbps)


def _emit(view: "View", document: "Document", fmt: OutputFormat, output: Path | None) -> None:
    """Write a result: `view` (views.View) for table/Markdown, `document` for JSON."""
    from prfaas_plan.render import views

    if output is None:
        with _stdout_errors():
            if fmt is OutputFormat.TABLE:
                from rich.console import Console

                views.render_table(view, Console())
            else:
                sys.stdout.write(views.render_text(view, document, fmt))
            sys.stdout.flush()
        return
    from prfaas_plan.inputs.files import write_atomically, write_text

    text = views.render_text(view, document, fmt)
    write_atomically(output, lambda tmp: write_text(tmp, text), "output")


@contextmanager
def _stdout_errors() -> Iterator[None]:
    """A failing write to stdout (a full device, ...) as one line; a closed pipe stays typer's
    (exit 1, silent). The unwritable rest is dropped so that Python's exit does not retry it."""
    import errno
    import os

    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        from prfaas_plan.inputs.files import write_error

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # no file descriptor (typer's CliRunner): nothing is retried
        raise write_error("the result", exc, "stdout") from None


def _spinner(show: bool, label: str) -> AbstractContextManager[object]:
    """A rich status spinner on stderr (for a terminal table), or nothing."""
    if not show:
        return nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(label)


@app.command(cls=_PlanCommand)
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
        Solver, typer.Option("--solver", help="MILP solver for sizing.")
    ] = Solver.HIGHS,
    out_of_range: RangeOpt = RangePolicy.EXTRAPOLATE,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw the threshold-balance figure (.png/.svg/.pdf).",
            callback=_plot_target,
        ),
    ] = None,
    ttft_target_s: Annotated[
        float | None,
        typer.Option(
            "--ttft-target-s",
            help="TTFT target under load (s): the best plan that meets "
            "it (M/G/c prefill pools + processor-sharing link approximation).",
        ),
    ] = None,
    ttft_percentile: Annotated[
        str,
        typer.Option("--ttft-percentile", help="Which TTFT the target bounds: mean, 50, 90 or 99."),
    ] = "90",
    ttft_load: Annotated[
        float | None,
        typer.Option(
            "--ttft-load",
            help="Load for the target, as a fraction of the unconstrained plan's exact-mode Λ_max.",
        ),
    ] = None,
    ttft_load_rps: Annotated[
        float | None, typer.Option("--ttft-load-rps", help="Load for the target (req/s).")
    ] = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Choose the threshold t and the PD prefill/decode split (or size the PrfaaS cluster) and
    compare with the homogeneous PD and naive heterogeneous baselines."""
    from prfaas_plan.commands.plan import plan, ttft_target
    from prfaas_plan.render.plan import plan_to_json, plan_view

    ttft = ttft_target(ttft_target_s, _percentile(ttft_percentile), ttft_load_rps, ttft_load)
    problem = _load(scenario, data_dir, bandwidth_gbps)
    sizing = target_rps is not None or max_prfaas_gpus is not None
    with _spinner(
        sizing and fmt is OutputFormat.TABLE and output is None, "solving the sizing MILP…"
    ):
        report = plan(
            problem, mode=mode, threshold_tokens=threshold_tokens, target_rps=target_rps,
            max_prfaas_gpus=max_prfaas_gpus, solver=solver, range_policy=out_of_range, ttft=ttft,
        )  # fmt: skip
    if plot is not None:
        from prfaas_plan.render.plot import plot_threshold_balance

        plot_threshold_balance(report, plot)
    _emit(plan_view(report), plan_to_json(report), fmt, output)


@app.command(cls=_PlanCommand)
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
    data_dir: DataDirOpt = None,
) -> None:
    """Evaluate one given configuration (t, N_p, N_d = rest of the PD cluster) without optimising."""
    from prfaas_plan.commands.plan import evaluate_configuration
    from prfaas_plan.render.plan import evaluation_to_json, evaluation_view

    problem = _load(scenario, data_dir, bandwidth_gbps)
    report = evaluate_configuration(
        problem,
        threshold_tokens=threshold_tokens,
        pd_prefill_instances=pd_prefill_instances,
        prfaas_instances=prfaas_instances,
        mode=mode,
        range_policy=out_of_range,
    )
    _emit(evaluation_view(report), evaluation_to_json(report), fmt, output)


def _percentile(text: str) -> int | str:
    """`--ttft-percentile`: 'mean' or a whole percentile; anything else is passed on as given
    (the library says what it accepts)."""
    return int(text) if text in ("50", "90", "99") else text


def _int_list(text: str, flag: str) -> list[float]:
    try:
        return [float(int(part)) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(
            f"{flag}: expected comma-separated whole token counts, got {text!r}"
        ) from None


@app.command(cls=_PlanCommand)
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
            "--plot", help="Draw Φ_kv against length (.png/.svg/.pdf).", callback=_plot_target
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

    report = kv_report(
        Catalog.open(data_dir), models, _int_list(lengths, "--lengths"), kv_dtype=kv_dtype,
        state_dtype=state_dtype, gpu=gpu, gpus_per_instance=gpus_per_instance,
    )  # fmt: skip
    if plot is not None:
        from prfaas_plan.render.plot import plot_kv_throughput

        plot_kv_throughput(report, plot)
    _emit(kv_view(report), kv_json(report), fmt, output)


@app.command(cls=_PlanCommand)
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
    mode: ModeOpt = Mode.PAPER,
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
    _emit(egress_view(report), egress_json(report), fmt, output)


@contextmanager
def _progress_bar(label: str) -> Iterator[Callable[[float], None]]:
    """A rich progress bar on stderr (only on a terminal); yields a callback taking 0..1."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(label), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty(),
    ) as bar:  # fmt: skip
        task = bar.add_task(label, total=1.0)
        yield lambda done: bar.update(task, completed=done)


def _float_list(text: str, flag: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{flag}: expected comma-separated numbers, got {text!r}") from None


@app.command(cls=_PlanCommand)
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
        float, typer.Option("--burst-cv", help="gamma: coefficient of variation of inter-arrivals.")
    ] = ArrivalSpec.burst_cv,
    period_s: Annotated[
        float, typer.Option("--period-s", help="sinusoidal: period (s).")
    ] = ArrivalSpec.period_s,
    amplitude: Annotated[
        float, typer.Option("--amplitude", help="sinusoidal: rate swing as a fraction of the mean.")
    ] = ArrivalSpec.amplitude,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Replay a Mooncake JSONL trace (timestamp, input_length, "
            "output_length, hash_ids); with --load/--rate-rps it is sped up to that rate.",
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
        float, typer.Option("--dip-fraction", help="Bandwidth dip: remaining share of the link.")
    ] = StressSpec.dip_fraction,
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
    # without --load: the default fraction, unless a rate is given or a trace replays as is
    default_load = () if trace or rate_rps else LoadSpec.fractions
    sized = requests is not None or duration_s is not None or trace is not None
    request = SimulationRequest(
        arrivals=ArrivalSpec(
            process=arrivals, requests=requests if sized else ArrivalSpec.requests,
            duration_s=duration_s, seed=seed, burst_cv=burst_cv, period_s=period_s,
            amplitude=amplitude, trace=trace,
        ),
        load=LoadSpec(
            fractions=_float_list(load, "--load") if load is not None else default_load,
            rate_rps=rate_rps,
        ),
        stress=StressSpec(dip_start_s, dip_duration_s, dip_fraction),
        policy=PolicySpec(policy),
        link_latency_s=link_latency_s,
    )  # fmt: skip
    validate(request)
    problem = _load(scenario, data_dir, bandwidth_gbps)
    with _progress_bar("simulating") as step:
        report = run_simulations(
            problem, request, plan_mode=mode, threshold_tokens=threshold_tokens,
            find_sustainable=sustainable, progress=step,
        )  # fmt: skip
    _emit(simulation_view(report), simulation_json(report), fmt, output)


@app.command("compare-policies", cls=_PlanCommand)
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
        typer.Option("--trace", help="Mooncake JSONL trace: enables the prefix-aware policy."),
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

    problem = _load(scenario, data_dir, bandwidth_gbps)
    spec = ComparisonSpec(load_fraction=load, requests=requests, seed=seed, trace=trace)
    with _progress_bar("comparing policies") as step:
        report = compare_policies_for(problem, spec, plan_mode=mode, progress=step)
    _emit(comparison_view(report), comparison_json(report), fmt, output)


@app.command("check", cls=_PlanCommand)
def check_command(
    data_dir: Annotated[
        Path | None, typer.Argument(help="Data directory to check (default: the shipped data/).")
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
            "--scenario", help="Golden scenario (repeatable; default: the shipped examples)."
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
    _emit(check_view(report), check_json(report), fmt, output)
    if not report.ok:
        raise typer.Exit(CHECK_FAILED_EXIT_CODE)


def main() -> None:
    """The console script `prfaas-plan`: the app, and an interrupt before it starts."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
