"""Queueing formulas of the loaded-TTFT model: Erlang C and the M/G/c mean wait
(Allen–Cunneen). Units: seconds, requests/s, Erlangs. Vectorised over every argument.

    C(c, a)  = Erlang C, the probability that an arrival to an M/M/c queue waits, a = λ E[S]
    Wq       ≈ C(c, a) · (1 + C_s²) / 2 · E[S] / (c (1 − ρ)),   ρ = a / c,  C_s² = Var S / E[S]²

Allen–Cunneen is exact for M/M/c (C_s² = 1) and for M/G/1 (Pollaczek–Khinchine), an
approximation otherwise.
"""

from typing import NamedTuple

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.errors import ConfigError


def _erlang_c(servers: ArrayLike, offered_erlangs: ArrayLike) -> FloatArray:
    c, a = np.broadcast_arrays(np.asarray(servers), np.asarray(offered_erlangs, float))
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise ConfigError(
            f"servers must be whole numbers >= 0, got {np.asarray(servers)}", parameter="servers"
        )
    c = c.astype(np.int64)
    blocking = np.ones(a.shape)
    for k in range(1, int(c.max(initial=0)) + 1):
        step = a * blocking / (k + a * blocking)
        blocking = np.where(k <= c, step, blocking)
    with np.errstate(divide="ignore", invalid="ignore"):
        waiting = c * blocking / (c - a * (1.0 - blocking))
    out = np.where(a >= c, 1.0, np.where(a > 0, waiting, 0.0))
    probability: FloatArray = np.where((c == 0) & (a <= 0), 0.0, out)
    return probability


def erlang_c(servers: ArrayLike, offered_erlangs: ArrayLike) -> float | FloatArray:
    """Erlang C: probability that an arrival to an M/M/c queue waits, C(c, a) with a = λ E[S].

    Computed through the Erlang B recursion B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1}), then
    C = c B_c / (c − a (1 − B_c)): no factorials or powers, so stable for hundreds of servers.
    Vectorised over both arguments (a float for scalar arguments); 1 when a >= c (every arrival
    waits, the queue is unstable), 0 when a = 0. With c = 0 servers: 1 if a > 0, else 0.
    """
    out = _erlang_c(servers, offered_erlangs)
    return float(out) if out.ndim == 0 else out


class MgcState(NamedTuple):
    """An M/G/c pool in steady state (arrays broadcast over the arguments of `mgc`)."""

    utilization: FloatArray  # ρ = λ E[S] / c (inf with arrivals and no server)
    mean_wait_s: FloatArray  # Wq, inf when ρ >= 1
    wait_probability: FloatArray  # C(c, a)
    conditional_wait_s: FloatArray  # E[W | W > 0] = Wq / C, inf when ρ >= 1


def mgc(
    servers: ArrayLike,
    arrival_rate_rps: ArrayLike,
    mean_service_s: ArrayLike,
    service_scv: ArrayLike,
) -> MgcState:
    """Utilisation, Allen–Cunneen mean wait, P(wait > 0) and conditional mean wait Wq / C of
    M/G/c FIFO pools, vectorised. A pool with no arrivals has ρ = 0 and no wait whatever its
    service time (which may be nan)."""
    c, lam, es, scv = np.broadcast_arrays(
        np.asarray(servers),
        np.asarray(arrival_rate_rps, float),
        np.asarray(mean_service_s, float),
        np.asarray(service_scv, float),
    )
    idle = lam <= 0
    es = np.where(idle, 0.0, es)
    scv = np.where(idle, 0.0, scv)
    offered = lam * es
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(c > 0, offered / np.where(c > 0, c, 1), np.where(offered > 0, np.inf, 0.0))
        stable = rho < 1
        # Wq / C = E[S] (1 + C_s²) / (2 c (1 − ρ)): computed directly, no 0/0 at light load
        conditional = np.where(
            stable & ~idle, es * (1 + scv) / (2 * np.maximum(c, 1) * (1 - rho)), 0.0
        )
    probability = _erlang_c(c, offered)
    wait = np.where(stable, probability * conditional, np.inf)
    return MgcState(rho, wait, probability, np.where(stable, conditional, np.inf))


def mgc_mean_wait(
    servers: ArrayLike,
    arrival_rate_rps: ArrayLike,
    mean_service_s: ArrayLike,
    service_scv: ArrayLike,
) -> float | FloatArray:
    """Mean wait in queue of an M/G/c FIFO queue, Allen–Cunneen:

        Wq = C(c, a) · (1 + C_s²) / 2 · E[S] / (c (1 − ρ)),   a = λ E[S], ρ = a / c.

    Exact for M/M/c (C_s² = 1) and for c = 1 (Pollaczek–Khinchine). inf when ρ >= 1, 0 when
    λ = 0. Vectorised (a float for scalar arguments).
    """
    wait = mgc(servers, arrival_rate_rps, mean_service_s, service_scv).mean_wait_s
    return float(wait) if wait.ndim == 0 else wait
