"""Why no plan meets a TTFT target (solve/ttft_target.py): the lowest TTFT figure reachable,
at which plan, and what binds it (overload, prefill time itself, a pool's queueing, link
sharing). Units: tokens, requests/s, seconds."""

import math

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.analytic.capacity import Bound, Configuration, evaluate, rates
from prfaas_plan.analytic.deployment_load import loads
from prfaas_plan.analytic.loaded_ttft import LoadedTtft, loaded_ttft
from prfaas_plan.analytic.ttft_distribution import ttft_percentiles
from prfaas_plan.choices import Mode
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.solve.search import GOLDEN_STEPS, golden_section_max
from prfaas_plan.solve.ttft_candidates import (
    Candidates,
    TtftSearch,
    configuration_of,
    evaluate_candidates,
)

LOWEST_SHORTLIST = 16  # candidates whose TTFT percentile is inverted when none is feasible
SHORTLIST_ROUNDS = 8

_PART_NAMES = {
    Bound.PRFAAS_COMPUTE: "PrfaaS prefill",
    Bound.PRFAAS_LINK: "the inter-cluster link",
    Bound.PD_PREFILL: "PD-P prefill",
    Bound.PD_DECODE: "PD-D decode",
}


def _describe(metric: int | str, target_s: float) -> str:
    name = "mean" if metric == "mean" else f"P{metric}"
    return f"{name} TTFT <= {target_s:g} s"


def _plan_text(configuration: Configuration) -> str:
    c = configuration
    return (
        f"t={c.threshold_tokens:,.0f} tokens, N_prfaas/N_p/N_d = "
        f"{c.prfaas_instances}/{c.pd_prefill_instances}/{c.pd_decode_instances}"
    )


def _binding_part(problem: TtftSearch, result: LoadedTtft, configuration: Configuration) -> str:
    """What keeps a stable plan above the target: its own prefill (and transfer) time, if the
    figure is above the target even with no load, else the part of the queueing delay that
    adds most to the mean TTFT."""
    idle = loaded_ttft(
        problem.system,
        problem.workload,
        configuration,
        0.0,
        link_latency_s=problem.link_latency_s,
    ).metric(problem.metric)
    if idle > problem.target_s:
        return f"bound by prefill time itself (unloaded {idle:.3g} s at this threshold)"
    p = result.offload_fraction
    parts = {
        "PD-P queueing": ((1 - p) * result.pd_prefill.mean_wait_s, result.pd_prefill),
        "PrfaaS queueing": (p * result.prfaas_prefill.mean_wait_s, result.prfaas_prefill),
    }
    name, (_, pool) = max(parts.items(), key=lambda item: item[1][0])
    link_extra = (
        p * (result.link.mean_transfer_s - result.link.latency_s) * (1 - 1 / result.link.slowdown)
    )
    if p > 0 and link_extra > parts[name][0]:
        return f"bound by link sharing (utilisation {result.link.utilization:.2f})"
    return (
        f"bound by {name} (mean wait {pool.mean_wait_s:.3g} s at utilisation "
        f"{pool.utilization:.2f})"
    )


def _metric_values(
    problem: TtftSearch, thresholds: ArrayLike, n_p: ArrayLike, n_d: ArrayLike
) -> FloatArray:
    """The constrained TTFT figure of candidates (inf where unstable)."""
    s, w, sp = problem.system, problem.workload, problem.space
    t = np.asarray(thresholds, float)
    state = loads(
        s, w, t, sp.prfaas_instances, n_p, n_d, problem.arrival_rate_rps, problem.link_latency_s
    )
    if problem.mesh is None:  # the mean
        return state.mean_s
    out = np.full(t.shape, np.inf)
    keep = state.stable
    if keep.any():
        out[keep] = ttft_percentiles(
            problem.mesh, state.take(keep), t[keep], problem.link_latency_s, [problem.metric]
        )[:, 0]
    return out


def _shortlisted(problem: TtftSearch, c: Candidates) -> int:
    """The candidate with the lowest TTFT figure. A percentile costs a numerical inversion, so
    it is computed for a shortlist only: the candidates with the most probability below a
    level x, at first the target. When the lowest figure v found is below x, the shortlist is
    drawn again at x = v, until it no longer improves: then no candidate outside it reaches
    the percentile by v."""
    stable = np.flatnonzero(c.stable)
    slack, i, best = c.slack, int(np.argmax(c.slack)), math.inf
    if problem.mesh is None:  # the mean: the slack orders the candidates already
        return i
    for _ in range(SHORTLIST_ROUNDS):
        short = stable[np.argsort(-slack[stable], kind="stable")[:LOWEST_SHORTLIST]]
        values = _metric_values(
            problem, c.thresholds[short], c.pd_prefill[short], c.pd_decode[short]
        )
        k = int(np.argmin(values))
        if not values[k] < best:
            break
        best, i = float(values[k]), int(short[k])
        slack = evaluate_candidates(
            problem._replace(target_s=best), c.thresholds, c.pd_prefill, c.pd_decode
        ).slack
    return i


def _lowest_ttft(problem: TtftSearch, c: Candidates, grid: FloatArray) -> Configuration:
    """The stable candidate with the lowest TTFT figure, its threshold then polished between
    its neighbours on the threshold `grid` (golden section; the figure is unimodal in t near
    there)."""
    i = _shortlisted(problem, c)
    configuration = configuration_of(problem.space, c, i)
    if problem.space.threshold_tokens is not None or problem.space.prfaas_instances == 0:
        return configuration
    j = int(np.searchsorted(grid, c.thresholds[i]))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
    n_p, n_d = c.pd_prefill[i : i + 1], c.pd_decode[i : i + 1]
    polished, _ = golden_section_max(
        lambda t: -_metric_values(problem, t, n_p, n_d),
        np.array([lo]),
        np.array([hi]),
        GOLDEN_STEPS,
    )
    t = float(polished[0])
    here, there = _metric_values(
        problem, np.array([c.thresholds[i], t]), np.repeat(n_p, 2), np.repeat(n_d, 2)
    )
    if there < here:
        configuration = configuration_of(
            problem.space, c._replace(thresholds=np.full(c.thresholds.shape, t)), i
        )
    return configuration


def infeasible(problem: TtftSearch, c: Candidates, grid: FloatArray) -> InfeasibleError:
    """The error for a search whose candidates `c` (on the threshold `grid`) all miss the
    target: the highest capacity if every plan is overloaded, else the lowest TTFT found."""
    s, w, sp = problem.system, problem.workload, problem.space
    rate = problem.arrival_rate_rps
    head = f"no plan meets {_describe(problem.metric, problem.target_s)} at {rate:g} req/s"
    if not c.stable.any():
        exact = rates(
            s, w, c.thresholds, sp.prfaas_instances, c.pd_prefill, c.pd_decode, Mode.EXACT
        )
        configuration = configuration_of(sp, c, int(np.argmax(exact.system_rps)))
        best = evaluate(s, w, configuration, Mode.EXACT)
        return InfeasibleError(
            f"{head}: every plan is overloaded, the highest capacity is "
            f"{best.system_throughput_rps:.3g} req/s (exact mode) at {_plan_text(configuration)}, "
            f"bound by {' and '.join(_PART_NAMES[b] for b in best.bounds)}; lower the load or "
            "add instances"
        )
    configuration = _lowest_ttft(problem, c, grid)
    result = loaded_ttft(s, w, configuration, rate, link_latency_s=problem.link_latency_s)
    return InfeasibleError(
        f"{head}: the lowest found is {result.metric(problem.metric):.3g} s at "
        f"{_plan_text(configuration)}, {_binding_part(problem, result, configuration)}; "
        "relax the target, lower the load or add instances"
    )
