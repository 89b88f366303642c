"""The sizing MILP over thresholds × instance counts, its size, and its two solver back-ends.

For a fixed threshold t_k every capacity term is linear in the instance counts and in Λ, so
choosing among K candidate thresholds is a mixed-integer linear program. With one binary y_k per
threshold (Σ y_k = 1) and one continuous Λ_k that may be positive only where y_k = 1, p_k the
offloaded share P(L > t_k) and s_k = P(L <= t_k) the local one:

    p_k Λ_k       <= n_prfaas / T_prfaas,k           (PrfaaS compute)
    p_k Λ_k       <= (B_out / S_kv,k) · y_k          (link)
    s_k Λ_k       <= n_p / T_pd,k                    (PD prefill)
    Λ_k           <= n_d · θ_d                       (PD decode)
    Λ_k           <= M · y_k,   n_p + n_d = N_pd,  n_d >= 1,  Λ = Σ_k Λ_k
    y_k <= n_prfaas where p_k > 0,   y_k <= n_p where s_k > 0   (a served share needs a server)

Two objectives: "fewest PrfaaS instances with Λ >= target (ties: larger Λ)" and "largest Λ".
The matrix is kept sparse (COO triplets, numpy only): it has at most 16K + 2 nonzeros where a dense one
would hold (7K + 3) × (2K + 3) numbers (450 MB at K = 2,002).

Solvers: HiGHS through scipy.optimize.milp (default) or CBC through pulp (a cross-check), both
imported inside the functions that call them, so that loading this module costs nothing.
Units: Λ in requests/s, instance counts, thresholds in tokens.
"""

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray, IntArray
from prfaas_plan.analytic.capacity import ServingSystem, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import Mode, Solver
from prfaas_plan.errors import SolverError
from prfaas_plan.solve.quiet import solver_output_silenced

if TYPE_CHECKING:  # pulp is imported only where a problem is built
    import pulp

MILP_TIME_LIMIT_S = 60.0
MILP_REL_GAP = 1e-9


@dataclass(frozen=True)
class Milp:
    """min c·x  s.t.  row_lower <= A x <= row_upper, bounds, integrality; A as COO triplets."""

    c: FloatArray
    a_rows: IntArray
    a_cols: IntArray
    a_values: FloatArray
    row_lower: FloatArray
    row_upper: FloatArray
    var_lower: FloatArray
    var_upper: FloatArray
    integrality: FloatArray


@dataclass(frozen=True)
class MilpSize:
    """The size of the sizing MILP for K thresholds, known before it is built."""

    thresholds: int  # K
    variables: int  # 3 + 2K: n_prfaas, n_p, n_d, y_1..K, Λ_1..K
    binaries: int  # K
    constraints: int  # 7K + 3
    nonzeros: int  # at most 16K + 2


def milp_size(thresholds: int) -> MilpSize:
    """Variables, binaries, rows and (at most) nonzeros of the MILP on `thresholds` points."""
    k = thresholds
    return MilpSize(k, 3 + 2 * k, k, 7 * k + 3, 16 * k + 2)


def build_milp(
    system: ServingSystem,
    workload: LengthDistribution,
    thresholds: FloatArray,
    pd_instances: int,
    mode: Mode,
    prfaas_upper: int,
    target_rps: float | None,
) -> Milp:
    """The MILP of the module docstring: with `target_rps`, fewest n_prfaas reaching it (ties:
    larger Λ, weighted < 1 instance in total); without, largest Λ. n_prfaas <= prfaas_upper."""
    k = thresholds.size
    unit = rates(system, workload, thresholds, 1, 1, 1, mode)  # per-instance rates at each t_k
    p = unit.offload_fraction
    # the local share from the distribution itself, not 1 − p: at t = 0 that is 1.1e-16 in exact
    # mode, and would demand a PD prefill instance for nothing
    s = workload.split(thresholds)[0][0]
    prfaas_per_instance = np.nan_to_num(unit.prfaas_compute_rps, nan=0.0)
    link_rps = np.nan_to_num(unit.prfaas_link_rps, nan=0.0)
    pd_prefill_per_instance = np.nan_to_num(unit.pd_prefill_rps, nan=0.0)
    decode_per_instance = system.decode_rps_per_instance
    big_m = decode_per_instance * pd_instances  # Λ can never exceed all-decode capacity

    y = 3 + np.arange(k)
    lam = 3 + k + np.arange(k)
    r = np.arange(k)
    ones, zeros = np.ones(k), np.zeros(k, dtype=np.int64)
    blocks = [  # (row, column, value) per block of k rows
        (r, lam, p), (r, zeros, -prfaas_per_instance),
        (k + r, lam, p), (k + r, y, -link_rps),
        (2 * k + r, lam, s), (2 * k + r, zeros + 1, -pd_prefill_per_instance),
        (3 * k + r, lam, ones), (3 * k + r, zeros + 2, np.full(k, -decode_per_instance)),
        (4 * k + r, lam, ones), (4 * k + r, y, np.full(k, -big_m)),
        (5 * k + zeros, y, ones),  # choose exactly one threshold
        (np.array([5 * k + 1] * 2), np.array([1, 2]), np.ones(2)),  # n_p + n_d = N_pd
        # a threshold that sends any request to a pool needs an instance there (y_k <= n): exact
        # in the model, and it stops a solver from hiding a tiny share (e.g. s = 4e-7) served by
        # zero instances inside its feasibility tolerance
        (5 * k + 2 + r, y, ones), (5 * k + 2 + r, zeros, np.where(p > 0, -1.0, 0.0)),
        (6 * k + 2 + r, y, ones), (6 * k + 2 + r, zeros + 1, np.where(s > 0, -1.0, 0.0)),
    ]  # fmt: skip
    n_rows = 7 * k + 2
    row_lower = np.full(n_rows, -np.inf)
    row_upper = np.concatenate(
        [np.zeros(5 * k + 2), np.where(p > 0, 0.0, 1.0), np.where(s > 0, 0.0, 1.0)]
    )
    row_lower[5 * k] = row_upper[5 * k] = 1.0
    row_lower[5 * k + 1] = row_upper[5 * k + 1] = pd_instances

    c = np.zeros(3 + 2 * k)
    if target_rps is not None:
        blocks.append((np.full(k, n_rows), lam, ones))
        row_lower = np.append(row_lower, target_rps)
        row_upper = np.append(row_upper, np.inf)
        c[0] = 1.0
        c[lam] = -0.5 / big_m  # tie-break towards larger Λ; < 1 instance in total
    else:
        # Λ as a share of the all-decode ceiling, scaled so that HiGHS's absolute gap (1e-6)
        # is no coarser than the relative one (MILP_REL_GAP)
        c[lam] = -1e3 / big_m
    a_rows, a_cols, a_values = (np.concatenate(part) for part in zip(*blocks, strict=True))
    keep = a_values != 0
    var_lower = np.zeros(3 + 2 * k)
    var_upper = np.full(3 + 2 * k, np.inf)
    var_upper[0] = prfaas_upper
    var_upper[1] = pd_instances - 1
    var_lower[2] = 1
    var_upper[2] = pd_instances
    var_upper[y] = 1
    integrality = np.zeros(3 + 2 * k)
    integrality[: 3 + k] = 1
    return Milp(
        c, a_rows[keep].astype(np.int64), a_cols[keep].astype(np.int64), a_values[keep],
        row_lower, row_upper, var_lower, var_upper, integrality,
    )  # fmt: skip


def solve_milp(m: Milp, solver: Solver, rel_gap: float = MILP_REL_GAP) -> FloatArray | None:
    """The optimal x (to `rel_gap`), or None if the program is infeasible; SolverError on any
    other status."""
    return (_solve_highs if solver is Solver.HIGHS else _solve_cbc)(m, rel_gap)


def _solve_highs(m: Milp, rel_gap: float = MILP_REL_GAP) -> FloatArray | None:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    a = coo_array((m.a_values, (m.a_rows, m.a_cols)), shape=(m.row_lower.size, m.c.size))
    with solver_output_silenced():  # HiGHS may print a debug line on descriptor 1
        result = milp(
            m.c,
            constraints=LinearConstraint(a.tocsr(), m.row_lower, m.row_upper),
            integrality=m.integrality,
            bounds=Bounds(m.var_lower, m.var_upper),
            options={"time_limit": MILP_TIME_LIMIT_S, "mip_rel_gap": rel_gap, "disp": False},
        )
    if result.status == 2:  # infeasible
        return None
    if result.status != 0 or result.x is None:
        raise SolverError(
            f"HiGHS (scipy.optimize.milp) did not solve the sizing MILP: {result.message}"
        )
    x: FloatArray = np.asarray(result.x, dtype=np.float64)
    return x


def solve_milp_exactly(m: Milp, rel_gap: float, feasibility_tolerance: float) -> FloatArray | None:
    """`solve_milp` with HiGHS (highspy, the library scipy wraps) at a tighter row and
    integrality tolerance than scipy's milp lets one set (its defaults: 1e-7 and 1e-6, which
    let a solution fall short of a row by that much): the optimal x or None if infeasible;
    SolverError on any other status."""
    import highspy
    from scipy.sparse import coo_array

    a = coo_array((m.a_values, (m.a_rows, m.a_cols)), shape=(m.row_lower.size, m.c.size)).tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = m.c.size, m.row_lower.size
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = m.c, m.var_lower, m.var_upper
    lp.row_lower_, lp.row_upper_ = m.row_lower, m.row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
    lp.integrality_ = [kinds[int(i)] for i in m.integrality]
    # HiGHS 1.16 has been seen to report an optimal, valid solution holding a NaN (a column its
    # presolve removed), and to end in "Solve error" at a tight tolerance on a model it solves
    # at a looser one: each is tried again without presolve, then at looser tolerances (the
    # callers check what comes back against the exact model)
    attempts = [(tol, presolve) for tol in (feasibility_tolerance, 1e-9, 1e-7)
                if tol >= feasibility_tolerance for presolve in ("choose", "off")]  # fmt: skip
    last = "no attempt"
    for tolerance, presolve in attempts:
        with solver_output_silenced():  # the banner of the first instance goes to descriptor 1
            h = highspy.Highs()  # type: ignore[no-untyped-call]
            h.setOptionValue("output_flag", False)
            for option, value in (
                ("mip_rel_gap", rel_gap), ("mip_feasibility_tolerance", tolerance),
                ("primal_feasibility_tolerance", tolerance),
                ("time_limit", MILP_TIME_LIMIT_S), ("presolve", presolve),
            ):  # fmt: skip
                if h.setOptionValue(option, value) != highspy.HighsStatus.kOk:
                    # HiGHS keeps its default for a value out of its range, silently
                    raise SolverError(f"HiGHS refused its option {option} = {value!r}")
            h.passModel(lp)
            h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return None
        last = h.modelStatusToString(status)
        if status == highspy.HighsModelStatus.kTimeLimit:
            break  # a harder model, not a numerical accident: no second minute
        if status == highspy.HighsModelStatus.kOptimal:
            x: FloatArray = np.asarray(h.getSolution().col_value, dtype=np.float64)
            if np.isfinite(x).all():
                return x
            last = "a solution that is not a number"
    raise SolverError(f"HiGHS did not solve the procurement MILP: {last}")


def to_pulp(
    m: Milp, name: str = "prfaas_sizing"
) -> tuple["pulp.LpProblem", list["pulp.LpVariable"]]:
    """`m` as a pulp problem (to solve with CBC or to write as MPS/LP) and its variables."""
    import pulp

    problem = pulp.LpProblem(name, pulp.LpMinimize)
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
    order = np.argsort(m.a_rows, kind="stable")
    starts = np.searchsorted(m.a_rows[order], np.arange(m.row_lower.size + 1))
    for r in range(m.row_lower.size):
        entries = order[starts[r] : starts[r + 1]]
        expr = pulp.lpSum(float(m.a_values[i]) * x[m.a_cols[i]] for i in entries)
        if m.row_lower[r] == m.row_upper[r]:
            problem += expr == float(m.row_upper[r])
        else:
            if np.isfinite(m.row_upper[r]):
                problem += expr <= float(m.row_upper[r])
            if np.isfinite(m.row_lower[r]):
                problem += expr >= float(m.row_lower[r])
    return problem, x


def _solve_cbc(m: Milp, rel_gap: float = MILP_REL_GAP) -> FloatArray | None:

    import pulp

    problem, x = to_pulp(m)
    with warnings.catch_warnings():
        # pulp 3.3 deprecates its bundled CBC for 4.0; it is still the one CBC that needs no
        # extra install, and it is only our cross-check back-end
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=MILP_TIME_LIMIT_S, gapRel=rel_gap)
    status = problem.solve(solver)
    if pulp.LpStatus[status] == "Infeasible":
        return None
    if pulp.LpStatus[status] != "Optimal":
        raise SolverError(
            f"CBC (pulp) did not solve the sizing MILP: status {pulp.LpStatus[status]}"
        )
    return np.array([v.value() or 0.0 for v in x])
