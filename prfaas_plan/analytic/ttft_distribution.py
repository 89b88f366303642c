"""The TTFT distribution of a loaded deployment: the length distribution's mesh with each length's
unloaded service times, each route's CDF (an M/M/c-shaped wait plus the service and transfer
times), their mixture and its percentiles by bisection. The queueing model and its result are
loaded_ttft.py. Units: seconds, requests/s, tokens, bytes, bytes/s."""

from typing import NamedTuple

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray
from prfaas_plan.analytic.capacity import BOUND_ORDER, Bound, ServingSystem
from prfaas_plan.analytic.deployment_load import Loads
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.queueing import MgcState

INVERSION_RTOL = 1e-10  # relative accuracy of a TTFT percentile


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
