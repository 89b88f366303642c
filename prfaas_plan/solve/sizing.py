"""Size the PrfaaS cluster: the fewest PrfaaS instances that reach a throughput target, or the
best throughput under a cap, for a given PD cluster, link and workload.

For a fixed threshold t_k every capacity term is linear in the instance counts and in Λ, so
choosing among K candidate thresholds is a mixed-integer linear program. With one binary y_k per
threshold (Σ y_k = 1) and one continuous Λ_k that may be positive only where y_k = 1:

    p_k Λ_k       <= n_prfaas / T_prfaas,k           (PrfaaS compute)
    p_k Λ_k       <= (B_out / S_kv,k) · y_k          (link)
    (1 − p_k) Λ_k <= n_p / T_pd,k                    (PD prefill)
    Λ_k           <= n_d · θ_d                       (PD decode)
    Λ_k           <= M · y_k,   n_p + n_d = N_pd,  n_d >= 1,  Λ = Σ_k Λ_k

Target mode minimises n_prfaas subject to Λ >= target (ties: larger Λ); cap mode maximises Λ
subject to n_prfaas <= cap (ties: fewer instances). The MILP works on a threshold grid; the
chosen instance counts are then re-optimised with the exact threshold of `optimize`, and one
instance fewer is re-checked so that grid resolution can never cost an instance.

Solvers: HiGHS through scipy.optimize.milp (default) or CBC through pulp (a cross-check). Both
are imported only here, only when sizing is asked for.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import Configuration, Evaluation, ServingSystem, evaluate, rates
from prfaas_plan.analytic.distributions import LengthDistribution
from prfaas_plan.choices import Mode, Solver
from prfaas_plan.errors import ConfigError, InfeasibleError, SolverError
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware

MILP_THRESHOLDS = 129
MAX_OBSERVED_THRESHOLDS = 2000
MILP_TIME_LIMIT_S = 60.0
MILP_REL_GAP = 1e-9
RTOL = 1e-9


@dataclass(frozen=True)
class SizingResult:
    evaluation: Evaluation  # the sized deployment, threshold re-optimised exactly
    target_rps: float | None
    max_prfaas_instances: int | None
    solver: Solver
    milp_thresholds: int  # K, the size of the MILP's threshold grid
    milp: Evaluation  # the MILP's own choice (counts and grid threshold), before refinement

    @property
    def milp_prfaas_instances(self) -> int:
        return self.milp.configuration.prfaas_instances


@dataclass(frozen=True)
class _Milp:
    """min c·x  s.t.  row_lower <= A x <= row_upper,  bounds, integrality (scipy.milp layout)."""

    c: FloatArray
    a: FloatArray
    row_lower: FloatArray
    row_upper: FloatArray
    var_lower: FloatArray
    var_upper: FloatArray
    integrality: FloatArray


def milp_threshold_grid(workload: LengthDistribution) -> FloatArray:
    """Thresholds the MILP may choose: 'offload all' (0), a grid over the support, 'offload none'."""
    observed = workload.threshold_candidates()
    if observed is not None:
        if observed.size > MAX_OBSERVED_THRESHOLDS:
            observed = np.quantile(observed, np.linspace(0, 1, MAX_OBSERVED_THRESHOLDS))
        inner = observed
    else:
        inner = np.geomspace(workload.min_tokens, workload.max_tokens, MILP_THRESHOLDS)
    return np.unique(np.concatenate([[0.0], inner, [np.inf]]))


def _build(
    system: ServingSystem,
    workload: LengthDistribution,
    pd_instances: int,
    mode: Mode,
    target_rps: float | None,
    max_prfaas: int | None,
    prfaas_upper: int,
) -> tuple[FloatArray, _Milp]:
    """The MILP of the module docstring on `milp_threshold_grid`: (thresholds, program)."""
    thresholds = milp_threshold_grid(workload)
    k = thresholds.size
    unit = rates(system, workload, thresholds, 1, 1, 1, mode)  # per-instance rates at each t_k
    p = unit.offload_fraction
    prfaas_per_instance = np.nan_to_num(unit.prfaas_compute_rps, nan=0.0)
    link_rps = np.nan_to_num(unit.prfaas_link_rps, nan=0.0)
    pd_prefill_per_instance = np.nan_to_num(unit.pd_prefill_rps, nan=0.0)
    decode_per_instance = system.decode_rps_per_instance
    big_m = decode_per_instance * pd_instances  # Λ can never exceed all-decode capacity

    n_vars = 3 + 2 * k  # n_prfaas, n_p, n_d, y_1..K, Λ_1..K
    y = 3 + np.arange(k)
    lam = 3 + k + np.arange(k)
    rows = np.arange(k)
    a = np.zeros((5 * k + 2, n_vars))
    a[rows, lam] = p
    a[rows, 0] = -prfaas_per_instance
    a[k + rows, lam] = p
    a[k + rows, y] = -link_rps
    a[2 * k + rows, lam] = 1 - p
    a[2 * k + rows, 1] = -pd_prefill_per_instance
    a[3 * k + rows, lam] = 1.0
    a[3 * k + rows, 2] = -decode_per_instance
    a[4 * k + rows, lam] = 1.0
    a[4 * k + rows, y] = -big_m
    row_lower = np.full(5 * k + 2, -np.inf)
    row_upper = np.zeros(5 * k + 2)
    a[5 * k, y] = 1.0  # choose exactly one threshold
    row_lower[5 * k] = row_upper[5 * k] = 1.0
    a[5 * k + 1, 1:3] = 1.0  # n_p + n_d = N_pd
    row_lower[5 * k + 1] = row_upper[5 * k + 1] = pd_instances
    # a threshold that sends any request to a pool needs an instance there (y_k <= n): exact in
    # the model, and it stops a solver from hiding a tiny share (e.g. 1 - p = 4e-7) served by
    # zero instances inside its feasibility tolerance
    guard = np.zeros((2 * k, n_vars))
    guard[rows, y] = guard[k + rows, y] = 1.0
    guard[rows, 0] = np.where(p > 0, -1.0, 0.0)
    guard[k + rows, 1] = np.where(1 - p > 0, -1.0, 0.0)
    a = np.vstack([a, guard])
    row_lower = np.append(row_lower, np.full(2 * k, -np.inf))
    row_upper = np.append(row_upper, np.where(np.concatenate([p > 0, 1 - p > 0]), 0.0, 1.0))

    c = np.zeros(n_vars)
    if target_rps is not None:
        extra = np.zeros((1, n_vars))
        extra[0, lam] = 1.0
        a = np.vstack([a, extra])
        row_lower = np.append(row_lower, target_rps)
        row_upper = np.append(row_upper, np.inf)
        c[0] = 1.0
        c[lam] = -0.5 / big_m  # tie-break towards larger Λ; < 1 instance in total
    else:
        c[lam] = -1.0
        c[0] = 1e-6 * big_m / max(prfaas_upper, 1)  # tie-break towards fewer instances
    var_lower = np.zeros(n_vars)
    var_upper = np.full(n_vars, np.inf)
    var_upper[0] = prfaas_upper if max_prfaas is None else max_prfaas
    var_upper[1] = pd_instances - 1
    var_lower[2] = 1
    var_upper[2] = pd_instances
    var_upper[y] = 1
    integrality = np.zeros(n_vars)
    integrality[: 3 + k] = 1
    return thresholds, _Milp(c, a, row_lower, row_upper, var_lower, var_upper, integrality)


def _solve_highs(m: _Milp) -> FloatArray | None:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

    result = milp(
        m.c,
        constraints=LinearConstraint(csr_array(m.a), m.row_lower, m.row_upper),
        integrality=m.integrality,
        bounds=Bounds(m.var_lower, m.var_upper),
        options={"time_limit": MILP_TIME_LIMIT_S, "mip_rel_gap": MILP_REL_GAP, "disp": False},
    )
    if result.status == 2:  # infeasible
        return None
    if result.status != 0 or result.x is None:
        raise SolverError(
            f"HiGHS (scipy.optimize.milp) did not solve the sizing MILP: {result.message}"
        )
    x: FloatArray = np.asarray(result.x, dtype=np.float64)
    return x


def _solve_cbc(m: _Milp) -> FloatArray | None:
    import warnings

    import pulp

    problem = pulp.LpProblem("prfaas_sizing", pulp.LpMinimize)
    x = [
        problem.add_variable(
            f"x{i}",
            lowBound=None if math.isinf(lo) else lo,
            upBound=None if math.isinf(hi) else hi,
            cat=pulp.LpInteger if integer else pulp.LpContinuous,
        )
        for i, (lo, hi, integer) in enumerate(
            zip(m.var_lower, m.var_upper, m.integrality, strict=True)
        )
    ]
    problem += pulp.lpSum(float(ci) * x[i] for i, ci in enumerate(m.c) if ci != 0)
    for r in range(m.a.shape[0]):
        (cols,) = np.nonzero(m.a[r])
        expr = pulp.lpSum(float(m.a[r, i]) * x[i] for i in cols)
        if m.row_lower[r] == m.row_upper[r]:
            problem += expr == float(m.row_upper[r])
        else:
            if np.isfinite(m.row_upper[r]):
                problem += expr <= float(m.row_upper[r])
            if np.isfinite(m.row_lower[r]):
                problem += expr >= float(m.row_lower[r])
    with warnings.catch_warnings():
        # pulp 3.3 deprecates its bundled CBC for 4.0; it is still the one CBC that needs no
        # extra install, and it is only our cross-check back-end
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=MILP_TIME_LIMIT_S, gapRel=MILP_REL_GAP)
    status = problem.solve(solver)
    if pulp.LpStatus[status] == "Infeasible":
        return None
    if pulp.LpStatus[status] != "Optimal":
        raise SolverError(
            f"CBC (pulp) did not solve the sizing MILP: status {pulp.LpStatus[status]}"
        )
    return np.array([v.value() or 0.0 for v in x])


def _best_with(
    system: ServingSystem,
    workload: LengthDistribution,
    n_prfaas: int,
    pd_instances: int,
    mode: Mode,
) -> Evaluation:
    return optimize_fixed_hardware(system, workload, SearchSpace(n_prfaas, pd_instances), mode)


def _infeasible(
    system: ServingSystem,
    workload: LengthDistribution,
    pd_instances: int,
    mode: Mode,
    target_rps: float | None,
    prfaas_upper: int,
    cap: int | None,
) -> InfeasibleError:
    limit = prfaas_upper if cap is None else cap
    best = _best_with(system, workload, limit, pd_instances, mode)
    bound = " + ".join(best.bounds)
    advice = {
        "pd_decode": "add PD instances",
        "prfaas_link": "buy more link bandwidth (link_bandwidth_bytes_per_s)",
        "pd_prefill": "add PD instances",
        "prfaas_compute": "allow more PrfaaS instances (max_prfaas_instances)",
    }[best.bounds[0]]
    within = (
        f"with at most {limit} PrfaaS instances"
        if cap is not None
        else "with any PrfaaS cluster size"
    )
    return InfeasibleError(
        f"no plan reaches {target_rps:.4g} req/s {within}: best is "
        f"{best.system_throughput_rps:.4g} req/s, bound by {bound}; {advice} or relax target_rps",
        parameter="target_rps",
    )


def _check_goal(target_rps: float | None, max_prfaas_instances: int | None) -> None:
    if target_rps is None and max_prfaas_instances is None:
        raise ConfigError(
            "sizing needs target_rps or max_prfaas_instances (or both)", parameter="target_rps"
        )
    if target_rps is not None and not (target_rps > 0 and math.isfinite(target_rps)):
        raise ConfigError(
            f"target_rps must be a finite number > 0, got {target_rps:g}", parameter="target_rps"
        )
    if max_prfaas_instances is not None and max_prfaas_instances < 0:
        raise ConfigError(
            f"max_prfaas_instances must allow >= 0 instances, got {max_prfaas_instances}",
            parameter="max_prfaas_instances",
        )


def _prfaas_upper(
    system: ServingSystem,
    workload: LengthDistribution,
    target_rps: float | None,
    cap: int | None,
) -> int:
    """An upper bound on the PrfaaS instances worth considering: p_k · T_prfaas,k <=
    T_prfaas(max length), so ceil(target · T_prfaas(max)) + 1 always cover the target; the cap
    if it is lower (or if there is no target)."""
    if target_rps is None:
        assert cap is not None  # _check_goal
        return cap
    worst_service_s = float(system.prfaas_prefill_latency(workload.max_tokens))
    upper = math.ceil(target_rps * worst_service_s) + 1
    return upper if cap is None else min(upper, cap)


def _fewest_reaching(
    n: int, best_with: Callable[[int], Evaluation], target_rps: float
) -> Evaluation:
    """From the MILP's n instances, the fewest whose exact-threshold plan still reaches the
    target (the exact threshold can only help: try fewer instances than the grid needed)."""
    best = best_with(n)
    while n > 0:
        fewer = best_with(n - 1)
        if fewer.system_throughput_rps < target_rps * (1 - RTOL):
            break
        n, best = n - 1, fewer
    if best.system_throughput_rps < target_rps * (1 - RTOL):  # a solver tolerance, at most
        raise SolverError(
            f"the sizing MILP chose {n} PrfaaS instances but they reach only "
            f"{best.system_throughput_rps:.6g} req/s < target_rps {target_rps:g}",
            parameter="target_rps",
        )
    return best


def size_prfaas_cluster(
    system: ServingSystem,
    workload: LengthDistribution,
    pd_instances: int,
    *,
    target_rps: float | None = None,
    max_prfaas_instances: int | None = None,
    mode: Mode = Mode.PAPER,
    solver: Solver = Solver.HIGHS,
) -> SizingResult:
    """Smallest PrfaaS cluster reaching `target_rps` (optionally under a cap), or, with only a
    cap, the highest Λ_max under it."""
    _check_goal(target_rps, max_prfaas_instances)
    SearchSpace(0, pd_instances)  # validates pd_instances
    prfaas_upper = _prfaas_upper(system, workload, target_rps, max_prfaas_instances)
    thresholds, model = _build(
        system, workload, pd_instances, mode, target_rps, max_prfaas_instances, prfaas_upper
    )
    x = (_solve_highs if solver is Solver.HIGHS else _solve_cbc)(model)
    if x is None:
        raise _infeasible(
            system, workload, pd_instances, mode, target_rps, prfaas_upper, max_prfaas_instances
        )
    k = 3 + int(np.argmax(x[3 : 3 + thresholds.size]))
    n_prfaas, n_p, n_d = (int(np.rint(v)) for v in x[:3])
    milp = evaluate(
        system, workload, Configuration(n_prfaas, n_p, n_d, float(thresholds[k - 3])), mode
    )

    def best_with(n: int) -> Evaluation:
        """Exact threshold and split for n instances; never worse than the MILP's own plan."""
        e = _best_with(system, workload, n, pd_instances, mode)
        if (
            n == milp.configuration.prfaas_instances
            and milp.system_throughput_rps > e.system_throughput_rps
        ):
            return milp
        return e

    if target_rps is not None:
        best = _fewest_reaching(milp.configuration.prfaas_instances, best_with, target_rps)
    else:
        # cap only: Λ never decreases with more instances, so the cap's Λ is the best; walk up
        # from the MILP's choice until the exact threshold reaches it
        assert max_prfaas_instances is not None  # _check_goal
        n = milp.configuration.prfaas_instances
        best = best_with(n)
        ceiling = best_with(max_prfaas_instances)
        while best.system_throughput_rps < ceiling.system_throughput_rps * (1 - RTOL):
            n += 1
            best = best_with(n)
    return SizingResult(
        evaluation=best,
        target_rps=target_rps,
        max_prfaas_instances=max_prfaas_instances,
        solver=solver,
        milp_thresholds=int(thresholds.size),
        milp=milp,
    )
