"""`optimize` and `evaluate`: plan a scenario (optimise, baselines, TTFT, mode comparison,
optional sizing or TTFT target under load), or evaluate one given configuration. No printing,
no file reading (the caller builds the `Problem`). Units: SI (s, req/s, tokens).
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import Configuration, Evaluation, ServingSystem, evaluate
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.analytic.ttft import TtftSummary
from prfaas_plan.choices import Mode, RangePolicy, Solver
from prfaas_plan.errors import ConfigError, RangeError
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.threshold import SearchSpace
from prfaas_plan.use_cases.numerics import model_numerics

if TYPE_CHECKING:  # queueing is imported only when a TTFT target is given, sizing when asked
    from prfaas_plan.analytic.cost import DeploymentCost
    from prfaas_plan.analytic.loaded_ttft import LoadedTtft
    from prfaas_plan.inputs.pricing import Pricing
    from prfaas_plan.solve.sizing import SizingResult
    from prfaas_plan.use_cases.cost import PlanCost


@dataclass(frozen=True)
class Deployment:
    name: str  # prfaas_pd | homogeneous_pd | naive_heterogeneous | evaluated
    prfaas_gpus: int
    pd_gpus: int
    evaluation: Evaluation
    ttft: TtftSummary
    cost: "DeploymentCost | None" = None  # None: no prices


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

    def __post_init__(self) -> None:
        if self.percentile not in TTFT_PERCENTILES:
            raise ConfigError(
                f"ttft_percentile must be mean, 50, 90 or 99, got {self.percentile!r}",
                parameter="ttft_percentile",
            )
        if not (self.target_s > 0 and math.isfinite(self.target_s)):
            raise ConfigError(
                f"ttft_target_s must be a finite number > 0, got {self.target_s:g}",
                parameter="ttft_target_s",
            )
        if self.load_rps is not None and self.load_fraction is None:
            load = self.load_rps
        elif self.load_fraction is not None and self.load_rps is None:
            load = self.load_fraction
        else:
            raise ConfigError(
                "a TTFT target needs exactly one of ttft_load_rps and ttft_load",
                parameter="ttft_load_rps",
            )
        if not (load > 0 and math.isfinite(load)):
            name = "ttft_load_rps" if self.load_rps is not None else "ttft_load"
            raise ConfigError(
                f"{name} (the TTFT target's load) must be a finite number > 0, got {load:g}",
                parameter=name,
            )
        plausible.check_in_range("ttft_target_s", self.target_s, 0, plausible.MAX_SECONDS, "s")
        if self.load_rps is not None:
            plausible.check_in_range(
                "ttft_load_rps",
                self.load_rps,
                plausible.MIN_RATE_RPS,
                plausible.MAX_RATE_RPS,
                "req/s",
            )
        else:
            plausible.check_in_range(
                "ttft_load", load, plausible.MIN_LOAD_FRACTION, plausible.MAX_LOAD_FRACTION
            )

    def rate_rps(self, exact_capacity_rps: float) -> float:
        """The target's arrival rate: `load_rps`, or `load_fraction` × `exact_capacity_rps`."""
        if self.load_rps is not None:
            return self.load_rps
        assert self.load_fraction is not None  # __post_init__: exactly one of the two
        return self.load_fraction * exact_capacity_rps


TTFT_PERCENTILES: tuple[int | str, ...] = ("mean", 50, 90, 99)


def ttft_target(
    target_s: float | None,
    percentile: int | str | None = None,
    load_rps: float | None = None,
    load_fraction: float | None = None,
) -> TtftTarget | None:
    """A TtftTarget (`percentile` None: TtftTarget's default), or None when no target is given
    (then no load and no percentile may be given either: they would have no effect)."""
    if target_s is None:
        if load_rps is not None or load_fraction is not None:
            raise ConfigError(
                "ttft_load/ttft_load_rps need ttft_target_s", parameter="ttft_target_s"
            )
        if percentile is not None:
            raise ConfigError(
                "ttft_percentile has no effect without a target (ttft_target_s), whose TTFT it "
                "chooses; give ttft_target_s or drop ttft_percentile",
                parameter="ttft_percentile",
            )
        return None
    if percentile is None:
        return TtftTarget(target_s, load_rps=load_rps, load_fraction=load_fraction)
    return TtftTarget(target_s, percentile, load_rps, load_fraction)


@dataclass(frozen=True)
class PlanReport:
    problem: Problem
    mode: Mode
    plan: Deployment
    homogeneous: Deployment
    naive: Deployment
    modes: ModeComparison
    sizing: "SizingResult | None"
    range_notes: tuple[RangeNote, ...]
    ttft_target: TtftTarget | None = None
    loaded_ttft: "LoadedTtft | None" = None  # the plan's TTFT under the target's load
    plan_cost: "PlanCost | None" = None  # the plan's cost and its equal-cost comparison

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
    plan_cost: "PlanCost | None" = None


def range_ends(
    system: ServingSystem,
) -> tuple[dict[tuple[float, float], list[FittedCurve]], FloatArray, FloatArray]:
    """The system's profiles by their profiled range (tokens), and the intervals whose mass
    `range_notes` reads: below each range's start, then above each range's end."""
    by_range: dict[tuple[float, float], list[FittedCurve]] = {}
    for curve in (system.prfaas_prefill_latency, system.pd_prefill_latency, system.kv_cache_size):
        by_range.setdefault((curve.table_min_tokens, curve.table_max_tokens), []).append(curve)
    ranges = list(by_range)
    ends = [(-np.inf, np.nextafter(lo, 0)) for lo, _ in ranges] + [(hi, np.inf) for _, hi in ranges]
    return by_range, np.array([a for a, _ in ends]), np.array([b for _, b in ends])


def range_notes(
    problem: Problem, policy: RangePolicy, masses: FloatArray | None = None
) -> tuple[RangeNote, ...]:
    """Where the workload reaches beyond the profiled lengths; raises under RangePolicy.ERROR.
    `masses`: the workload's mass on each of `range_ends`' intervals, when already known (a
    batch's log-normals: analytic/log_normal_rows.py `interval_masses`)."""
    by_range, lows, highs = range_ends(problem.system)
    ranges = list(by_range)
    if masses is None:  # the mass below and above every range, in one call
        masses = problem.workload.partial_moments(lows, highs, max_order=0)[0]
    notes = []
    for i, ((lo, hi), curves) in enumerate(by_range.items()):
        below, above = float(masses[i]), float(masses[len(ranges) + i])
        if below > 0 or above > 0:
            notes.append(RangeNote(tuple(curves), lo, hi, below, above))
    if policy is RangePolicy.ERROR and notes:
        n = notes[0]
        raise RangeError(
            f"{n.curves[0].source}: {n.fraction_below:.3%} of input lengths lie below "
            f"{n.table_min_tokens:g} and {n.fraction_above:.3%} above {n.table_max_tokens:g} tokens, "
            "the profiled range; "
            "out_of_range error forbids extrapolating the fit (use out_of_range extrapolate, "
            "narrow workload.input_tokens, or profile more lengths)",
            parameter="out_of_range",
        )
    return tuple(notes)


def check_threshold(threshold_tokens: float | None) -> None:
    """A given routing threshold is >= 0 and a plausible length (one rule for every command)."""
    if threshold_tokens is not None and not threshold_tokens >= 0:
        raise ConfigError(
            f"threshold_tokens must be >= 0, got {threshold_tokens:g}", parameter="threshold_tokens"
        )
    if threshold_tokens is not None:
        plausible.check_in_range(
            "threshold_tokens", threshold_tokens, 0, plausible.MAX_TOKENS, "tokens"
        )


def _size(
    problem: Problem,
    mode: Mode,
    target_rps: float | None,
    max_prfaas_gpus: int | None,
    solver: Solver,
) -> "SizingResult":
    """The PrfaaS cluster size (solve/sizing.py), with `max_prfaas_gpus` in whole instances."""
    from prfaas_plan.solve.sizing import size_prfaas_cluster

    per_instance = problem.scenario.prfaas_cluster.gpus_per_instance
    if max_prfaas_gpus is not None and (max_prfaas_gpus < 0 or max_prfaas_gpus % per_instance):
        below = max(max_prfaas_gpus, 0) // per_instance * per_instance
        raise ConfigError(
            f"max_prfaas_gpus must be a non-negative multiple of prfaas_cluster.gpus_per_instance "
            f"({per_instance}), got {max_prfaas_gpus}; e.g. {below} or {below + per_instance}",
            parameter="max_prfaas_gpus",
        )
    if max_prfaas_gpus is not None:
        plausible.check_in_range("max_prfaas_gpus", max_prfaas_gpus, 0, plausible.MAX_GPUS, "GPUs")
    if target_rps is not None and 0 < target_rps < math.inf:  # sizing refuses the rest
        plausible.check_in_range(
            "target_rps", target_rps, plausible.MIN_RATE_RPS, plausible.MAX_RATE_RPS, "req/s"
        )
    cap = None if max_prfaas_gpus is None else max_prfaas_gpus // per_instance
    return size_prfaas_cluster(
        problem.system, problem.workload, problem.pd_instances, target_rps=target_rps,
        max_prfaas_instances=cap, mode=mode, solver=solver,
    )  # fmt: skip


@model_numerics("optimize")
def plan(
    problem: Problem,
    *,
    mode: Mode = Mode.PAPER,
    threshold_tokens: float | None = None,
    target_rps: float | None = None,
    max_prfaas_gpus: int | None = None,
    solver: Solver | None = None,
    range_policy: RangePolicy = RangePolicy.EXTRAPOLATE,
    ttft: TtftTarget | None = None,
    pricing: "Pricing | None" = None,
) -> PlanReport:
    """Optimise t and N_p/N_d (or size the PrfaaS cluster), compare with both baselines.
    With `ttft`, the plan is the best one whose TTFT under load meets the target. `solver`
    (sizing only; None: HiGHS) is refused without sizing, where it would have no effect.
    With `pricing`, every deployment is priced and the plan compared at equal cost."""
    notes = range_notes(problem, range_policy)
    if solver is not None and target_rps is None and max_prfaas_gpus is None:
        raise ConfigError(
            "solver has no effect without sizing: only the sizing MILP (target_rps/"
            "max_prfaas_gpus) uses a solver; drop it or size the cluster",
            parameter="solver",
        )
    check_threshold(threshold_tokens)
    asked = problem
    sizing = None
    prfaas_instances = problem.prfaas_instances
    if target_rps is not None or max_prfaas_gpus is not None:
        if threshold_tokens is not None:
            raise ConfigError(
                "threshold_tokens cannot be combined with sizing (target_rps/max_prfaas_gpus)",
                parameter="threshold_tokens",
            )
        sizing = _size(problem, mode, target_rps, max_prfaas_gpus, solver or Solver.HIGHS)
        prfaas_instances = sizing.evaluation.configuration.prfaas_instances
    if sizing is not None:
        problem = dataclasses.replace(problem, prfaas_instances=prfaas_instances)
    from prfaas_plan.use_cases.plan_reports import reports_many, search_many

    optima = search_many([problem], threshold_tokens)
    (report,) = reports_many([problem], optima, mode, [notes], [pricing])
    if ttft is not None:
        if sizing is not None:
            raise ConfigError(
                "a TTFT target cannot be combined with sizing (target_rps/max_prfaas_gpus)",
                parameter="ttft",
            )
        from prfaas_plan.solve.ttft_target import optimize_with_ttft

        m = report.modes
        capacity = m.paper_plan_exact_rps if mode is Mode.PAPER else m.exact.system_throughput_rps
        space = SearchSpace(prfaas_instances, problem.pd_instances, threshold_tokens)
        chosen, loaded = optimize_with_ttft(
            problem.system, problem.workload, space, arrival_rate_rps=ttft.rate_rps(capacity),
            ttft_target_s=ttft.target_s, ttft_percentile=ttft.percentile, mode=mode,
        )  # fmt: skip
        (report,) = reports_many([problem], optima, mode, [notes], [pricing], [chosen])
        report = dataclasses.replace(report, ttft_target=ttft, loaded_ttft=loaded)
    if sizing is not None:
        (report,) = reports_many([problem], optima, mode, [notes], [pricing], [sizing.evaluation])
        report = dataclasses.replace(report, sizing=sizing)
    return dataclasses.replace(report, problem=asked)


@model_numerics("evaluate")
def evaluate_configuration(
    problem: Problem,
    *,
    threshold_tokens: float,
    pd_prefill_instances: int,
    prfaas_instances: int | None = None,
    mode: Mode = Mode.PAPER,
    range_policy: RangePolicy = RangePolicy.EXTRAPOLATE,
    pricing: "Pricing | None" = None,
) -> EvaluationReport:
    """The model for one given configuration, no optimisation."""
    notes = range_notes(problem, range_policy)
    n_prfaas = problem.prfaas_instances if prfaas_instances is None else prfaas_instances
    if n_prfaas < 0:
        raise ConfigError(
            f"prfaas_instances must be >= 0, got {n_prfaas}", parameter="prfaas_instances"
        )
    plausible.check_in_range("prfaas_instances", n_prfaas, 0, plausible.MAX_INSTANCES, "instances")
    if not 0 <= pd_prefill_instances < problem.pd_instances:
        raise ConfigError(
            f"pd_prefill_instances must be in [0, {problem.pd_instances - 1}] so that at least one "
            f"of pd_cluster.instances={problem.pd_instances} decodes, got {pd_prefill_instances}",
            parameter="pd_prefill_instances",
        )
    check_threshold(threshold_tokens)
    configuration = Configuration(
        n_prfaas,
        pd_prefill_instances,
        problem.pd_instances - pd_prefill_instances,
        threshold_tokens,
    )
    evaluation = evaluate(problem.system, problem.workload, configuration, mode)
    from prfaas_plan.use_cases.plan_reports import deployments_many, plan_costs

    ((deployed,),) = deployments_many([problem], [{"evaluated": evaluation}], [pricing])
    (cost,) = plan_costs([problem], [deployed], [pricing], mode)
    return EvaluationReport(problem, deployed, notes, cost)
