"""The `sensitivity` command: what binds, what one more unit of each resource buys, shadow
prices and the routing-policy upper bound (cvxpy, imported only when the command runs), and the
curves (--curves JSON/CSV, --plot figure)."""

from pathlib import Path
from typing import Annotated

import typer

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
from prfaas_plan.errors import ConfigError
from prfaas_plan.use_cases.field_docs import describe

CURVE_SUFFIXES = (".json", ".csv")


def _curves_name(text: str) -> Path:
    from prfaas_plan.inputs.files import check_name

    path = check_name(text, "curves")
    if path.suffix.lower() not in CURVE_SUFFIXES:
        raise ConfigError(
            f"curves: file must end in .json or .csv, got {path.name!r}",
            parameter="curves",
        )
    return path


def _curves_target(value: Path | None) -> Path | None:
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "curves")
    return value


@app.command("sensitivity", cls=CliCommand)
def sensitivity(
    scenario: ScenarioArg = None,
    mode: ModeOpt = None,
    bandwidth_gbps: BandwidthOpt = None,
    bins: Annotated[
        int | None, typer.Option("--bins", help=describe("SensitivityRequest", "bins"))
    ] = None,
    curves: Annotated[
        Path | None,
        typer.Option(
            "--curves",
            help="Also write Λ_max and t* against bandwidth, PrfaaS size and mean input length "
            "(.json or .csv).",
            callback=_curves_target,
            parser=_curves_name,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw those curves and the threshold balance (.png/.svg/.pdf).",
            callback=plot_target,
            parser=plot_name,
        ),
    ] = None,
    gpu_prices_usd_per_gpu_hour: GpuPriceOpt = None,
    link_offering: LinkOfferingOpt = None,
    cost_model: CostModelOpt = None,
    utilization: UtilizationOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """What binds at the optimum, what one more PrfaaS instance, PD instance, 10% of link or 10%
    of decode SLO slack is worth, the capacities' shadow prices and the routing LP's upper bound
    on every length-based routing policy."""
    from prfaas_plan.render.sensitivity import sensitivity_to_json, sensitivity_view
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import SensitivityRequest, build
    from prfaas_plan.use_cases.sensitivity import sensitivity_curves

    check_distinct_outputs(output, plot, curves=curves)
    request = build(
        SensitivityRequest, mode=mode, bins=bins,
        gpu_prices_usd_per_gpu_hour=gpu_prices(gpu_prices_usd_per_gpu_hour), link_offering=link_offering,
        cost_model=cost_model, utilization=utilization,
    )  # fmt: skip
    problem, catalog = load_problem(scenario, data_dir, bandwidth_gbps)
    with spinner(fmt is OutputFormat.TABLE and output is None, "solving the routing LPs…"):
        report = calls.sensitivity(problem, request, catalog)
        lines = sensitivity_curves(problem, request.mode, catalog) if curves or plot else ()
    if curves is not None:
        from prfaas_plan.inputs.files import write_atomically, write_text
        from prfaas_plan.render.sensitivity import curves_to_csv, curves_to_json
        from prfaas_plan.render.views import dumps

        text = (
            curves_to_csv(lines)
            if curves.suffix.lower() == ".csv"
            else dumps(curves_to_json(lines))
        )
        write_atomically(curves, lambda tmp: write_text(tmp, text), "curves")
    if plot is not None:
        from prfaas_plan.render.plot import plot_sensitivity_curves

        plot_sensitivity_curves(problem, report.plan, lines, plot)
    emit(sensitivity_view(report), sensitivity_to_json(report), fmt, output)
