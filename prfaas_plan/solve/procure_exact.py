"""`procure` at the continuous optimum: the threshold is not a grid point but the exact one.

The procurement MILP (solve/procure_milp.py) fixes the threshold to one of K candidates and
chooses the discrete things (sites, instance counts, the PD split) there. Which candidates
suffice? With X the served rate, n_p the PD-P instances, and per request

    h(t)   = s(t) / c(t)        PD-P work of the local share   (non-decreasing in t)
    W_j(t) = p(t) / a_j(t)      site j's work of the offloaded share (non-increasing)
    E_S(t) = p(t) S_kv(l_long)  KV bytes crossing the link    (non-increasing: S_kv is affine)

a deployment serves X at t iff X h(t) <= n_p, X q_j W_j(t) <= n_j and X q_j E_S(t) <= B_j for
the shares q_j of the offloaded traffic each site takes (Σ q_j = 1), and θ_d n_d >= X; its link
volume costs Σ_j π_j q_j E_S(t) X. Raising t relaxes every site row and lowers the volume, and
is limited only by the PD-P row. So any deployment serving X at t serves it, no dearer, at

    t_n(X) = max { t : X h(t) <= n }   for n = n_p,

and the cheapest deployment reaching X lies at one of t_0(X) = 0 (everything offloaded),
t_1(X), ..., t_N(X) (N = max_pd_instances; t = inf where the PD cluster takes everything):
`balance_thresholds`, at most N + 1 MILPs of one threshold each, pruned by their bounds
(solve_procure). These are the thresholds where PD prefill saturates exactly, the balance
points of the model (reference eq. 7) for each PD-P count.

A budget: solve/procure_budget.py, which asks this module for targets.

The argument needs h non-decreasing and W_j non-increasing. The first always holds in exact
mode and for increasing latency curves in paper mode; W_j = E[T_j(L); L > t] always falls in
exact mode, but in paper mode p T_j(E[L | L > t]) can rise slightly (convex T, long tails:
up to ~1e-7 relative at the top of the case study's range with an H20 PrfaaS site).
`monotone_violation` measures it on a fine grid; where it is not monotone the grid thresholds
are added to the candidates and the result says the threshold is exact only to that measure.
Units: req/s, $/h, tokens, bytes.
"""

import heapq
import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import ServingSystem, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import Mode
from prfaas_plan.solve.procure_bounds import pd_counts, single_site_target, target_lower_bounds
from prfaas_plan.solve.procure_milp import solve_one, solve_procure
from prfaas_plan.solve.procure_space import ProcurePoint, ProcureSpace, SiteRates
from prfaas_plan.solve.search import milp_threshold_grid

BISECTION_STEPS = 80  # halves a log-threshold interval of ln(2^20) to ~1e-23: machine precision
MONOTONE_GRID_POINTS = 1025
MONOTONE_RTOL = 1e-12  # rises below this are rounding, not a property of the curves
# a run of thresholds whose bound is within this of the best cost found cannot beat it by more
# than the comparisons of the tests (1e-9) can see
PRUNE_RTOL = 1e-12
LONG_RUN = 64  # thresholds: a run this long is halved rather than searched best first


@dataclass(frozen=True)
class SitePrices:
    """One candidate PrfaaS site's prices and size limit (its curves are in its system)."""

    name: str
    usd_per_instance_hour: float  # P_j
    fixed_usd_per_hour: float  # F_j, paid when the site has an instance
    usd_per_gb: float  # π_j, per GB (10^9 bytes) of KV carried
    max_instances: int  # U_j


@dataclass(frozen=True)
class ProcureModel:
    """Everything procure's capacity terms depend on, so that they can be evaluated at any
    threshold: the PD cluster's system (its prefill curve, decode, output), each site's system
    (the PD cluster's with the site's prefill curve and link bandwidth), the workload, the
    service-time mode and the prices."""

    pd_system: ServingSystem
    site_systems: tuple[ServingSystem, ...]
    sites: tuple[SitePrices, ...]
    workload: LengthDistribution
    mode: Mode
    pd_usd_per_instance_hour: float
    max_pd_instances: int

    def space(self, thresholds_tokens: FloatArray) -> ProcureSpace:
        """The MILP's coefficients at `thresholds_tokens` (nan terms, where a role serves
        nobody, as 0)."""
        grid = np.asarray(thresholds_tokens, float)
        pd = rates(self.pd_system, self.workload, grid, 1, 1, 1, self.mode)
        site_rates = []
        for prices, system in zip(self.sites, self.site_systems, strict=True):
            r = rates(system, self.workload, grid, 1, 1, 1, self.mode)
            kv_gb = units.bytes_to_gb(np.nan_to_num(np.asarray(r.long_kv_cache_bytes, float)))
            site_rates.append(SiteRates(
                name=prices.name,
                compute_rps_per_instance=np.nan_to_num(np.asarray(r.prfaas_compute_rps, float)),
                link_rps=np.nan_to_num(np.asarray(r.prfaas_link_rps, float)),
                usd_per_instance_hour=prices.usd_per_instance_hour,
                fixed_usd_per_hour=prices.fixed_usd_per_hour,
                usd_per_offloaded_request=kv_gb * prices.usd_per_gb,
                max_instances=prices.max_instances,
            ))  # fmt: skip
        return ProcureSpace(
            thresholds_tokens=grid,
            offload_fraction=np.asarray(pd.offload_fraction, float),
            # the local share from the distribution itself, not 1 − p (see sizing_milp)
            local_fraction=np.asarray(self.workload.split(grid)[0][0], float),
            pd_prefill_rps_per_instance=np.nan_to_num(np.asarray(pd.pd_prefill_rps, float)),
            decode_rps_per_instance=self.pd_system.decode_rps_per_instance,
            pd_usd_per_instance_hour=self.pd_usd_per_instance_hour,
            max_pd_instances=self.max_pd_instances,
            sites=tuple(site_rates),
        )


@dataclass(frozen=True)
class ExactPoint:
    """A procure optimum: the point and the space (its candidate thresholds) it indexes."""

    space: ProcureSpace
    point: ProcurePoint
    # monotone_violation of the model (0: the threshold is exact, module docstring)
    monotone_violation: float = 0.0
    proven: bool = True  # False: the budget search stopped at ASCENT_MAX_STEPS

    @property
    def threshold_tokens(self) -> float:
        return float(self.space.thresholds_tokens[self.point.threshold_index])


def _local_work(model: ProcureModel, t: FloatArray) -> FloatArray:
    """h(t) = s(t) / c(t): PD-P instance-seconds per request of the local share (0 where none)."""
    s = model.workload.split(t)[0][0]
    c = rates(model.pd_system, model.workload, t, 0, 1, 1, model.mode).pd_prefill_rps
    with np.errstate(divide="ignore", invalid="ignore"):
        work: FloatArray = np.where(s > 0, s / c, 0.0)
    return work


def log_range(workload: LengthDistribution) -> tuple[float, float]:
    return math.log(workload.min_tokens), math.log(workload.max_tokens)


def monotone_violation(model: ProcureModel) -> float:
    """The largest relative rise of any site's W_j(t) or fall of h(t) between neighbouring
    thresholds of a fine grid (0 when the module docstring's argument holds)."""
    candidates = model.workload.threshold_candidates()
    if candidates is not None:
        t = np.asarray(candidates, float)
    else:
        t = np.exp(np.linspace(*log_range(model.workload), MONOTONE_GRID_POINTS))
    worst = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        h = _local_work(model, t)
        fall = -np.diff(h) / h[1:]
        worst = max(worst, float(np.nanmax(fall, initial=0.0)))
        for system in model.site_systems:
            r = rates(system, model.workload, t, 1, 1, 1, model.mode)
            w = r.offload_fraction / r.prfaas_compute_rps
            rise = np.diff(w) / w[:-1]
            worst = max(worst, float(np.nanmax(np.where(np.isfinite(rise), rise, 0.0), initial=0)))
    return worst if worst > MONOTONE_RTOL else 0.0


def balance_thresholds(model: ProcureModel, target_rps: float) -> FloatArray:
    """t_n(X) for n = 0..N (module docstring), sorted and distinct: 0 (everything offloaded),
    the largest t with X h(t) <= n for each n >= 1 (bisection on ln t to machine precision, or
    the largest distinct length of a discrete distribution), inf where n serves every length."""
    x = float(target_rps)
    n = np.arange(1, model.max_pd_instances + 1, dtype=float)
    budget = n / x  # PD-P work per request n instances allow at X
    w = model.workload
    full = float(_local_work(model, np.array([np.inf]))[0])
    candidates = w.threshold_candidates()
    if candidates is not None:
        lengths = np.asarray(candidates, float)
        h = _local_work(model, lengths)
        # h is non-decreasing; the last length whose h fits (none: only below every length)
        last = np.searchsorted(h, budget * (1 + 1e-12), side="right") - 1
        t = np.where(last >= 0, lengths[np.clip(last, 0, None)], 0.0)
    else:
        lo, hi = (np.full(n.size, v) for v in log_range(w))
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            fits = _local_work(model, np.exp(mid)) <= budget
            lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid)
            if np.all(hi - lo <= 4 * np.spacing(hi)):
                break
        t = np.exp(lo)
    t = np.where(full <= budget, np.inf, t)
    return np.unique(np.concatenate([[0.0], t]))


def _candidates(model: ProcureModel, target_rps: float, violation: float) -> FloatArray:
    thresholds = balance_thresholds(model, target_rps)
    if violation > 0:
        thresholds = np.unique(np.concatenate([thresholds, milp_threshold_grid(model.workload)]))
    return thresholds


def exact_target(
    model: ProcureModel, target_rps: float, violation: float | None = None
) -> ExactPoint | None:
    """The cheapest deployment reaching `target_rps` at any threshold (module docstring);
    None when none does. `violation`: monotone_violation(model), if already known."""
    violation = monotone_violation(model) if violation is None else violation
    space = model.space(_candidates(model, target_rps, violation))
    search = solve_procure if violation > 0 else _interval_search
    point = search(space, target_rps=target_rps)
    return None if point is None else ExactPoint(space, point, violation)


def _interval_search(space: ProcureSpace, target_rps: float) -> ProcurePoint | None:
    """The cheapest point of `space` (thresholds increasing) reaching `target_rps`, by branch
    and bound over runs of thresholds instead of one MILP each: at t_k the cost is PD(k), the
    fewest PD instances' price (non-decreasing in k: n_p = ceil(X h(t_k))), plus S(k), what the
    sites cost to carry the offloaded traffic (non-increasing in k: module docstring). A run
    [i, j] not yet solved costs at least PD(i) + S(j + 1) (S of the nearest solved threshold
    above it, 0 if none) and at least the least of the MILP's own bounds on it
    (`target_lower_bounds`). Runs are split at their middle, lowest bound first, until every
    run's bound reaches the best point found (the closed-form single-site optimum to begin)."""
    x = float(target_rps)
    size = space.thresholds_tokens.size
    n_d, n_p = pd_counts(space, np.full(size, x))
    pd_usd = space.pd_usd_per_instance_hour * (n_d + n_p)
    feasible = np.flatnonzero(n_d + n_p <= space.max_pd_instances)  # a prefix: n_p rises
    best = single_site_target(space, x)
    if feasible.size == 0:
        return best
    own = target_lower_bounds(space, x)

    def bound(i: int, j: int, beyond_usd: float) -> float:  # run [i, j]; beyond: S(j + 1)
        return max(float(pd_usd[i]) + beyond_usd, float(np.min(own[i : j + 1])))

    last = int(feasible[-1])
    runs = [(bound(0, last, 0.0), 0, last, 0.0)] if math.isfinite(bound(0, last, 0.0)) else []
    while runs:
        lower, i, j, beyond_usd = heapq.heappop(runs)
        if best is not None and lower >= best.usd_per_hour * (1 - PRUNE_RTOL):
            break  # the lowest bound left: no run can beat the best point
        # a long run is halved (its ends' bound tightens fastest); a short one visited at its
        # most promising threshold by the MILP's own bounds (best first, as solve_procure)
        m = (i + j) // 2 if j - i >= LONG_RUN else i + int(np.argmin(own[i : j + 1]))
        point = solve_one(space, m, x, None)
        if point is None:  # the sites cannot carry t_m's offload: nor any lower threshold's
            site_usd = math.inf
        else:
            site_usd = max(point.usd_per_hour - float(pd_usd[m]), 0.0)
            if best is None or point.usd_per_hour < best.usd_per_hour:
                best = point
        for a, b, right in ((i, m - 1, site_usd), (m + 1, j, beyond_usd)):
            lower = bound(a, b, right) if a <= b else math.inf
            if math.isfinite(lower):  # inf: no threshold of the run reaches the target
                heapq.heappush(runs, (lower, a, b, right))
    return best
