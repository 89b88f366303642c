"""`procure` within a budget at the continuous optimum: the most throughput a budget buys, and
the cheapest deployment serving it.

A budget B: the most throughput within B is the largest X whose cheapest deployment costs
<= B (that cost never falls as X grows). From a feasible deployment, `rate_within_budget`
finds the most its counts serve within B at the best continuous t (the end of its plateau of
C(X)). Whether that rate Λ is the answer one target says: Λ (1 + ASCENT_RTOL), solved as a
target; when no deployment reaches it within B, Λ is the optimum to ASCENT_RTOL. Otherwise the
search gallops above Λ (steps of 1/16, doubled while reached) until a rate is out of reach,
then bisects in ln X between the two; every rate out of reach is a certificate for all above
it, since C never falls. The answer is the cheapest deployment reaching Λ (the cheapest of the
highest-throughput plans).
Units: req/s, $/h, tokens.
"""

import dataclasses
import math

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.solve.procure_exact import (
    BISECTION_STEPS,
    ExactPoint,
    ProcureModel,
    exact_target,
    log_range,
    monotone_violation,
)
from prfaas_plan.solve.procure_space import ProcurePoint
from prfaas_plan.solve.search import COARSE_GRID_POINTS

# a rate within this of the optimum is the optimum: far below any printed digit, and the ascent
# of the budget mode steps by it when a deployment's rate cannot be raised further
ASCENT_RTOL = 1e-10
ASCENT_MAX_STEPS = 200
GALLOP_FIRST_STEP = 1 / 16  # the first relative step above a rate reached, doubled while reached


def _site_terms(
    model: ProcureModel, t: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """At thresholds t: p, s, c (PD-P req/s per instance), and per site (rows) a_j, b_j and
    the volume price of one offloaded req/s for an hour (w_j, $/h per req/s)."""
    space = model.space(t)
    a = np.array([s.compute_rps_per_instance for s in space.sites]).reshape(-1, t.size)
    b = np.array([s.link_rps for s in space.sites]).reshape(-1, t.size)
    w = np.array([units.per_s_to_per_hour(s.usd_per_offloaded_request) for s in space.sites])
    return (
        space.offload_fraction, space.local_fraction, space.pd_prefill_rps_per_instance,
        a, b, w.reshape(-1, t.size),
    )  # fmt: skip


def fixed_usd_per_hour(model: ProcureModel, point: ProcurePoint) -> float:
    """What a point's counts cost by the hour whatever it serves: PD and site instances and
    the ports of the sites it uses (its link volume excluded)."""
    sites = sum(
        s.usd_per_instance_hour * n + (s.fixed_usd_per_hour if n > 0 else 0.0)
        for s, n in zip(model.sites, point.site_instances, strict=True)
    )
    pd = model.pd_usd_per_instance_hour * (point.pd_prefill_instances + point.pd_decode_instances)
    return sites + pd


def _rate_at(
    model: ProcureModel, point: ProcurePoint, budget_usd_per_hour: float, t: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(G, U) at thresholds t for the point's counts within the budget: G = c n_p / s, the
    PD-P term (non-increasing in t), and U the least of the offloaded terms (the sites'
    capacity Σ_j min(a_j n_j, b_j) / p, and what the budget left after the counts pays of the
    link volume, cheapest $/GB first) and decode θ n_d (non-decreasing). Λ(t) = min(G, U)."""
    p, s, c, a, b, w = _site_terms(model, t)
    n = np.array(point.site_instances, float)[:, None]
    caps = np.where(n > 0, np.minimum(a * n, b), 0.0)  # offloaded req/s each site can carry
    left = budget_usd_per_hour - fixed_usd_per_hour(model, point)
    affordable = np.zeros(t.size)
    budget = np.full(t.size, left)
    # the same order at every t: w_j = π_j S_kv(l_long) x 3600
    for j in np.argsort([prices.usd_per_gb for prices in model.sites], kind="stable"):
        with np.errstate(divide="ignore", invalid="ignore"):
            take = np.where(w[j] > 0, np.minimum(caps[j], budget / w[j]), caps[j])
        take = np.clip(take, 0.0, None)
        affordable += take
        budget = budget - w[j] * take
    decode = model.pd_system.decode_rps_per_instance * point.pd_decode_instances
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(s > 0, c * point.pd_prefill_instances / s, np.inf)
        offloaded = np.where(p > 0, affordable / p, np.inf)
    u: FloatArray = np.minimum(offloaded, decode)
    if left < 0:
        u = np.zeros(t.size)
    return g, u


def rate_within_budget(
    model: ProcureModel, point: ProcurePoint, budget_usd_per_hour: float
) -> tuple[float, float]:
    """(Λ, t): the most the point's counts serve within the budget at the best threshold,
    max_t min(G(t), U(t)) of `_rate_at`: where the falling G meets the rising U (bisection on
    ln t to machine precision from the grid bracket where G − U changes sign), or at an end
    (t = 0: everything offloaded, t = inf: nothing). Every Λ returned is served at its t."""
    w = model.workload
    candidates = w.threshold_candidates()
    ends = np.array([0.0, np.inf])
    if candidates is not None:
        t = np.concatenate([ends, np.asarray(candidates, float)])
        g, u = _rate_at(model, point, budget_usd_per_hour, t)
        lam = np.minimum(g, u)
        best = int(np.argmax(lam))
        return float(lam[best]), float(t[best])
    grid = np.exp(np.linspace(*log_range(w), COARSE_GRID_POINTS))
    t = np.concatenate([ends, grid])
    g, u = _rate_at(model, point, budget_usd_per_hour, t)
    lam = np.minimum(g, u)
    best = int(np.argmax(lam))
    above = np.flatnonzero(g[2:] <= u[2:])  # G has fallen to U: the crossing is before this
    if above.size and above[0] > 0:
        lo, hi = math.log(grid[above[0] - 1]), math.log(grid[above[0]])
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            gm, um = _rate_at(model, point, budget_usd_per_hour, np.array([math.exp(mid)]))
            lo, hi = (mid, hi) if gm[0] > um[0] else (lo, mid)
            if hi - lo <= 4 * math.ulp(abs(hi)):
                break
        ends_t = np.exp(np.array([lo, hi]))
        g2, u2 = _rate_at(model, point, budget_usd_per_hour, ends_t)
        refined = np.minimum(g2, u2)
        k = int(np.argmax(refined))
        if refined[k] > lam[best]:
            return float(refined[k]), float(ends_t[k])
    return float(lam[best]), float(t[best])


def exact_budget(
    model: ProcureModel, budget_usd_per_hour: float, start: ExactPoint | None
) -> ExactPoint | None:
    """The highest rate within `budget_usd_per_hour` at any threshold, and the cheapest
    deployment reaching it (module docstring), ascending from `start` (a deployment within the
    budget, e.g. the grid's optimum); None when `start` is None or serves nothing."""
    if start is None or not start.point.served_rps > 0:
        return None
    violation = monotone_violation(model)
    lam = max(start.point.served_rps,
              rate_within_budget(model, start.point, budget_usd_per_hour)[0])  # fmt: skip
    last = start
    proven = False
    failed_rps = math.inf  # the least rate known out of reach within the budget
    step = GALLOP_FIRST_STEP
    tried_next = False  # lam (1 + ASCENT_RTOL) already tried for this lam
    reached = False  # the last target tried was reached
    for _ in range(ASCENT_MAX_STEPS):
        if failed_rps <= lam * (1 + ASCENT_RTOL):
            proven = True
            break
        if not (tried_next or reached):  # after a miss: is lam the answer? one target says
            goal, tried_next = lam * (1 + ASCENT_RTOL), True
        elif math.isinf(failed_rps):  # no bound above yet: gallop
            goal, step = lam * (1 + step), step * 2
        else:  # bisect (in ln X) between what is reached and what is not
            goal = math.sqrt(lam * failed_rps)
        found = exact_target(model, goal, violation)
        if found is None or found.point.usd_per_hour > budget_usd_per_hour * (1 + 1e-12):
            failed_rps, reached = min(failed_rps, goal), False
            continue
        last, reached, tried_next = found, True, False
        lam = max(goal, rate_within_budget(model, found.point, budget_usd_per_hour)[0])
    best = exact_target(model, lam, violation)
    if best is None:  # rounding at the very rate a deployment saturates: its last target
        best = last
    return dataclasses.replace(best, proven=proven, monotone_violation=violation)
