"""`prfaas-plan export`: flags -> export/ (plan, build, write) ; `--read DIR` reads one back."""

from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import Mode
from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import DataDirOpt, FormatOpt, OutputFormat, source
from prfaas_plan.cli.output import emit, note_inputs
from prfaas_plan.errors import ConfigError
from prfaas_plan.use_cases.field_docs import describe

TargetOpt = Annotated[
    str | None,
    typer.Option("--target", "-t", help=describe("ExportRequest", "target")),
]


@app.command("export", cls=CliCommand)
def export_command(
    source_file: Annotated[
        Path | None,
        typer.Argument(
            help="Scenario YAML (planned here) or a plan JSON from `optimize -f json` (exported "
            "as reviewed); default: the paper's case study.",
            callback=source("scenario or plan file"),
        ),
    ] = None,
    target: TargetOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="New directory to write the manifests into."),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(
            "--scenario",
            help="With a plan JSON: its scenario (default: the file the plan names); with --read: the "
            "export's scenario (default: the case study).",
            callback=source("scenario"),
        ),
    ] = None,
    read: Annotated[
        Path | None,
        typer.Option(
            "--read", help="Read an exported directory back: its replicas, GPUs, threshold, Λ_max."
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help=describe("ExportRequest", "name")),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help=describe("ExportRequest", "namespace"))
    ] = None,
    image: Annotated[
        str | None, typer.Option("--image", help=describe("ExportRequest", "image"))
    ] = None,
    model_id: Annotated[
        str | None,
        typer.Option("--model-id", help=describe("ExportRequest", "model_id")),
    ] = None,
    prompt_chars_per_token: Annotated[
        int | None,
        typer.Option(
            "--prompt-chars-per-token",
            help=describe("ExportRequest", "prompt_chars_per_token"),
        ),
    ] = None,
    mode: Annotated[
        Mode | None, typer.Option("--mode", help=describe("ExportRequest", "mode"))
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    data_dir: DataDirOpt = None,
) -> None:
    """Write the plan as a serving stack's manifests (llm-d, Dynamo, plain Kubernetes), one
    folder a site, with a note of what the stack cannot express and its modelled cost.
    Exit 3 on a bad input or output (one `error:` line; nothing is written)."""
    from prfaas_plan.export.build import ExportRequest, Target, build_export
    from prfaas_plan.export.manifest import write_directory
    from prfaas_plan.export.plan_source import (
        looks_like_plan_json,
        plan_from_json,
        plan_from_scenario,
        plan_scenario_file,
        read_plan_json,
    )
    from prfaas_plan.inputs.scenario import open_problem
    from prfaas_plan.use_cases.requests import build

    if read is not None:
        if target is not None or output is not None or source_file is not None:
            raise ConfigError("--read takes only --scenario (and --format): it writes nothing")
        _read_back(read, open_problem(scenario, data_dir), fmt)
        return
    if target is None or output is None:
        raise ConfigError("export needs --target (llm-d, dynamo or kubernetes) and --output DIR")
    if target not in {t.value for t in Target}:
        raise ConfigError(f"--target must be llm-d, dynamo or kubernetes, got {target!r}")
    note_inputs(source_file, scenario)
    request = build(
        ExportRequest, target=target, mode=mode, name=name, namespace=namespace, image=image,
        model_id=model_id, prompt_chars_per_token=prompt_chars_per_token,
    )  # fmt: skip
    if source_file is not None and looks_like_plan_json(source_file):
        data = read_plan_json(source_file)
        problem = open_problem(scenario or plan_scenario_file(data, source_file), data_dir)
        plan = plan_from_json(data, source_file, problem)
    else:
        if scenario is not None:
            raise ConfigError("--scenario goes with a plan JSON; a scenario is the argument")
        problem = open_problem(source_file, data_dir)
        plan = plan_from_scenario(problem, request.mode)
    result = build_export(problem, plan, request)
    write_directory(output, result.files)
    typer.echo(f"wrote {output}: {result.summary()}", err=True)


def _read_back(directory: Path, problem: object, fmt: OutputFormat) -> None:
    from prfaas_plan.export.readback import read_export
    from prfaas_plan.inputs.scenario import Problem
    from prfaas_plan.render.views import View

    assert isinstance(problem, Problem)
    back = read_export(directory, problem)
    rows = [(f"{role} replicas", [str(p.replicas)]) for role, p in sorted(back.pools.items())] + [
        (f"{role} GPUs / instance", [str(p.gpus_per_instance)])
        for role, p in sorted(back.pools.items())
    ]
    view = View(
        f"{directory} ({back.target}, scenario {back.scenario_label})",
        ["value"],
        [("threshold tokens (L > t)", [f"{back.threshold_tokens:,.0f}"]), *rows,
         ("Λ_max req/s", [f"{back.system_rps:.4f}"])],
        [],
    )  # fmt: skip
    document = {
        "directory": str(directory),
        "target": back.target,
        "scenario": back.scenario_label,
        "threshold_tokens": back.threshold_tokens,
        "pools": {
            role: {"replicas": p.replicas, "gpus_per_instance": p.gpus_per_instance}
            for role, p in sorted(back.pools.items())
        },
        "system_rps": back.system_rps,
    }
    emit(view, document, fmt, None)
