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
mode: max Σ_k Λ_k with cost <= B. The space and `brute_force`, which enumerates it, are
solve/procure_space.py's; the single-site answers and the bounds, solve/procure_bounds.py's.
Units: req/s, $/h, bytes.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import numpy.typing as npt

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.choices import Solver
from prfaas_plan.solve.procure_bounds import (
    budget_upper_bounds,
    single_site_budget,
    single_site_target,
    target_lower_bounds,
)
from prfaas_plan.solve.procure_space import (
    ProcurePoint,
    ProcureSpace,
    capacity_rps,
    cost_terms,
    site_caps,
    volume_split,
)
from prfaas_plan.solve.sizing_milp import Milp, solve_milp, solve_milp_exactly, to_pulp

# a cost (or throughput) within PROCURE_REL_GAP of the optimum is the optimum, and a row within
# PROCURE_FEASIBILITY_TOL of its bound holds (HiGHS' defaults, 1e-6 and 1e-6 to 1e-7, would let a
# deployment short of a target by 1e-7 pass for one reaching it; the exact threshold search of
# solve/procure_exact.py steps rates by 1e-10)
PROCURE_REL_GAP = 1e-11
PROCURE_FEASIBILITY_TOL = 1e-10  # HiGHS refuses (and ignores) any tighter


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
    caps_rps = np.array([np.minimum(s.compute_rps_per_instance * s.max_instances, s.link_rps)
                          for s in space.sites]).reshape(j_count, k)  # fmt: skip
    site_m = caps_rps.max(axis=1) if k else np.zeros(j_count)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam_m = np.minimum.reduce([
            np.full(k, big_m),
            np.where(space.local_fraction > 0, space.pd_prefill_rps_per_instance
                     * space.max_pd_instances / space.local_fraction, np.inf),
            np.where(space.offload_fraction > 0, caps_rps.sum(axis=0) / space.offload_fraction,
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
    lam_jk = np.where(np.array(n) > 0, np.clip(lam_jk, 0.0, site_caps(space, kk, n)), 0.0)
    volume = sum(
        units.per_s_to_per_hour(s.usd_per_offloaded_request[kk]) * r
        for s, r in zip(space.sites, lam_jk, strict=True)
    )
    cost = cost_terms(space, kk, n, n_p, n_d) + volume
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
    upper = budget_upper_bounds(space, budget_usd_per_hour)
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
            volume, shares = volume_split(one, 0, n, offloaded)
            usd = cost_terms(one, 0, n, point.pd_prefill_instances, point.pd_decode_instances)
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
