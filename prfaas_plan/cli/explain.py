"""The `explain` command: the model's equations with the scenario's numbers substituted, and the
elasticities of Λ_max (sympy, imported only when the command runs)."""

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
)
from prfaas_plan.cli.output import emit, load_problem


@app.command("explain", cls=CliCommand)
def explain(
    scenario: ScenarioArg = None,
    mode: ModeOpt = None,
    bandwidth_gbps: BandwidthOpt = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """The plan put through the model's equations with the scenario's numbers (Markdown renders
    the LaTeX), and the elasticities of Λ_max derived symbolically."""
    from prfaas_plan.render.explain import explain_to_json, explain_view
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import ExplainRequest, build

    request = build(ExplainRequest, mode=mode)
    problem, catalog = load_problem(scenario, data_dir, bandwidth_gbps)
    report = calls.explain(problem, request, catalog)
    emit(explain_view(report), explain_to_json(report), fmt, output)
