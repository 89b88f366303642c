"""`egress`: the bandwidth wall, the KV egress a saturated prefill cluster needs (reference
eq. 2), across catalog models at one length or for one scenario's distribution at a threshold.
Units: bytes/s, tokens; the link in Gbps (10^9 bit/s) as given.
"""

import math
from pathlib import Path

from prfaas_plan import plausible, units
from prfaas_plan.analytic.egress import (
    Egress,
    EgressReport,
    egress_at_length,
    egress_at_threshold,
    smallest_fitting_threshold,
)
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.use_cases.numerics import model_numerics

PAPER_EGRESS_GPUS = 512  # the paper's cluster-scale example: 512 H200 ...
PAPER_EGRESS_GPUS_PER_INSTANCE = 8
PAPER_EGRESS_GPU = "h200"
PAPER_LINK_GBPS = 100.0  # ... against a 100 Gbps link
PAPER_MEAN_TOKENS = 32768.0  # ... offloading requests of 32K tokens on average


def _instances(n_gpus: int, per_instance: int) -> int:
    if per_instance <= 0 or n_gpus <= 0 or n_gpus % per_instance:
        raise ConfigError(
            f"prfaas_gpus must be a positive multiple of gpus_per_instance, "
            f"got {n_gpus} and {per_instance}",
            parameter="prfaas_gpus",
        )
    plausible.check_in_range("prfaas_gpus", n_gpus, 1, plausible.MAX_GPUS, "GPUs")
    return n_gpus // per_instance


def _scenario_egress(
    catalog: Catalog,
    scenario: Path,
    prfaas_gpus: int | None,
    gpus_per_instance: int | None,
    gpu: str | None,
    threshold_tokens: float,
    link_gbps: float | None,
    mode: Mode,
) -> EgressReport:
    """Eq. 2 for a scenario's PrfaaS cluster, link and length distribution at threshold t."""
    if not threshold_tokens >= 0:
        raise ConfigError(
            f"threshold_tokens must be >= 0, got {threshold_tokens:g}", parameter="threshold_tokens"
        )
    plausible.check_in_range(
        "threshold_tokens", threshold_tokens, 0, plausible.MAX_TOKENS, "tokens"
    )
    problem = build_problem(load_scenario(scenario), scenario, catalog, link_gbps)
    cluster = problem.scenario.prfaas_cluster
    gpu = gpu or cluster.gpu
    per_instance = cluster.gpus_per_instance if gpus_per_instance is None else gpus_per_instance
    n_gpus = prfaas_gpus if prfaas_gpus is not None else cluster.gpus
    instances = _instances(n_gpus, per_instance)
    model = problem.scenario.model
    prefill = catalog.prefill_latency(model, gpu, per_instance, problem.workload.max_tokens)
    kv = problem.system.kv_cache_size
    link = problem.system.link_bandwidth_bytes_per_s
    e = egress_at_threshold(prefill, kv, instances, problem.workload, threshold_tokens, link, mode)
    return EgressReport(
        title=f"{problem.scenario.name} ({model})",
        gpu=gpu,
        gpus_per_instance=per_instance,
        prfaas_gpus=n_gpus,
        mode=mode,
        rows=((model, e, "" if e is not None else "no request is longer than t"),),
        threshold_tokens=threshold_tokens,
        smallest_fitting_threshold_tokens=smallest_fitting_threshold(
            prefill, kv, instances, problem.workload, link, mode
        ),
    )


def _model_row(
    catalog: Catalog,
    name: str,
    gpu: str,
    per_instance: int,
    instances: int,
    mean_tokens: float,
    link_bytes_per_s: float,
    named: bool,
) -> tuple[str, Egress | None, str]:
    """(model, egress or None, note); a model without a profile is a note unless `named`."""
    spec = catalog.model(name)
    try:
        prefill = catalog.prefill_latency(name, gpu, per_instance)
        kv = catalog.kv_cache_size(name, "bf16")
    except ConfigError:
        if named:
            raise
        return name, None, f"no {gpu}-x{per_instance} prefill or bf16 KV profile"
    beyond = []
    if mean_tokens > spec.max_context_tokens:
        beyond.append(f"{mean_tokens:g} tokens exceeds its context ({spec.max_context_tokens:g})")
    if not prefill.table_min_tokens <= mean_tokens <= prefill.table_max_tokens:
        beyond.append(
            f"extrapolated beyond its profiled [{prefill.table_min_tokens:g}, {prefill.table_max_tokens:g}] tokens"
        )
    e = egress_at_length(prefill, kv, instances, mean_tokens, link_bytes_per_s)
    return name, e, "; ".join(beyond)


@model_numerics("egress")
def egress_report(
    catalog: Catalog,
    *,
    models: list[str] | None = None,
    scenario: Path | None = None,
    prfaas_gpus: int | None = None,
    gpus_per_instance: int | None = None,
    gpu: str | None = None,
    mean_tokens: float | None = None,
    threshold_tokens: float | None = None,
    link_gbps: float | None = None,
    mode: Mode | None = None,
) -> EgressReport:
    """Eq. 2 across catalog models at one length (`mean_tokens`, default PAPER_MEAN_TOKENS), or
    for one scenario's distribution at a threshold (`threshold_tokens`, default 0; with the
    smallest threshold that fits its link). A parameter the chosen form does not use is refused,
    not ignored (`mode`, None: paper, only splits a scenario's distribution)."""
    if link_gbps is not None and not (link_gbps > 0 and math.isfinite(link_gbps)):
        raise ConfigError(
            f"link_gbps must be a finite number > 0, got {link_gbps:g}", parameter="link_gbps"
        )
    if link_gbps is not None:
        plausible.check_in_range(
            "link_gbps",
            link_gbps,
            plausible.MIN_BANDWIDTH_GBPS,
            plausible.MAX_BANDWIDTH_GBPS,
            "Gbps",
        )
    if gpus_per_instance is not None and gpus_per_instance < 1:
        raise ConfigError(
            f"gpus_per_instance must be >= 1, got {gpus_per_instance}",
            parameter="gpus_per_instance",
        )
    if scenario is not None:
        if models:
            raise ConfigError(
                "egress: give model names or scenario, not both", parameter="scenario"
            )
        if mean_tokens is not None:
            raise ConfigError(
                "mean_tokens has no effect with a scenario: L_avg is the scenario's "
                "E[L | L > t]; drop mean_tokens or the scenario",
                parameter="mean_tokens",
            )
        return _scenario_egress(catalog, scenario, prfaas_gpus, gpus_per_instance, gpu,
                                threshold_tokens or 0.0, link_gbps, mode or Mode.PAPER)  # fmt: skip
    if threshold_tokens is not None:
        raise ConfigError(
            "threshold_tokens needs a scenario: it splits the scenario's length distribution; "
            "without one, mean_tokens sets the length",
            parameter="threshold_tokens",
        )
    if mode is not None:
        raise ConfigError(
            "mode has no effect without a scenario: eq. 2 at one length uses no service-time "
            "mode (it picks the length of a scenario's distribution); drop it or give a scenario",
            parameter="mode",
        )
    mean_tokens = PAPER_MEAN_TOKENS if mean_tokens is None else mean_tokens
    gpu = gpu or PAPER_EGRESS_GPU
    per_instance = (
        PAPER_EGRESS_GPUS_PER_INSTANCE if gpus_per_instance is None else gpus_per_instance
    )
    n_gpus = prfaas_gpus if prfaas_gpus is not None else PAPER_EGRESS_GPUS
    instances = _instances(n_gpus, per_instance)
    if not (mean_tokens > 0 and math.isfinite(mean_tokens)):
        raise ConfigError(
            f"mean_tokens must be a finite number > 0, got {mean_tokens:g}", parameter="mean_tokens"
        )
    plausible.check_in_range(
        "mean_tokens", mean_tokens, plausible.MIN_TOKENS, plausible.MAX_TOKENS, "tokens"
    )
    catalog.gpu(gpu, where="gpu: ", parameter="gpu")
    link = units.gbps_to_bytes_per_s(PAPER_LINK_GBPS if link_gbps is None else link_gbps)
    rows = tuple(
        _model_row(catalog, name, gpu, per_instance, instances, mean_tokens, link, bool(models))
        for name in models or list(catalog.models())
    )
    return EgressReport(
        title=f"{n_gpus} x {gpu.upper()} at {mean_tokens:,.0f} tokens",
        gpu=gpu,
        gpus_per_instance=per_instance,
        prfaas_gpus=n_gpus,
        mode=Mode.PAPER,
        rows=rows,
    )
