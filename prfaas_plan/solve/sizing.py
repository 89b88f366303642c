"""Size the PrfaaS cluster: the fewest PrfaaS instances that reach a throughput target, or the
fewest that reach the best throughput under a cap, for a given PD cluster, link and workload.

The MILP over thresholds × counts (solve/sizing_milp.py) works on a threshold grid; its choice is
then refined with the exact threshold of `optimize` (optimize_fixed_hardware):

- target mode: MILP "fewest n_prfaas with Λ >= target (ties: larger Λ)"; then the fewest n whose
  exact Λ_max(n) >= target · (1 − RTOL), searched downwards from the MILP's n (the exact
  threshold can only help), so grid resolution never costs an instance.
- cap mode (no target): lexicographic, because a tie-break weight in one objective can fall
  below the solver's gap (it did: all allowed instances on a decode-bound plateau). Phase 1
  maximises Λ under n_prfaas <= cap; phase 2 minimises n_prfaas with Λ >= Λ₁ (1 − MILP_RTOL).
  Then Λ* = Λ_max(cap) exactly, and the answer is the fewest n with Λ_max(n) >= Λ* (1 − RTOL).
  Λ_max(n) never decreases in n, so that n is found by galloping from the MILP's n and bisecting
  (O(log cap) exact evaluations), and a larger cap cannot change it once Λ* is reached.

Sizes are bounded before anything is built: caps and targets by plausible.py, the MILP by
plausible.MAX_SIZING_MILP_BINARIES. Units: Λ and targets in requests/s.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.analytic.capacity import (
    Bound,
    Configuration,
    Evaluation,
    ServingSystem,
    evaluate,
)
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import Mode, Solver
from prfaas_plan.errors import ConfigError, InfeasibleError, SolverError
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware

# A count whose exact Λ_max is within RTOL (relative) of the goal reaches it: the exact optimiser
# is accurate to ~1e-10 (threshold root to ROOT_RTOL), far below any printed digit, while a
# plateau (decode- or link-bound) is flat to the last bit, so 1e-9 sees it whatever the cap.
RTOL = 1e-9
# Phase 2 of the cap mode accepts Λ within MILP_RTOL of phase 1's: HiGHS and CBC satisfy rows to
# ~1e-7 to 1e-9, so phase 1's Λ may sit that far above what a fewer-instance plan can show.
MILP_RTOL = 1e-6


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
    if target_rps is None:  # cap mode: only 1 PD instance (decoding) and no PrfaaS instance
        return InfeasibleError(
            f"no plan serves any request with at most {limit} PrfaaS instances: the "
            f"{pd_instances} PD instance must decode, so prefill needs a PrfaaS instance; "
            "allow more PrfaaS instances (max_prfaas_instances) or add PD instances",
            parameter="max_prfaas_instances",
        )
    best = _best_with(system, workload, limit, pd_instances, mode)
    bound = " + ".join(best.bounds)
    advice = {
        "pd_decode": "add PD instances",
        "prfaas_link": "buy more link bandwidth (link_bandwidth_bytes_per_s)",
        "pd_prefill": "add PD instances",
        "prfaas_compute": "allow more PrfaaS instances (max_prfaas_instances)",
    }[best.bounds[0]]
    if cap is not None:
        within = f"with at most {limit} PrfaaS instances"
    elif limit == plausible.MAX_INSTANCES and Bound.PRFAAS_COMPUTE in best.bounds:
        within = f"with at most {limit} PrfaaS instances (the plausibility bound)"
    else:  # more PrfaaS instances would not lift the binding constraint
        within = "with any PrfaaS cluster size"
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
    if target_rps is not None:
        if not (target_rps > 0 and math.isfinite(target_rps)):
            raise ConfigError(
                f"target_rps must be a finite number > 0, got {target_rps:g}",
                parameter="target_rps",
            )
        plausible.check_in_range(
            "target_rps", target_rps, plausible.MIN_RATE_RPS, plausible.MAX_RATE_RPS, "req/s"
        )
    if max_prfaas_instances is not None:
        if max_prfaas_instances < 0:
            raise ConfigError(
                f"max_prfaas_instances must allow >= 0 instances, got {max_prfaas_instances}",
                parameter="max_prfaas_instances",
            )
        if max_prfaas_instances > plausible.MAX_INSTANCES:
            raise ConfigError(
                f"max_prfaas_instances must be at most {plausible.MAX_INSTANCES} PrfaaS instances "
                f"(more than any fleet), got {max_prfaas_instances}",
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
    if it is lower (or if there is no target); never above plausible.MAX_INSTANCES."""
    if target_rps is None:
        assert cap is not None  # _check_goal
        return cap
    worst_service_s = float(system.prfaas_prefill_latency(workload.max_tokens))
    needed = target_rps * worst_service_s + 1
    upper = plausible.MAX_INSTANCES if needed > plausible.MAX_INSTANCES else math.ceil(needed)
    return upper if cap is None else min(upper, cap)


def _check_model_size(thresholds: int) -> None:
    """Refuse, before building it, a MILP too large to solve in seconds (the threshold grids of
    solve/sizing_milp.py stay below the bound; this guards a change to them)."""
    from prfaas_plan.solve.sizing_milp import milp_size  # only a sizing run loads the MILP

    size = milp_size(thresholds)
    if size.binaries > plausible.MAX_SIZING_MILP_BINARIES:
        raise ConfigError(
            f"the sizing MILP would have {size.binaries} binaries ({size.variables} variables, "
            f"{size.constraints} constraints, <= {size.nonzeros} nonzeros), above "
            f"MAX_SIZING_MILP_BINARIES = {plausible.MAX_SIZING_MILP_BINARIES}"
        )


def _fewest(reaches: Callable[[int], bool], start: int, upper: int) -> int:
    """The fewest n in [0, upper] with reaches(n), for `reaches` monotone in n and true at
    `upper`: gallop from `start` (steps 1, 2, 4, ...) to a bracket, then bisect it."""
    if reaches(start):
        hi, step = start, 1
        while hi - step >= 0 and reaches(hi - step):
            hi, step = hi - step, 2 * step
        lo = max(hi - step, -1)  # fails (or below 0)
    else:
        lo, step = start, 1
        while not reaches(min(lo + step, upper)):
            lo, step = min(lo + step, upper), 2 * step
        hi = min(lo + step, upper)
    while hi - lo > 1:  # reaches(hi), not reaches(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def _milp_choice(
    system: ServingSystem,
    workload: LengthDistribution,
    pd_instances: int,
    mode: Mode,
    prfaas_upper: int,
    target_rps: float | None,
    solver: Solver,
) -> Evaluation | None:
    """The MILP's plan (its counts at its grid threshold), lexicographic without a target
    (module docstring); None if no plan is feasible."""
    from prfaas_plan.solve.sizing_milp import build_milp, solve_milp  # only a sizing run's

    thresholds = milp_threshold_grid(workload)

    def solve(target: float | None) -> Evaluation | None:
        model = build_milp(system, workload, thresholds, pd_instances, mode, prfaas_upper, target)
        x = solve_milp(model, solver)
        if x is None:
            return None
        k = int(np.argmax(x[3 : 3 + thresholds.size]))
        n_prfaas, n_p, n_d = (int(np.rint(v)) for v in x[:3])
        configuration = Configuration(n_prfaas, n_p, n_d, float(thresholds[k]))
        return evaluate(system, workload, configuration, mode)

    if target_rps is not None:
        return solve(target_rps)
    best = solve(None)
    if best is None or best.system_throughput_rps <= 0:
        return best
    return solve(best.system_throughput_rps * (1 - MILP_RTOL)) or best


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
    cap, the smallest reaching the highest Λ_max under it (module docstring)."""
    _check_goal(target_rps, max_prfaas_instances)
    SearchSpace(0, pd_instances)  # validates pd_instances
    k = milp_threshold_grid(workload).size
    _check_model_size(k)
    prfaas_upper = _prfaas_upper(system, workload, target_rps, max_prfaas_instances)
    milp = _milp_choice(system, workload, pd_instances, mode, prfaas_upper, target_rps, solver)
    if milp is None:
        raise _infeasible(
            system, workload, pd_instances, mode, target_rps, prfaas_upper, max_prfaas_instances
        )
    n_milp = milp.configuration.prfaas_instances
    known: dict[int, Evaluation] = {}

    def best_with(n: int) -> Evaluation:
        """Exact threshold and split for n instances; never worse than the MILP's own plan."""
        if n not in known:
            e = _best_with(system, workload, n, pd_instances, mode)
            better_milp = n == n_milp and milp.system_throughput_rps > e.system_throughput_rps
            known[n] = milp if better_milp else e
        return known[n]

    if target_rps is not None:
        goal_rps, upper = target_rps, n_milp
        if best_with(n_milp).system_throughput_rps < goal_rps * (1 - RTOL):  # solver tolerance
            raise SolverError(
                f"the sizing MILP chose {n_milp} PrfaaS instances but they reach only "
                f"{best_with(n_milp).system_throughput_rps:.6g} req/s < target_rps {goal_rps:g}",
                parameter="target_rps",
            )
    else:
        assert max_prfaas_instances is not None  # _check_goal
        upper = max_prfaas_instances
        goal_rps = best_with(upper).system_throughput_rps
    n = _fewest(
        lambda n: best_with(n).system_throughput_rps >= goal_rps * (1 - RTOL), n_milp, upper
    )
    return SizingResult(
        evaluation=best_with(n),
        target_rps=target_rps,
        max_prfaas_instances=max_prfaas_instances,
        solver=solver,
        milp_thresholds=k,
        milp=milp,
    )
