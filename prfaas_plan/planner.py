"""The library entry points behind the CLI: plan a scenario (optimise, baselines, TTFT, mode
comparison, optional sizing) or evaluate one given configuration. Pure: no printing, no files
beyond what `scenario.build_problem` already read.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.capacity import Configuration, Evaluation, evaluate
from prfaas_plan.choices import Mode, RangePolicy, Solver
from prfaas_plan.errors import ConfigError, RangeError
from prfaas_plan.optimize import (
    SearchSpace,
    homogeneous_baseline,
    naive_heterogeneous,
    optimize_fixed_hardware,
)
from prfaas_plan.profiles import FittedCurve
from prfaas_plan.scenario import Problem
from prfaas_plan.sizing import SizingResult, size_prfaas_cluster
from prfaas_plan.ttft import TtftSummary, unloaded_ttft


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
        return self.paper.system_throughput_rps / self.paper_plan_exact_rps - 1.0


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

    @property
    def speedup_vs_homogeneous(self) -> float:
        return (
            self.plan.evaluation.system_throughput_rps
            / self.homogeneous.evaluation.system_throughput_rps
        )

    @property
    def speedup_vs_naive(self) -> float:
        return (
            self.plan.evaluation.system_throughput_rps / self.naive.evaluation.system_throughput_rps
        )


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
) -> PlanReport:
    """Optimise t and N_p/N_d (or size the PrfaaS cluster), compare with both baselines."""
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
