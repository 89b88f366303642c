"""The library entry points behind the CLI: plan a scenario (optimise, baselines, TTFT, mode
comparison, optional sizing), evaluate one given configuration, or size the KV egress of a
prefill cluster. No printing; file reading only through `scenario` and `catalog`.
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Configuration, Evaluation, evaluate
from prfaas_plan.analytic.egress import (
    EgressReport,
    egress_at_length,
    egress_at_threshold,
    smallest_fitting_threshold,
)
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.analytic.ttft import TtftSummary, unloaded_ttft
from prfaas_plan.choices import Mode, RangePolicy, Solver
from prfaas_plan.errors import ConfigError, RangeError
from prfaas_plan.inputs.scenario import Problem, build_problem, load_scenario
from prfaas_plan.solve.sizing import SizingResult, size_prfaas_cluster
from prfaas_plan.solve.threshold import (
    SearchSpace,
    homogeneous_baseline,
    naive_heterogeneous,
    optimize_fixed_hardware,
)

if TYPE_CHECKING:  # queueing is imported only when a TTFT target is given
    from prfaas_plan.analytic.loaded_ttft import LoadedTtft


@dataclass(frozen=True)
class Deployment:
    name: str  # prfaas_pd | homogeneous_pd | naive_heterogeneous | evaluated
    prfaas_gpus: int
    pd_gpus: int
    evaluation: Evaluation
    ttft: TtftSummary


@dataclass(frozen=True)
class RangeNote:
    """Share of requests whose length lies outside the profiled range of some tables (their
    fits are extrapolated there)."""

    curves: tuple[FittedCurve, ...]
    table_min_tokens: float
    table_max_tokens: float
    fraction_below: float
    fraction_above: float


@dataclass(frozen=True)
class ModeComparison:
    """The paper's representative-length convention against exact mean service times."""

    paper: Evaluation  # optimum under Mode.PAPER
    exact: Evaluation  # optimum under Mode.EXACT
    paper_plan_exact_rps: float  # the paper-mode plan's configuration evaluated exactly

    @property
    def paper_overstatement(self) -> float:
        """How much the paper mode's Λ_max exceeds what its own plan sustains exactly."""
        if not self.paper_plan_exact_rps > 0:
            return math.nan
        return self.paper.system_throughput_rps / self.paper_plan_exact_rps - 1.0


@dataclass(frozen=True)
class TtftTarget:
    """`percentile` TTFT (50, 90, 99 or 'mean') <= `target_s` under Poisson load: an absolute
    `load_rps`, or `load_fraction` of the unconstrained plan's exact-mode Λ_max."""

    target_s: float
    percentile: int | str = 90
    load_rps: float | None = None
    load_fraction: float | None = None

    def __post_init__(self):
        if not (self.target_s > 0 and math.isfinite(self.target_s)):
            raise ConfigError(f"--ttft-target-s must be a finite number > 0, got {self.target_s:g}")
        if (self.load_rps is None) == (self.load_fraction is None):
            raise ConfigError("a TTFT target needs exactly one of --ttft-load-rps and --ttft-load")
        load = self.load_rps if self.load_rps is not None else self.load_fraction
        if not (load > 0 and math.isfinite(load)):
            raise ConfigError(f"the TTFT target's load must be a finite number > 0, got {load:g}")

    def rate_rps(self, exact_capacity_rps: float) -> float:
        return (
            self.load_rps if self.load_rps is not None else self.load_fraction * exact_capacity_rps
        )


@dataclass(frozen=True)
class PlanReport:
    problem: Problem
    mode: Mode
    plan: Deployment
    homogeneous: Deployment
    naive: Deployment
    modes: ModeComparison
    sizing: SizingResult | None
    range_notes: tuple[RangeNote, ...]
    ttft_target: TtftTarget | None = None
    loaded_ttft: "LoadedTtft | None" = None  # the plan's TTFT under the target's load

    @property
    def speedup_vs_homogeneous(self) -> float:
        """Plan Λ_max / baseline Λ_max (inf when the baseline serves nothing)."""
        return _ratio(self.plan, self.homogeneous)

    @property
    def speedup_vs_naive(self) -> float:
        return _ratio(self.plan, self.naive)


def _ratio(plan: Deployment, baseline: Deployment) -> float:
    numerator = plan.evaluation.system_throughput_rps
    denominator = baseline.evaluation.system_throughput_rps
    if denominator > 0:
        return numerator / denominator
    return math.inf if numerator > 0 else math.nan


@dataclass(frozen=True)
class EvaluationReport:
    problem: Problem
    deployment: Deployment
    range_notes: tuple[RangeNote, ...]


def range_notes(problem: Problem, policy: RangePolicy) -> tuple[RangeNote, ...]:
    """Where the workload reaches beyond the profiled lengths; raises under RangePolicy.ERROR."""
    s = problem.system
    by_range: dict[tuple[float, float], list[FittedCurve]] = {}
    for curve in (s.prfaas_prefill_latency, s.pd_prefill_latency, s.kv_cache_size):
        by_range.setdefault((curve.table_min_tokens, curve.table_max_tokens), []).append(curve)
    notes = []
    for (lo, hi), curves in by_range.items():
        below = float(problem.workload.partial_moments(-np.inf, np.nextafter(lo, 0))[0])
        above = float(problem.workload.partial_moments(hi, np.inf)[0])
        if below > 0 or above > 0:
            notes.append(RangeNote(tuple(curves), lo, hi, below, above))
    if policy is RangePolicy.ERROR and notes:
        n = notes[0]
        raise RangeError(
            f"{n.curves[0].source}: {n.fraction_below:.3%} of input lengths lie below "
            f"{n.table_min_tokens:g} and {n.fraction_above:.3%} above {n.table_max_tokens:g} tokens, "
            "the profiled range; "
            "--out-of-range error forbids extrapolating the fit (use --out-of-range extrapolate, "
            "narrow workload.input_tokens, or profile more lengths)"
        )
    return tuple(notes)


def _deployment(problem: Problem, name: str, evaluation: Evaluation) -> Deployment:
    c = evaluation.configuration
    s = problem.scenario
    return Deployment(
        name=name,
        prfaas_gpus=c.prfaas_instances * s.prfaas_cluster.gpus_per_instance,
        pd_gpus=c.pd_instances * s.pd_cluster.gpus_per_instance,
        evaluation=evaluation,
        ttft=unloaded_ttft(problem.system, problem.workload, c.threshold_tokens),
    )


def plan(
    problem: Problem,
    *,
    mode: Mode = Mode.PAPER,
    threshold_tokens: float | None = None,
    target_rps: float | None = None,
    max_prfaas_gpus: int | None = None,
    solver: Solver = Solver.HIGHS,
    range_policy: RangePolicy = RangePolicy.EXTRAPOLATE,
    ttft: TtftTarget | None = None,
) -> PlanReport:
    """Optimise t and N_p/N_d (or size the PrfaaS cluster), compare with both baselines.
    With `ttft`, the plan is the best one whose TTFT under load meets the target."""
    notes = range_notes(problem, range_policy)
    if threshold_tokens is not None and not threshold_tokens >= 0:
        raise ConfigError(f"--threshold-tokens must be >= 0, got {threshold_tokens:g}")
    system, workload = problem.system, problem.workload
    sizing = None
    prfaas_instances = problem.prfaas_instances
    if target_rps is not None or max_prfaas_gpus is not None:
        if threshold_tokens is not None:
            raise ConfigError(
                "--threshold-tokens cannot be combined with sizing (--target-rps/--max-prfaas-gpus)"
            )
        per_instance = problem.scenario.prfaas_cluster.gpus_per_instance
        if max_prfaas_gpus is not None and (max_prfaas_gpus < 0 or max_prfaas_gpus % per_instance):
            below = max(max_prfaas_gpus, 0) // per_instance * per_instance
            raise ConfigError(
                f"--max-prfaas-gpus must be a non-negative multiple of prfaas_cluster.gpus_per_instance "
                f"({per_instance}), got {max_prfaas_gpus}; e.g. {below} or {below + per_instance}"
            )
        cap = None if max_prfaas_gpus is None else max_prfaas_gpus // per_instance
        sizing = size_prfaas_cluster(
            system,
            workload,
            problem.pd_instances,
            target_rps=target_rps,
            max_prfaas_instances=cap,
            mode=mode,
            solver=solver,
        )
        prfaas_instances = sizing.evaluation.configuration.prfaas_instances

    def best(m: Mode) -> Evaluation:
        space = SearchSpace(prfaas_instances, problem.pd_instances, threshold_tokens)
        return optimize_fixed_hardware(system, workload, space, m)

    optimum = {m: best(m) for m in Mode}
    chosen = sizing.evaluation if sizing is not None else optimum[mode]
    loaded = None
    if ttft is not None:
        if sizing is not None:
            raise ConfigError(
                "a TTFT target cannot be combined with sizing (--target-rps/--max-prfaas-gpus)"
            )
        from prfaas_plan.solve.ttft_target import optimize_with_ttft

        # the unconstrained plan's capacity with exact service times (as `simulate --load`)
        capacity = evaluate(system, workload, optimum[mode].configuration, Mode.EXACT)
        rate_rps = ttft.rate_rps(capacity.system_throughput_rps)
        space = SearchSpace(prfaas_instances, problem.pd_instances, threshold_tokens)
        chosen, loaded = optimize_with_ttft(
            system, workload, space, arrival_rate_rps=rate_rps, ttft_target_s=ttft.target_s,
            ttft_percentile=ttft.percentile, mode=mode,
        )  # fmt: skip
    paper_config = optimum[Mode.PAPER].configuration
    modes = ModeComparison(
        paper=optimum[Mode.PAPER],
        exact=optimum[Mode.EXACT],
        paper_plan_exact_rps=evaluate(
            system, workload, paper_config, Mode.EXACT
        ).system_throughput_rps,
    )
    s = problem.scenario
    total_gpus = prfaas_instances * s.prfaas_cluster.gpus_per_instance + s.pd_cluster.gpus
    homogeneous = homogeneous_baseline(
        system, workload, total_gpus // s.pd_cluster.gpus_per_instance, mode
    )
    naive = naive_heterogeneous(system, workload, prfaas_instances, problem.pd_instances, mode)
    return PlanReport(
        problem=problem,
        mode=mode,
        plan=_deployment(problem, "prfaas_pd", chosen),
        homogeneous=_deployment(problem, "homogeneous_pd", homogeneous),
        naive=_deployment(problem, "naive_heterogeneous", naive),
        modes=modes,
        sizing=sizing,
        range_notes=notes,
        ttft_target=ttft,
        loaded_ttft=loaded,
    )


def evaluate_configuration(
    problem: Problem,
    *,
    threshold_tokens: float,
    pd_prefill_instances: int,
    prfaas_instances: int | None = None,
    mode: Mode = Mode.PAPER,
    range_policy: RangePolicy = RangePolicy.EXTRAPOLATE,
) -> EvaluationReport:
    """The model for one given configuration, no optimisation."""
    notes = range_notes(problem, range_policy)
    n_prfaas = problem.prfaas_instances if prfaas_instances is None else prfaas_instances
    if n_prfaas < 0:
        raise ConfigError(f"--prfaas-instances must be >= 0, got {n_prfaas}")
    if not 0 <= pd_prefill_instances < problem.pd_instances:
        raise ConfigError(
            f"--pd-prefill-instances must be in [0, {problem.pd_instances - 1}] so that at least one "
            f"of pd_cluster.instances={problem.pd_instances} decodes, got {pd_prefill_instances}"
        )
    if not threshold_tokens >= 0:
        raise ConfigError(f"--threshold-tokens must be >= 0, got {threshold_tokens:g}")
    configuration = Configuration(
        n_prfaas,
        pd_prefill_instances,
        problem.pd_instances - pd_prefill_instances,
        threshold_tokens,
    )
    evaluation = evaluate(problem.system, problem.workload, configuration, mode)
    return EvaluationReport(problem, _deployment(problem, "evaluated", evaluation), notes)


PAPER_EGRESS_GPUS = 512  # the paper's cluster-scale example: 512 H200 ...
PAPER_EGRESS_GPUS_PER_INSTANCE = 8
PAPER_EGRESS_GPU = "h200"
PAPER_LINK_GBPS = 100.0  # ... against a 100 Gbps link


def egress_report(
    catalog,
    *,
    models: list[str] | None = None,
    scenario=None,
    prfaas_gpus: int | None = None,
    gpus_per_instance: int | None = None,
    gpu: str | None = None,
    mean_tokens: float = 32768.0,
    threshold_tokens: float = 0.0,
    link_gbps: float | None = None,
    mode: Mode = Mode.PAPER,
) -> EgressReport:
    """Eq. 2 across catalog models at one length, or for one scenario's distribution at a
    threshold (with the smallest threshold that fits its link)."""
    if link_gbps is not None and not (link_gbps > 0 and math.isfinite(link_gbps)):
        raise ConfigError(f"--link-gbps must be a finite number > 0, got {link_gbps:g}")
    if gpus_per_instance is not None and gpus_per_instance < 1:
        raise ConfigError(f"--gpus-per-instance must be >= 1, got {gpus_per_instance}")
    if scenario is not None:
        if models:
            raise ConfigError("egress: give model names or --scenario, not both")
        problem = build_problem(load_scenario(scenario), scenario, catalog, link_gbps)
        cluster = problem.scenario.prfaas_cluster
        gpu = gpu or cluster.gpu
        per_instance = cluster.gpus_per_instance if gpus_per_instance is None else gpus_per_instance
        n_gpus = prfaas_gpus if prfaas_gpus is not None else cluster.gpus
    else:
        gpu = gpu or PAPER_EGRESS_GPU
        per_instance = (
            PAPER_EGRESS_GPUS_PER_INSTANCE if gpus_per_instance is None else gpus_per_instance
        )
        n_gpus = prfaas_gpus if prfaas_gpus is not None else PAPER_EGRESS_GPUS
    if per_instance <= 0 or n_gpus <= 0 or n_gpus % per_instance:
        raise ConfigError(
            f"--prfaas-gpus must be a positive multiple of --gpus-per-instance, "
            f"got {n_gpus} and {per_instance}"
        )
    instances = n_gpus // per_instance
    if scenario is not None:
        if not threshold_tokens >= 0:
            raise ConfigError(f"--threshold-tokens must be >= 0, got {threshold_tokens:g}")
        model = problem.scenario.model
        prefill = catalog.prefill_latency(model, gpu, per_instance, problem.workload.max_tokens)
        kv = problem.system.kv_cache_size
        link = problem.system.link_bandwidth_bytes_per_s
        e = egress_at_threshold(
            prefill, kv, instances, problem.workload, threshold_tokens, link, mode
        )
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
    if not (mean_tokens > 0 and math.isfinite(mean_tokens)):
        raise ConfigError(f"--mean-tokens must be a finite number > 0, got {mean_tokens:g}")
    catalog.gpu(gpu, where="--gpu: ")
    link = units.gbps_to_bytes_per_s(PAPER_LINK_GBPS if link_gbps is None else link_gbps)
    rows = []
    for name in models or list(catalog.models()):
        catalog.model(name)
        try:
            prefill = catalog.prefill_latency(name, gpu, per_instance)
            kv = catalog.kv_cache_size(name, "bf16")
        except ConfigError:
            if models:
                raise
            rows.append((name, None, f"no {gpu}-x{per_instance} prefill or bf16 KV profile"))
            continue
        beyond = []
        if mean_tokens > catalog.model(name).max_context_tokens:
            beyond.append(
                f"{mean_tokens:g} tokens exceeds its context ({catalog.model(name).max_context_tokens:g})"
            )
        if not prefill.table_min_tokens <= mean_tokens <= prefill.table_max_tokens:
            beyond.append(
                f"extrapolated beyond its profiled [{prefill.table_min_tokens:g}, {prefill.table_max_tokens:g}] tokens"
            )
        rows.append(
            (name, egress_at_length(prefill, kv, instances, mean_tokens, link), "; ".join(beyond))
        )
    return EgressReport(
        title=f"{n_gpus} x {gpu.upper()} at {units.tokens_to_ktokens(mean_tokens):g}K tokens",
        gpu=gpu,
        gpus_per_instance=per_instance,
        prfaas_gpus=n_gpus,
        mode=mode,
        rows=tuple(rows),
    )
