"""Candidate plans of the TTFT-constrained search (solve/ttft_target.py): each is a threshold
and a PD split, evaluated for Λ_max (capacity.rates in the planning mode) and for its TTFT slack
at the target (analytic/loaded_ttft.py). Units: tokens, requests/s, seconds."""

from typing import NamedTuple

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray, IntArray
from prfaas_plan.analytic.capacity import Configuration, ServingSystem, rates
from prfaas_plan.analytic.deployment_load import loads
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.loaded_ttft import Metric
from prfaas_plan.analytic.ttft_distribution import TtftMesh, ttft_cdf
from prfaas_plan.choices import Mode
from prfaas_plan.solve.threshold import SearchSpace


class Candidates(NamedTuple):
    """Candidate plans (flat arrays): threshold, split, Λ_max, stability, TTFT slack."""

    thresholds: FloatArray
    pd_prefill: IntArray
    pd_decode: IntArray
    capacity_rps: FloatArray
    stable: BoolArray
    slack: FloatArray  # >= 0 iff the target is met: P(TTFT <= x) − q, or x − mean


class TtftSearch(NamedTuple):
    """One TTFT-constrained search: what is fixed while candidates vary."""

    system: ServingSystem
    workload: LengthDistribution
    space: SearchSpace
    mode: Mode
    arrival_rate_rps: float
    metric: Metric
    target_s: float
    link_latency_s: float
    mesh: TtftMesh | None  # the TTFT mesh, for a percentile target (None for the mean)


def evaluate_candidates(
    problem: TtftSearch, thresholds: ArrayLike, n_p: ArrayLike, n_d: ArrayLike
) -> Candidates:
    """Λ_max (capacity.rates in the planning mode) and the TTFT slack of candidates
    (broadcast, then flattened)."""
    s, w, sp = problem.system, problem.workload, problem.space
    t, p, d = np.broadcast_arrays(np.asarray(thresholds, float), np.asarray(n_p), np.asarray(n_d))
    t, p, d = t.ravel(), p.ravel(), d.ravel()
    capacity = rates(s, w, t, sp.prfaas_instances, p, d, problem.mode).system_rps
    state = loads(
        s, w, t, sp.prfaas_instances, p, d, problem.arrival_rate_rps, problem.link_latency_s
    )
    if problem.mesh is None:  # the mean
        slack = problem.target_s - state.mean_s
    else:
        x = np.full((t.size, 1), problem.target_s)
        met = ttft_cdf(problem.mesh, state, t, problem.link_latency_s, x)[:, 0]
        slack = met - float(problem.metric) / 100.0
    slack = np.where(state.stable, slack, -np.inf)
    return Candidates(t, p, d, np.asarray(capacity, float), state.stable, slack)


def concat(parts: list[Candidates]) -> Candidates:
    return Candidates._make(np.concatenate(fields) for fields in zip(*parts, strict=True))


def configuration_of(space: SearchSpace, c: Candidates, i: int) -> Configuration:
    """Candidate `i` as a Configuration."""
    return Configuration(
        prfaas_instances=space.prfaas_instances,
        pd_prefill_instances=int(c.pd_prefill[i]),
        pd_decode_instances=int(c.pd_decode[i]),
        threshold_tokens=float(c.thresholds[i]),
    )
