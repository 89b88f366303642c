"""TTFT under load when the offloaded traffic is split over several PrfaaS sites, each with its
own prefill pool and link (procure's multi-site plans). The queueing model of loaded_ttft.py,
applied per route: requests with L > t (share p) go to site j with probability q_j (Σ q_j = 1,
independent of the length: the plan's split of the offloaded req/s), so site j's pool and link
see Poisson arrivals at λ p q_j and the lengths of the whole offloaded share; the local route
is PD-P's as in one site. With F_local(x) = P(TTFT <= x, local) and F_j(x) = P(TTFT <= x,
offloaded | the site's own load) (ttft_distribution.route_part: both include the route's share)

    P(TTFT <= x) = F_local(x) + Σ_j q_j F_j(x),
    E[TTFT] = (1 − p) E[TTFT | local] + p Σ_j q_j E[TTFT | offloaded to j].

One site with q = 1 is loaded_ttft itself (tests/test_split_ttft.py). Units: s, req/s.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import BOUND_ORDER, Bound, ServingSystem
from prfaas_plan.analytic.deployment_load import Loads, loads
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.loaded_ttft import check_metric
from prfaas_plan.analytic.ttft import PERCENTILES
from prfaas_plan.analytic.ttft_distribution import INVERSION_RTOL, TtftMesh, route_cdf, ttft_mesh


@dataclass(frozen=True)
class SiteRoute:
    """One PrfaaS site of a split plan: its system (prefill curve, link), RTT, instances and
    share q_j of the offloaded requests."""

    system: ServingSystem
    rtt_s: float
    instances: int
    share: float


@dataclass(frozen=True)
class SplitTtft:
    """TTFT of a plan whose offloaded requests are split over sites, at a Poisson rate (module
    docstring). Not `stable` (a pool or link at utilisation >= 1, named in `overloaded` as
    'pd_prefill', 'pd_decode' or 'site j: prfaas_compute' / 'site j: prfaas_link'): every
    figure is inf."""

    arrival_rate_rps: float
    stable: bool
    overloaded: tuple[str, ...]
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    offload_fraction: float
    site_shares: tuple[float, ...]

    def metric(self, percentile: int | str) -> float:
        key = check_metric(percentile)
        return self.mean_s if key == "mean" else float(getattr(self, f"p{key}_s"))


def split_ttft(
    pd_system: ServingSystem,
    workload: LengthDistribution,
    threshold_tokens: float,
    pd_prefill_instances: int,
    pd_decode_instances: int,
    routes: Sequence[SiteRoute],
    arrival_rate_rps: float,
) -> SplitTtft:
    """The TTFT mean and P50/P90/P99 of the module docstring."""
    lam = float(arrival_rate_rps)
    t = np.array([float(threshold_tokens)])
    # each call's other pools are placeholders (one instance): only its own route's are read
    local = loads(pd_system, workload, t, 1, pd_prefill_instances, pd_decode_instances, lam, 0.0)
    used = [r for r in routes if r.share > 0]
    remote = [loads(r.system, workload, t, r.instances, 1, 1, lam * r.share, r.rtt_s) for r in used]
    p = float(local.offload_fraction[0])
    overloaded = [
        str(b) for b in (Bound.PD_PREFILL, Bound.PD_DECODE)
        if local.utilization[BOUND_ORDER.index(b), 0] >= 1 and (b is Bound.PD_DECODE or p < 1)
    ]  # fmt: skip
    if p > 0:
        for j, state in enumerate(remote):
            overloaded += [
                f"site {j}: {b}" for b in (Bound.PRFAAS_COMPUTE, Bound.PRFAAS_LINK)
                if state.utilization[BOUND_ORDER.index(b), 0] >= 1
            ]  # fmt: skip
    shares = tuple(r.share for r in routes)
    if overloaded:
        inf = math.inf
        return SplitTtft(lam, False, tuple(overloaded), inf, inf, inf, inf, p, shares)
    mean = (1 - p) * float(local.pd_service_s[0] + local.pd_wait.mean_wait_s[0]) if p < 1 else 0.0
    for r, state in zip(used, remote, strict=True):
        if p > 0:
            transfer_s = (
                float(state.mean_transfer_bytes[0]) / r.system.link_bandwidth_bytes_per_s
                * float(state.link_slowdown[0])
            )  # fmt: skip
            wait_s = float(state.prfaas_wait.mean_wait_s[0])
            offloaded_s = float(state.prfaas_service_s[0]) + wait_s + transfer_s + r.rtt_s
            mean += p * r.share * offloaded_s
    local_mesh = ttft_mesh(pd_system, workload)
    meshes = [ttft_mesh(r.system, workload) for r in used]

    def cdf(x: FloatArray) -> FloatArray:
        points = x[:, None]
        total = route_cdf(local_mesh, _rows(local, x.size), np.full(x.size, t[0]), 0.0, points,
                          offloaded=False)[:, 0]  # fmt: skip
        for r, state, mesh in zip(used, remote, meshes, strict=True):
            total = total + r.share * _offloaded(mesh, state, t[0], r.rtt_s, points)
        return total

    percentiles = _invert(cdf, np.array(PERCENTILES, float) / 100.0, local_mesh, meshes, used)
    p50, p90, p99 = (float(v) for v in percentiles)
    return SplitTtft(lam, True, (), mean, p50, p90, p99, p, shares)


def _rows(state: Loads, count: int) -> Loads:
    """One plan's state repeated `count` times (one row per point of x)."""
    return Loads._make(
        [
            type(v)(*(np.repeat(f, count, axis=-1) for f in v))
            if isinstance(v, tuple)
            else np.repeat(v, count, axis=-1)
            for v in state
        ]
    )


def _offloaded(
    mesh: TtftMesh, state: Loads, threshold_tokens: float, rtt_s: float, points: FloatArray
) -> FloatArray:
    rows = _rows(state, points.shape[0])
    part: FloatArray = route_cdf(
        mesh, rows, np.full(points.shape[0], threshold_tokens), rtt_s, points, offloaded=True
    )[:, 0]
    return part


def _invert(
    cdf: Callable[[FloatArray], FloatArray],
    q: FloatArray,
    local_mesh: TtftMesh,
    meshes: list[TtftMesh],
    routes: list[SiteRoute],
) -> FloatArray:
    """The smallest x with cdf(x) >= q for each q, by bisection to INVERSION_RTOL (as
    ttft_distribution.ttft_percentiles)."""
    longest = max(
        [float(local_mesh.local_s.max())]
        + [
            float((m.offloaded_s + m.transfer_s).max()) + r.rtt_s
            for m, r in zip(meshes, routes, strict=True)
        ]
    )
    lo, hi = np.zeros(q.size), np.full(q.size, 1.0 + longest)
    for _ in range(200):
        short = cdf(hi) < q
        if not short.any():
            break
        hi = np.where(short, 2 * hi, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= INVERSION_RTOL * hi):
            break
    return hi
