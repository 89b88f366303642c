"""The cheapest deployment reaching a target throughput X that also meets a TTFT target at a
Poisson load λ (analytic/loaded_ttft.py), over the procurement space with the offloaded
traffic on at most one site (the queueing model has one PrfaaS pool and one link).

For a threshold t_k and a site j (or none, where nothing is offloaded) the counts are:
n_d the fewest decode instances with θ_d n_d >= X and θ_d n_d > λ (decode is not part of
TTFT: more only costs), n_p from ceil(s_k X / c_k) to N_pd,max − n_d, n_j from
ceil(p_k X / a_jk) to U_j (site j's link must carry p_k X). TTFT splits by route
(`loaded_ttft.route_part`): the local route's part depends on n_p alone, the offloaded
route's on n_j alone (and the site's link and RTT), so each pair (k, j) evaluates n_p and n_j
separately and combines them on the (n_j, n_p) grid. Pairs are visited cheapest capacity-only
cost first and the search stops once that bound reaches the best plan meeting the target.
Units: req/s, $/h, s.
"""

import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.deployment_load import loads
from prfaas_plan.analytic.distributions import LengthDistribution
from prfaas_plan.analytic.loaded_ttft import Metric, TtftMesh, route_part, ttft_mesh
from prfaas_plan.solve.procure_milp import ProcurePoint, ProcureSpace, pd_counts, site_counts


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
    # the most any evaluated plan reaches: P(TTFT <= target) for a percentile, or the lowest
    # mean TTFT (s); over the whole space when point is None (nothing was pruned then)
    best_reach: float
    pairs_evaluated: int
    pairs: int


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
) -> TtftSearch:
    """The cheapest (k, j, n_j, n_p, n_d) of the module docstring; the link volume is billed
    at X, as in the MILP's target mode."""
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

    # every pair (k, j) with its capacity-only lower bound: the fewest instances reaching X
    pairs: list[tuple[float, int, int]] = []
    for j, site in enumerate((None, *space.sites), start=-1):
        if site is None:
            n_min = np.where(p > 0, np.inf, 0.0)
            extra = np.zeros(k_count)
        else:
            n_min = site_counts(space, site, np.full(k_count, x))
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

    local_parts: dict[int, tuple[FloatArray, FloatArray]] = {}  # per k: (n_p, local part)
    best: ProcurePoint | None = None
    best_reach = -math.inf
    evaluated = 0
    for bound, k, j in pairs:
        if best is not None and bound >= best.usd_per_hour * (1 - 1e-12):
            break
        evaluated += 1
        t = float(space.thresholds_tokens[k])
        if k not in local_parts:
            n_p = np.arange(int(n_p_min[k]), space.max_pd_instances - n_d + 1, dtype=float)
            state = loads(pd_system, workload, np.full(n_p.size, t), 1, n_p, n_d, lam, 0.0)
            local = route_part(pd_system, pd_mesh, state, np.full(n_p.size, t), 0.0,
                               goal.target_s, offloaded=False)  # fmt: skip
            local_parts[k] = (n_p, local)
        n_p, local = local_parts[k]
        if j < 0:
            n = np.zeros(1)
            remote = np.zeros(1)
            usd_site = np.zeros(1)
        else:
            site, queues = space.sites[j], sites[j]
            n = np.arange(int(site_counts(space, site, np.full(k_count, x))[k]),
                          site.max_instances + 1, dtype=float)  # fmt: skip
            ts = np.full(n.size, t)
            state = loads(queues.system, workload, ts, n, 1, n_d, lam, queues.rtt_s)
            remote = route_part(queues.system, meshes[j], state, ts, queues.rtt_s,
                                goal.target_s, offloaded=True)  # fmt: skip
            usd_site = (
                site.usd_per_instance_hour * n + site.fixed_usd_per_hour
                + units.per_s_to_per_hour(site.usd_per_offloaded_request[k]) * p[k] * x
            )  # fmt: skip
        reach = remote[:, None] + local[None, :]  # (n_j, n_p)
        best_reach = max(best_reach, float(reach.max()))
        ok = reach >= need - 1e-12
        if not ok.any():
            continue
        usd = usd_site[:, None] + price_pd * (n_p[None, :] + n_d)
        usd = np.where(ok, usd, np.inf)
        a, b = np.unravel_index(int(np.argmin(usd)), usd.shape)
        if best is None or usd[a, b] < best.usd_per_hour:
            instances = tuple(int(n[a]) if i == j else 0 for i in range(len(space.sites)))
            shares = tuple(float(p[k] * x) if i == j else 0.0 for i in range(len(space.sites)))
            best = ProcurePoint(k, instances, shares, int(n_p[b]), n_d, x, float(usd[a, b]))
    return TtftSearch(best, best_reach if percentile else -best_reach, evaluated, len(pairs))


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
    from prfaas_plan.analytic.capacity import Configuration
    from prfaas_plan.analytic.loaded_ttft import loaded_ttft
    from prfaas_plan.solve.procure_milp import capacity_rps

    best: ProcurePoint | None = None
    size = len(space.sites)
    for k in range(space.thresholds_tokens.size):
        for j in range(-1, size):
            counts = range(1) if j < 0 else range(1, space.sites[j].max_instances + 1)
            for c in counts:
                n = tuple(c if i == j else 0 for i in range(size))
                for n_p in range(space.max_pd_instances):
                    for n_d in range(1, space.max_pd_instances - n_p + 1):
                        if capacity_rps(space, k, n, n_p, n_d) < target_rps * (1 - 1e-9):
                            continue
                        if j >= 0 and space.offload_fraction[k] == 0:
                            continue
                        site = None if j < 0 else space.sites[j]
                        usd = space.pd_usd_per_instance_hour * (n_p + n_d)
                        if site is not None:
                            usd += (
                                site.usd_per_instance_hour * c + site.fixed_usd_per_hour
                                + units.per_s_to_per_hour(site.usd_per_offloaded_request[k])
                                * space.offload_fraction[k] * target_rps
                            )  # fmt: skip
                        if best is not None and usd >= best.usd_per_hour - 1e-9:
                            continue
                        system, rtt = (pd_system, 0.0) if j < 0 else (sites[j].system,
                                                                       sites[j].rtt_s)  # fmt: skip
                        configuration = Configuration(c, n_p, n_d,
                                                      float(space.thresholds_tokens[k]))  # fmt: skip
                        state = loaded_ttft(system, workload, configuration, goal.load_rps,
                                            link_latency_s=rtt)  # fmt: skip
                        if state.stable and state.metric(goal.metric) <= goal.target_s:
                            shares = tuple(
                                float(space.offload_fraction[k] * target_rps) if i == j else 0.0
                                for i in range(size)
                            )
                            best = ProcurePoint(k, n, shares, n_p, n_d, target_rps, usd)
    return best
