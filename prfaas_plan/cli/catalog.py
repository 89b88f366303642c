"""`kv` and `egress`: what the catalog's models and GPUs imply, without a scenario."""

from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.choices import Mode
from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import (
    DataDirOpt,
    FormatOpt,
    OutputFormat,
    OutputOpt,
    check_distinct_outputs,
    plot_name,
    plot_target,
    source,
    token_counts,
)
from prfaas_plan.cli.output import emit


@app.command(cls=CliCommand)
def kv(
    models: Annotated[
        list[str] | None, typer.Argument(help="Catalog models (default: every model).")
    ] = None,
    lengths_tokens: Annotated[
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
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.render.catalog import kv_json, kv_view
    from prfaas_plan.use_cases.kv import kv_report

    check_distinct_outputs(output, plot)
    report = kv_report(
        Catalog.open(data_dir), models, token_counts(lengths_tokens, "--lengths"), kv_dtype=kv_dtype,
        state_dtype=state_dtype, gpu=gpu, gpus_per_instance=gpus_per_instance,
    )  # fmt: skip
    if plot is not None:
        from prfaas_plan.render.plot import plot_kv_throughput

        plot_kv_throughput(report, plot)
    emit(kv_view(report), kv_json(report), fmt, output)


@app.command(cls=CliCommand)
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
        int | None,
        typer.Option("--prfaas-gpus", help="N, GPUs in the prefill cluster (default: 512)."),
    ] = None,
    gpus_per_instance: Annotated[
        int | None, typer.Option("--gpus-per-instance", help="P, GPUs per instance (default: 8).")
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Prefill GPU (default: h200).")] = None,
    mean_tokens: Annotated[
        float | None,
        typer.Option(
            "--mean-tokens",
            help="Without --scenario: L_avg, mean offloaded length (tokens) (default: 32768).",
        ),
    ] = None,
    threshold_tokens: Annotated[
        float | None,
        typer.Option(
            "--threshold-tokens", help="With --scenario: routing threshold t (default: 0)."
        ),
    ] = None,
    link_gbps: Annotated[
        float | None, typer.Option("--link-gbps", help="Link to test, 10^9 bit/s (default: 100).")
    ] = None,
    mode: Annotated[
        Mode | None,
        typer.Option(
            "--mode", help="With --scenario: service-time mode, paper or exact (default: paper)."
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """The bandwidth wall: KV egress a saturated prefill cluster needs (reference eq. 2),
    whether a link carries it and, for a scenario, the smallest threshold that fits."""
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.render.catalog import egress_json, egress_view
    from prfaas_plan.use_cases.egress import egress_report

    report = egress_report(
        Catalog.open(data_dir), models=models, scenario=scenario, prfaas_gpus=prfaas_gpus,
        gpus_per_instance=gpus_per_instance, gpu=gpu, mean_tokens=mean_tokens,
        threshold_tokens=threshold_tokens, link_gbps=link_gbps, mode=mode,
    )  # fmt: skip
    emit(egress_view(report), egress_json(report), fmt, output)
