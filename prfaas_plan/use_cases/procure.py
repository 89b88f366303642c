"""`procure`: the cheapest deployment reaching a target throughput, or the highest throughput
within a budget, over candidate PrfaaS sites (GPU type x price x link offering), instance
counts, the PD split and the threshold (solve/procure_milp.py). No printing.

Sites come from the scenario's `procurement.sites`, or default to every GPU with a prefill
profile for the model (at the scenario's PrfaaS GPUs per instance) x every link offering of
data/links/. Prices: inputs/pricing.py. Units: req/s, $/h, s.
"""

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.loaded_ttft import LoadedTtft, Metric, check_metric
from prfaas_plan.analytic.split_ttft import SplitTtft
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, InfeasibleError, PrfaasPlanError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.files import write_atomically
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.procure_budget import exact_budget, fixed_usd_per_hour
from prfaas_plan.solve.procure_exact import ExactPoint, ProcureModel, exact_target
from prfaas_plan.solve.procure_milp import build_procure_milp, solve_procure, write_model
from prfaas_plan.solve.procure_space import ProcurePoint, ProcureSpace
from prfaas_plan.solve.procure_ttft import SiteQueues, TtftGoal, cheapest_with_ttft
from prfaas_plan.solve.procure_ttft_plans import point_ttft
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.use_cases.numerics import model_numerics
from prfaas_plan.use_cases.plan import TtftTarget, ttft_target
from prfaas_plan.use_cases.procure_sites import Site, procure_model


@dataclass(frozen=True)
class ProcureReport:
    problem: Problem
    pricing: Pricing
    sites: tuple[Site, ...]
    space: ProcureSpace
    target_rps: float | None
    budget_usd_per_hour: float | None
    point: ProcurePoint
    capacity_rps: float  # Λ_max of the chosen counts at the chosen threshold
    bound: str  # what limits that capacity: pd_decode, pd_prefill or prfaas (site compute/link)
    ttft: "ProcureTtft | None" = None
    # how exact the threshold is (solve/procure_exact.py): 0, or how far the model's work curves
    # are from monotone (then the grid thresholds were candidates too)
    monotone_violation: float = 0.0
    proven: bool = True  # False: the budget search stopped before proving its rate the highest

    @property
    def threshold_tokens(self) -> float:
        return float(self.space.thresholds_tokens[self.point.threshold_index])


@dataclass(frozen=True)
class ProcureTtft:
    """The TTFT target of a procure, and how the chosen deployment meets it."""

    target: TtftTarget
    load_rps: float
    # the chosen deployment at load_rps: over its site's link and RTT, or split over its sites
    loaded: LoadedTtft | SplitTtft
    capacity_only_usd_per_hour: float  # the cheapest deployment reaching the target rate alone
    binds: bool  # the TTFT target makes the deployment dearer than capacity_only_usd_per_hour
    capacity_only_sites: int  # PrfaaS sites that cheapest deployment uses
    pairs_evaluated: int  # (threshold, site) pairs the TTFT search evaluated, of `pairs`
    pairs: int
    headroom_plans: int = 0  # multi-site plans tried at rates above the target (_with_ttft)


def binding(space: ProcureSpace, point: ProcurePoint) -> tuple[float, str]:
    """(Λ_max of the point's counts at its threshold, the limit that sets it): pd_decode
    (θ n_d), pd_prefill (c n_p / s) or the PrfaaS sites (Σ_j min(a_j n_j, b_j) / p), named
    prfaas_compute or prfaas_link by what limits the sites in use (both: prfaas_compute+link)."""
    k, n = point.threshold_index, point.site_instances
    limits = {"pd_decode": space.decode_rps_per_instance * point.pd_decode_instances}
    if space.local_fraction[k] > 0:
        limits["pd_prefill"] = (
            space.pd_prefill_rps_per_instance[k] * point.pd_prefill_instances
            / space.local_fraction[k]
        )  # fmt: skip
    p = space.offload_fraction[k]
    if p > 0:
        kinds = {
            "compute" if s.compute_rps_per_instance[k] * c <= s.link_rps[k] else "link"
            for s, c in zip(space.sites, n, strict=True)
            if c > 0
        }
        name = "prfaas_" + "+".join(sorted(kinds)) if kinds else "prfaas_compute"
        caps = [
            min(s.compute_rps_per_instance[k] * c, s.link_rps[k])
            for s, c in zip(space.sites, n, strict=True)
        ]
        limits[name] = sum(caps) / p
    bound = min(limits, key=lambda x: limits[x])
    return limits[bound], bound


@model_numerics("procure")
def procure(
    catalog: Catalog,
    problem: Problem,
    pricing: Pricing,
    *,
    target_rps: float | None = None,
    budget_usd_per_hour: float | None = None,
    gpu_prices: dict[str, float] | None = None,
    max_instances_per_site: int | None = None,
    mode: Mode = Mode.PAPER,
    export_model: Path | None = None,
    ttft: TtftTarget | None = None,
) -> ProcureReport:
    """The cheapest deployment reaching `target_rps`, or the highest Λ within
    `budget_usd_per_hour` (exactly one); InfeasibleError (exit 6) names the best effort.
    `export_model` (.mps or .lp) also writes the whole MILP, atomically, before solving; it
    stays written when no deployment is found (an infeasible model is what a solver's own
    diagnosis needs), and the error says so.
    `ttft` (with `target_rps` only): also meet a TTFT figure at a Poisson load (its load_rps,
    or load_fraction of target_rps), the offloaded traffic then on at most one site
    (solve/procure_ttft.py)."""
    if (target_rps is None) == (budget_usd_per_hour is None):
        raise ConfigError("procure needs exactly one of target_rps and budget_usd_per_hour",
                          parameter="target_rps")  # fmt: skip
    if target_rps is not None:
        plausible.check_in_range(
            "target_rps", target_rps, plausible.MIN_RATE_RPS, plausible.MAX_RATE_RPS, "req/s"
        )
    if budget_usd_per_hour is not None:
        plausible.check_in_range(
            "budget_usd_per_hour", budget_usd_per_hour, plausible.MIN_BUDGET_USD_PER_HOUR,
            plausible.MAX_BUDGET_USD_PER_HOUR, "$/h",
        )  # fmt: skip
    if ttft is not None and target_rps is None:
        raise ConfigError(
            "a TTFT target (ttft_target_s) applies to target_rps (the cheapest deployment "
            "meeting both), not to budget_usd_per_hour",
            parameter="ttft_target_s",
        )
    sites, model = procure_model(
        catalog, problem, pricing, gpu_prices, max_instances_per_site, mode
    )
    grid = model.space(milp_threshold_grid(problem.workload))
    if export_model is not None:
        if export_model.suffix.lower() not in (".mps", ".lp"):
            raise ConfigError(
                f"export_model must end in .mps or .lp, got {plausible.quoted(str(export_model))}",
                parameter="export_model",
            )
        milp = build_procure_milp(grid, target_rps, budget_usd_per_hour)
        write_atomically(export_model, lambda tmp: write_model(milp, tmp), "export_model")
    try:
        return _solve(problem, pricing, sites, model, grid, target_rps, budget_usd_per_hour, ttft)
    except PrfaasPlanError as exc:
        if export_model is None:
            raise
        raise type(exc)(
            f"{exc}; the model was written to {export_model} all the same (export_model)",
            parameter=exc.parameter,
        ) from None


def _solve(problem: Problem, pricing: Pricing, sites: tuple[Site, ...], model: ProcureModel,
           grid: ProcureSpace, target_rps: float | None, budget_usd_per_hour: float | None,
           ttft: TtftTarget | None) -> ProcureReport:  # fmt: skip
    """`procure`'s search once its inputs are checked (and its model exported)."""
    if budget_usd_per_hour is not None:
        found = exact_budget(model, budget_usd_per_hour, _on_grid(grid, budget_usd_per_hour))
        if found is None:
            # one PD instance that decodes cannot also prefill: serving anything takes two
            cheapest = 2 * model.pd_usd_per_instance_hour
            raise InfeasibleError(
                f"no deployment that serves anything fits budget_usd_per_hour "
                f"{budget_usd_per_hour:g}: the cheapest (one PD-P + one PD-D instance) costs "
                f"{cheapest:,.2f} $/h",
                parameter="budget_usd_per_hour",
            )
    else:
        assert target_rps is not None
        found = exact_target(model, target_rps)
        if found is None:
            best = _best_effort(model, grid)
            if best is None:
                what = "no deployment serves anything (a PD cluster of one instance only decodes)"
            else:
                capacity, bound = binding(best.space, best.point)
                what = (f"the best is {capacity:.4g} req/s ({_describe(sites, best.point)}), "
                        f"bound by {bound}")  # fmt: skip
            raise InfeasibleError(
                f"no deployment in the candidate space reaches target_rps {target_rps:g} req/s: "
                f"{what}; allow more instances (max_instances_per_site, "
                "procurement.max_pd_instances) or relax the target",
                parameter="target_rps",
            )
    if ttft is not None:
        assert target_rps is not None
        return _with_ttft(problem, pricing, sites, model, target_rps, found, ttft)
    capacity, bound = binding(found.space, found.point)
    return ProcureReport(problem, pricing, sites, found.space, target_rps, budget_usd_per_hour,
                         found.point, capacity, bound, None, found.monotone_violation,
                         found.proven)  # fmt: skip


def procure_ttft_target(
    target_s: float | None,
    percentile: int | str | None = None,
    load_rps: float | None = None,
    load_fraction: float | None = None,
) -> TtftTarget | None:
    """use_cases/plan.py `ttft_target` with procure's default load: the target rate itself
    (load_fraction 1 of target_rps) when neither load is given."""
    if target_s is not None and load_rps is None and load_fraction is None:
        load_fraction = 1.0
    return ttft_target(target_s, percentile, load_rps, load_fraction)


def site_queues(
    sites: tuple[Site, ...], systems: tuple[ServingSystem, ...]
) -> tuple[SiteQueues, ...]:
    """What the queueing model needs of each candidate site: its serving system and RTT."""
    return tuple(SiteQueues(sy, s.rtt_s) for s, sy in zip(sites, systems, strict=True))


# multi-site plans for a TTFT target: the capacity-cheapest deployments at the target rate
# times HEADROOM_STEP, HEADROOM_STEP², ... (at most HEADROOM_PLANS of them)
HEADROOM_STEP = 1.1
HEADROOM_PLANS = 16


def _with_ttft(problem: Problem, pricing: Pricing, sites: tuple[Site, ...],
               model: ProcureModel, target_rps: float, cheapest: ExactPoint,
               ttft: TtftTarget) -> ProcureReport:  # fmt: skip
    """The cheapest deployment reaching `target_rps` and meeting `ttft`: the capacity-only
    optimum `cheapest` if it meets it (then nothing cheaper can); else the cheaper of the
    single-site search of solve/procure_ttft.py (every single-site plan, over the grid and the
    exact optimum's thresholds) and the multi-site plans `_headroom` tries. InfeasibleError
    naming the most any plan reaches."""
    load = ttft.rate_rps(target_rps)
    metric = check_metric(ttft.percentile)
    queues = site_queues(sites, model.site_systems)
    space, point = cheapest.space, cheapest.point
    state = point_ttft(space, problem.system, queues, problem.workload, point, load)
    meets = state.stable and state.metric(metric) <= ttft.target_s
    evaluated, pairs, tried = 0, 0, 0
    if not meets:
        space = model.space(np.unique(np.concatenate([
            milp_threshold_grid(problem.workload), cheapest.space.thresholds_tokens
        ])))  # fmt: skip
        goal = TtftGoal(metric, ttft.target_s, load)
        search = cheapest_with_ttft(space, problem.system, queues, problem.workload, target_rps,
                                    goal)  # fmt: skip
        evaluated, pairs = search.pairs_evaluated, search.pairs
        ceiling = search.point.usd_per_hour if search.point is not None else math.inf
        split, tried = _headroom(model, problem, queues, target_rps, goal, ceiling)
        if split is not None:
            space, point = split.space, split.point
        elif search.point is not None:
            point = search.point
        else:
            if math.isfinite(search.best_met_fraction):
                what = (f"P(TTFT <= {ttft.target_s:g} s) reaches at most "
                        f"{search.best_met_fraction:.1%} (needs {float(metric):g}%)")  # fmt: skip
            elif math.isfinite(search.lowest_mean_s):
                what = f"no plan's mean TTFT is below {search.lowest_mean_s:.3g} s"
            else:
                what = f"every candidate is overloaded at {load:g} req/s"
            raise InfeasibleError(
                f"no deployment reaches target_rps {target_rps:g} req/s with "
                f"{_metric_name(metric)} TTFT <= {ttft.target_s:g} s at {load:g} req/s: "
                f"{what} (every single-site plan; multi-site plans with up to "
                f"{HEADROOM_STEP**HEADROOM_PLANS:.1f}x the target's capacity); allow more "
                "instances (max_instances_per_site, procurement.max_pd_instances), a faster or "
                "nearer site, a lower load, or relax the target",
                parameter="ttft_target_s",
            )
        state = point_ttft(space, problem.system, queues, problem.workload, point, load)
    capacity, bound = binding(space, point)
    binds = bool(point.usd_per_hour > cheapest.point.usd_per_hour * (1 + 1e-9))
    used = sum(n > 0 for n in cheapest.point.site_instances)
    extra = ProcureTtft(ttft, load, state, cheapest.point.usd_per_hour, binds, used, evaluated,
                        pairs, tried)  # fmt: skip
    return ProcureReport(problem, pricing, sites, space, target_rps, None, point, capacity, bound,
                         extra, cheapest.monotone_violation)  # fmt: skip


def _headroom(model: ProcureModel, problem: Problem, queues: tuple[SiteQueues, ...],
              target_rps: float, goal: TtftGoal,
              ceiling_usd_per_hour: float) -> tuple[ExactPoint | None, int]:  # fmt: skip
    """Multi-site plans for a TTFT goal: the capacity-cheapest deployment reaching
    target_rps x HEADROOM_STEP^m (m = 1, 2, ...: more capacity, less queueing), priced serving
    the target, its offloaded requests split as its plan splits them; the first that offloads
    to several sites, meets the goal and costs less than `ceiling_usd_per_hour`, and how many
    were tried. Stops once a deployment's instances alone cost the ceiling (more capacity only
    costs more). Not exhaustive: a heuristic over multi-site plans (single-site plans are
    searched exhaustively by cheapest_with_ttft)."""
    tried = 0
    for m in range(1, HEADROOM_PLANS + 1):
        found = exact_target(model, target_rps * HEADROOM_STEP**m)
        if found is None:
            break
        point = _serving(model, found, target_rps)
        if fixed_usd_per_hour(model, point) >= ceiling_usd_per_hour:
            break
        if sum(n > 0 for n in point.site_instances) < 2:
            continue
        tried += 1
        state = point_ttft(found.space, problem.system, queues, problem.workload, point,
                           goal.load_rps)  # fmt: skip
        if state.stable and state.metric(goal.metric) <= goal.target_s:
            if point.usd_per_hour < ceiling_usd_per_hour:
                return dataclasses.replace(found, point=point), tried
            break
    return None, tried


def _serving(model: ProcureModel, found: ExactPoint, rps: float) -> ProcurePoint:
    """`found`'s deployment serving `rps` (<= what it was solved for): its offloaded req/s
    scaled down, its link volume billed at `rps`."""
    point = found.point
    scale = rps / point.served_rps if point.served_rps > 0 else 0.0
    k = point.threshold_index
    site_rps = tuple(r * scale for r in point.site_rps)
    volume = sum(
        units.per_s_to_per_hour(s.usd_per_offloaded_request[k]) * r
        for s, r in zip(found.space.sites, site_rps, strict=True)
    )
    usd = float(fixed_usd_per_hour(model, point) + volume)
    return dataclasses.replace(point, site_rps=site_rps, served_rps=rps, usd_per_hour=usd)


def _metric_name(metric: Metric) -> str:
    return "mean" if metric == "mean" else f"P{metric}"


def _best_effort(model: ProcureModel, grid: ProcureSpace) -> ExactPoint | None:
    """The highest Λ of the space (any threshold), and the cheapest deployment reaching it;
    None when nothing serves any request."""
    return exact_budget(model, math.inf, _on_grid(grid, math.inf))


def _on_grid(grid: ProcureSpace, budget_usd_per_hour: float) -> ExactPoint | None:
    """The budget's optimum on the threshold grid: where the exact search starts."""
    point = solve_procure(grid, budget_usd_per_hour=budget_usd_per_hour)
    return None if point is None else ExactPoint(grid, point)


def _describe(sites: tuple[Site, ...], point: ProcurePoint) -> str:
    used = [f"{n} x {s.name}" for s, n in zip(sites, point.site_instances, strict=True) if n]
    pd = f"PD {point.pd_prefill_instances}+{point.pd_decode_instances}"
    return ", ".join([*used, pd])
