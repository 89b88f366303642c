"""The routing relaxation: a linear program (cvxpy) that chooses, per fine length bin, the rate of
requests offloaded to PrfaaS, maximising Λ under the four capacity constraints. Its optimum
bounds every length-based routing policy for a split; its dual values are the shadow prices of
the capacities. Units: req/s, seconds, Gbit and Gbps (the link row is scaled to Gbps so that its
dual is in req/s per Gbps), instances.

With bins b of probability w_b, conditional mean service times T_f,b (PrfaaS), T_p,b (PD-P) and
KV size S_b (exact mode: E[T(L) | L in b]), and x_b the offloaded fraction of bin b:

    max Λ  s.t.  Λ Σ_b T_f,b x_b w_b <= N_prfaas                 (PrfaaS compute)
                 Λ Σ_b S_b x_b w_b   <= B_out                    (link)
                 Λ Σ_b T_p,b (1 − x_b) w_b <= N_p                (PD prefill)
                 Λ <= N_d · BS_max / (T_decode · L_out)          (PD decode),  0 <= x_b <= 1

which with s = 1/Λ and q_b = x_b w_b is the LP  min s  s.t.  Σ T_f,b q_b <= N_prfaas s, ...,
1 <= N_d r_d s, 0 <= q_b <= w_b: box bounds on q instead of rows, so the simplex stays fast
(measured, 8 splits of the case study: 2,000 bins ~0.2 s after cvxpy's import, 20,000
bins ~1.2 s; 100,000 took 50 s, hence MAX_BINS).

A threshold t is the policy x_b = 1 above t and 0 below: it is feasible whenever t is a bin
edge (the caller inserts the plan's t), so the LP optimum is never below the threshold optimum.
The shadow price of a capacity is ∂Λ*/∂capacity, from the row's dual (see solve_routing_lp).
cvxpy is imported inside the functions.
"""

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray, IntArray
from prfaas_plan.analytic.capacity import Bound, ServingSystem
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.errors import ConfigError, SolverError

DEFAULT_BINS = 2000
MIN_BINS, MAX_BINS = 2, 20_000
FRACTION_TOLERANCE = 1e-6  # an offloaded fraction within this of 0 or 1 counts as whole


@dataclass(frozen=True)
class Bins:
    """Length bins with their probability and conditional mean costs (exact mode)."""

    edges_tokens: FloatArray  # n + 1 increasing edges
    probability: FloatArray  # w_b = P(L in bin b)
    prfaas_service_time_s: FloatArray  # E[T_prfaas(L) | L in b]
    pd_prefill_service_time_s: FloatArray  # E[T_pd(L) | L in b]
    kv_cache_gbit: FloatArray  # E[S_kv(L) | L in b], Gbit


def length_bins(
    system: ServingSystem,
    workload: LengthDistribution,
    bins: int = DEFAULT_BINS,
    extra_edges_tokens: tuple[float, ...] = (),
) -> Bins:
    """`bins` geometric bins over the workload's range, plus `extra_edges_tokens` (e.g. a plan's
    threshold, so that its policy is feasible); bins holding no request are dropped."""
    if not MIN_BINS <= bins <= MAX_BINS:
        raise ConfigError(
            f"bins must be between {MIN_BINS} and {MAX_BINS}, got {bins}", parameter="bins"
        )
    lo, hi = float(workload.min_tokens), float(workload.max_tokens)
    extra = [e for e in extra_edges_tokens if np.isfinite(e) and lo < e < hi]
    edges = np.unique(np.concatenate([np.geomspace(max(lo, 1.0), hi, bins + 1), extra, [lo]]))
    moments = workload.partial_moments(edges[:-1], edges[1:])
    w = moments[0]
    keep = w > 1e-15
    m = moments[:, keep]
    kept_edges = np.concatenate([edges[:-1][keep], [edges[1:][keep][-1]]])

    def mean(values: FloatArray) -> FloatArray:
        out: FloatArray = values / m[0]
        return out

    return Bins(
        edges_tokens=kept_edges,
        probability=w[keep],
        prfaas_service_time_s=mean(system.prfaas_prefill_latency.expectation(m)),
        pd_prefill_service_time_s=mean(system.pd_prefill_latency.expectation(m)),
        # bytes -> Gbit is the factor of bytes/s -> Gbps
        kv_cache_gbit=units.bytes_per_s_to_gbps(mean(system.kv_cache_size.expectation(m))),
    )


@dataclass(frozen=True)
class RoutingOptimum:
    """The LP's optimum for one split: Λ, the routing and the shadow prices."""

    prfaas_instances: int
    pd_prefill_instances: int
    pd_decode_instances: int
    system_throughput_rps: float  # Λ* of the LP
    offloaded_fraction: FloatArray  # x_b = y_b / (Λ w_b) per bin, in [0, 1]
    edges_tokens: FloatArray
    # ∂Λ*/∂(right-hand side): req/s per PrfaaS instance, per Gbps, per PD-P instance, and per
    # PD-D instance (the decode row is Λ <= N_d · r_d, its dual scaled by r_d)
    shadow_prices: dict[Bound, float]

    @property
    def fractional_bins(self) -> IntArray:
        """Indices of bins routed partly to each side."""
        x = self.offloaded_fraction
        found: IntArray = np.flatnonzero((x > FRACTION_TOLERANCE) & (x < 1 - FRACTION_TOLERANCE))
        return found

    @property
    def is_threshold(self) -> bool:
        """The routing never offloads a shorter bin more than a longer one."""
        return bool(np.all(np.diff(self.offloaded_fraction) >= -FRACTION_TOLERANCE))


def _silence_highs_banner() -> None:
    """HiGHS >= 1.12 prints a copyright banner to the process's stdout (file descriptor 1, not
    Python's sys.stdout) when its first instance is made, whatever its options; stdout is the
    command's data, so the first instance is made here with descriptor 1 pointed at /dev/null."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return
    import highspy

    from prfaas_plan.solve.quiet import solver_output_silenced

    with solver_output_silenced():
        highspy.Highs()  # type: ignore[no-untyped-call]
    _BANNER_SHOWN = True


_BANNER_SHOWN = False


def solve_routing_lp(
    system: ServingSystem,
    bins: Bins,
    prfaas_instances: float,
    pd_prefill_instances: float,
    pd_decode_instances: float,
) -> RoutingOptimum:
    """The LP above for one split (instance counts may be fractional, for finite differences),
    solved as its scaled form by HiGHS through cvxpy (a vertex: few fractional bins)."""
    import cvxpy as cp

    w = bins.probability
    split = (round(prfaas_instances), round(pd_prefill_instances), round(pd_decode_instances))
    if prfaas_instances <= 0 and pd_prefill_instances <= 0:  # no prefill: nothing is served
        return RoutingOptimum(
            *split, system_throughput_rps=0.0, offloaded_fraction=np.zeros(w.size),
            edges_tokens=bins.edges_tokens, shadow_prices=dict.fromkeys(Bound, math.nan),
        )  # fmt: skip
    # a side without instances takes no request: its share is fixed by bounds, not by a row
    # that rounding could make infeasible (Σ T (w − q) <= 0 · s)
    lower = w if pd_prefill_instances <= 0 else np.zeros(w.size)
    upper = np.zeros(w.size) if prfaas_instances <= 0 else w
    q = cp.Variable(w.size, bounds=[lower, upper])  # offloaded share per bin, q_b = x_b w_b
    s = cp.Variable(nonneg=True)  # 1 / Λ
    r_d = system.decode_rps_per_instance
    bandwidth_gbps = units.bytes_per_s_to_gbps(system.link_bandwidth_bytes_per_s)
    rows: dict[Bound, Any] = {Bound.PD_DECODE: pd_decode_instances * r_d * s >= 1}
    if prfaas_instances > 0:
        rows[Bound.PRFAAS_COMPUTE] = bins.prfaas_service_time_s @ q <= prfaas_instances * s
        rows[Bound.PRFAAS_LINK] = bins.kv_cache_gbit @ q <= bandwidth_gbps * s
    if pd_prefill_instances > 0:
        rows[Bound.PD_PREFILL] = bins.pd_prefill_service_time_s @ (w - q) <= (
            pd_prefill_instances * s
        )
    problem = cp.Problem(cp.Minimize(s), list(rows.values()))
    try:
        _silence_highs_banner()
        problem.solve(solver=cp.HIGHS)  # type: ignore[no-untyped-call]
    except cp.error.SolverError as exc:
        raise SolverError(f"the routing LP failed in HiGHS: {exc}") from None
    if problem.status != cp.OPTIMAL or s.value is None or q.value is None:
        raise SolverError(f"the routing LP ended with status {problem.status!r}, not optimal")
    lam = 1.0 / float(s.value)
    # row i reads g_i(q) <= c_i · s with c_i = capacity_i (per unit of the resource): by the
    # envelope theorem ∂s*/∂capacity_i = −μ_i s*, so ∂Λ*/∂capacity_i = μ_i Λ* (per instance for
    # decode: its row carries r_d)
    per_unit = {Bound.PD_DECODE: r_d}
    duals = {
        bound: float(np.asarray(rows[bound].dual_value)) * lam * per_unit.get(bound, 1.0)
        for bound in rows
    }
    return RoutingOptimum(
        *split,
        system_throughput_rps=lam,
        offloaded_fraction=np.clip(q.value / w, 0.0, 1.0),
        edges_tokens=bins.edges_tokens,
        shadow_prices=_prices_at_zero(bins, duals, prfaas_instances, pd_prefill_instances),
    )


def _prices_at_zero(
    bins: Bins, duals: dict[Bound, float], prfaas_instances: float, pd_prefill_instances: float
) -> dict[Bound, float]:
    """Every capacity's price, those of a side with no instances (no row: its bins are fixed by
    bounds) included: the right derivative, what its first unit is worth. With the other rows'
    prices P (req/s per unit), moving a little of bin b to the empty side frees P_f T_f,b +
    P_l S_b (to PD-P) or P_p T_p,b (to PrfaaS) and costs T_p,b or T_f,b of it, so the first
    unit goes to the bin that frees most per second and is worth
        PD-P:   max_b (P_f T_f,b + P_l S_b) / T_p,b
        PrfaaS: max_b P_p T_p,b / T_f,b,   the link then idle (price 0).
    This is the least of the empty row's dual values, which the LP leaves undetermined (at
    N = 0 any larger value is dual-optimal too): the slope of Λ* for N from 0 upwards."""
    prices = dict(duals)
    if pd_prefill_instances <= 0:
        freed = (
            prices[Bound.PRFAAS_COMPUTE] * bins.prfaas_service_time_s
            + prices[Bound.PRFAAS_LINK] * bins.kv_cache_gbit
        )
        prices[Bound.PD_PREFILL] = float(np.max(freed / bins.pd_prefill_service_time_s))
    if prfaas_instances <= 0:
        freed = prices[Bound.PD_PREFILL] * bins.pd_prefill_service_time_s
        prices[Bound.PRFAAS_COMPUTE] = float(np.max(freed / bins.prfaas_service_time_s))
        prices[Bound.PRFAAS_LINK] = 0.0
    return {bound: prices[bound] for bound in Bound}


def routing_bound(
    system: ServingSystem,
    bins: Bins,
    prfaas_instances: int,
    pd_instances: int,
) -> tuple[RoutingOptimum, ...]:
    """The LP's optimum for every split N_p + N_d = pd_instances, N_d >= 1."""
    return tuple(
        solve_routing_lp(system, bins, prfaas_instances, n_p, pd_instances - n_p)
        for n_p in range(pd_instances)
    )
