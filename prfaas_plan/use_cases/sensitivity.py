"""`sensitivity`: what binds at the optimum and what the next unit of each resource is worth —
discrete gains in Λ_max from one more instance, +10% link bandwidth and +10% decode SLO slack,
the shadow prices of the capacities from the routing LP (solve/relaxation.py), and that LP's
upper bound on every length-based routing policy against the threshold plan. Units: req/s.

The marginal gains are keyed by resource (`Resource`), so that a column per dollar/hour can be
added beside them once prices are known. The LP is in exact mode (conditional mean service
times per bin); its shadow prices and bound are compared with the exact-mode threshold optimum.
"""

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Bound, Evaluation
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, InfeasibleError, RangeError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.inputs.scenario import Problem, build_problem, decode_point
from prfaas_plan.inputs.scenario_schema import SloSpec
from prfaas_plan.solve.relaxation import (
    DEFAULT_BINS,
    RoutingOptimum,
    length_bins,
    routing_bound,
    solve_routing_lp,
)
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.use_cases.cost import price_deployment
from prfaas_plan.use_cases.numerics import model_numerics

STEP_FRACTION = 0.10  # +10% link bandwidth, +10% decode step budget
GAP_RTOL = 1e-7  # LP bound and threshold optimum closer than this are equal (solver tolerance)


class Resource(StrEnum):
    """A unit the operator could add; keys of `SensitivityReport.marginal_gains`."""

    PRFAAS_INSTANCE = "prfaas_instance"  # +1 PrfaaS instance
    PD_INSTANCE = "pd_instance"  # +1 PD instance, split re-optimised
    LINK_BANDWIDTH = "link_bandwidth_10pct"  # +10% B_out
    DECODE_SLO_SLACK = "decode_slo_slack_10pct"  # decode step budget 1/SLO × 1.1


@dataclass(frozen=True)
class Marginal:
    """Λ_max after adding one unit of a resource (re-optimised t and split)."""

    resource: Resource
    step: str  # what was added, in words with units
    plan: Evaluation  # the re-optimised plan with the unit added

    def gain_rps(self, baseline_rps: float) -> float:
        return self.plan.system_throughput_rps - baseline_rps


@dataclass(frozen=True)
class RoutingBound:
    """The routing LP for every split against the exact-mode threshold optimum."""

    per_split: tuple[RoutingOptimum, ...]
    threshold_plan: Evaluation  # the exact-mode threshold optimum (every split)
    bins: int

    @property
    def best(self) -> RoutingOptimum:
        return max(self.per_split, key=lambda r: r.system_throughput_rps)

    @property
    def bound_rps(self) -> float:
        return self.best.system_throughput_rps

    @property
    def gap(self) -> float:
        """Relative gap of the threshold plan to the bound (0 when threshold routing is optimal)."""
        if self.bound_rps <= 0:
            return 0.0
        gap = 1.0 - self.threshold_plan.system_throughput_rps / self.bound_rps
        return gap if abs(gap) > GAP_RTOL else 0.0


@dataclass(frozen=True)
class SensitivityReport:
    problem: Problem
    mode: Mode
    plan: Evaluation
    marginal_gains: dict[Resource, Marginal]
    # the LP at the exact-mode optimum's split, whose duals are the shadow prices
    shadow: RoutingOptimum
    routing: RoutingBound
    # what each step adds to the deployment's $/hour (step_costs); empty without prices
    step_cost_usd_per_hour: dict[Resource, float] = field(default_factory=dict)

    def gain_rps(self, resource: Resource) -> float:
        return self.marginal_gains[resource].gain_rps(self.plan.system_throughput_rps)

    def rps_per_usd_per_hour(self, resource: Resource) -> float | None:
        """Λ gained per $/hour the step adds (None: unpriced, or a step that costs nothing)."""
        cost = self.step_cost_usd_per_hour.get(resource)
        return self.gain_rps(resource) / cost if cost is not None and cost > 0 else None

    @property
    def best_buy(self) -> Resource | None:
        """The priced step with the most Λ per $/hour (what to buy next), if any gains."""
        priced = [
            (r, v) for r in self.step_cost_usd_per_hour if (v := self.rps_per_usd_per_hour(r))
        ]
        best = max(priced, key=lambda rv: rv[1], default=None)
        return best[0] if best is not None and best[1] > 0 else None


def step_costs(
    problem: Problem, plan: Evaluation, gains: dict[Resource, Marginal], pricing: Pricing
) -> dict[Resource, float]:
    """$/hour each priced step adds: the deployment with the unit added, re-optimised and priced
    at the same utilisation (use_cases/cost.py; its link volume follows its new egress), minus
    the plan's own. The decode SLO is not bought, so it has no price.

    +10% link is priced once, by what it needs of the link offering the plan bought:
    - the wider link's egress (at Λ_max) still fits that offering: 10% of its port price, pro
      rata, plus the extra volume at its rate — the offering is kept, even where another would
      now be cheaper (the operator widens what they have);
    - it does not fit: the deployment is re-priced with the cheapest offering that carries it,
      and the step costs the difference of the two deployments' $/hour (the new port replaces
      the old one: nothing is added on top).
    No link bought (nothing offloaded), or no offering wide enough for the wider link's
    egress: the link step is unpriced."""
    s, c = problem.scenario, plan.configuration
    g_prfaas, g_pd = s.prfaas_cluster.gpus_per_instance, s.pd_cluster.gpus_per_instance
    prfaas_gpus = c.prfaas_instances * g_prfaas
    pd_gpus = (c.pd_prefill_instances + c.pd_decode_instances) * g_pd
    base = price_deployment(problem, pricing, prfaas_gpus, pd_gpus, plan)

    def added(resource: Resource, extra_prfaas: int, extra_pd: int, links: Pricing) -> float:
        new = gains[resource].plan
        cost = price_deployment(problem, links, prfaas_gpus + extra_prfaas, pd_gpus + extra_pd, new)
        return cost.total_usd_per_hour - base.total_usd_per_hour

    out = {
        Resource.PRFAAS_INSTANCE: added(Resource.PRFAAS_INSTANCE, g_prfaas, 0, pricing),
        Resource.PD_INSTANCE: added(Resource.PD_INSTANCE, 0, g_pd, pricing),
    }
    if base.link is None:
        return out
    # the bought offering if it carries the wider link (its port pro rata + the volume), else
    # the cheapest that does (the deployments' difference), else unpriced
    bought = dataclasses.replace(pricing, links=(base.link,))
    for links, port_share in (
        (bought, STEP_FRACTION * base.link_fixed_usd_per_hour),
        (pricing, 0.0),
    ):
        try:
            out[Resource.LINK_BANDWIDTH] = added(Resource.LINK_BANDWIDTH, 0, 0, links) + port_share
            break
        except ConfigError:  # these offerings do not carry the wider link's egress
            continue
    return out


def _optimum(problem: Problem, mode: Mode, prfaas: int = 0, pd: int = 0) -> Evaluation:
    space = SearchSpace(problem.prfaas_instances + prfaas, problem.pd_instances + pd)
    return optimize_fixed_hardware(problem.system, problem.workload, space, mode)


def _looser_slo(problem: Problem, catalog: Catalog) -> Problem:
    """The problem with a decode step budget (1 / SLO) larger by STEP_FRACTION."""
    scenario = problem.scenario
    slo = SloSpec.model_construct(
        decode_tokens_per_s=scenario.slo.decode_tokens_per_s / (1 + STEP_FRACTION)
    )
    looser = build_problem(scenario.model_copy(update={"slo": slo}), Path(problem.source), catalog)
    return dataclasses.replace(
        looser,
        system=dataclasses.replace(
            looser.system, link_bandwidth_bytes_per_s=problem.system.link_bandwidth_bytes_per_s
        ),
    )


def _wider_link(problem: Problem) -> Problem:
    gbps = units.bytes_per_s_to_gbps(problem.system.link_bandwidth_bytes_per_s)
    return _with_bandwidth(problem, gbps * (1 + STEP_FRACTION))


def marginal_gains(problem: Problem, mode: Mode, catalog: Catalog) -> dict[Resource, Marginal]:
    """Λ_max re-optimised with one more unit of each resource."""
    return {
        Resource.PRFAAS_INSTANCE: Marginal(
            Resource.PRFAAS_INSTANCE, "+1 PrfaaS instance", _optimum(problem, mode, prfaas=1)
        ),
        Resource.PD_INSTANCE: Marginal(
            Resource.PD_INSTANCE,
            "+1 PD instance (split re-optimised)",
            _optimum(problem, mode, pd=1),
        ),
        Resource.LINK_BANDWIDTH: Marginal(
            Resource.LINK_BANDWIDTH, "+10% link bandwidth", _optimum(_wider_link(problem), mode)
        ),
        Resource.DECODE_SLO_SLACK: Marginal(
            Resource.DECODE_SLO_SLACK,
            "+10% decode step budget (SLO tokens/s ÷ 1.1)",
            _optimum(_looser_slo(problem, catalog), mode),
        ),
    }


def routing_upper_bound(problem: Problem, bins: int = DEFAULT_BINS) -> RoutingBound:
    """The routing LP for every split, the exact-mode threshold optimum's t inserted as a bin
    edge (so the threshold plan is feasible in the LP and the bound can never fall below it)."""
    exact = _optimum(problem, Mode.EXACT)
    grid = length_bins(
        problem.system, problem.workload, bins, (exact.configuration.threshold_tokens,)
    )
    per_split = routing_bound(problem.system, grid, problem.prfaas_instances, problem.pd_instances)
    return RoutingBound(per_split, exact, bins)


@model_numerics("sensitivity")
def sensitivity_report(
    problem: Problem,
    mode: Mode = Mode.PAPER,
    bins: int = DEFAULT_BINS,
    catalog: Catalog | None = None,
    pricing: Pricing | None = None,
) -> SensitivityReport:
    """The plan (optimum in `mode`), the discrete marginal gains, the LP's shadow prices at the
    exact-mode optimum's split, and the routing bound over every split. `catalog` (default: the
    shipped data) is needed to re-derive the decode operating point for a looser SLO; with
    `pricing`, each step's $/hour and Λ per $/hour (what to buy next)."""
    catalog = catalog if catalog is not None else Catalog.open()
    plan = _optimum(problem, mode)
    routing = routing_upper_bound(problem, bins)
    exact = routing.threshold_plan.configuration
    # the prices from bins without t* as an edge: with it, the optimum is a degenerate vertex
    # (both prefill rows tight, no fractional bin) whose duals are one-sided derivatives
    shadow = solve_routing_lp(
        problem.system, length_bins(problem.system, problem.workload, bins),
        exact.prfaas_instances, exact.pd_prefill_instances, exact.pd_decode_instances,
    )  # fmt: skip
    gains = marginal_gains(problem, mode, catalog)
    return SensitivityReport(
        problem=problem,
        mode=mode,
        plan=plan,
        marginal_gains=gains,
        shadow=shadow,
        routing=routing,
        step_cost_usd_per_hour={} if pricing is None else step_costs(problem, plan, gains, pricing),
    )


SHADOW_UNITS = {
    Bound.PRFAAS_COMPUTE: "req/s per PrfaaS instance",
    Bound.PRFAAS_LINK: "req/s per Gbps",
    Bound.PD_PREFILL: "req/s per PD-P instance",
    Bound.PD_DECODE: "req/s per PD-D instance",
}


@dataclass(frozen=True)
class Curve:
    """Λ_max and t* (re-optimised, split included) as one input varies, the rest fixed."""

    name: str  # bandwidth | prfaas_cluster | mean_input_length
    x_label: str  # the input with its unit, as the CSV/JSON key: link_bandwidth_gbps, ...
    x: tuple[float, ...]
    plans: tuple[Evaluation, ...]


BANDWIDTH_CURVE_GBPS = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 400)
MEAN_LENGTH_FACTORS = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)


def _with_bandwidth(problem: Problem, gbps: float) -> Problem:
    system = dataclasses.replace(
        problem.system, link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(gbps)
    )
    return dataclasses.replace(problem, system=system)


def _shifted_workload(
    problem: Problem, workload: TruncatedLogNormal, catalog: Catalog
) -> Problem | None:
    """The problem with the input lengths `workload`, its decode operating point re-read from
    the decode table at the new mean decode context (longer prompts make decode steps slower);
    None where that context lies outside the profiled ones or no batch meets the SLO there."""
    s = problem.scenario
    output = problem.output_lengths
    if output is None:
        return dataclasses.replace(problem, workload=workload)
    table = catalog.decode_table(s.model, s.pd_cluster.gpu, s.pd_cluster.gpus_per_instance)
    try:
        point = decode_point(table, s.slo.decode_tokens_per_s, workload, output)
    except (RangeError, InfeasibleError):
        return None
    system = dataclasses.replace(problem.system, decode=point)
    return dataclasses.replace(problem, workload=workload, system=system)


@model_numerics("sensitivity")
def sensitivity_curves(
    problem: Problem, mode: Mode = Mode.PAPER, catalog: Catalog | None = None
) -> tuple[Curve, ...]:
    """Λ_max and t* against link bandwidth (the bandwidth wall), PrfaaS cluster size and (for a
    truncated log-normal workload, by shifting μ) the mean input length, the decode point
    re-read at each length's decode context (points where the table has none are left out).
    `catalog` (default: the shipped data) holds the decode table."""
    gbps = sorted(
        {*map(float, BANDWIDTH_CURVE_GBPS),
         float(units.bytes_per_s_to_gbps(problem.system.link_bandwidth_bytes_per_s))}
    )  # fmt: skip
    curves = [
        Curve("bandwidth", "link_bandwidth_gbps", tuple(gbps),
              tuple(_optimum(_with_bandwidth(problem, g), mode) for g in gbps)),
    ]  # fmt: skip
    sizes = range(0, max(2 * problem.prfaas_instances, problem.prfaas_instances + 4) + 1)
    curves.append(
        Curve("prfaas_cluster", "prfaas_instances", tuple(map(float, sizes)),
              tuple(_optimum(problem, mode, prfaas=n - problem.prfaas_instances) for n in sizes))
    )  # fmt: skip
    w = problem.workload
    if isinstance(w, TruncatedLogNormal):
        catalog = catalog if catalog is not None else Catalog.open()
        shifted = [
            (x.mean_tokens, p)
            for x in (dataclasses.replace(w, mu_log=w.mu_log + math.log(f))
                      for f in MEAN_LENGTH_FACTORS)
            if (p := _shifted_workload(problem, x, catalog)) is not None
        ]  # fmt: skip
        curves.append(
            Curve("mean_input_length", "mean_input_tokens", tuple(x for x, _ in shifted),
                  tuple(_optimum(p, mode) for _, p in shifted))
        )  # fmt: skip
    return tuple(curves)
