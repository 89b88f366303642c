"""`prfaas-plan import-profile FORMAT FILE...`: measured profiles from vLLM, SGLang or Dynamo
benchmark results, written into a data directory (use_cases/import_profile.py)."""

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import ProfileFormat, ProfileKind
from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import FormatOpt, OutputFormat, OutputOpt, source
from prfaas_plan.cli.output import emit, guard_output, note_inputs


class Provenance(StrEnum):
    """meta.yaml's provenance of an imported table (use_cases/import_profile.py PROVENANCES)."""

    MEASURED = "measured"
    ESTIMATED = "estimated"


@app.command("import-profile", cls=CliCommand)
def import_profile_command(
    fmt_in: Annotated[
        ProfileFormat, typer.Argument(metavar="FORMAT", help="vllm, sglang or dynamo.")
    ],
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="Result files (several for decode at several concurrencies).",
            callback=source("benchmark file"),
        ),
    ],
    model: Annotated[str, typer.Option("--model", help="Model key of models.yaml.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU name (a file of <data>/gpus/).")],
    gpus_per_instance: Annotated[
        int, typer.Option("--gpus-per-instance", min=1, max=1024, help="GPUs of one instance.")
    ],
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data-dir",
            help="Data directory to write into; a new or empty one is first initialised from "
            "the shipped data.",
            callback=source("data_dir"),
        ),
    ],
    kind: Annotated[
        ProfileKind,
        typer.Option(
            "--kind",
            help="prefill or decode; auto: dynamo by its arrays, vllm/sglang decode when the "
            "runs span several concurrencies.",
        ),
    ] = ProfileKind.AUTO,
    engine_version: Annotated[
        str | None, typer.Option("--engine-version", help="Engine version for meta.yaml.")
    ] = None,
    parallelism: Annotated[
        str | None,
        typer.Option("--parallelism", help="Parallel layout for meta.yaml, e.g. 'TP8'."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing profile.")] = False,
    provenance: Annotated[
        Provenance | None,
        typer.Option(
            "--provenance",
            help="meta.yaml's provenance: estimated for latencies a model made (Dynamo's "
            "AIConfigurator path); default measured, or estimated where the file says so.",
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
) -> None:
    """Import measured prefill latency (from TTFT of requests that did not queue) or decode step
    latency (from ITLs at several concurrencies) into DATA_DIR/profiles/, with a meta.yaml."""
    from prfaas_plan.render.imports import import_json, import_view
    from prfaas_plan.use_cases.import_profile import import_profile

    note_inputs(*files)
    guard_output(output)  # before anything is written into the data directory
    report = import_profile(
        fmt_in, files, model=model, gpu=gpu, gpus_per_instance=gpus_per_instance,
        data_dir=data_dir, kind=kind, engine_version=engine_version, parallelism=parallelism,
        force=force, provenance=provenance.value if provenance else None,
    )  # fmt: skip
    emit(import_view(report), import_json(report), fmt, output)
