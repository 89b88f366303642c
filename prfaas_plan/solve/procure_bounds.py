"""Procurement in closed form where the MILP needs no search, and the bounds that narrow it: the
cheapest single-site deployment for a target (`single_site_target`) and the most a single site
serves within a budget (`single_site_budget`), the PD counts a rate needs, and the lower
(target) and upper (budget) bounds on each site's instances. Units: req/s, $/h.
"""

import functools
import math
from collections.abc import Callable

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.solve.procure_space import ProcurePoint, ProcureSpace, SiteRates


def _pd_rates_needed(space: ProcureSpace) -> FloatArray:
    """PD instances per req/s of Λ at each t_k (1/θ_d + s_k/c_k; inf where PD-P cannot serve)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        prefill = np.where(
            space.local_fraction > 0, space.local_fraction / space.pd_prefill_rps_per_instance, 0.0
        )
    return 1 / space.decode_rps_per_instance + np.nan_to_num(prefill, nan=np.inf)


def _first_instance_usd_per_hour(space: ProcureSpace) -> FloatArray:
    """Offloading anything buys at least one instance and a link: min_j (P_j + F_j) where
    p_k > 0, else 0 (a lower bound, with whole instances)."""
    first = min((s.usd_per_instance_hour + s.fixed_usd_per_hour for s in space.sites),
                default=math.inf)  # fmt: skip
    return np.where(space.offload_fraction > 0, first, 0.0)


def pd_counts(space: ProcureSpace, rps: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The fewest PD-D and PD-P instances serving `rps` at each t_k: ceil(Λ / θ_d), at least 1,
    and ceil(s_k Λ / c_k) (inf where PD-P cannot serve its share s_k > 0)."""
    shrink = 1 - 1e-12  # Λ exactly at a capacity needs no further instance
    n_d = np.maximum(np.ceil(rps / space.decode_rps_per_instance * shrink), 1.0)
    s, c = space.local_fraction, space.pd_prefill_rps_per_instance
    with np.errstate(divide="ignore", invalid="ignore"):
        n_p = np.where(s > 0, np.ceil(rps * s / c * shrink), 0.0)
    return n_d, np.nan_to_num(n_p, nan=np.inf, posinf=np.inf)


def site_counts(space: ProcureSpace, site: SiteRates, rps: FloatArray) -> FloatArray:
    """The fewest instances of `site` prefilling the offloaded p_k Λ: ceil(p_k Λ / a_jk)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.ceil(space.offload_fraction * rps / site.compute_rps_per_instance * (1 - 1e-12))
    return np.where(space.offload_fraction > 0, np.nan_to_num(n, nan=np.inf), 0.0)


def _single_site_cost(
    space: ProcureSpace, site: SiteRates | None, rps: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(n_d, n_p, n_j, $/h) of the fewest whole instances serving `rps` at each t_k with the
    offloaded share on `site` alone (None: nothing offloaded); $/h is inf where the counts
    break a bound (N_pd,max, U_j, the link) or, without a site, where p_k > 0."""
    n_d, n_p = pd_counts(space, rps)
    usd = space.pd_usd_per_instance_hour * (n_d + n_p)
    over = n_d + n_p > space.max_pd_instances
    p = space.offload_fraction
    if site is None:
        n = np.zeros_like(rps)
        over |= (p > 0) & (rps > 0)
    else:
        n = site_counts(space, site, rps)
        offloaded = p * rps
        usd = usd + (site.usd_per_instance_hour * n + site.fixed_usd_per_hour
                     + units.per_s_to_per_hour(site.usd_per_offloaded_request) * offloaded)  # fmt: skip
        over |= (n > site.max_instances) | (offloaded > site.link_rps * (1 + 1e-12))
    return n_d, n_p, n, np.where(over, np.inf, usd)


def _single_site_usd(space: ProcureSpace, site: SiteRates | None, rps: FloatArray) -> FloatArray:
    return _single_site_cost(space, site, rps)[3]


def _single_site_point(
    space: ProcureSpace, j: int, k: int, counts: tuple[FloatArray, ...], rps: float, usd: float
) -> ProcurePoint:
    """The point of site j (-1: none) at t_k with the counts (n_d, n_p, n_j) at index k."""
    n_d, n_p, n = counts[0][k], counts[1][k], counts[2][k]
    size = len(space.sites)
    instances = tuple(int(n) if i == j else 0 for i in range(size))
    shares = tuple(float(space.offload_fraction[k] * rps) if i == j else 0.0 for i in range(size))
    return ProcurePoint(k, instances, shares, int(n_p), int(n_d), rps, usd)


def single_site_target(space: ProcureSpace, target_rps: float) -> ProcurePoint | None:
    """The cheapest point reaching `target_rps` that offloads to at most one site, in closed
    form for every (t_k, site j) at once (`_single_site_cost`: n_d = ceil(X / θ_d),
    n_p = ceil(s_k X / c_k), n_j = ceil(p_k X / a_jk)). A feasible point of the MILP, so an
    incumbent that prunes its thresholds; None when there is no such point."""
    rps = np.full(space.thresholds_tokens.size, float(target_rps))
    best: ProcurePoint | None = None
    for j, site in enumerate((None, *space.sites), start=-1):
        counts = _single_site_cost(space, site, rps)
        k = int(np.argmin(counts[3]))
        usd = float(counts[3][k])
        if math.isfinite(usd) and (best is None or usd < best.usd_per_hour):
            best = _single_site_point(space, j, k, counts[:3], float(target_rps), usd)
    return best


def _largest_within(
    cost: Callable[[FloatArray], FloatArray], budget: float, hi: FloatArray
) -> FloatArray:
    """The largest Λ in [0, hi] with cost(Λ) <= budget, row by row, for a cost that never
    falls as Λ grows (a step function of whole instances): bisection to 1e-13 of hi. The Λ
    returned is within the budget (0 where nothing is)."""
    top = np.where(np.isfinite(hi), hi, 0.0)
    fits = cost(top) <= budget
    lo, up = np.where(fits, top, 0.0), top
    for _ in range(60):
        mid = 0.5 * (lo + up)
        fits = cost(mid) <= budget
        lo, up = np.where(fits, mid, lo), np.where(fits, up, mid)
        if np.all(up - lo <= 1e-13 * up):
            break
    return lo


def single_site_budget(space: ProcureSpace, budget_usd_per_hour: float) -> ProcurePoint | None:
    """The highest-Λ point within `budget_usd_per_hour` that offloads to at most one site, for
    every (t_k, site j) at once: Λ is bisected on `_single_site_cost`, then raised to what the
    counts found serve (their capacity, and the link volume the rest of the budget pays for).
    A feasible point of the MILP, so an incumbent; None when the budget serves nothing."""
    b = budget_usd_per_hour
    p, s = space.offload_fraction, space.local_fraction
    with np.errstate(divide="ignore"):
        pd_cap = space.max_pd_instances / _pd_rates_needed(space)  # what the PD cluster can serve
    best: ProcurePoint | None = None
    for j, site in enumerate((None, *space.sites), start=-1):
        with np.errstate(divide="ignore", invalid="ignore"):
            if site is None:
                hi = np.where(p > 0, 0.0, pd_cap)
            else:
                remote = np.minimum(site.compute_rps_per_instance * site.max_instances,
                                    site.link_rps) / p  # fmt: skip
                hi = np.where(p > 0, np.minimum(pd_cap, np.nan_to_num(remote)), 0.0)
        lam = _largest_within(functools.partial(_single_site_usd, space, site), b, hi)
        n_d, n_p, n, usd = _single_site_cost(space, site, lam)
        with np.errstate(divide="ignore", invalid="ignore"):
            served = np.minimum(
                space.decode_rps_per_instance * n_d,
                np.where(s > 0, space.pd_prefill_rps_per_instance * n_p / s, np.inf),
            )
            if site is not None:
                volume = units.per_s_to_per_hour(site.usd_per_offloaded_request) * p
                remote = np.minimum(site.compute_rps_per_instance * n, site.link_rps) / p
                served = np.minimum(served, np.where(p > 0, remote, np.inf))
                fixed = usd - volume * lam
                served = np.minimum(served, np.where(volume > 0, (b - fixed) / volume, np.inf))
                usd = fixed + volume * served
        served = np.where(lam > 0, served, 0.0)  # >= Λ, up to the counts' 1e-12 tolerance
        k = int(np.argmax(served))
        if served[k] > 0 and (best is None or served[k] > best.served_rps):
            best = _single_site_point(space, j, k, (n_d, n_p, n), float(served[k]), float(usd[k]))
    return best


def target_lower_bounds(space: ProcureSpace, target_rps: float) -> FloatArray:
    """A lower bound on the cost of reaching `target_rps` at each t_k: the PD pools in whole
    instances, plus the offloaded D_k = p_k X at the cheapest $ per offloaded req/s of any site
    (instances fractional; its link's fixed price spread over what it can carry of D_k, at most
    D_k), and at least one instance and one link. inf where the PD cluster cannot reach X."""
    x = target_rps
    decode, prefill = pd_counts(space, np.full(space.thresholds_tokens.size, float(x)))
    bound = space.pd_usd_per_instance_hour * (decode + prefill)
    demand = space.offload_fraction * x
    if space.sites:
        per_site = []
        for s in space.sites:
            # what the site can carry of D_k; a site that can carry nothing costs inf per req/s
            carry = np.minimum.reduce([s.compute_rps_per_instance * s.max_instances, s.link_rps,
                                       demand])  # fmt: skip
            with np.errstate(divide="ignore", invalid="ignore"):
                unit = (
                    s.usd_per_instance_hour / s.compute_rps_per_instance
                    + units.per_s_to_per_hour(s.usd_per_offloaded_request)
                    + s.fixed_usd_per_hour / carry
                )
            per_site.append(np.where(carry > 0, unit, np.inf))
        with np.errstate(invalid="ignore"):  # 0 x inf where nothing is offloaded
            offload = np.where(demand > 0, demand * np.min(per_site, axis=0), 0.0)
    else:
        offload = np.where(demand > 0, np.inf, 0.0)
    bound = bound + np.maximum(offload, _first_instance_usd_per_hour(space))
    bound[decode + prefill > space.max_pd_instances] = np.inf
    bound = np.nan_to_num(bound, nan=0.0)  # a bound that is not a number prunes nothing
    return bound


def budget_upper_bounds(space: ProcureSpace, budget_usd_per_hour: float) -> FloatArray:
    """An upper bound on Λ within `budget_usd_per_hour` at each t_k: the largest Λ whose PD
    pools in whole instances (`pd_counts`) and the offloaded p_k Λ at the cheapest of
    F_j + p_k Λ u_j over the sites (u_j: $ per offloaded req/s with fractional instances,
    volume included; F_j: the link's fixed price) fit the budget and the pools' reach."""
    p = space.offload_fraction
    caps = sum(
        (np.minimum(s.compute_rps_per_instance * s.max_instances, s.link_rps) for s in space.sites),
        start=np.zeros(p.size),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = np.minimum(
            space.max_pd_instances / _pd_rates_needed(space),
            np.where(p > 0, caps / p, np.inf),
        )
        per_site = [
            np.where(np.minimum(s.compute_rps_per_instance * s.max_instances, s.link_rps) > 0,
                     s.usd_per_instance_hour / s.compute_rps_per_instance, np.inf)
            + units.per_s_to_per_hour(s.usd_per_offloaded_request)
            for s in space.sites
        ]  # fmt: skip
    fixed = np.array([s.fixed_usd_per_hour for s in space.sites])[:, None]
    unit = np.array(per_site).reshape(len(space.sites), p.size)

    def cost(lam: FloatArray) -> FloatArray:
        # sites S carrying p Λ pay at least Σ_S F_j + p Λ min_S u_j >= min_j (F_j + p Λ u_j)
        n_d, n_p = pd_counts(space, lam)
        with np.errstate(invalid="ignore"):  # 0 x inf where nothing is offloaded
            offload = np.where(p > 0, np.min(fixed + p * lam * unit, axis=0, initial=np.inf), 0.0)
        usd: FloatArray = space.pd_usd_per_instance_hour * (n_d + n_p) + offload
        return usd

    # a valid upper bound: the first Λ past the bisection's last point within the budget
    lam = _largest_within(cost, budget_usd_per_hour, np.nan_to_num(hi, posinf=0.0))
    return np.where(lam > 0, lam * (1 + 1e-12) + 1e-12, 0.0)
