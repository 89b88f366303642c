"""Time to first token under load: an analytic queueing approximation. The queueing formulas
are in queueing.py, the deployment's queues in deployment_load.py, the TTFT distribution in
ttft_distribution.py, the result here; the planner's TTFT-constrained search is solve/ttft_target.py.

Units: seconds, requests/s, tokens, bytes, bytes/s. Poisson arrivals at rate λ; requests with
L > t (share p) are prefilled on PrfaaS, the rest on PD-P (prfaas-model.md §2).

The model, per part of the deployment (utilisations ρ = λ / the exact-mode capacity term of
capacity.rates, so ρ = 1 exactly where Λ_max puts the limit):

- Each prefill pool is an M/G/c FIFO queue: c = its instances, arrivals at λp (PrfaaS) or
  λ(1 − p) (PD-P), service S = T(L) for the lengths routed to it. E[S] and E[S²] are exact:
  T is a polynomial, so E[T(L)² | A] needs the partial moments E[L^k; A] up to k = 2·deg T,
  in closed form (`LengthDistribution.partial_moments`). The mean wait is Allen–Cunneen:

      Wq ≈ C(c, a) · (1 + C_s²) / 2 · E[S] / (c (1 − ρ)),   a = λ E[S], ρ = a / c,
      C_s² = Var S / E[S]²,  C(c, a) = Erlang C (probability of waiting),

  exact for M/M/c (C_s² = 1) and for M/G/1 (Pollaczek–Khinchine), an approximation otherwise.
- The inter-cluster link is an M/G/1 processor-sharing queue for the offloaded requests' KV
  transfers (rate λp, sizes S_kv(L)): a transfer of x bytes takes x / (B (1 − ρ_link)) on
  average, whatever the size distribution, plus a fixed `link_latency_s`.
- The decode slots (N_d · BS_max servers, each holding a request for L_out · T_decode) must
  not be overloaded; their wait is reported but is not part of TTFT (as in simulate.py: the
  first token is ready when prefill ends, or when the KVCache has arrived).

TTFT of a request of length l, the approximation used for the distribution:

    local (l <= t):      W_pd + T_pd(l)
    offloaded (l > t):   W_prfaas + T_prfaas(l) + S_kv(l) / (B (1 − ρ_link)) + link_latency_s

where the wait W of a pool is independent of the request's own length (FIFO) and distributed
as in M/M/c: P(W > 0) = C(c, a), and W | W > 0 exponential with mean Wq / C (Allen–Cunneen's
Wq); the transfer time is replaced by its mean given the size. The mean TTFT is then

    (1 − p) (E[T_pd | L <= t] + Wq_pd)
      + p (E[T_prfaas | L > t] + Wq_prfaas + E[S_kv | L > t] / (B (1 − ρ_link)) + latency);

P50/P90/P99 invert the mixture CDF over the routes and the length distribution's mesh
(4096 cells for continuous distributions) by bisection. At rate 0 this is ttft.unloaded_ttft.

What it leaves out: the conditional wait of an M/G/c queue is not exactly exponential nor
Allen–Cunneen's mean exact; a transfer's time under sharing varies around its mean; and the
link's arrivals (the PrfaaS pool's departures) are smoother than Poisson. Measured against
the simulator (tests/analytic/test_queueing.py), on the case-study plan the mean and P90 come out about
1% low at 50% and 80% of Λ_max and about 2% low at 95% (the waits are 5-10% low for these
pools, whose service times vary less than exponential ones; P(W > 0) is right to 0.01). The
case-study link runs at ρ <= 0.12; with a link busy enough to matter M/G/1-PS overstates the
transfer time (+45% at ρ_link = 0.7, TTFT +6%), so there the figures are conservative.
"""

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from prfaas_plan.analytic.capacity import BOUND_ORDER, Bound, Configuration, ServingSystem
from prfaas_plan.analytic.deployment_load import Loads, loads
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.queueing import MgcState, mgc
from prfaas_plan.analytic.ttft import PERCENTILES, TtftSummary, unloaded_ttft
from prfaas_plan.analytic.ttft_distribution import ttft_mesh, ttft_percentiles
from prfaas_plan.errors import ConfigError

Metric = Literal["mean", 50, 90, 99]  # the TTFT figure a target constrains
TTFT_METRICS: tuple[Metric, ...] = ("mean", 50, 90, 99)


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolQueue:
    """One pool of identical servers under Poisson arrivals (M/G/c, Allen–Cunneen)."""

    servers: int
    arrival_rate_rps: float
    mean_service_s: float  # E[S] of the requests it serves (nan if none)
    service_scv: float  # C_s² = Var S / E[S]²
    utilization: float  # ρ = λ E[S] / c; >= 1 means overloaded (inf with no server)
    wait_probability: float  # Erlang C: P(W > 0)
    mean_wait_s: float  # Wq; inf when overloaded


@dataclass(frozen=True)
class LinkQueue:
    """The inter-cluster link as an M/G/1 processor-sharing queue of KV transfers."""

    arrival_rate_rps: float  # offloaded requests/s
    mean_transfer_bytes: float  # E[S_kv(L) | L > t] (nan if nothing is offloaded)
    utilization: float
    slowdown: float  # 1 / (1 − ρ): a transfer takes this many times its unshared time
    latency_s: float  # fixed latency added to every transfer
    mean_transfer_s: float  # E[S_kv] / B · slowdown + latency_s (inf when overloaded)


@dataclass(frozen=True)
class LoadedTtft:
    """TTFT of one plan at Poisson arrival rate `arrival_rate_rps` (module docstring).

    When `stable` is False (some part at utilisation >= 1, named in `overloaded`) a queue grows
    without bound and the plan has no steady state: every TTFT figure is inf, never a number.
    The pools' own fields still show which part is overloaded and how the others fare.
    """

    arrival_rate_rps: float
    stable: bool
    overloaded: tuple[Bound, ...]  # the capacity terms that λ reaches or exceeds
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    local_mean_s: float  # requests prefilled on PD-P (nan if none)
    offloaded_mean_s: float  # requests prefilled on PrfaaS, transfer included (nan if none)
    offload_fraction: float
    prfaas_prefill: PoolQueue
    pd_prefill: PoolQueue
    link: LinkQueue
    pd_decode: PoolQueue  # decode slots; its wait is not part of TTFT (see module docstring)
    unloaded: TtftSummary  # ttft.unloaded_ttft of the same threshold, for comparison

    def metric(self, percentile: int | str) -> float:
        """The TTFT figure a target constrains: 'mean', 50, 90 or 99."""
        key = check_metric(percentile)
        return self.mean_s if key == "mean" else float(getattr(self, f"p{key}_s"))


def check_metric(percentile: object) -> Metric:
    """The TTFT metric `percentile` names ('mean', 50, 90 or 99, ints only), or ConfigError."""
    for metric in TTFT_METRICS:
        if percentile == metric and type(percentile) is type(metric):
            return metric
    raise ConfigError(
        f"TTFT percentile must be one of 'mean', 50, 90, 99; got {percentile!r}",
        parameter="ttft_percentile",
    )


def check_rate(arrival_rate_rps: float) -> None:
    if not (arrival_rate_rps >= 0 and math.isfinite(arrival_rate_rps)):
        raise ConfigError(
            f"the arrival rate must be a finite number >= 0 req/s, got {arrival_rate_rps:g}",
            parameter="arrival_rate_rps",
        )


def check_latency(link_latency_s: float) -> None:
    if not (link_latency_s >= 0 and math.isfinite(link_latency_s)):
        raise ConfigError(
            f"link latency must be a finite number >= 0 s, got {link_latency_s:g}",
            parameter="link_latency_s",
        )


def _pool(
    servers: int,
    arrival_rate_rps: float,
    share: float,
    mean_service_s: float,
    scv: float,
    wait: MgcState,
) -> PoolQueue:
    """One candidate's pool (the first element of each array), serving `share` of the
    requests at `arrival_rate_rps` in all, as a PoolQueue."""
    return PoolQueue(
        servers=int(servers),
        arrival_rate_rps=arrival_rate_rps * share,
        mean_service_s=mean_service_s if share > 0 else math.nan,
        service_scv=scv,
        utilization=float(wait.utilization.flat[0]),
        wait_probability=float(wait.wait_probability.flat[0]),
        mean_wait_s=float(wait.mean_wait_s.flat[0]),
    )


def _decode_pool(system: ServingSystem, instances: int, arrival_rate_rps: float) -> PoolQueue:
    """The decode slots as an M/D/c pool: output lengths are the constant L_out, so the
    service is deterministic (C_s² = 0)."""
    slots = instances * system.decode.batch_size
    service_s = system.output_tokens * system.decode.step_latency_s
    wait = mgc(slots, np.array([arrival_rate_rps]), service_s, 0.0)
    return _pool(slots, arrival_rate_rps, 1.0, service_s, 0.0, wait)


def _link(
    system: ServingSystem, loads: Loads, arrival_rate_rps: float, latency_s: float
) -> LinkQueue:
    p = float(loads.offload_fraction[0])
    slowdown = float(loads.link_slowdown[0])
    transfer_bytes = float(loads.mean_transfer_bytes[0]) if p > 0 else math.nan
    mean_transfer_s = (
        transfer_bytes / system.link_bandwidth_bytes_per_s * slowdown + latency_s
        if p > 0
        else math.nan
    )
    return LinkQueue(
        arrival_rate_rps=arrival_rate_rps * p,
        mean_transfer_bytes=transfer_bytes,
        utilization=float(loads.utilization[BOUND_ORDER.index(Bound.PRFAAS_LINK), 0]),
        slowdown=slowdown,
        latency_s=latency_s,
        mean_transfer_s=mean_transfer_s,
    )


def loaded_ttft(
    system: ServingSystem,
    workload: LengthDistribution,
    configuration: Configuration,
    arrival_rate_rps: float,
    *,
    link_latency_s: float = 0.0,
) -> LoadedTtft:
    """TTFT mean and P50/P90/P99 of `configuration` at a Poisson arrival rate (req/s), by the
    approximation of the module docstring. At rate 0 this is `unloaded_ttft` (plus the link
    latency on offloaded requests)."""
    check_rate(arrival_rate_rps)
    check_latency(link_latency_s)
    c = configuration
    lam = float(arrival_rate_rps)
    t = np.array([float(c.threshold_tokens)])
    state = loads(
        system,
        workload,
        t,
        c.prfaas_instances,
        c.pd_prefill_instances,
        c.pd_decode_instances,
        lam,
        link_latency_s,
    )
    p = float(state.offload_fraction[0])
    utilization = state.utilization[:, 0]
    overloaded = tuple(b for b, u in zip(BOUND_ORDER, utilization, strict=True) if u >= 1)
    p50 = p90 = p99 = math.inf
    if not overloaded:
        mesh = ttft_mesh(system, workload)
        p50, p90, p99 = (
            float(v) for v in ttft_percentiles(mesh, state, t, link_latency_s, PERCENTILES)[0]
        )
    return LoadedTtft(
        arrival_rate_rps=lam,
        stable=not overloaded,
        overloaded=overloaded,
        mean_s=float(state.mean_s[0]),
        p50_s=p50,
        p90_s=p90,
        p99_s=p99,
        local_mean_s=float(state.local_mean_s[0]),
        offloaded_mean_s=float(state.offloaded_mean_s[0]),
        offload_fraction=p,
        prfaas_prefill=_pool(
            c.prfaas_instances,
            lam,
            p,
            float(state.prfaas_service_s[0]),
            float(state.prfaas_scv[0]),
            state.prfaas_wait,
        ),
        pd_prefill=_pool(
            c.pd_prefill_instances,
            lam,
            1 - p,
            float(state.pd_service_s[0]),
            float(state.pd_scv[0]),
            state.pd_wait,
        ),
        link=_link(system, state, lam, link_latency_s),
        pd_decode=_decode_pool(system, c.pd_decode_instances, lam),
        unloaded=unloaded_ttft(system, workload, float(c.threshold_tokens)),
    )
