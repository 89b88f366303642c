"""Time to first token under load: an analytic queueing approximation. The queueing formulas
are in queueing.py, the deployment's queues in deployment_load.py, the TTFT distribution and
the result here; the planner's TTFT-constrained search is solve/ttft_target.py.

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
the simulator (tests/test_queueing.py), on the case-study plan the mean and P90 come out about
1% low at 50% and 80% of Λ_max and about 2% low at 95% (the waits are 5-10% low for these
pools, whose service times vary less than exponential ones; P(W > 0) is right to 0.01). The
case-study link runs at ρ <= 0.12; with a link busy enough to matter M/G/1-PS overstates the
transfer time (+45% at ρ_link = 0.7, TTFT +6%), so there the figures are conservative.
"""

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray
from prfaas_plan.analytic.capacity import BOUND_ORDER, Bound, Configuration, ServingSystem
from prfaas_plan.analytic.deployment_load import Loads, loads
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.queueing import MgcState, mgc
from prfaas_plan.analytic.ttft import PERCENTILES, TtftSummary, unloaded_ttft
from prfaas_plan.errors import ConfigError

Metric = Literal["mean", 50, 90, 99]  # the TTFT figure a target constrains
TTFT_METRICS: tuple[Metric, ...] = ("mean", 50, 90, 99)
INVERSION_RTOL = 1e-10  # relative accuracy of a TTFT percentile


# --- the TTFT distribution -----------------------------------------------------------------


class TtftMesh(NamedTuple):
    """The length distribution's mesh with each length's unloaded service times."""

    tokens: FloatArray
    weights: FloatArray  # sum to 1
    local_s: FloatArray  # T_pd(l)
    offloaded_s: FloatArray  # T_prfaas(l)
    transfer_s: FloatArray  # S_kv(l) / B, unshared
    ascending: bool = False  # tokens in increasing order: a route's cells are a slice


def ttft_mesh(system: ServingSystem, workload: LengthDistribution) -> TtftMesh:
    tokens, weights = workload.mesh()
    return TtftMesh(
        tokens,
        weights / weights.sum(),
        system.pd_prefill_latency(tokens),
        system.prfaas_prefill_latency(tokens),
        system.kv_cache_size(tokens) / system.link_bandwidth_bytes_per_s,
        bool(np.all(np.diff(tokens) >= 0)),
    )


def _cells(mesh: TtftMesh, threshold_tokens: float, offloaded: bool) -> "slice | BoolArray":
    """The mesh cells of a route at one threshold: L > t offloaded, L <= t local (a slice, a
    view without copies, where the mesh is in increasing order)."""
    if mesh.ascending:
        i = int(np.searchsorted(mesh.tokens, threshold_tokens, side="right"))
        return slice(i, None) if offloaded else slice(0, i)
    mask: BoolArray = (
        mesh.tokens > threshold_tokens if offloaded else mesh.tokens <= threshold_tokens
    )
    return mask


def route_cdf(
    mesh: TtftMesh,
    loads: Loads,
    thresholds: ArrayLike,
    link_latency_s: float,
    x: ArrayLike,
    offloaded: bool,
) -> FloatArray:
    """P(TTFT <= x and the request takes the route: offloaded, or local) for K candidate plans
    (`loads` and `thresholds` of shape (K,)) at points x of shape (K, Q): shape (K, Q)."""
    t = np.asarray(thresholds, float)
    if t.size and np.all(t == t.flat[0]):  # one threshold: only the route's own cells
        cells: slice | BoolArray = _cells(mesh, float(t.flat[0]), offloaded)
        weights = mesh.weights[cells]
    else:
        above = mesh.tokens > t[:, None, None]  # (K, 1, n)
        cells = slice(None)
        weights = np.where(above if offloaded else ~above, mesh.weights, 0.0)
    if offloaded:
        slowdown = loads.link_slowdown[:, None, None]
        base = mesh.offloaded_s[cells] + mesh.transfer_s[cells] * slowdown + link_latency_s
        wait = loads.prfaas_wait
    else:
        base = mesh.local_s[cells]
        wait = loads.pd_wait
    points = np.asarray(x, float)
    # a cell whose unloaded TTFT exceeds every x adds nothing: dropped before the exponentials
    # (most of a route's cells at a percentile target below its longest requests' TTFT)
    lowest = base if base.ndim == 1 else base.min(axis=tuple(range(base.ndim - 1)))
    reached = lowest <= points.max(initial=-np.inf)
    if not reached.all():
        base = base[..., reached]
        weights = weights[..., reached]
    if points.size and points.shape[1] == 1 and np.all(points == points.flat[0]):
        return _route_cdf_at(points.flat[0], base, weights, wait)[:, None]
    probability = wait.wait_probability[:, None, None]
    conditional = wait.conditional_wait_s[:, None, None]
    y = points[:, :, None] - base
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        decay = np.where(conditional > 0, np.exp(-np.maximum(y, 0) / conditional), 0.0)
    met = np.where(y >= 0, 1.0 - probability * decay, 0.0)
    out: FloatArray = (met * weights).sum(axis=-1)
    return out


def _route_cdf_at(x: float, base: FloatArray, weights: FloatArray, wait: MgcState) -> FloatArray:
    """`route_cdf` at one x for every plan (route_part's case), in fewer passes: the sum over
    reached cells (base <= x) of w (1 − P e^(−(x − base)/c)) is W_reached − P Σ w e^(−y/c),
    a masked exponential and a matrix-vector product. base: (n,) shared by the plans (the local
    route: every cell left is reached) or (K, 1, n) (the offloaded route: the link's slowdown
    differs by plan); weights (n,) or (K, 1, n) (plans at different thresholds)."""
    conditional_s = wait.conditional_wait_s
    waits = conditional_s > 0
    scale = np.where(waits, conditional_s, 1.0)[:, None]
    if base.ndim == 1 and weights.ndim == 1:
        with np.errstate(over="ignore"):
            decay_sum = np.exp(-(x - base)[None, :] / scale) @ weights
        reached_weight = np.full(scale.shape[0], weights.sum())
    else:
        k = scale.shape[0]
        y = x - np.broadcast_to(base, (k, 1, base.shape[-1]))[:, 0, :]
        w = np.broadcast_to(weights, (k, 1, base.shape[-1]))[:, 0, :]
        reached = y >= 0
        with np.errstate(over="ignore", invalid="ignore"):
            decay = np.where(reached, np.exp(np.where(reached, -y, 0.0) / scale), 0.0)
        decay_sum = np.einsum("kn,kn->k", decay, w)
        reached_weight = np.einsum("kn,kn->k", reached, w)
    out: FloatArray = reached_weight - np.where(waits, wait.wait_probability * decay_sum, 0.0)
    return out


def ttft_cdf(
    mesh: TtftMesh, loads: Loads, thresholds: ArrayLike, link_latency_s: float, x: ArrayLike
) -> FloatArray:
    """P(TTFT <= x) under the approximation of the module docstring, for K candidate plans
    (`loads` and `thresholds` of shape (K,)) at points x of shape (K, Q): shape (K, Q)."""
    return route_cdf(mesh, loads, thresholds, link_latency_s, x, False) + route_cdf(
        mesh, loads, thresholds, link_latency_s, x, True
    )


def route_part(
    system: ServingSystem,
    mesh: TtftMesh | None,
    loads: Loads,
    thresholds: ArrayLike,
    link_latency_s: float,
    target_s: float,
    offloaded: bool,
) -> FloatArray:
    """One route's part of a TTFT target for K candidate plans (shape (K,)): with a mesh (a
    percentile target), P(TTFT <= target_s and the request takes the route); without (the
    mean), −(its share) x E[TTFT | the route]. The local and offloaded parts add up to
    ttft_cdf at the target, or to −mean. The two routes share no queue (the local one is
    PD-P's, the offloaded one PrfaaS's and the link's), so a search may vary each route's
    instances alone. A route with requests whose pool or link is overloaded gets −inf."""
    p = loads.offload_fraction
    u = loads.utilization
    if offloaded:
        used = p > 0
        overloaded = used & (
            (u[BOUND_ORDER.index(Bound.PRFAAS_COMPUTE)] >= 1)
            | (u[BOUND_ORDER.index(Bound.PRFAAS_LINK)] >= 1)
        )
    else:
        used = p < 1
        overloaded = used & (u[BOUND_ORDER.index(Bound.PD_PREFILL)] >= 1)
    if mesh is not None:
        x = np.full((np.asarray(thresholds).size, 1), target_s)
        part = route_cdf(mesh, loads, thresholds, link_latency_s, x, offloaded)[:, 0]
    else:
        with np.errstate(invalid="ignore"):
            if offloaded:
                transfer_s = (
                    loads.mean_transfer_bytes / system.link_bandwidth_bytes_per_s
                    * loads.link_slowdown
                )  # fmt: skip
                mean = loads.prfaas_service_s + loads.prfaas_wait.mean_wait_s + transfer_s
                part = np.where(used, -p * (mean + link_latency_s), 0.0)
            else:
                mean = loads.pd_service_s + loads.pd_wait.mean_wait_s
                part = np.where(used, -(1 - p) * mean, 0.0)
    out: FloatArray = np.where(overloaded, -np.inf, part)
    return out


def ttft_percentiles(
    mesh: TtftMesh,
    loads: Loads,
    thresholds: ArrayLike,
    link_latency_s: float,
    percentiles: ArrayLike,
) -> FloatArray:
    """TTFT percentiles of K stable candidate plans, shape (K, Q): the smallest x with
    P(TTFT <= x) >= q / 100, by bisection to a relative INVERSION_RTOL."""
    q = np.asarray(percentiles, float)[None, :] / 100.0
    k = np.asarray(thresholds).size
    lo = np.zeros((k, q.shape[1]))
    longest = np.maximum(mesh.local_s.max(), mesh.offloaded_s.max() + mesh.transfer_s.max())
    hi = np.full(lo.shape, 1.0 + longest + link_latency_s)
    for _ in range(200):  # grow hi until it holds the percentile
        short = ttft_cdf(mesh, loads, thresholds, link_latency_s, hi) < q
        if not short.any():
            break
        hi = np.where(short, 2 * hi, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = ttft_cdf(mesh, loads, thresholds, link_latency_s, mid) < q
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
