"""The deployment's queues at a Poisson arrival rate λ, vectorised over candidate plans
(thresholds × splits): each prefill pool an M/G/c queue (queueing.mgc) with the exact E[S]
and C_s² of the lengths routed to it, the link an M/G/1 processor-sharing queue (slowdown
1 / (1 − ρ_link)), and the mean TTFT per route. The model and its limits are described in
loaded_ttft.py. Units: seconds, requests/s, tokens, bytes, bytes/s.
"""

from typing import NamedTuple

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray
from prfaas_plan.analytic.capacity import BOUND_ORDER, Bound, ServingSystem, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.analytic.queueing import MgcState, mgc
from prfaas_plan.choices import Mode


class Loads(NamedTuple):
    """Queueing state of candidate plans (arrays broadcast over thresholds and splits)."""

    offload_fraction: FloatArray
    stable: BoolArray
    utilization: FloatArray  # stacked in capacity.BOUND_ORDER, shape (4, ...)
    prfaas_service_s: FloatArray  # E[S], E[S²]/E[S]² − 1 of each prefill pool
    prfaas_scv: FloatArray
    pd_service_s: FloatArray
    pd_scv: FloatArray
    prfaas_wait: MgcState  # (ρ, Wq, C, Wq / C) of each prefill pool
    pd_wait: MgcState
    link_slowdown: FloatArray  # 1 / (1 − ρ_link), inf if ρ_link >= 1
    mean_transfer_bytes: FloatArray  # E[S_kv | L > t]
    local_mean_s: FloatArray  # mean TTFT per route (nan where the route is empty)
    offloaded_mean_s: FloatArray
    mean_s: FloatArray

    def take(self, keep: BoolArray) -> "Loads":
        """The candidates `keep` (a mask over the last axis)."""
        if keep.all():
            return self
        fields = [
            MgcState(*(f[..., keep] for f in v)) if isinstance(v, MgcState) else v[..., keep]
            for v in self
        ]
        return Loads._make(fields)


def _scv(curve: FittedCurve, moments: FloatArray, mean_s: FloatArray) -> FloatArray:
    """C_s² = E[y(L)² | A] / E[y | A]² − 1 of the requests in A (0 where A is empty)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        second = curve.second_moment(moments) / moments[0]
        scv: FloatArray = np.where(moments[0] > 0, np.maximum(second / mean_s**2 - 1.0, 0.0), 0.0)
    return scv


def _agreeing(pool: MgcState, utilization: FloatArray) -> MgcState:
    """The pool's state with the capacity model's ρ: λ·p·E[S]/c and λ/Λ_bound round differently,
    and at Λ_max one may give 1 - 1e-16 where the other gives 1; the capacity model decides."""
    stable = utilization < 1
    return MgcState(
        utilization,
        np.where(stable, pool.mean_wait_s, np.inf),
        pool.wait_probability,
        np.where(stable, pool.conditional_wait_s, np.inf),
    )


def loads(
    system: ServingSystem,
    workload: LengthDistribution,
    threshold_tokens: ArrayLike,
    prfaas_instances: ArrayLike,
    pd_prefill_instances: ArrayLike,
    pd_decode_instances: ArrayLike,
    arrival_rate_rps: float,
    link_latency_s: float,
) -> Loads:
    """Utilisations, waits and mean TTFT per route of candidate plans at Poisson rate λ."""
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
    short = workload.partial_moments(-np.inf, t, 2 * system.pd_prefill_latency.degree)
    long = workload.partial_moments(t, np.inf, 2 * system.prfaas_prefill_latency.degree)
    prfaas_scv = _scv(system.prfaas_prefill_latency, long, r.prfaas_service_time_s)
    pd_scv = _scv(system.pd_prefill_latency, short, r.pd_prefill_service_time_s)
    prfaas_wait = _agreeing(
        mgc(prfaas_instances, lam * p, r.prfaas_service_time_s, prfaas_scv),
        utilization[BOUND_ORDER.index(Bound.PRFAAS_COMPUTE)],
    )
    pd_wait = _agreeing(
        mgc(pd_prefill_instances, lam * (1 - p), r.pd_prefill_service_time_s, pd_scv),
        utilization[BOUND_ORDER.index(Bound.PD_PREFILL)],
    )
    rho_link = utilization[BOUND_ORDER.index(Bound.PRFAAS_LINK)]
    with np.errstate(divide="ignore"):
        slowdown = np.where(rho_link < 1, 1.0 / (1.0 - rho_link), np.inf)
    transfer_s = (
        np.where(p > 0, r.long_kv_cache_bytes, 0.0) / system.link_bandwidth_bytes_per_s * slowdown
    )
    local = np.where(p < 1, r.pd_prefill_service_time_s + pd_wait.mean_wait_s, np.nan)
    offloaded = np.where(
        p > 0,
        r.prfaas_service_time_s + prfaas_wait.mean_wait_s + transfer_s + link_latency_s,
        np.nan,
    )
    mean = np.where(p < 1, (1 - p) * local, 0.0) + np.where(p > 0, p * offloaded, 0.0)
    unstable = ~stable
    return Loads(
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
