"""The cheapest deployment reaching a target throughput X that also meets a TTFT target at a
Poisson load λ (analytic/loaded_ttft.py), over the procurement space with the offloaded
traffic on at most one site (the queueing model has one PrfaaS pool and one link).

For a threshold t_k and a site j (or none, where nothing is offloaded) the counts are:
n_d the fewest decode instances with θ_d n_d >= X and θ_d n_d > λ (decode is not part of
TTFT: more only costs), n_p from ceil(s_k X / c_k) to N_pd,max − n_d, n_j from
ceil(p_k X / a_jk) to U_j (site j's link must carry p_k X). TTFT splits by route
(`ttft_distribution.route_part`): the local route's part depends on n_p alone, the offloaded
route's on n_j alone (and the site's link and RTT), so each pair (k, j) evaluates n_p and n_j
separately and combines them on the (n_j, n_p) grid. Pairs are visited cheapest capacity-only
cost first and the search stops once that bound reaches the best plan meeting the target.
Units: req/s, $/h, s.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import ServingSystem, rates
from prfaas_plan.analytic.deployment_load import Loads, loads
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.loaded_ttft import Metric
from prfaas_plan.analytic.ttft_distribution import TtftMesh, route_part, ttft_mesh
from prfaas_plan.choices import Mode
from prfaas_plan.solve.procure_bounds import pd_counts, site_counts
from prfaas_plan.solve.procure_space import ProcurePoint, ProcureSpace


@dataclass(frozen=True)
class TtftGoal:
    metric: Metric  # "mean", 50, 90 or 99
    target_s: float
    load_rps: float  # λ, Poisson


@dataclass(frozen=True)
class SiteQueues:
    """What the queueing model needs of a site beyond its prices: its serving system (the
    site's prefill curve and link bandwidth over the PD cluster's) and its round-trip time."""

    system: ServingSystem
    rtt_s: float


@dataclass(frozen=True)
class TtftSearch:
    point: ProcurePoint | None  # None: no single-site deployment meets the target
    # when point is None, over the whole space (nan for the other metric, and both where every
    # plan is overloaded): the highest P(TTFT <= target) of a percentile target, the lowest
    # mean TTFT of a mean target
    best_met_fraction: float
    lowest_mean_s: float
    pairs_evaluated: int
    pairs: int


@dataclass
class SearchMemo:
    """What successive searches with the same X and load share (the ε-constraint loop of
    `ttft_frontier`, each goal stricter than the last, so what fails once fails again): the
    pools' states, which do not depend on the TTFT target; the pairs (k, j) with no plan meeting
    a goal; and per threshold the fewest PD-P instances, per pair the fewest site instances,
    that could still meet one (more instances only lower a route's TTFT)."""

    queues: "dict[tuple[object, ...], Loads]" = field(default_factory=dict)
    failed: set[tuple[int, int]] = field(default_factory=set)
    least_pd_prefill: dict[int, float] = field(default_factory=dict)
    least_site: dict[tuple[int, int], float] = field(default_factory=dict)


def saturated_servers(offered_load: FloatArray) -> FloatArray:
    """Servers past which an M/G/c pool offered `offered_load` (λ E[S], erlangs) has a wait
    probability (Erlang C) below 1e-25, so that a TTFT figure cannot move by more than that:
    a + 12 √a + 12 (with c = a + β √a, Erlang C tends to (1 + β Φ(β)/φ(β))^-1, ~1e-32 at
    β = 12; the + 12 covers a < 1; tests/solve/test_procure_ttft.py checks it). A search may stop a
    pool's count there: more servers only cost more."""
    a = np.nan_to_num(np.asarray(offered_load, float), nan=0.0)
    servers: FloatArray = np.ceil(a + 12.0 * np.sqrt(a) + 12.0)
    return servers


def _exact_service_s(
    system: ServingSystem, workload: LengthDistribution, space: ProcureSpace, offloaded: bool
) -> FloatArray:
    """E[T(L) | route] at each threshold (the queues' exact-mode service time; 0 where the
    route is empty)."""
    r = rates(system, workload, space.thresholds_tokens, 1, 1, 1, Mode.EXACT)
    service = r.prfaas_service_time_s if offloaded else r.pd_prefill_service_time_s
    seconds: FloatArray = np.nan_to_num(np.asarray(service, float), nan=0.0)
    return seconds


def dominated_sites(space: ProcureSpace, sites: tuple[SiteQueues, ...]) -> frozenset[int]:
    """Sites no single-site plan needs: j is beaten by j' with the same prefill and KV curves,
    a link at least as wide and an RTT no longer, no higher price per instance, per port or per
    GB, and at least as many instances allowed. Any plan on j then has its twin on j' with the
    same counts, no dearer and no slower (the same queues at the site, a link no busier, a
    shorter round trip) and no smaller. Of identical sites the first is kept."""
    beaten = set()
    for j, (a, qa) in enumerate(zip(space.sites, sites, strict=True)):
        for i, (b, qb) in enumerate(zip(space.sites, sites, strict=True)):
            if i == j or i in beaten:
                continue
            same_curves = (
                qa.system.prfaas_prefill_latency == qb.system.prfaas_prefill_latency
                and qa.system.kv_cache_size == qb.system.kv_cache_size
            )
            no_worse = (
                qb.system.link_bandwidth_bytes_per_s >= qa.system.link_bandwidth_bytes_per_s
                and qb.rtt_s <= qa.rtt_s
                and b.usd_per_instance_hour <= a.usd_per_instance_hour
                and b.fixed_usd_per_hour <= a.fixed_usd_per_hour
                and bool(np.all(b.usd_per_offloaded_request <= a.usd_per_offloaded_request))
                and b.max_instances >= a.max_instances
            )
            if same_curves and no_worse:
                beaten.add(j)
                break
    return frozenset(beaten)


def _decode_instances(space: ProcureSpace, target_rps: float, load_rps: float) -> int:
    """The fewest decode instances with θ_d n_d >= X and θ_d n_d > λ (a stable decode pool)."""
    theta = space.decode_rps_per_instance
    return max(math.ceil(target_rps / theta * (1 - 1e-12)), math.floor(load_rps / theta) + 1)


def cheapest_with_ttft(
    space: ProcureSpace,
    pd_system: ServingSystem,
    sites: tuple[SiteQueues, ...],
    workload: LengthDistribution,
    target_rps: float,
    goal: TtftGoal,
    volume_at_capacity: bool = False,
    memo: SearchMemo | None = None,
    report_reach: bool = True,
) -> TtftSearch:
    """The cheapest (k, j, n_j, n_p, n_d) of the module docstring; among equally cheap plans
    the one that meets the target by the widest margin (highest P(TTFT <= target), or lowest
    mean), across pairs too. The link volume is billed at X, as in the MILP's target mode, or
    with `volume_at_capacity` at the plan's Λ_max (as `procure --pareto` prices plans).
    `memo`: what a previous search with the same X and load and a laxer goal learnt (SearchMemo).
    `report_reach`: when nothing meets the goal, find the best reach over every pair for the
    caller's message (the frontier loop does not need it)."""
    memo = SearchMemo() if memo is None else memo
    queues, failed = memo.queues, memo.failed
    x, lam = float(target_rps), float(goal.load_rps)
    k_count = space.thresholds_tokens.size
    n_d = _decode_instances(space, x, lam)
    n_p_min = pd_counts(space, np.full(k_count, x))[1]
    price_pd = space.pd_usd_per_instance_hour
    percentile = goal.metric != "mean"
    need = float(goal.metric) / 100.0 if percentile else -goal.target_s
    meshes: list[TtftMesh | None] = [
        ttft_mesh(q.system, workload) if percentile else None for q in sites
    ]
    pd_mesh = ttft_mesh(pd_system, workload) if percentile else None
    p = space.offload_fraction

    # the local route's part at t_k for each n_p, computed when a pair of t_k is first reached;
    # it bounds n_p from below at every pair of t_k, the offloaded route adding at most its share
    # of requests (or, for the mean, nothing)
    pd_cap = saturated_servers(lam * (1 - p) * _exact_service_s(pd_system, workload, space, False))
    counts = [
        np.arange(n_p_min[k], max(n_p_min[k], min(space.max_pd_instances - n_d, pd_cap[k])) + 1)
        if np.isfinite(n_p_min[k]) else np.zeros(0)
        for k in range(k_count)
    ]  # fmt: skip
    if ("local", x, lam) not in queues:  # one vectorised call for every (t_k, n_p)
        ks = np.repeat(np.arange(k_count), [c.size for c in counts])
        queues[("local", x, lam)] = loads(pd_system, workload, space.thresholds_tokens[ks], 1,
                                   np.concatenate(counts), n_d, lam, 0.0)  # fmt: skip
    every = queues[("local", x, lam)]
    ends = np.cumsum([c.size for c in counts])
    most_remote = (  # the offloaded route's share of requests at each t_k (0 for the mean)
        np.array([pd_mesh.weights[pd_mesh.tokens > t].sum() for t in space.thresholds_tokens])
        if pd_mesh else np.zeros(k_count)
    )  # fmt: skip
    local_parts: dict[int, tuple[FloatArray, FloatArray, float]] = {}  # (n_p, part, least n_p)

    def local_part(k: int) -> tuple[FloatArray, FloatArray, float]:
        if k not in local_parts:
            t = float(space.thresholds_tokens[k])
            keep = np.zeros(every.offload_fraction.size, bool)
            keep[ends[k] - counts[k].size : ends[k]] = True
            keep[ends[k] - counts[k].size : ends[k]] = counts[k] >= memo.least_pd_prefill.get(k, 0)
            n_p = counts[k][keep[ends[k] - counts[k].size : ends[k]]]
            local = route_part(pd_system, pd_mesh, every.take(keep), np.full(n_p.size, t), 0.0,
                               goal.target_s, offloaded=False)  # fmt: skip
            reachable = np.flatnonzero(local + most_remote[k] >= need - 1e-12)
            least = float(n_p[reachable[0]]) if reachable.size else math.inf
            memo.least_pd_prefill[k] = least
            local_parts[k] = (n_p, local, least)
        return local_parts[k]

    # every pair (k, j) with a lower bound on its cost: the fewest instances reaching X
    pairs: list[tuple[float, int, int]] = []
    site_least = [site_counts(space, site, np.full(k_count, x)) for site in space.sites]
    beaten = dominated_sites(space, sites)
    for j, site in enumerate((None, *space.sites), start=-1):
        if j in beaten:
            continue
        if site is None:
            n_min = np.where(p > 0, np.inf, 0.0)
            extra = np.zeros(k_count)
        else:
            n_min = site_least[j]
            fits = (p > 0) & (p * x <= site.link_rps * (1 + 1e-12)) & (n_min <= site.max_instances)
            n_min = np.where(fits, n_min, np.inf)
            extra = (
                site.usd_per_instance_hour * n_min + site.fixed_usd_per_hour
                + units.per_s_to_per_hour(site.usd_per_offloaded_request) * p * x
            )  # fmt: skip
        usd = price_pd * (n_p_min + n_d) + extra
        usd = np.where((n_p_min + n_d <= space.max_pd_instances) & np.isfinite(n_min), usd, np.inf)
        pairs += [(float(usd[k]), int(k), j) for k in np.flatnonzero(np.isfinite(usd))]
    pairs.sort()

    site_caps: dict[int, FloatArray] = {}

    def grid(k: int, j: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """(n_j, n_p, reach on the (n_j, n_p) grid, $/h of the site's instances and port)."""
        n_p, local, _ = local_part(k)
        if j < 0:
            return np.zeros(1), n_p, local[None, :], np.zeros(1)
        t = float(space.thresholds_tokens[k])
        site, site_queues = space.sites[j], sites[j]
        if j not in site_caps:
            site_caps[j] = saturated_servers(
                lam * p * _exact_service_s(site_queues.system, workload, space, True)
            )
        top = max(site_least[j][k], min(site.max_instances, site_caps[j][k]))
        every_n = np.arange(int(site_least[j][k]), int(top) + 1, dtype=float)
        key = ("remote", k, j, x, lam)
        if key not in queues:
            queues[key] = loads(site_queues.system, workload, np.full(every_n.size, t), every_n,
                                1, n_d, lam, site_queues.rtt_s)  # fmt: skip
        keep = every_n >= memo.least_site.get((k, j), 0)
        n = every_n[keep]
        remote = route_part(site_queues.system, meshes[j], queues[key].take(keep),
                            np.full(n.size, t), site_queues.rtt_s, goal.target_s,
                            offloaded=True)  # fmt: skip
        reachable = np.flatnonzero(remote + local.max(initial=-np.inf) >= need - 1e-12)
        memo.least_site[(k, j)] = float(n[reachable[0]]) if reachable.size else math.inf
        usd_site = site.usd_per_instance_hour * n + site.fixed_usd_per_hour
        return n, n_p, remote[:, None] + local[None, :], usd_site

    best: ProcurePoint | None = None
    best_reach = best_point_reach = -math.inf
    evaluated = 0
    hopeless: list[tuple[int, int]] = []  # pairs no count of which can meet the target
    for bound, k, j in pairs:
        if best is not None and bound > best.usd_per_hour + 1e-9:
            break
        if (k, j) in failed:
            hopeless.append((k, j))
            continue
        least = local_part(k)[2]
        # the same bound with the fewest PD-P instances whose route could meet the target (and
        # the fewest site instances that could, as far as an earlier search found)
        refined = bound + price_pd * (least - n_p_min[k])
        if j >= 0 and (k, j) in memo.least_site:
            more = memo.least_site[(k, j)] - site_least[j][k]
            refined += space.sites[j].usd_per_instance_hour * more
        if not math.isfinite(refined):
            hopeless.append((k, j))
            failed.add((k, j))
            continue
        if best is not None and refined > best.usd_per_hour + 1e-9:
            continue
        evaluated += 1
        n, n_p, reach, usd_site = grid(k, j)
        best_reach = max(best_reach, float(reach.max()))
        ok = reach >= need - 1e-12
        if not ok.any():
            failed.add((k, j))
            continue
        served = np.full(reach.shape, x)
        if j >= 0 and volume_at_capacity:
            served = _capacity_grid(space, k, j, n, n_p, n_d)
        volume = (
            0.0
            if j < 0
            else units.per_s_to_per_hour(space.sites[j].usd_per_offloaded_request[k]) * p[k]
        )
        usd = usd_site[:, None] + price_pd * (n_p[None, :] + n_d) + volume * served
        usd = np.where(ok, usd, np.inf)
        cheapest = usd.min()
        a, b = np.unravel_index(int(np.argmax(np.where(usd <= cheapest + 1e-9, reach, -np.inf))),
                                usd.shape)  # fmt: skip
        better = (
            best is None
            or usd[a, b] < best.usd_per_hour - 1e-9
            or (usd[a, b] <= best.usd_per_hour + 1e-9 and reach[a, b] > best_point_reach)
        )
        if better:
            instances = tuple(int(n[a]) if i == j else 0 for i in range(len(space.sites)))
            shares = tuple(float(p[k] * x) if i == j else 0.0 for i in range(len(space.sites)))
            best = ProcurePoint(k, instances, shares, int(n_p[b]), n_d, x, float(usd[a, b]))
            best_point_reach = float(reach[a, b])
    if best is None and report_reach:  # the most any plan reaches, for the message: every pair
        for k, j in hopeless:
            best_reach = max(best_reach, float(grid(k, j)[2].max()))
    finite = math.isfinite(best_reach)
    return TtftSearch(
        best,
        best_reach if percentile and finite else math.nan,
        -best_reach if not percentile and finite else math.nan,
        evaluated,
        len(pairs),
    )


def _capacity_grid(space: ProcureSpace, k: int, j: int, n: FloatArray, n_p: FloatArray,
                   n_d: int) -> FloatArray:  # fmt: skip
    """Λ_max of site j's n (rows) x PD-P n_p (columns) at t_k with n_d decode instances."""
    site, p, s = space.sites[j], space.offload_fraction[k], space.local_fraction[k]
    remote = np.minimum(site.compute_rps_per_instance[k] * n, site.link_rps[k]) / p
    local = space.pd_prefill_rps_per_instance[k] * n_p / s if s > 0 else np.full(n_p.shape, np.inf)
    grid: FloatArray = np.minimum(
        np.minimum(remote[:, None], local[None, :]), space.decode_rps_per_instance * n_d
    )
    return grid
