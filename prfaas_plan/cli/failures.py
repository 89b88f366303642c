"""How the command line reports a failure: the library's parameters written as this CLI's flags
(`PARAMETER_FLAGS`, `error_message`), every expected failure as one `error:` line on stderr with
the exit code of its class (errors.py), a usage error (exit 2) as one `error:` line and one usage
line, and any option given twice refused; under the console script and typer's CliRunner alike."""

import re
import sys
from typing import TYPE_CHECKING, Any

import typer
from typer._click.exceptions import UsageError  # typer vendors click: no public name for it
from typer.core import TyperCommand, TyperGroup, TyperOption

from prfaas_plan.errors import ConfigError, PlanError, ResourceLimitError

if TYPE_CHECKING:
    pass


# library parameter (as errors name it) -> the flag that sets it
PARAMETER_FLAGS: dict[str, str] = {
    # optimize / evaluate (commands/plan.py, solve/sizing.py, inputs/scenario.py)
    "threshold_tokens": "--threshold-tokens",
    # prices (inputs/pricing.py)
    "gpu_price": "--gpu-price",
    "link_offering": "--link-offering",
    "cost_model": "--cost-model",
    "utilization": "--utilization",
    # procure (commands/procure.py)
    "budget_usd_per_hour": "--budget-usd-per-hour",
    "max_instances_per_site": "--max-instances-per-site",
    "export_model": "--export-model",
    "bandwidth_gbps": "--bandwidth-gbps",
    "target_rps": "--target-rps",
    "max_prfaas_gpus": "--max-prfaas-gpus",
    "max_prfaas_instances": "--max-prfaas-gpus",
    "solver": "--solver",
    "range_policy": "--out-of-range",
    "plot_path": "--plot",
    "curves_path": "--curves",  # sensitivity
    "bins": "--bins",  # sensitivity (routing-LP bins)
    "ttft.target_s": "--ttft-target-s",
    "ttft.percentile": "--ttft-percentile",
    "ttft.load_fraction": "--ttft-load",
    "ttft.load_rps": "--ttft-load-rps",
    "pd_prefill_instances": "--pd-prefill-instances",
    "prfaas_instances": "--prfaas-instances",
    "mode": "--mode",
    "output": "--output",
    "data_dir": "--data-dir",
    "value": "--value",  # sweep-report (study/report.py)
    # import-profile (commands/import_profile.py)
    "engine_version": "--engine-version",
    "parallelism": "--parallelism",
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
    # sweep (study/run.py)
    "dask_scheduler": "--dask-scheduler",
    "workers": "--workers",
    # sweep-report (study/report.py)
    "group": "--group",
    "x": "--x",
    "y": "--y",
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


class PlanCommand(TyperCommand):
    """A command that refuses any option given more than once, unless it is declared a list
    (`multiple`, like `check --scenario`): click would keep only the last, so
    `--bandwidth-gbps 100 --bandwidth-gbps 1` would plan for 1 Gbps without a word, and
    `--load 0.5 --load 0.8` read as a sweep would run 0.8 alone."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from prfaas_plan.cli.output import INPUTS

        INPUTS.clear()  # a new command: none of its inputs read yet
        if not ctx.resilient_parsing:
            try:
                _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            except UsageError:
                order = []  # super() reports it
            seen: set[str] = set()
            for p in order:
                if not isinstance(p, TyperOption) or p.multiple:
                    continue
                flag = max(p.opts, key=len)
                if flag in seen:
                    sweep = (
                        ", a sweep as one list: --load 0.5,0.8"
                        if self.name == "simulate" and flag == "--load"
                        else ""
                    )
                    raise ConfigError(
                        f"{flag} given more than once (only the last would count); "
                        f"give it once{sweep}"
                    )
                seen.add(flag)
        try:
            return super().parse_args(ctx, args)
        except UsageError as exc:
            exc.ctx = (
                exc.ctx or ctx
            )  # click leaves it out of some (a missing value): the usage line
            raise


class PlanGroup(TyperGroup):
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
