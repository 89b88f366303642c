"""The highest arrival rate a deployment sustains in simulation, found by bisection on the rate,
to compare with the closed-form Λ_max (reference prfaas-model.md §2). Units: requests/s.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.engine import simulate
from prfaas_plan.sim.stats import SimulationResult


@dataclass(frozen=True)
class SustainableRate:
    """Result of `sustainable_rate`: the bracket [stable_rps, unstable_rps] around the highest
    sustainable arrival rate, and `rate_rps` its midpoint."""

    rate_rps: float
    stable_rps: float
    unstable_rps: float
    backlog_fraction: float
    requests: int
    runs: int


def backlog_share(result: SimulationResult) -> float:
    """Largest share of a stage's requests still queued at the horizon: waiting for PrfaaS
    prefill, PD prefill or a decode slot, or in transfer, each divided by the requests that
    reached that stage in the window (requests in service are not counted: there are at most
    as many as servers)."""
    shares = [
        queued / max(reached, 1)
        for queued, reached in (
            (result.prfaas_prefill.queued_at_horizon, result.prfaas_prefill.requests),
            (result.pd_prefill.queued_at_horizon, result.pd_prefill.requests),
            (result.link.in_flight_at_horizon, result.link.transfers),
            (result.pd_decode.queued_at_horizon, result.pd_decode.requests),
        )
    ]
    return max(shares)


def sustainable_rate(
    system: ServingSystem,
    configuration: Configuration,
    unit_arrival_s: ArrayLike,
    input_tokens: ArrayLike,
    output_tokens: ArrayLike | None = None,
    *,
    low_rps: float,
    high_rps: float,
    backlog_fraction: float = 0.005,
    rel_tol: float = 1e-3,
    **simulate_options: Any,
) -> SustainableRate:
    """Highest arrival rate the deployment sustains, found by bisection on the rate.

    Common random numbers: the stream at rate λ is `unit_arrival_s / λ` (so `unit_arrival_s`
    should have mean rate 1 req/s) with the same lengths, so the backlog grows monotonically
    with λ. λ counts as sustainable when, at the last arrival, no stage holds a backlog of more
    than `backlog_fraction` of the requests it received (`backlog_share`). Above the true limit
    Λ* the queue of a binding stage grows by about (λ/Λ* − 1) per request it receives, so the
    estimate lies between Λ* and about Λ* · (1 + backlog_fraction), give or take the backlog a
    stable queue near saturation holds (of order sqrt(requests)): use enough requests that
    backlog_fraction · requests dwarfs sqrt(requests). The bracket [low_rps, high_rps] is
    widened if it does not contain the limit; bisection stops at relative width `rel_tol`.
    """
    unit_arrival_s = np.asarray(unit_arrival_s, dtype=float)
    n = unit_arrival_s.size
    if not 0 < low_rps < high_rps:
        raise ConfigError(f"need 0 < low_rps < high_rps, got {low_rps:g} and {high_rps:g}")
    runs = 0

    def stable(rate_rps: float) -> bool:
        nonlocal runs
        runs += 1
        result = simulate(
            system,
            configuration,
            unit_arrival_s / rate_rps,
            input_tokens,
            output_tokens,
            **simulate_options,
        )
        return backlog_share(result) <= backlog_fraction

    for _ in range(30):
        if stable(low_rps):
            break
        low_rps, high_rps = low_rps / 2, low_rps
    else:
        raise ConfigError("no sustainable rate found: even a very low rate builds a backlog")
    for _ in range(30):
        if not stable(high_rps):
            break
        low_rps, high_rps = high_rps, high_rps * 2
    else:
        raise ConfigError("no unsustainable rate found: the backlog never builds up")
    while high_rps - low_rps > rel_tol * low_rps:
        middle = 0.5 * (low_rps + high_rps)
        if stable(middle):
            low_rps = middle
        else:
            high_rps = middle
    return SustainableRate(
        rate_rps=0.5 * (low_rps + high_rps),
        stable_rps=low_rps,
        unstable_rps=high_rps,
        backlog_fraction=backlog_fraction,
        requests=n,
        runs=runs,
    )
