"""The procurement MILP: the cheapest deployment reaching a target throughput (or the highest
throughput within a budget) over candidate PrfaaS sites, instance counts, the PD split and the
routing threshold, with offloaded traffic split between several sites at once.

As in solve/sizing_milp.py, one binary y_k picks the threshold t_k from a grid, and every
capacity term is then linear. Per candidate site j (a GPU type, its price and a link offering):
a_jk offloaded req/s per instance at t_k (1 / T_j(l_long,k)), b_jk = B_j / S_kv,k the link's
req/s, P_j $/instance-hour, F_j the link's fixed $/h, w_jk = S_kv,k x $/byte of its volume.
Variables n_j (instances), z_j (site bought), n_p, n_d, y_k, Λ_k and Λ_jk (site j's share):

    Λ_jk <= a_jk n_j,   Λ_jk <= b_jk y_k,   Σ_k Λ_jk <= M z_j,   n_j <= U_j z_j   (site j)
    Σ_j Λ_jk = p_k Λ_k,   s_k Λ_k <= c_k n_p,   Λ_k <= θ_d n_d,   Λ_k <= M y_k,   Σ_k y_k = 1
    y_k <= n_p where s_k > 0,   n_d >= 1,   n_p + n_d <= N_pd,max
    cost = Σ_j (P_j n_j + F_j z_j + 3600 Σ_k w_jk Λ_jk) + P_pd (n_p + n_d)   ($/h)

Target mode: min cost with Σ_k Λ_k >= X (the link volume is billed at the served X). Budget
mode: max Σ_k Λ_k with cost <= B. `brute_force` enumerates the same space (tests, benchmark).
Units: req/s, $/h, bytes.
"""

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.choices import Solver
from prfaas_plan.solve.sizing_milp import Milp, solve_milp, solve_milp_exactly, to_pulp

# a cost (or throughput) within PROCURE_REL_GAP of the optimum is the optimum, and a row within
# PROCURE_FEASIBILITY_TOL of its bound holds (HiGHS' defaults, 1e-6 and 1e-6 to 1e-7, would let a
# deployment short of a target by 1e-7 pass for one reaching it; the exact threshold search of
# solve/procure_exact.py steps rates by 1e-10)
PROCURE_REL_GAP = 1e-11
PROCURE_FEASIBILITY_TOL = 1e-10  # HiGHS refuses (and ignores) any tighter


@dataclass(frozen=True)
class SiteRates:
    """One candidate PrfaaS site on the threshold grid."""

    name: str
    compute_rps_per_instance: FloatArray  # a_jk, offloaded req/s one instance prefills
    link_rps: FloatArray  # b_jk = B_j / S_kv(l_long,k)
    usd_per_instance_hour: float  # P_j
    fixed_usd_per_hour: float  # F_j
    usd_per_offloaded_request: FloatArray  # w_jk = S_kv(l_long,k) x $/byte
    max_instances: int  # U_j


@dataclass(frozen=True)
class ProcureSpace:
    thresholds_tokens: FloatArray
    offload_fraction: FloatArray  # p_k
    local_fraction: FloatArray  # s_k
    pd_prefill_rps_per_instance: FloatArray  # c_k
    decode_rps_per_instance: float  # θ_d
    pd_usd_per_instance_hour: float
    max_pd_instances: int
    sites: tuple[SiteRates, ...]


@dataclass(frozen=True)
class ProcurePoint:
    threshold_index: int
    site_instances: tuple[int, ...]
    site_rps: tuple[float, ...]  # offloaded req/s each site carries at the served rate
    pd_prefill_instances: int
    pd_decode_instances: int
    served_rps: float
    usd_per_hour: float


def _cost_terms(space: ProcureSpace, k: int, n: tuple[int, ...], n_p: int, n_d: int) -> float:
    fixed = sum(s.fixed_usd_per_hour for s, c in zip(space.sites, n, strict=True) if c > 0)
    gpus = sum(s.usd_per_instance_hour * c for s, c in zip(space.sites, n, strict=True))
    return fixed + gpus + space.pd_usd_per_instance_hour * (n_p + n_d)


def _site_caps(space: ProcureSpace, k: int, n: tuple[int, ...]) -> FloatArray:
    return np.array(
        [
            min(s.compute_rps_per_instance[k] * c, s.link_rps[k])
            for s, c in zip(space.sites, n, strict=True)
        ]
    )


def capacity_rps(space: ProcureSpace, k: int, n: tuple[int, ...], n_p: int, n_d: int) -> float:
    """Λ_max of fixed counts at t_k: min(θ n_d, c_k n_p / s_k, Σ_j min(a_jk n_j, b_jk) / p_k)."""
    limits = [space.decode_rps_per_instance * n_d]
    if space.local_fraction[k] > 0:
        limits.append(space.pd_prefill_rps_per_instance[k] * n_p / space.local_fraction[k])
    if space.offload_fraction[k] > 0:
        limits.append(float(_site_caps(space, k, n).sum()) / space.offload_fraction[k])
    return min(limits)


def _volume_split(
    space: ProcureSpace, k: int, n: tuple[int, ...], offloaded_rps: float
) -> tuple[float, FloatArray]:
    """Cheapest split of `offloaded_rps` over the sites (cheapest volume first): ($/h, per site)."""
    caps = _site_caps(space, k, n)
    price = np.array([units.per_s_to_per_hour(s.usd_per_offloaded_request[k]) for s in space.sites])
    share = np.zeros(len(space.sites))
    left = offloaded_rps
    for j in np.argsort(price, kind="stable"):
        share[j] = min(caps[j], left)
        left -= share[j]
    return float(price @ share), share


def brute_force(space: ProcureSpace, target_rps: float) -> ProcurePoint | None:
    """The cheapest point reaching `target_rps` by enumerating every threshold, count and split."""
    best: ProcurePoint | None = None
    ranges = [range(s.max_instances + 1) for s in space.sites]
    for k in range(space.thresholds_tokens.size):
        for n in itertools.product(*ranges):
            for n_p in range(space.max_pd_instances):
                for n_d in range(1, space.max_pd_instances - n_p + 1):
                    if capacity_rps(space, k, n, n_p, n_d) < target_rps * (1 - 1e-9):
                        continue
                    volume, share = _volume_split(
                        space, k, n, space.offload_fraction[k] * target_rps
                    )
                    cost = _cost_terms(space, k, n, n_p, n_d) + volume
                    if best is None or cost < best.usd_per_hour - 1e-9:
                        best = ProcurePoint(k, n, tuple(share), n_p, n_d, target_rps, cost)
                    break  # more decode instances only cost more
    return best


def build_procure_milp(
    space: ProcureSpace, target_rps: float | None = None, budget_usd_per_hour: float | None = None
) -> Milp:
    """The MILP of the module docstring (exactly one of `target_rps`, `budget_usd_per_hour`)."""
    j_count, k = len(space.sites), space.thresholds_tokens.size
    n_idx = np.arange(j_count)
    z_idx = j_count + n_idx
    np_idx, nd_idx = 2 * j_count, 2 * j_count + 1
    y_idx = 2 * j_count + 2 + np.arange(k)
    lam_idx = y_idx + k
    n_vars = 2 * j_count + 2 + 2 * k + j_count * k
    big_m = space.decode_rps_per_instance * space.max_pd_instances
    # the tightest big-Ms the bounds allow (a weak relaxation made the budget mode take ~20 s):
    # a site carries at most max_k min(a_jk U_j, b_jk); Λ_k at most what every pool allows
    site_caps = np.array([np.minimum(s.compute_rps_per_instance * s.max_instances, s.link_rps)
                          for s in space.sites]).reshape(j_count, k)  # fmt: skip
    site_m = site_caps.max(axis=1) if k else np.zeros(j_count)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam_m = np.minimum.reduce([
            np.full(k, big_m),
            np.where(space.local_fraction > 0, space.pd_prefill_rps_per_instance
                     * space.max_pd_instances / space.local_fraction, np.inf),
            np.where(space.offload_fraction > 0, site_caps.sum(axis=0) / space.offload_fraction,
                     np.inf),
        ])  # fmt: skip
    rows: list[npt.NDArray[np.int64]] = []
    cols: list[npt.NDArray[np.int64]] = []
    vals: list[FloatArray] = []
    lower: list[float] = []
    upper: list[float] = []

    def row(c: "npt.ArrayLike", v: "npt.ArrayLike", lo: float, hi: float) -> None:
        columns = np.asarray(c, dtype=np.int64)
        rows.append(np.full(columns.size, len(lower)))
        cols.append(columns)
        vals.append(np.asarray(v, dtype=float))
        lower.append(lo)
        upper.append(hi)

    inf = math.inf
    cost_cols: list[int] = [np_idx, nd_idx]
    cost_vals: list[float] = [space.pd_usd_per_instance_hour] * 2
    for j, site in enumerate(space.sites):
        lam_jk = 2 * j_count + 2 + 2 * k + j * k + np.arange(k)
        for kk in range(k):
            row([lam_jk[kk], n_idx[j]], [1.0, -site.compute_rps_per_instance[kk]], -inf, 0.0)
            row([lam_jk[kk], y_idx[kk]], [1.0, -site.link_rps[kk]], -inf, 0.0)
        row([*lam_jk, z_idx[j]], [*np.ones(k), -site_m[j]], -inf, 0.0)
        row([n_idx[j], z_idx[j]], [1.0, -float(site.max_instances)], -inf, 0.0)
        cost_cols += [int(n_idx[j]), int(z_idx[j]), *lam_jk.tolist()]
        cost_vals += [site.usd_per_instance_hour, site.fixed_usd_per_hour]
        cost_vals += units.per_s_to_per_hour(site.usd_per_offloaded_request).tolist()
    for kk in range(k):
        shares = [2 * j_count + 2 + 2 * k + j * k + kk for j in range(j_count)]
        row([*shares, lam_idx[kk]], [*np.ones(j_count), -space.offload_fraction[kk]], 0.0, 0.0)
        row(
            [lam_idx[kk], np_idx],
            [space.local_fraction[kk], -space.pd_prefill_rps_per_instance[kk]],
            -inf,
            0.0,
        )
        row([lam_idx[kk], nd_idx], [1.0, -space.decode_rps_per_instance], -inf, 0.0)
        row([lam_idx[kk], y_idx[kk]], [1.0, -lam_m[kk]], -inf, 0.0)
        if space.local_fraction[kk] > 0:
            row([y_idx[kk], np_idx], [1.0, -1.0], -inf, 0.0)
    row(y_idx, np.ones(k), 1.0, 1.0)
    row([np_idx, nd_idx], [1.0, 1.0], -inf, float(space.max_pd_instances))
    c = np.zeros(n_vars)
    if target_rps is not None:
        row(lam_idx, np.ones(k), target_rps, inf)
        np.add.at(c, np.array(cost_cols), np.array(cost_vals))
    else:
        assert budget_usd_per_hour is not None
        row(np.array(cost_cols), np.array(cost_vals), -inf, budget_usd_per_hour)
        c[lam_idx] = -1.0  # req/s: 1e-6 of the optimum is below any printed digit
    var_lower = np.zeros(n_vars)
    var_upper = np.full(n_vars, inf)
    var_upper[n_idx] = [s.max_instances for s in space.sites]
    var_upper[z_idx] = 1
    var_upper[[np_idx, nd_idx]] = space.max_pd_instances
    var_lower[nd_idx] = 1
    var_upper[y_idx] = 1
    integrality = np.zeros(n_vars)
    integrality[: 2 * j_count + 2 + k] = 1
    a_values = np.concatenate(vals)
    keep = a_values != 0
    return Milp(
        c, np.concatenate(rows).astype(np.int64)[keep], np.concatenate(cols)[keep], a_values[keep],
        np.array(lower), np.array(upper), var_lower, var_upper, integrality,
    )  # fmt: skip


def point_from_solution(space: ProcureSpace, x: FloatArray) -> ProcurePoint:
    """The point of a MILP solution: counts rounded, and Λ and each site's share clamped to what
    the rounded counts serve (a solver's tolerance may leave ~1e-7 above it, or on a site with
    no instance)."""
    j_count, k = len(space.sites), space.thresholds_tokens.size
    n = tuple(round(v) for v in x[:j_count])
    n_p, n_d = (round(v) for v in x[2 * j_count : 2 * j_count + 2])
    y = x[2 * j_count + 2 : 2 * j_count + 2 + k]
    kk = int(np.argmax(y))
    served = min(float(x[2 * j_count + 2 + k + kk]), capacity_rps(space, kk, n, n_p, n_d))
    lam_jk = x[2 * j_count + 2 + 2 * k :].reshape(j_count, k)[:, kk]
    lam_jk = np.where(np.array(n) > 0, np.clip(lam_jk, 0.0, _site_caps(space, kk, n)), 0.0)
    volume = sum(
        units.per_s_to_per_hour(s.usd_per_offloaded_request[kk]) * r
        for s, r in zip(space.sites, lam_jk, strict=True)
    )
    cost = _cost_terms(space, kk, n, n_p, n_d) + volume
    return ProcurePoint(kk, n, tuple(float(v) for v in lam_jk), n_p, n_d, max(served, 0.0), cost)


def _at(space: ProcureSpace, k: int) -> ProcureSpace:
    """The space restricted to threshold t_k (y_k = 1)."""
    one = slice(k, k + 1)
    return dataclasses.replace(
        space,
        thresholds_tokens=space.thresholds_tokens[one],
        offload_fraction=space.offload_fraction[one],
        local_fraction=space.local_fraction[one],
        pd_prefill_rps_per_instance=space.pd_prefill_rps_per_instance[one],
        sites=tuple(
            dataclasses.replace(
                s, compute_rps_per_instance=s.compute_rps_per_instance[one],
                link_rps=s.link_rps[one], usd_per_offloaded_request=s.usd_per_offloaded_request[one],
            )
            for s in space.sites
        ),
    )  # fmt: skip


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


def _budget_upper_bounds(space: ProcureSpace, budget_usd_per_hour: float) -> FloatArray:
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


def solve_procure(
    space: ProcureSpace, target_rps: float | None = None, budget_usd_per_hour: float | None = None
) -> ProcurePoint | None:
    """The optimum of the MILP of `build_procure_milp`, found threshold by threshold: y_k fixed,
    each restriction is a small MILP. The best single-site point (closed form) is the first
    incumbent; thresholds are visited best bound first and the search stops once no remaining
    threshold's bound can beat the incumbent. None when no point meets the target or budget."""
    best: ProcurePoint | None
    if target_rps is not None:
        best = single_site_target(space, target_rps)
        bound = target_lower_bounds(space, target_rps)
        for k in np.argsort(bound, kind="stable"):
            if not math.isfinite(bound[k]) or (
                best and bound[k] >= best.usd_per_hour * (1 - PROCURE_REL_GAP)
            ):
                break
            point = solve_one(space, int(k), target_rps, None)
            if point is not None and (best is None or point.usd_per_hour < best.usd_per_hour):
                best = point
        return best
    assert budget_usd_per_hour is not None
    best = single_site_budget(space, budget_usd_per_hour)
    upper = _budget_upper_bounds(space, budget_usd_per_hour)
    for k in np.argsort(-upper, kind="stable"):
        if best is not None and upper[k] <= best.served_rps * (1 + PROCURE_REL_GAP):
            break
        point = solve_one(space, int(k), None, budget_usd_per_hour)
        if point is not None and (best is None or point.served_rps > best.served_rps):
            best = point
    return best


def solve_one(
    space: ProcureSpace, k: int, target_rps: float | None, budget_usd_per_hour: float | None
) -> ProcurePoint | None:
    """The MILP at threshold t_k alone. A target is checked against the returned counts' exact
    capacity: the solver holds rows only to PROCURE_FEASIBILITY_TOL (absolute), so a
    deployment short of the target by less than that, divided by the offloaded share, can come
    back; then the target is raised past its shortfall and solved again (a deployment whose
    capacity lies in that sliver is lost: the answer is then exact to the solver's tolerance)."""
    one = _at(space, k)
    goal = target_rps
    for _ in range(TOLERANCE_RETRIES):
        milp = build_procure_milp(one, goal, budget_usd_per_hour)
        scale = _rate_scale(one, goal)
        x = solve_milp_exactly(_scaled(milp, scale), PROCURE_REL_GAP, PROCURE_FEASIBILITY_TOL)
        if x is None:
            return None
        x = x * scale
        point = point_from_solution(one, x)
        if target_rps is None:
            return dataclasses.replace(point, threshold_index=k)
        if point.served_rps >= target_rps * (1 - 1e-13):
            # a target reached (its counts' capacity checked to 1e-13) is served exactly, its
            # offloaded req/s split over the sites cheapest volume first (the solver's shares
            # hold their sum only to its tolerance, and so would its volume bill)
            n = point.site_instances
            offloaded = float(one.offload_fraction[0]) * target_rps
            volume, shares = _volume_split(one, 0, n, offloaded)
            usd = _cost_terms(one, 0, n, point.pd_prefill_instances, point.pd_decode_instances)
            return dataclasses.replace(
                point, threshold_index=k, served_rps=target_rps,
                site_rps=tuple(float(v) for v in shares), usd_per_hour=float(usd + volume),
            )  # fmt: skip
        assert goal is not None
        goal = goal + 2 * (goal - point.served_rps)
    return None


TOLERANCE_RETRIES = 4


def _rate_scale(space: ProcureSpace, target_rps: float | None) -> FloatArray:
    """Per column, the unit the solver sees it in: with a target X at one threshold, Λ in units
    of X and each site's share in units of p X (its fraction of the offloaded traffic), so the
    solver's absolute row tolerance is a relative one on the target; counts and y unscaled."""
    j_count, k = len(space.sites), space.thresholds_tokens.size
    scale = np.ones(2 * j_count + 2 + 2 * k + j_count * k)
    if target_rps is None or k != 1:
        return scale
    scale[2 * j_count + 2 + k] = target_rps
    offloaded = float(space.offload_fraction[0]) * target_rps
    if offloaded > 0:
        scale[2 * j_count + 3 + k :] = offloaded
    return scale


def _scaled(m: Milp, scale: FloatArray) -> Milp:
    """`m` in the columns x' = x / scale (its optimum, times scale, is m's)."""
    return dataclasses.replace(
        m, c=m.c * scale, a_values=m.a_values * scale[m.a_cols],
        var_lower=m.var_lower / scale, var_upper=m.var_upper / scale,
    )  # fmt: skip


def solve_procure_monolithic(
    space: ProcureSpace, target_rps: float | None = None, budget_usd_per_hour: float | None = None
) -> ProcurePoint | None:
    """The whole MILP in one solve (what --export-model writes; slower than `solve_procure`)."""
    milp = build_procure_milp(space, target_rps, budget_usd_per_hour)
    x = solve_milp(milp, Solver.HIGHS, PROCURE_REL_GAP)
    return None if x is None else point_from_solution(space, x)


def write_model(m: Milp, path: Path) -> None:
    """Write `m` for another solver: MPS (fixed names x0.., minimise) for a `.mps` path, CPLEX
    LP format for `.lp`. Variable order: n_j, z_j, n_p, n_d, y_k, Λ_k, Λ_jk (module docstring)."""
    problem, _ = to_pulp(m, "prfaas_procure")
    if path.suffix.lower() == ".mps":
        problem.writeMPS(str(path))
    else:
        problem.writeLP(str(path))
