"""Time to first token under load: an analytic queueing approximation, and the planner's search
for the highest-capacity plan that meets a TTFT target at a given arrival rate.

Units: seconds, requests/s, tokens, bytes, bytes/s. Poisson arrivals at rate λ; requests with
L > t (share p) are prefilled on PrfaaS, the rest on PD-P (prfaas-model.md §2).

The model, per part of the deployment (utilisations ρ = λ / the exact-mode capacity term of
capacity.rates, so ρ = 1 exactly where Λ_max puts the limit):

- Each prefill pool is an M/G/c FIFO queue: c = its instances, arrivals at λp (PrfaaS) or
  λ(1 − p) (PD-P), service S = T(L) for the lengths routed to it. E[S] and E[S²] are exact:
  T is a polynomial, so E[T(L)² | A] needs the partial moments E[L^k; A] up to k = 2·deg T,
  computed here in closed form (`length_moments`). The mean wait is Allen–Cunneen:

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
simulate.py (tests/test_queueing.py), on the case-study plan the mean and P90 come out about
1% low at 50% and 80% of Λ_max and about 2% low at 95% (the waits are 5-10% low for these
pools, whose service times vary less than exponential ones; P(W > 0) is right to 0.01). The
case-study link runs at ρ <= 0.12; with a link busy enough to matter M/G/1-PS overstates the
transfer time (+45% at ρ_link = 0.7, TTFT +6%), so there the figures are conservative.

`optimize_with_ttft` maximises Λ_max (capacity.rates, either mode) over the threshold t and
the split N_p/N_d subject to the TTFT target at an absolute arrival rate (see its docstring).
"""

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from prfaas_plan.analytic.capacity import (
    BOUND_ORDER,
    Bound,
    Configuration,
    Evaluation,
    ServingSystem,
    evaluate,
    rates,
)
from prfaas_plan.analytic.distributions import (
    Histogram,
    LengthDistribution,
    ObservedLengths,
    TruncatedLogNormal,
)
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.analytic.ttft import TtftSummary, unloaded_ttft
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, InfeasibleError
from prfaas_plan.solve.threshold import SearchSpace

PERCENTILES = (50, 90, 99)
TTFT_METRICS = ("mean", 50, 90, 99)
THRESHOLD_GRID_POINTS = 97  # geometric grid of thresholds per split, before refinement
REFINE_STEPS = 60  # bisection steps to the peak of Λ_max: a bracket shrinks by 2^-60
EDGE_STEPS = 45  # ... to an edge of the feasible set: 2^-45 ~ 3e-14 of a grid cell
INVERSION_RTOL = 1e-10  # relative accuracy of a TTFT percentile
TIE_RTOL = 1e-9
GOLDEN_STEPS = 45  # shrinks a bracket by 0.618^45 ~ 4e-10
SLACK_STEPS = 30  # golden-section steps to the most TTFT slack: 0.618^30 ~ 5e-7 of the bracket
LOWEST_SHORTLIST = 16  # candidates whose TTFT percentile is inverted when none is feasible

_SQRT2 = math.sqrt(2.0)
_erfc = np.frompyfunc(math.erfc, 1, 1)  # no scipy at import time (see test_layering)


# --- queueing formulas ----------------------------------------------------------------------


def erlang_c(servers, offered_erlangs):
    """Erlang C: probability that an arrival to an M/M/c queue waits, C(c, a) with a = λ E[S].

    Computed through the Erlang B recursion B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1}), then
    C = c B_c / (c − a (1 − B_c)): no factorials or powers, so stable for hundreds of servers.
    Vectorised over both arguments; 1 when a >= c (every arrival waits, the queue is unstable),
    0 when a = 0. With c = 0 servers: 1 if a > 0, else 0.
    """
    c, a = np.broadcast_arrays(np.asarray(servers), np.asarray(offered_erlangs, float))
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise ConfigError(f"servers must be whole numbers >= 0, got {np.asarray(servers)}")
    c = c.astype(np.int64)
    blocking = np.ones(a.shape)
    for k in range(1, int(c.max(initial=0)) + 1):
        step = a * blocking / (k + a * blocking)
        blocking = np.where(k <= c, step, blocking)
    with np.errstate(divide="ignore", invalid="ignore"):
        waiting = c * blocking / (c - a * (1.0 - blocking))
    out = np.where(a >= c, 1.0, np.where(a > 0, waiting, 0.0))
    out = np.where((c == 0) & (a <= 0), 0.0, out)
    return float(out) if out.ndim == 0 else out


def mgc_mean_wait(servers, arrival_rate_rps, mean_service_s, service_scv):
    """Mean wait in queue of an M/G/c FIFO queue, Allen–Cunneen:

        Wq = C(c, a) · (1 + C_s²) / 2 · E[S] / (c (1 − ρ)),   a = λ E[S], ρ = a / c.

    Exact for M/M/c (C_s² = 1) and for c = 1 (Pollaczek–Khinchine). inf when ρ >= 1, 0 when
    λ = 0. Vectorised.
    """
    wait = _mgc(servers, arrival_rate_rps, mean_service_s, service_scv)[1]
    return float(wait) if wait.ndim == 0 else wait


def _mgc(servers, arrival_rate_rps, mean_service_s, service_scv):
    """(utilisation ρ, mean wait Wq, P(wait > 0), conditional mean wait Wq / C), vectorised.
    A pool with no arrivals has ρ = 0 and no wait whatever its service time (may be nan)."""
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
    probability = np.asarray(erlang_c(c, offered))
    wait = np.where(stable, probability * conditional, np.inf)
    conditional = np.where(stable, conditional, np.inf)
    return rho, wait, probability, conditional


# --- moments of the length distribution ---------------------------------------------------


def _upper_tail(z):
    return 0.5 * np.asarray(_erfc(np.asarray(z, float) / _SQRT2), dtype=float)


def _normal_mass(z_lo, z_hi):
    """P(z_lo < Z <= z_hi), Z standard normal, as a difference of whichever tails are small."""
    z_lo, z_hi = np.broadcast_arrays(np.asarray(z_lo, float), np.asarray(z_hi, float))
    lower = _upper_tail(-z_hi) - _upper_tail(-z_lo)  # both <= 0: Phi(z_hi) − Phi(z_lo)
    upper = _upper_tail(z_lo) - _upper_tail(z_hi)  # both >= 0
    middle = 1.0 - _upper_tail(-z_lo) - _upper_tail(z_hi)
    mass = np.where(z_hi <= 0, lower, np.where(z_lo >= 0, upper, middle))
    return np.maximum(mass, 0.0)


def length_moments(distribution: LengthDistribution, a, b, max_order: int = 4) -> np.ndarray:
    """E[L^k; a < L <= b] for k = 0..max_order (probability-weighted, not conditional), shape
    (max_order + 1, *broadcast(a, b).shape): workload.partial_moments to a higher order.

    Closed forms for the three shipped distributions: the truncated log-normal
    (exp(kμ + k²σ²/2) · [Φ(z_b − kσ) − Φ(z_a − kσ)] / Z), the histogram (uniform density per
    bin) and observed lengths (sums of powers). Any other distribution is integrated over its
    mesh, which puts each cell's mass at one point (accurate to the mesh's resolution).
    """
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    orders = range(max_order + 1)
    if isinstance(distribution, TruncatedLogNormal):
        d = distribution
        lo = np.clip(a, d.min_tokens, d.max_tokens)
        hi = np.maximum(np.clip(b, d.min_tokens, d.max_tokens), lo)
        with np.errstate(divide="ignore"):
            z_lo = (np.log(lo) - d.mu_log) / d.sigma_log
            z_hi = (np.log(hi) - d.mu_log) / d.sigma_log
        z_min = (math.log(d.min_tokens) - d.mu_log) / d.sigma_log
        z_max = (math.log(d.max_tokens) - d.mu_log) / d.sigma_log
        norm = float(_normal_mass(z_min, z_max))
        return np.stack(
            [
                math.exp(k * d.mu_log + 0.5 * (k * d.sigma_log) ** 2)
                / norm
                * _normal_mass(z_lo - k * d.sigma_log, z_hi - k * d.sigma_log)
                for k in orders
            ]
        )
    if isinstance(distribution, Histogram):
        edges = np.asarray(distribution.bin_edges_tokens, float)
        w = np.asarray(distribution.weights, float)
        density = w / w.sum() / np.diff(edges)
        lo = np.clip(a[..., None], edges[:-1], edges[1:])
        hi = np.maximum(np.clip(b[..., None], edges[:-1], edges[1:]), lo)
        return np.stack(
            [((hi ** (k + 1) - lo ** (k + 1)) / (k + 1) * density).sum(axis=-1) for k in orders]
        )
    if isinstance(distribution, ObservedLengths):
        values = distribution.lengths_tokens  # sorted, each equally likely
        weights = np.full(values.size, 1.0 / values.size)
    else:
        values, weights = distribution.mesh()
        order = np.argsort(values, kind="stable")
        values, weights = values[order], weights[order] / weights.sum()
    powers = np.stack([values**k for k in orders]) * weights
    cumulative = np.concatenate([np.zeros((len(orders), 1)), np.cumsum(powers, axis=1)], axis=1)
    i = np.searchsorted(values, a, side="right")
    j = np.searchsorted(values, np.maximum(a, b), side="right")
    return cumulative[:, j] - cumulative[:, i]


def _square(curve: FittedCurve) -> tuple[float, ...]:
    """Coefficients of y(l)², for E[y(L)²] from partial moments."""
    c = np.asarray(curve.coefficients, float)
    return tuple(np.polynomial.polynomial.polymul(c, c).tolist())


def _second_moment(curve: FittedCurve, moments) -> np.ndarray:
    """E[y(L)²; A] from partial moments m_k = E[L^k; A], k up to 2·degree."""
    return sum(c * moments[k] for k, c in enumerate(_square(curve)))


# --- the deployment under load (vectorised over candidate plans) ---------------------------


class _Loads(NamedTuple):
    """Queueing state of candidate plans (arrays broadcast over thresholds and splits)."""

    offload_fraction: np.ndarray
    stable: np.ndarray
    utilization: np.ndarray  # stacked in capacity.BOUND_ORDER, shape (4, ...)
    prfaas_service_s: np.ndarray  # E[S], E[S²]/E[S]² − 1 of each prefill pool
    prfaas_scv: np.ndarray
    pd_service_s: np.ndarray
    pd_scv: np.ndarray
    prfaas_wait: tuple  # (ρ, Wq, C, Wq / C) of each prefill pool
    pd_wait: tuple
    link_slowdown: np.ndarray  # 1 / (1 − ρ_link), inf if ρ_link >= 1
    mean_transfer_bytes: np.ndarray  # E[S_kv | L > t]
    local_mean_s: np.ndarray  # mean TTFT per route (nan where the route is empty)
    offloaded_mean_s: np.ndarray
    mean_s: np.ndarray


def _loads(
    system: ServingSystem,
    workload: LengthDistribution,
    threshold_tokens,
    prfaas_instances,
    pd_prefill_instances,
    pd_decode_instances,
    arrival_rate_rps: float,
    link_latency_s: float,
) -> _Loads:
    lam = float(arrival_rate_rps)
    r = rates(
        system,
        workload,
        threshold_tokens,
        prfaas_instances,
        pd_prefill_instances,
        pd_decode_instances,
        Mode.EXACT,  # queues see the mean service time E[T(L)], whatever the planning mode
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        utilization = np.where(lam > 0, lam / r.limits_rps, 0.0)
    stable = np.all(utilization < 1, axis=0)
    p = r.offload_fraction
    t = np.broadcast_to(np.asarray(threshold_tokens, float), p.shape)
    short = length_moments(workload, -np.inf, t, 2 * system.pd_prefill_latency.degree)
    long = length_moments(workload, t, np.inf, 2 * system.prfaas_prefill_latency.degree)

    def scv(curve, moments, mean_s):
        with np.errstate(divide="ignore", invalid="ignore"):
            second = _second_moment(curve, moments) / moments[0]
            return np.where(moments[0] > 0, np.maximum(second / mean_s**2 - 1.0, 0.0), 0.0)

    prfaas_scv = scv(system.prfaas_prefill_latency, long, r.prfaas_service_time_s)
    pd_scv = scv(system.pd_prefill_latency, short, r.pd_prefill_service_time_s)
    prfaas_wait = _mgc(prfaas_instances, lam * p, r.prfaas_service_time_s, prfaas_scv)
    pd_wait = _mgc(pd_prefill_instances, lam * (1 - p), r.pd_prefill_service_time_s, pd_scv)
    rho_link = utilization[BOUND_ORDER.index(Bound.PRFAAS_LINK)]
    with np.errstate(divide="ignore"):
        slowdown = np.where(rho_link < 1, 1.0 / (1.0 - rho_link), np.inf)
    transfer_s = (
        np.where(p > 0, r.long_kv_cache_bytes, 0.0) / system.link_bandwidth_bytes_per_s * slowdown
    )
    local = np.where(p < 1, r.pd_prefill_service_time_s + pd_wait[1], np.nan)
    offloaded = np.where(
        p > 0, r.prfaas_service_time_s + prfaas_wait[1] + transfer_s + link_latency_s, np.nan
    )
    mean = np.where(p < 1, (1 - p) * local, 0.0) + np.where(p > 0, p * offloaded, 0.0)
    unstable = ~stable
    return _Loads(
        offload_fraction=p,
        stable=stable,
        utilization=utilization,
        prfaas_service_s=r.prfaas_service_time_s,
        prfaas_scv=prfaas_scv,
        pd_service_s=r.pd_prefill_service_time_s,
        pd_scv=pd_scv,
        prfaas_wait=prfaas_wait,
        pd_wait=pd_wait,
        link_slowdown=slowdown,
        mean_transfer_bytes=r.long_kv_cache_bytes,
        local_mean_s=np.where(unstable & (p < 1), np.inf, local),
        offloaded_mean_s=np.where(unstable & (p > 0), np.inf, offloaded),  # nan: empty route
        mean_s=np.where(unstable, np.inf, mean),
    )


class _Mesh(NamedTuple):
    """The length distribution's mesh with each length's unloaded service times."""

    tokens: np.ndarray
    weights: np.ndarray  # sum to 1
    local_s: np.ndarray  # T_pd(l)
    offloaded_s: np.ndarray  # T_prfaas(l)
    transfer_s: np.ndarray  # S_kv(l) / B, unshared


def _mesh(system: ServingSystem, workload: LengthDistribution) -> _Mesh:
    tokens, weights = workload.mesh()
    return _Mesh(
        tokens,
        weights / weights.sum(),
        system.pd_prefill_latency(tokens),
        system.prfaas_prefill_latency(tokens),
        system.kv_cache_size(tokens) / system.link_bandwidth_bytes_per_s,
    )


def _ttft_cdf(mesh: _Mesh, loads: _Loads, thresholds, link_latency_s: float, x):
    """P(TTFT <= x) under the approximation of the module docstring, for K candidate plans
    (`loads` and `thresholds` of shape (K,)) at points x of shape (K, Q): shape (K, Q)."""
    t = np.asarray(thresholds, float)[:, None, None]
    offloaded = mesh.tokens > t  # (K, 1, n)
    slowdown = loads.link_slowdown[:, None, None]
    base = np.where(
        offloaded,
        mesh.offloaded_s + mesh.transfer_s * slowdown + link_latency_s,
        mesh.local_s,
    )
    probability = np.where(
        offloaded, loads.prfaas_wait[2][:, None, None], loads.pd_wait[2][:, None, None]
    )
    conditional = np.where(
        offloaded, loads.prfaas_wait[3][:, None, None], loads.pd_wait[3][:, None, None]
    )
    y = np.asarray(x, float)[:, :, None] - base
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        decay = np.where(conditional > 0, np.exp(-np.maximum(y, 0) / conditional), 0.0)
    cdf = np.where(y >= 0, 1.0 - probability * decay, 0.0)
    return (cdf * mesh.weights).sum(axis=-1)


def _percentiles(mesh: _Mesh, loads: _Loads, thresholds, link_latency_s: float, percentiles):
    """TTFT percentiles of K stable candidate plans, shape (K, Q): the smallest x with
    P(TTFT <= x) >= q / 100, by bisection to a relative INVERSION_RTOL."""
    q = np.asarray(percentiles, float)[None, :] / 100.0
    k = np.asarray(thresholds).size
    lo = np.zeros((k, q.shape[1]))
    longest = np.maximum(mesh.local_s.max(), mesh.offloaded_s.max() + mesh.transfer_s.max())
    hi = np.full(lo.shape, 1.0 + longest + link_latency_s)
    for _ in range(200):  # grow hi until it holds the percentile
        short = _ttft_cdf(mesh, loads, thresholds, link_latency_s, hi) < q
        if not short.any():
            break
        hi = np.where(short, 2 * hi, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = _ttft_cdf(mesh, loads, thresholds, link_latency_s, mid) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= INVERSION_RTOL * hi):
            break
    return hi


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
        key = _check_metric(percentile)
        return self.mean_s if key == "mean" else getattr(self, f"p{key}_s")


def _check_metric(percentile) -> int | str:
    for metric in TTFT_METRICS:
        if percentile == metric and type(percentile) is type(metric):
            return metric
    raise ConfigError(f"TTFT percentile must be one of 'mean', 50, 90, 99; got {percentile!r}")


def _check_rate(arrival_rate_rps: float) -> None:
    if not (arrival_rate_rps >= 0 and math.isfinite(arrival_rate_rps)):
        raise ConfigError(
            f"the arrival rate must be a finite number >= 0 req/s, got {arrival_rate_rps:g}"
        )


def _check_latency(link_latency_s: float) -> None:
    if not (link_latency_s >= 0 and math.isfinite(link_latency_s)):
        raise ConfigError(f"link latency must be a finite number >= 0 s, got {link_latency_s:g}")


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
    _check_rate(arrival_rate_rps)
    _check_latency(link_latency_s)
    c = configuration
    lam = float(arrival_rate_rps)
    t = np.array([float(c.threshold_tokens)])
    loads = _loads(
        system,
        workload,
        t,
        c.prfaas_instances,
        c.pd_prefill_instances,
        c.pd_decode_instances,
        lam,
        link_latency_s,
    )
    p = float(loads.offload_fraction[0])
    utilization = loads.utilization[:, 0]
    overloaded = tuple(b for b, u in zip(BOUND_ORDER, utilization, strict=True) if u >= 1)
    stable = not overloaded
    if stable:
        p50, p90, p99 = _percentiles(
            _mesh(system, workload), loads, t, link_latency_s, PERCENTILES
        )[0]
    else:
        p50 = p90 = p99 = math.inf

    def pool(servers, share, mean_s, scv, wait) -> PoolQueue:
        rho, wq, probability, _ = (float(v[0]) for v in wait)
        return PoolQueue(
            servers=int(servers),
            arrival_rate_rps=lam * share,
            mean_service_s=float(mean_s[0]) if share > 0 else math.nan,
            service_scv=float(scv[0]),
            utilization=rho,
            wait_probability=probability,
            mean_wait_s=wq,
        )

    decode_slots = c.pd_decode_instances * system.decode.batch_size
    decode_service_s = system.output_tokens * system.decode.step_latency_s
    rho_link = float(utilization[BOUND_ORDER.index(Bound.PRFAAS_LINK)])
    slowdown = float(loads.link_slowdown[0])
    transfer_bytes = float(loads.mean_transfer_bytes[0]) if p > 0 else math.nan
    return LoadedTtft(
        arrival_rate_rps=lam,
        stable=stable,
        overloaded=overloaded,
        mean_s=float(loads.mean_s[0]),
        p50_s=float(p50),
        p90_s=float(p90),
        p99_s=float(p99),
        local_mean_s=float(loads.local_mean_s[0]),
        offloaded_mean_s=float(loads.offloaded_mean_s[0]),
        offload_fraction=p,
        prfaas_prefill=pool(
            c.prfaas_instances, p, loads.prfaas_service_s, loads.prfaas_scv, loads.prfaas_wait
        ),
        pd_prefill=pool(
            c.pd_prefill_instances, 1 - p, loads.pd_service_s, loads.pd_scv, loads.pd_wait
        ),
        link=LinkQueue(
            arrival_rate_rps=lam * p,
            mean_transfer_bytes=transfer_bytes,
            utilization=rho_link,
            slowdown=slowdown,
            latency_s=link_latency_s,
            mean_transfer_s=(
                transfer_bytes / system.link_bandwidth_bytes_per_s * slowdown + link_latency_s
                if p > 0
                else math.nan
            ),
        ),
        # output lengths are the constant L_out: deterministic service, C_s² = 0
        pd_decode=pool(
            decode_slots,
            1.0,
            np.array([decode_service_s]),
            np.array([0.0]),
            _mgc(decode_slots, np.array([lam]), decode_service_s, 0.0),
        ),
        unloaded=unloaded_ttft(system, workload, float(c.threshold_tokens)),
    )


# --- the constrained optimiser ----------------------------------------------------------------


class _Candidates(NamedTuple):
    """Candidate plans (flat arrays): threshold, split, Λ_max, stability, TTFT slack."""

    thresholds: np.ndarray
    pd_prefill: np.ndarray
    pd_decode: np.ndarray
    capacity_rps: np.ndarray
    stable: np.ndarray
    slack: np.ndarray  # >= 0 iff the target is met: q − P(TTFT <= x) sign-flipped, or x − mean


class _Problem(NamedTuple):
    system: ServingSystem
    workload: LengthDistribution
    space: SearchSpace
    mode: Mode
    arrival_rate_rps: float
    metric: int | str
    target_s: float
    link_latency_s: float
    mesh: _Mesh | None


def _evaluate(problem: _Problem, thresholds, n_p, n_d) -> _Candidates:
    """Λ_max (capacity.rates in the planning mode) and the TTFT slack of flat candidates."""
    s, w, sp = problem.system, problem.workload, problem.space
    t, n_p, n_d = np.broadcast_arrays(
        np.asarray(thresholds, float), np.asarray(n_p), np.asarray(n_d)
    )
    t, n_p, n_d = t.ravel(), n_p.ravel(), n_d.ravel()
    capacity = rates(s, w, t, sp.prfaas_instances, n_p, n_d, problem.mode).system_rps
    loads = _loads(
        s, w, t, sp.prfaas_instances, n_p, n_d, problem.arrival_rate_rps, problem.link_latency_s
    )
    if problem.metric == "mean":
        slack = problem.target_s - loads.mean_s
    else:
        x = np.full((t.size, 1), problem.target_s)
        met = _ttft_cdf(problem.mesh, loads, t, problem.link_latency_s, x)[:, 0]
        slack = met - problem.metric / 100.0
    slack = np.where(loads.stable, slack, -np.inf)
    return _Candidates(t, n_p, n_d, np.asarray(capacity, float), loads.stable, slack)


def _concat(parts: list[_Candidates]) -> _Candidates:
    return _Candidates(*(np.concatenate(fields) for fields in zip(*parts, strict=True)))


def _threshold_grid(workload: LengthDistribution) -> np.ndarray:
    """From 'offload everything' (below the shortest length) to 'offload nothing'."""
    grid = np.geomspace(workload.min_tokens, workload.max_tokens, THRESHOLD_GRID_POINTS)
    return np.concatenate([[workload.min_tokens - 1.0], grid])


def _bisect(lo, hi, left_of, steps: int):
    """Shrink brackets [lo, hi] of t (arrays) around a change of `left_of(t)` (True on the side
    of `lo`) by bisection, keeping both ends."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        left = left_of(mid)
        lo, hi = np.where(left, mid, lo), np.where(left, hi, mid)
    return lo, hi


def _golden_max(problem: _Problem, lo, hi, n_p, n_d):
    """Threshold maximising the TTFT slack in [lo, hi], per row (golden section, one new
    evaluation per step)."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    both = _evaluate(problem, np.concatenate([x1, x2]), np.tile(n_p, 2), np.tile(n_d, 2)).slack
    f1, f2 = np.split(both, 2)
    for _ in range(SLACK_STEPS):
        left = f1 >= f2  # the maximum lies in [lo, x2]: x1 becomes the new x2
        lo, hi = np.where(left, lo, x1), np.where(left, x2, hi)
        x1, x2, f1, f2 = (
            np.where(left, hi - ratio * (hi - lo), x2),
            np.where(left, x1, lo + ratio * (hi - lo)),
            np.where(left, -np.inf, f2),
            np.where(left, f1, -np.inf),
        )
        new = _evaluate(problem, np.where(left, x1, x2), n_p, n_d).slack
        f1, f2 = np.where(left, new, f1), np.where(left, f2, new)
    return np.where(f1 >= f2, x1, x2)


def _search(problem: _Problem, grid, n_p, n_d) -> _Candidates:
    """Every candidate the optimum can be among, for thresholds searched per split.

    1. The grid, and per split the crossing of the two prefill terms (where Λ_max peaks,
       reference eq. 7: Λ_max rises up to it and falls after it), found by bisection.
    2. Per split, the threshold of most TTFT slack near the grid's best (golden section between
       its grid neighbours), so that a feasible set narrower than a grid cell is not missed.
    3. With those points added to each split's grid, every edge of the feasible set (where the
       target starts or stops holding) between neighbouring points whose better end could
       beat the best feasible Λ_max found so far, by bisection; both ends of each bracket.
    """
    s, w, sp = problem.system, problem.workload, problem.space
    coarse = _evaluate(problem, grid[None, :], n_p[:, None], n_d[:, None])
    shape = (n_p.size, grid.size)

    def prfaas_binds(t, n_p, n_d):
        r = rates(s, w, t, sp.prfaas_instances, n_p, n_d, problem.mode)
        with np.errstate(invalid="ignore"):
            return r.limits_rps[:2].min(axis=0) < r.limits_rps[2]

    rising = prfaas_binds(grid[None, :], n_p[:, None], n_d[:, None])
    turns = rising[:, :-1] & ~rising[:, 1:]
    # with N_p = 0 the "crossing" is the jump at the shortest length, not a balance point;
    # splits without a crossing repeat a grid point instead
    crosses = turns.any(axis=1) & (n_p > 0)
    first = turns.argmax(axis=1)
    peak_lo, peak_hi = _bisect(
        np.where(crosses, grid[first], grid[0]),
        np.where(crosses, grid[first + 1], grid[0]),
        lambda t: prfaas_binds(t, n_p, n_d),
        REFINE_STEPS,
    )
    best = np.argmax(coarse.slack.reshape(shape), axis=1)
    last = grid.size - 1
    most_slack = _golden_max(
        problem, grid[np.maximum(best - 1, 0)], grid[np.minimum(best + 1, last)], n_p, n_d
    )
    extra = np.column_stack([peak_lo, peak_hi, most_slack])
    added = _evaluate(problem, extra, n_p[:, None], n_d[:, None])
    rows = np.column_stack([np.tile(grid, (n_p.size, 1)), extra])
    shape = rows.shape
    order = np.argsort(rows, axis=1, kind="stable")
    rows = np.take_along_axis(rows, order, axis=1)
    points = _Candidates(
        *(
            np.take_along_axis(
                np.column_stack([a.reshape(n_p.size, -1), b.reshape(n_p.size, -1)]), order, axis=1
            ).ravel()
            for a, b in zip(coarse, added, strict=True)
        )
    )
    feasible = (points.slack >= 0).reshape(shape)
    capacity = points.capacity_rps.reshape(shape)
    reached = np.max(np.where(feasible, capacity, -np.inf))
    flips = np.argwhere(feasible[:, :-1] != feasible[:, 1:])
    split, i = flips[:, 0], flips[:, 1]
    ceiling = np.maximum(capacity[split, i], capacity[split, i + 1])
    keep = ceiling >= reached * (1 - TIE_RTOL)
    found = [points]
    if keep.any():
        split, i = split[keep], i[keep]
        left_feasible = feasible[split, i]
        lo, hi = _bisect(
            rows[split, i],
            rows[split, i + 1],
            lambda t: (_evaluate(problem, t, n_p[split], n_d[split]).slack >= 0) == left_feasible,
            EDGE_STEPS,
        )
        found += [_evaluate(problem, ends, n_p[split], n_d[split]) for ends in (lo, hi)]
    return _concat(found)


def _describe(metric, target_s: float) -> str:
    name = "mean" if metric == "mean" else f"P{metric}"
    return f"{name} TTFT <= {target_s:g} s"


def _configuration(space: SearchSpace, c: _Candidates, i: int) -> Configuration:
    return Configuration(
        prfaas_instances=space.prfaas_instances,
        pd_prefill_instances=int(c.pd_prefill[i]),
        pd_decode_instances=int(c.pd_decode[i]),
        threshold_tokens=float(c.thresholds[i]),
    )


def _plan_text(configuration: Configuration) -> str:
    c = configuration
    return (
        f"t={c.threshold_tokens:,.0f} tokens, N_prfaas/N_p/N_d = "
        f"{c.prfaas_instances}/{c.pd_prefill_instances}/{c.pd_decode_instances}"
    )


_PART_NAMES = {
    Bound.PRFAAS_COMPUTE: "PrfaaS prefill",
    Bound.PRFAAS_LINK: "the inter-cluster link",
    Bound.PD_PREFILL: "PD-P prefill",
    Bound.PD_DECODE: "PD-D decode",
}


def _binding_part(problem: _Problem, result: LoadedTtft, configuration: Configuration) -> str:
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


def _take(field, keep):
    """Rows `keep` of a _Loads field (an array or a tuple of arrays)."""
    if isinstance(field, tuple):
        return tuple(np.asarray(f)[..., keep] for f in field)
    return np.asarray(field)[..., keep]


def _metric_values(problem: _Problem, thresholds, n_p, n_d) -> np.ndarray:
    """The constrained TTFT figure of candidates (inf where unstable)."""
    s, w, sp = problem.system, problem.workload, problem.space
    t = np.asarray(thresholds, float)
    loads = _loads(
        s, w, t, sp.prfaas_instances, n_p, n_d, problem.arrival_rate_rps, problem.link_latency_s
    )
    if problem.metric == "mean":
        return loads.mean_s
    out = np.full(t.shape, np.inf)
    keep = loads.stable
    if keep.any():
        stable = _Loads(*(_take(field, keep) for field in loads))
        out[keep] = _percentiles(
            problem.mesh, stable, t[keep], problem.link_latency_s, [problem.metric]
        )[:, 0]
    return out


def _lowest_ttft(problem: _Problem, c: _Candidates) -> Configuration:
    """The stable candidate with the lowest TTFT figure, its threshold then polished between
    its neighbours on the grid (golden section; the figure is unimodal in t near there).

    A percentile costs a numerical inversion, so it is computed for a shortlist only: the
    candidates with the most probability below a level x, at first the target. When the lowest
    figure v found is below x, the shortlist is drawn again at x = v, until it no longer
    improves: then no candidate outside it reaches the percentile by v."""
    stable = np.flatnonzero(c.stable)
    slack, i, best = c.slack, int(np.argmax(c.slack)), math.inf
    if problem.metric != "mean":
        for _ in range(8):
            short = stable[np.argsort(-slack[stable], kind="stable")[:LOWEST_SHORTLIST]]
            values = _metric_values(
                problem, c.thresholds[short], c.pd_prefill[short], c.pd_decode[short]
            )
            k = int(np.argmin(values))
            if not values[k] < best:
                break
            best, i = float(values[k]), int(short[k])
            slack = _evaluate(
                problem._replace(target_s=best), c.thresholds, c.pd_prefill, c.pd_decode
            ).slack
    configuration = _configuration(problem.space, c, i)
    if problem.space.threshold_tokens is not None or problem.space.prfaas_instances == 0:
        return configuration
    grid = _threshold_grid(problem.workload)
    j = int(np.searchsorted(grid, c.thresholds[i]))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
    n_p, n_d = np.repeat(c.pd_prefill[i], 2), np.repeat(c.pd_decode[i], 2)
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(GOLDEN_STEPS):
        x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        f1, f2 = _metric_values(problem, np.array([x1, x2]), n_p, n_d)
        if f1 <= f2:
            hi = x2
        else:
            lo = x1
    t = 0.5 * (lo + hi)
    here, there = _metric_values(problem, np.array([c.thresholds[i], t]), n_p, n_d)
    if there < here:
        configuration = _configuration(
            problem.space, c._replace(thresholds=np.full(c.thresholds.shape, t)), i
        )
    return configuration


def _infeasible(problem: _Problem, c: _Candidates) -> InfeasibleError:
    s, w, sp = problem.system, problem.workload, problem.space
    rate = problem.arrival_rate_rps
    head = f"no plan meets {_describe(problem.metric, problem.target_s)} at {rate:g} req/s"
    if not c.stable.any():
        exact = rates(
            s, w, c.thresholds, sp.prfaas_instances, c.pd_prefill, c.pd_decode, Mode.EXACT
        )
        configuration = _configuration(sp, c, int(np.argmax(exact.system_rps)))
        best = evaluate(s, w, configuration, Mode.EXACT)
        return InfeasibleError(
            f"{head}: every plan is overloaded, the highest capacity is "
            f"{best.system_throughput_rps:.3g} req/s (exact mode) at {_plan_text(configuration)}, "
            f"bound by {' and '.join(_PART_NAMES[b] for b in best.bounds)}; lower the load or "
            "add instances"
        )
    configuration = _lowest_ttft(problem, c)
    result = loaded_ttft(s, w, configuration, rate, link_latency_s=problem.link_latency_s)
    return InfeasibleError(
        f"{head}: the lowest found is {result.metric(problem.metric):.3g} s at "
        f"{_plan_text(configuration)}, {_binding_part(problem, result, configuration)}; "
        "relax the target, lower the load or add instances"
    )


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
    Λ_max. Search: for every split, a geometric grid of THRESHOLD_GRID_POINTS thresholds, then
    bisection to the crossing of the two prefill terms (the unconstrained peak of Λ_max) and to
    every edge of the feasible set between grid points; the best feasible candidate wins (ties,
    e.g. a decode-bound plateau, go to the most TTFT slack). A feasible set narrower than a grid
    cell, away from the peak, can be missed.

    Raises InfeasibleError naming the best TTFT reachable and what binds it.
    """
    metric = _check_metric(ttft_percentile)
    _check_rate(arrival_rate_rps)
    _check_latency(link_latency_s)
    if not (ttft_target_s > 0 and math.isfinite(ttft_target_s)):
        raise ConfigError(f"the TTFT target must be a finite number > 0 s, got {ttft_target_s:g}")
    problem = _Problem(
        system,
        workload,
        space,
        mode,
        float(arrival_rate_rps),
        metric,
        float(ttft_target_s),
        float(link_latency_s),
        None if metric == "mean" else _mesh(system, workload),
    )
    n_p, n_d = space.splits()
    if space.threshold_tokens is not None:
        grid = np.array([float(space.threshold_tokens)])
    elif space.prfaas_instances == 0:
        grid = np.array([np.inf])
    else:
        grid = _threshold_grid(workload)
    if grid.size > 1:
        candidates = _search(problem, grid, n_p, n_d)
    else:
        candidates = _evaluate(problem, grid[None, :], n_p[:, None], n_d[:, None])
    feasible = candidates.slack >= 0
    if not feasible.any():
        raise _infeasible(problem, candidates)
    capacity = np.where(feasible, candidates.capacity_rps, -np.inf)
    tied = np.flatnonzero(capacity >= capacity.max() * (1 - TIE_RTOL))
    i = int(tied[np.argmax(candidates.slack[tied])])
    configuration = _configuration(space, candidates, i)
    return (
        evaluate(system, workload, configuration, mode),
        loaded_ttft(
            system, workload, configuration, arrival_rate_rps, link_latency_s=link_latency_s
        ),
    )
