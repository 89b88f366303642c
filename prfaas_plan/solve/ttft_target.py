"""The highest-capacity plan that meets a TTFT target at a given arrival rate: maximise Λ_max
(capacity.rates, either mode) over the threshold t and the split N_p/N_d, subject to a TTFT
figure (mean, P50, P90 or P99, analytic/loaded_ttft.py) at an absolute Poisson arrival rate.
Units: tokens, requests/s, seconds.
"""

import math

import numpy as np

from prfaas_plan.analytic.arrays import BoolArray, FloatArray, IntArray
from prfaas_plan.analytic.capacity import Evaluation, ServingSystem, evaluate, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.loaded_ttft import (
    LoadedTtft,
    check_latency,
    check_metric,
    check_rate,
    loaded_ttft,
)
from prfaas_plan.analytic.ttft_distribution import ttft_mesh
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.solve.search import (
    TIE_RTOL,
    bisect,
    golden_section_max,
    ttft_threshold_grid,
)
from prfaas_plan.solve.threshold import SearchSpace
from prfaas_plan.solve.ttft_candidates import (
    Candidates,
    TtftSearch,
    concat,
    configuration_of,
    evaluate_candidates,
)
from prfaas_plan.solve.ttft_infeasible import infeasible

REFINE_STEPS = 60  # bisection steps to the peak of Λ_max: a bracket shrinks by 2^-60
EDGE_STEPS = 45  # ... to an edge of the feasible set: 2^-45 ~ 3e-14 of a grid cell
SLACK_STEPS = 30  # golden-section steps to the most TTFT slack: 0.618^30 ~ 5e-7 of the bracket


def _peaks(
    problem: TtftSearch, grid: FloatArray, n_p: IntArray, n_d: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Per split, a bracket [lo, hi] (REFINE_STEPS bisections wide) of the crossing of the two
    prefill terms, where Λ_max peaks (reference eq. 7: Λ_max rises up to it and falls after
    it); a grid point for splits without a crossing."""
    s, w, sp = problem.system, problem.workload, problem.space

    def prfaas_binds(t: FloatArray, n_p: IntArray, n_d: IntArray) -> BoolArray:
        r = rates(s, w, t, sp.prfaas_instances, n_p, n_d, problem.mode)
        with np.errstate(invalid="ignore"):
            binds: BoolArray = r.limits_rps[:2].min(axis=0) < r.limits_rps[2]
        return binds

    rising = prfaas_binds(grid[None, :], n_p[:, None], n_d[:, None])
    turns = rising[:, :-1] & ~rising[:, 1:]
    # with N_p = 0 the "crossing" is the jump at the shortest length, not a balance point;
    # splits without a crossing repeat a grid point instead
    crosses = turns.any(axis=1) & (n_p > 0)
    first = turns.argmax(axis=1)
    return bisect(
        np.where(crosses, grid[first], grid[0]),
        np.where(crosses, grid[first + 1], grid[0]),
        lambda t: prfaas_binds(t, n_p, n_d),
        REFINE_STEPS,
    )


def _with_refinements(
    problem: TtftSearch, grid: FloatArray, n_p: IntArray, n_d: IntArray
) -> tuple[Candidates, FloatArray]:
    """Steps 1 and 2 of `_search`: every split's grid plus its peak bracket and its point of
    most TTFT slack, each row sorted by threshold. Returns the candidates (row-major, flat)
    and the (splits, points) array of their thresholds."""
    coarse = evaluate_candidates(problem, grid[None, :], n_p[:, None], n_d[:, None])
    peak_lo, peak_hi = _peaks(problem, grid, n_p, n_d)
    best = np.argmax(coarse.slack.reshape(n_p.size, grid.size), axis=1)
    last = grid.size - 1
    most_slack, _ = golden_section_max(
        lambda t: evaluate_candidates(problem, t, n_p, n_d).slack,
        grid[np.maximum(best - 1, 0)],
        grid[np.minimum(best + 1, last)],
        SLACK_STEPS,
    )
    extra = np.column_stack([peak_lo, peak_hi, most_slack])
    added = evaluate_candidates(problem, extra, n_p[:, None], n_d[:, None])
    rows = np.column_stack([np.tile(grid, (n_p.size, 1)), extra])
    order = np.argsort(rows, axis=1, kind="stable")
    points = Candidates._make(
        np.take_along_axis(
            np.column_stack([a.reshape(n_p.size, -1), b.reshape(n_p.size, -1)]), order, axis=1
        ).ravel()
        for a, b in zip(coarse, added, strict=True)
    )
    return points, np.take_along_axis(rows, order, axis=1)


def _search(problem: TtftSearch, grid: FloatArray, n_p: IntArray, n_d: IntArray) -> Candidates:
    """Every candidate the optimum can be among, for thresholds searched per split.

    1. The grid, and per split the crossing of the two prefill terms (where Λ_max peaks),
       found by bisection.
    2. Per split, the threshold of most TTFT slack near the grid's best (golden section between
       its grid neighbours), so that a feasible set narrower than a grid cell is not missed.
    3. With those points added to each split's grid, every edge of the feasible set (where the
       target starts or stops holding) between neighbouring points whose better end could
       beat the best feasible Λ_max found so far, by bisection; both ends of each bracket.
    """
    points, rows = _with_refinements(problem, grid, n_p, n_d)
    feasible = (points.slack >= 0).reshape(rows.shape)
    capacity = points.capacity_rps.reshape(rows.shape)
    reached = np.max(np.where(feasible, capacity, -np.inf))
    flips = np.argwhere(feasible[:, :-1] != feasible[:, 1:])
    split, i = flips[:, 0], flips[:, 1]
    ceiling = np.maximum(capacity[split, i], capacity[split, i + 1])
    keep = ceiling >= reached * (1 - TIE_RTOL)
    found = [points]
    if keep.any():
        split, i = split[keep], i[keep]
        left_feasible = feasible[split, i]

        def left_of(t: FloatArray) -> BoolArray:
            met = evaluate_candidates(problem, t, n_p[split], n_d[split]).slack >= 0
            same: BoolArray = met == left_feasible
            return same

        lo, hi = bisect(rows[split, i], rows[split, i + 1], left_of, EDGE_STEPS)
        found += [evaluate_candidates(problem, ends, n_p[split], n_d[split]) for ends in (lo, hi)]
    return concat(found)


def optimize_with_ttft(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    *,
    arrival_rate_rps: float,
    ttft_target_s: float,
    ttft_percentile: int | str = 90,
    mode: Mode = Mode.EXACT,
    link_latency_s: float = 0.0,
) -> tuple[Evaluation, LoadedTtft]:
    """Maximise Λ_max over the threshold t and the split N_p/N_d of `space`, subject to
    `ttft_percentile` ('mean', 50, 90 or 99) of TTFT <= `ttft_target_s` at the Poisson arrival
    rate `arrival_rate_rps` (loaded_ttft's approximation).

    The load is an absolute rate, the same for every candidate, because that is what a service
    target means ("P90 TTFT <= 2 s at 3 req/s"): expressed as a fraction of each candidate's own
    Λ_max, every candidate would be judged at a different traffic level and a plan with less
    capacity would face less traffic. To plan at, say, 80% of the unconstrained optimum, pass
    0.8 × optimize_fixed_hardware(...).system_throughput_rps.

    Λ_max comes from capacity.rates in `mode`; the queues always use the exact mean service
    times (what the servers do), so a plan is stable iff the rate is below its exact-mode
    Λ_max. Search: for every split, a geometric grid of TTFT_GRID_POINTS thresholds, then
    bisection to the crossing of the two prefill terms (the unconstrained peak of Λ_max) and to
    every edge of the feasible set between grid points; the best feasible candidate wins (ties,
    e.g. a decode-bound plateau, go to the most TTFT slack). A feasible set narrower than a grid
    cell, away from the peak, can be missed.

    Raises InfeasibleError naming the best TTFT reachable and what binds it.
    """
    metric = check_metric(ttft_percentile)
    check_rate(arrival_rate_rps)
    check_latency(link_latency_s)
    if not (ttft_target_s > 0 and math.isfinite(ttft_target_s)):
        raise ConfigError(
            f"the TTFT target must be a finite number > 0 s, got {ttft_target_s:g}",
            parameter="ttft_target_s",
        )
    problem = TtftSearch(
        system,
        workload,
        space,
        mode,
        float(arrival_rate_rps),
        metric,
        float(ttft_target_s),
        float(link_latency_s),
        None if metric == "mean" else ttft_mesh(system, workload),
    )
    n_p, n_d = space.splits()
    if space.threshold_tokens is not None:
        grid = np.array([float(space.threshold_tokens)])
    elif space.prfaas_instances == 0:
        grid = np.array([np.inf])
    else:
        grid = ttft_threshold_grid(workload)
    if grid.size > 1:
        candidates = _search(problem, grid, n_p, n_d)
    else:
        candidates = evaluate_candidates(problem, grid[None, :], n_p[:, None], n_d[:, None])
    feasible = candidates.slack >= 0
    if not feasible.any():
        raise infeasible(problem, candidates, ttft_threshold_grid(workload))
    capacity = np.where(feasible, candidates.capacity_rps, -np.inf)
    tied = np.flatnonzero(capacity >= capacity.max() * (1 - TIE_RTOL))
    i = int(tied[np.argmax(candidates.slack[tied])])
    configuration = configuration_of(space, candidates, i)
    return (
        evaluate(system, workload, configuration, mode),
        loaded_ttft(
            system, workload, configuration, arrival_rate_rps, link_latency_s=link_latency_s
        ),
    )
