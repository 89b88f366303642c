"""Single-site plans under a TTFT target: the TTFT of a point at a Poisson load (one site, or
split over its sites), the frontier of cost against TTFT, and the brute force over every
single-site plan that checks procure_ttft.cheapest_with_ttft (tests). Units: req/s, $/h, s."""

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.loaded_ttft import LoadedTtft, Metric, loaded_ttft
from prfaas_plan.analytic.split_ttft import SiteRoute, SplitTtft, split_ttft
from prfaas_plan.solve.procure_space import ProcurePoint, ProcureSpace, capacity_rps
from prfaas_plan.solve.procure_ttft import SearchMemo, SiteQueues, TtftGoal, cheapest_with_ttft


@dataclass(frozen=True)
class FrontierPoint:
    point: ProcurePoint
    ttft_s: float  # the percentile at the load


def point_ttft(
    space: ProcureSpace,
    pd_system: ServingSystem,
    sites: tuple[SiteQueues, ...],
    workload: LengthDistribution,
    point: ProcurePoint,
    load_rps: float,
) -> LoadedTtft | SplitTtft:
    """The TTFT at Poisson `load_rps` of a point: over its one site's link with its RTT
    (loaded_ttft), or, offloading to several sites, with the offloaded requests split as the
    point's offloaded req/s are (analytic/split_ttft.py)."""
    used = [j for j, n in enumerate(point.site_instances) if n > 0]
    threshold = float(space.thresholds_tokens[point.threshold_index])
    if len(used) > 1:
        total = sum(point.site_rps[j] for j in used)
        routes = [
            SiteRoute(sites[j].system, sites[j].rtt_s, point.site_instances[j],
                      point.site_rps[j] / total if total > 0 else 1 / len(used))
            for j in used
        ]  # fmt: skip
        return split_ttft(pd_system, workload, threshold, point.pd_prefill_instances,
                          point.pd_decode_instances, routes, load_rps)  # fmt: skip
    system, rtt_s = (sites[used[0]].system, sites[used[0]].rtt_s) if used else (pd_system, 0.0)
    configuration = Configuration(
        sum(point.site_instances), point.pd_prefill_instances, point.pd_decode_instances, threshold
    )
    return loaded_ttft(system, workload, configuration, load_rps, link_latency_s=rtt_s)


def ttft_frontier(
    space: ProcureSpace,
    pd_system: ServingSystem,
    sites: tuple[SiteQueues, ...],
    workload: LengthDistribution,
    target_rps: float,
    load_rps: float,
    percentile: Metric = 90,
    step: float = 0.01,
    max_points: int = 100,
) -> tuple[FrontierPoint, ...]:
    """The non-dominated single-site plans of cost ($/h, link volume at Λ_max) against a TTFT
    percentile at Poisson `load_rps`, among plans reaching `target_rps`, by the ε-constraint
    method: the cheapest stable plan first, then repeatedly the cheapest whose percentile is
    below (1 − step) x the last one's, until none is (or `max_points`). Exact up to `step`:
    a plan within `step` of a found one's TTFT, and dearer, may be missed."""
    found: list[FrontierPoint] = []
    limit = math.inf
    memo = SearchMemo()  # each goal is stricter than the last: what fails once fails again
    while len(found) < max_points:
        goal = TtftGoal(percentile, limit * (1 - step) if found else 1e12, load_rps)
        search = cheapest_with_ttft(space, pd_system, sites, workload, target_rps, goal,
                                    volume_at_capacity=True, memo=memo,
                                    report_reach=False)  # fmt: skip
        if search.point is None:
            break
        state = point_ttft(space, pd_system, sites, workload, search.point, load_rps)
        limit = state.metric(percentile)
        found.append(FrontierPoint(search.point, limit))
    # a plan as cheap as the next one found (whose TTFT is lower) is dominated by it
    kept = [f for f, after in itertools.zip_longest(found, found[1:])
            if after is None or after.point.usd_per_hour > f.point.usd_per_hour + 1e-9]  # fmt: skip
    return tuple(kept)


def single_site_plans(space: ProcureSpace) -> Iterator[tuple[int, int, tuple[int, ...], int, int]]:
    """Every (k, j, n, n_p, n_d) offloading to one site j at most (j = -1: none, only where
    nothing is offloaded), n the instances per site: the space brute force enumerates."""
    size = len(space.sites)
    for k, j in itertools.product(range(space.thresholds_tokens.size), range(-1, size)):
        if (j < 0) != (space.offload_fraction[k] == 0):
            continue
        for c in range(1) if j < 0 else range(1, space.sites[j].max_instances + 1):
            n = tuple(c if i == j else 0 for i in range(size))
            for n_p in range(space.max_pd_instances):
                for n_d in range(1, space.max_pd_instances - n_p + 1):
                    yield k, j, n, n_p, n_d


def brute_force_with_ttft(
    space: ProcureSpace,
    pd_system: ServingSystem,
    sites: tuple[SiteQueues, ...],
    workload: LengthDistribution,
    target_rps: float,
    goal: TtftGoal,
) -> ProcurePoint | None:
    """The same optimum by evaluating every single-site plan's whole TTFT (tests): every
    threshold, site or none, instance count, PD split and decode count reaching X."""
    best: ProcurePoint | None = None
    for k, j, n, n_p, n_d in single_site_plans(space):
        if capacity_rps(space, k, n, n_p, n_d) < target_rps * (1 - 1e-9):
            continue
        offloaded = float(space.offload_fraction[k] * target_rps)
        usd = space.pd_usd_per_instance_hour * (n_p + n_d)
        if j >= 0:
            site = space.sites[j]
            usd += (
                site.usd_per_instance_hour * n[j] + site.fixed_usd_per_hour
                + units.per_s_to_per_hour(site.usd_per_offloaded_request[k]) * offloaded
            )  # fmt: skip
        if best is not None and usd >= best.usd_per_hour - 1e-9:
            continue
        shares = tuple(offloaded if i == j else 0.0 for i in range(len(n)))
        point = ProcurePoint(k, n, shares, n_p, n_d, target_rps, usd)
        state = point_ttft(space, pd_system, sites, workload, point, goal.load_rps)
        if state is not None and state.stable and state.metric(goal.metric) <= goal.target_s:
            best = point
    return best
