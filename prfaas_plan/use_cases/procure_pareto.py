"""`procure --pareto`: the non-dominated deployments of cost ($/h) against Λ_max and, among
those reaching a target rate, against the P90 TTFT (unloaded, or at a Poisson load), over the
procurement space.

Candidates are enumerated with numpy: every threshold of the MILP's grid x every single
candidate site (or none) x its instance count x every PD split; the cost is priced at the
plan's Λ_max (GPUs, the link's fixed price if bought, its volume at Λ_max). Plans that split
the offloaded traffic over several sites are not candidates here (the MILP of `procure`
handles those). The unloaded P90 TTFT adds the site's RTT to offloaded requests. Baselines
(homogeneous PD, naive heterogeneous) and the scenario's own deployment come from `optimize`'s
use-case with the same prices. At a load, the TTFT frontier's plans come from the
ε-constraint search of solve/procure_ttft.py (the same single-site space, with the PD-P count
chosen for latency and the fewest decode instances stable at the load), and the reference deployments' P90 is their own at that
load (inf when it overloads them). A target no candidate reaches is refused (InfeasibleError,
exit 6, nothing written), as plain `procure` refuses it: its cost-P90 frontier would be empty.
Units: req/s, $/h, s.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.loaded_ttft import Metric, loaded_ttft
from prfaas_plan.analytic.ttft import unloaded_percentile_by_threshold
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, InfeasibleError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.procure_space import ProcureSpace
from prfaas_plan.solve.procure_ttft_plans import ttft_frontier
from prfaas_plan.use_cases.numerics import model_numerics
from prfaas_plan.use_cases.plan import Deployment, plan
from prfaas_plan.use_cases.procure import binding, site_queues
from prfaas_plan.use_cases.procure_sites import Site, procure_candidates

PARETO_PERCENTILE: Metric = 90
LOADED_FRONTIER_STEP = 0.02  # consecutive plans of the loaded TTFT frontier differ by >= 2%


@dataclass(frozen=True)
class ParetoPlan:
    site: str | None  # None: nothing offloaded (homogeneous PD)
    threshold_tokens: float
    site_instances: int
    pd_prefill_instances: int
    pd_decode_instances: int
    usd_per_hour: float  # at Λ_max
    capacity_rps: float  # Λ_max
    p90_ttft_s: float  # unloaded, or at the report's ttft_load_rps


@dataclass(frozen=True)
class Marker:
    name: str  # homogeneous_pd | naive_heterogeneous | scenario (the case study)
    usd_per_hour: float
    capacity_rps: float
    p90_ttft_s: float


@dataclass(frozen=True)
class ParetoReport:
    problem: Problem
    pricing: Pricing
    target_rps: float
    candidates: int
    capacity_frontier: tuple[ParetoPlan, ...]  # cost up, Λ_max up
    ttft_frontier: tuple[ParetoPlan, ...]  # among Λ_max >= target: cost up, P90 down
    markers: tuple[Marker, ...]
    ttft_load_rps: float | None = None  # None: the TTFT frontier is unloaded


def non_dominated(cost: FloatArray, worse: FloatArray) -> np.ndarray:
    """Indices of the points no other point beats in both `cost` and `worse` (both lower
    better) nor ties in both, cheapest first."""
    order = np.lexsort((worse, cost))
    best = np.minimum.accumulate(worse[order])
    keep = np.ones(order.size, bool)
    keep[1:] = worse[order][1:] < best[:-1]
    return order[keep]


def candidate_bound(space: ProcureSpace) -> int:
    """An upper bound on the candidates `enumerate_plans` considers, known before it runs:
    thresholds x (one per instance count of every site, plus none) x N_pd,max (the PD splits
    kept at a threshold: at most one per total PD count)."""
    instances = 1 + sum(s.max_instances for s in space.sites)
    return space.thresholds_tokens.size * instances * space.max_pd_instances


def _check_size(space: ProcureSpace) -> None:
    """Refuse, before enumerating, a space larger than plausible.MAX_PARETO_CANDIDATES."""

    n = space.max_pd_instances
    thresholds = space.thresholds_tokens.size
    work = candidate_bound(space) + thresholds * n * (n + 1) // 2
    if work > plausible.MAX_PARETO_CANDIDATES:
        instances = 1 + sum(s.max_instances for s in space.sites)
        raise ConfigError(
            f"the Pareto frontiers would weigh {work:.3g} candidate plans and PD splits "
            f"({thresholds} thresholds x {instances:,} site instance counts x {n} PD counts, "
            f"and {n * (n + 1) // 2:,} PD splits a threshold), above "
            f"{plausible.MAX_PARETO_CANDIDATES:.3g} (~15 s); allow fewer instances per site "
            "(max_instances_per_site), fewer sites (procurement.sites) or fewer PD instances "
            "(procurement.max_pd_instances)",
            parameter="max_instances_per_site",
        )


def enumerate_plans(
    space: ProcureSpace, p90_s: FloatArray, pd_p90_s: float, target_rps: float
) -> tuple[dict[str, FloatArray], int]:
    """Every candidate (threshold, one site or none, instances, PD split) worth keeping,
    flattened: arrays k, site (-1: none), n, n_p, n_d, usd_per_hour (at Λ_max), capacity_rps,
    p90_s; and how many candidates were considered. `p90_s[j, k]`: site j's unloaded P90 at
    t_k; `pd_p90_s` the PD cluster's alone. At each threshold only the PD splits no other split
    beats on both price and PD capacity are kept (a beaten split only makes every plan dearer
    or smaller), and each block (one threshold and site) keeps only its plans on one of the
    two frontiers (cost against Λ_max; among plans reaching `target_rps`, cost against P90): a
    plan beaten within its block is beaten overall, so memory holds the frontiers, not the
    candidates."""
    n_max = space.max_pd_instances
    n_p, n_d = np.array([(a, b) for a in range(n_max) for b in range(1, n_max - a + 1)]).T
    pd_usd = space.pd_usd_per_instance_hour * (n_p + n_d)
    parts: list[dict[str, FloatArray]] = []
    count = 0
    for k in range(space.thresholds_tokens.size):
        s, p = space.local_fraction[k], space.offload_fraction[k]
        pd_cap = space.decode_rps_per_instance * n_d
        if s > 0:
            pd_cap = np.minimum(pd_cap, space.pd_prefill_rps_per_instance[k] * n_p / s)
        split = non_dominated(pd_usd, -pd_cap)
        for j, site in enumerate((None, *space.sites), start=-1):  # -1: no site (n = 0)
            remote: FloatArray
            usd_site: FloatArray
            if site is None:
                n = np.zeros(1, int)
                remote = np.array([np.inf if p == 0 else 0.0])  # offloading needs a site
                usd_site = np.zeros(1)
                volume = 0.0
                p90 = np.full(1, pd_p90_s)
            else:
                n = np.arange(1, site.max_instances + 1)
                if p > 0:
                    remote = np.minimum(site.compute_rps_per_instance[k] * n, site.link_rps[k]) / p
                else:
                    remote = np.zeros(n.size)  # a site that carries nothing is waste
                usd_site = np.asarray(
                    site.usd_per_instance_hour * n + site.fixed_usd_per_hour, float
                )
                volume = units.per_s_to_per_hour(site.usd_per_offloaded_request[k] * p)
                p90 = np.full(n.size, p90_s[j, k])
            cap = np.minimum(pd_cap[split][None, :], remote[:, None])  # (N, P)
            usd = pd_usd[split][None, :] + usd_site[:, None] + volume * cap  # volume: $/h / rps
            nn, pp = np.meshgrid(n, split, indexing="ij")
            live = cap > 0
            count += int(live.sum())
            block = {
                "k": np.full(int(live.sum()), k), "site": np.full(nn.shape, j)[live],
                "n": nn[live], "n_p": n_p[pp][live], "n_d": n_d[pp][live],
                "usd_per_hour": usd[live], "capacity_rps": cap[live],
                "p90_s": np.broadcast_to(p90[:, None], nn.shape)[live],
            }  # fmt: skip
            parts.append(_on_a_frontier(block, target_rps))
    plans = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    return plans, count


def _on_a_frontier(plans: dict[str, FloatArray], target_rps: float) -> dict[str, FloatArray]:
    """The plans on either frontier of `plans` (cost against Λ_max; among those reaching
    `target_rps`, cost against P90)."""
    cost, capacity = plans["usd_per_hour"], plans["capacity_rps"]
    keep = np.zeros(cost.size, bool)
    keep[non_dominated(cost, -capacity)] = True
    reach = np.flatnonzero(capacity >= target_rps * (1 - 1e-9))
    keep[reach[non_dominated(cost[reach], plans["p90_s"][reach])]] = True
    return {key: value[keep] for key, value in plans.items()}


@model_numerics("procure")
def procure_pareto(
    catalog: Catalog,
    problem: Problem,
    pricing: Pricing,
    *,
    target_rps: float,
    gpu_prices: dict[str, float] | None = None,
    max_instances_per_site: int | None = None,
    mode: Mode = Mode.PAPER,
    ttft_load_rps: float | None = None,
) -> ParetoReport:
    """The two frontiers of the module docstring and the three reference deployments. With
    `ttft_load_rps` the TTFT frontier is the P90 at that Poisson load instead, found by
    solve/procure_ttft.ttft_frontier (plans a step of 2% apart in P90)."""

    plausible.check_in_range(
        "target_rps", target_rps, plausible.MIN_RATE_RPS, plausible.MAX_RATE_RPS, "req/s"
    )
    if ttft_load_rps is not None:
        plausible.check_in_range(
            "ttft_load_rps", ttft_load_rps, plausible.MIN_RATE_RPS, plausible.MAX_RATE_RPS, "req/s"
        )
    sites, space, systems = procure_candidates(
        catalog, problem, pricing, gpu_prices, max_instances_per_site, mode
    )
    _check_size(space)
    grid = space.thresholds_tokens
    p90 = np.array([
        unloaded_percentile_by_threshold(system, problem.workload, grid, float(PARETO_PERCENTILE), site.rtt_s)
        for site, system in zip(sites, systems, strict=True)
    ])  # fmt: skip
    pd_p90 = unloaded_percentile_by_threshold(
        problem.system, problem.workload, np.full(1, np.inf), float(PARETO_PERCENTILE)
    )
    plans, count = enumerate_plans(space, p90, float(pd_p90[0]), target_rps)

    def chosen(idx: np.ndarray) -> tuple[ParetoPlan, ...]:
        return tuple(
            ParetoPlan(
                site=None if plans["site"][i] < 0 else sites[int(plans["site"][i])].name,
                threshold_tokens=float(grid[int(plans["k"][i])]),
                site_instances=int(plans["n"][i]), pd_prefill_instances=int(plans["n_p"][i]),
                pd_decode_instances=int(plans["n_d"][i]),
                usd_per_hour=float(plans["usd_per_hour"][i]),
                capacity_rps=float(plans["capacity_rps"][i]), p90_ttft_s=float(plans["p90_s"][i]),
            )
            for i in idx
        )  # fmt: skip

    best_rps = float(plans["capacity_rps"].max(initial=0.0))
    if not best_rps >= target_rps * (1 - 1e-9):  # as plain procure: exit 6, nothing written
        raise InfeasibleError(
            f"no deployment in the candidate space reaches target_rps {target_rps:g} req/s, so "
            f"the cost-P90 frontier (plans reaching it) would be empty: the highest capacity "
            f"of a one-site plan is {best_rps:.4g} req/s; give a target_rps at most that (the cost-capacity "
            "frontier does not depend on it) or allow more instances (max_instances_per_site, "
            "procurement.max_pd_instances)",
            parameter="target_rps",
        )
    capacity = non_dominated(plans["usd_per_hour"], -plans["capacity_rps"])
    if ttft_load_rps is None:
        reach = np.flatnonzero(plans["capacity_rps"] >= target_rps * (1 - 1e-9))
        ttft = chosen(reach[non_dominated(plans["usd_per_hour"][reach], plans["p90_s"][reach])])
    else:
        ttft = _loaded_frontier(sites, space, systems, problem, target_rps, ttft_load_rps)
    # priced as the frontier is: link volume at Λ_max (utilisation 1), not optimize's default
    report = plan(problem, mode=mode, pricing=dataclasses.replace(pricing, utilization=1.0))

    def reference_p90(d: Deployment) -> float:
        if ttft_load_rps is None:
            return d.ttft.p90_s
        at = loaded_ttft(
            problem.system, problem.workload, d.evaluation.configuration, ttft_load_rps
        )
        return at.p90_s

    markers = tuple(
        Marker(name, d.cost.total_usd_per_hour if d.cost else float("nan"),
               d.evaluation.system_throughput_rps, reference_p90(d))
        for name, d in (("homogeneous_pd", report.homogeneous),
                        ("naive_heterogeneous", report.naive), ("scenario", report.plan))
    )  # fmt: skip
    return ParetoReport(problem, pricing, target_rps, count, chosen(capacity),
                        ttft, markers, ttft_load_rps)  # fmt: skip


def _loaded_frontier(sites: tuple[Site, ...], space: ProcureSpace,
                     systems: tuple[ServingSystem, ...], problem: Problem, target_rps: float,
                     load_rps: float) -> tuple[ParetoPlan, ...]:  # fmt: skip
    """The cost-P90 frontier at `load_rps` (solve/procure_ttft.ttft_frontier) as ParetoPlans."""
    queues = site_queues(sites, systems)
    found = ttft_frontier(space, problem.system, queues, problem.workload, target_rps, load_rps,
                          PARETO_PERCENTILE, step=LOADED_FRONTIER_STEP)  # fmt: skip
    out = []
    for f in found:
        point = f.point
        used = [j for j, c in enumerate(point.site_instances) if c]
        capacity, _ = binding(space, point)
        out.append(ParetoPlan(
            site=sites[used[0]].name if used else None,
            threshold_tokens=float(space.thresholds_tokens[point.threshold_index]),
            site_instances=sum(point.site_instances),
            pd_prefill_instances=point.pd_prefill_instances,
            pd_decode_instances=point.pd_decode_instances,
            usd_per_hour=point.usd_per_hour, capacity_rps=capacity, p90_ttft_s=f.ttft_s,
        ))  # fmt: skip
    return tuple(out)
