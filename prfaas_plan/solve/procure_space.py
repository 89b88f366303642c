"""The space procurement searches: candidate PrfaaS sites (a GPU type, its price and a link
offering, each with its per-threshold rates), a deployment in it (`ProcurePoint`: instances per
site, the PD split, the threshold), what that deployment serves (`capacity_rps`) and costs, and
`brute_force`, which enumerates the space (tests, benchmark). Units: req/s, $/h, bytes.
"""

import itertools
from dataclasses import dataclass

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import FloatArray


@dataclass(frozen=True)
class SiteRates:
    """One candidate PrfaaS site on the threshold grid."""

    name: str
    compute_rps_per_instance: FloatArray  # a_jk, offloaded req/s one instance prefills
    link_rps: FloatArray  # b_jk = B_j / S_kv(l_long,k)
    usd_per_instance_hour: float  # P_j
    fixed_usd_per_hour: float  # F_j
    usd_per_offloaded_request: FloatArray  # w_jk = S_kv(l_long,k) x $/byte
    max_instances: int  # U_j


@dataclass(frozen=True)
class ProcureSpace:
    thresholds_tokens: FloatArray
    offload_fraction: FloatArray  # p_k
    local_fraction: FloatArray  # s_k
    pd_prefill_rps_per_instance: FloatArray  # c_k
    decode_rps_per_instance: float  # θ_d
    pd_usd_per_instance_hour: float
    max_pd_instances: int
    sites: tuple[SiteRates, ...]


@dataclass(frozen=True)
class ProcurePoint:
    threshold_index: int
    site_instances: tuple[int, ...]
    site_rps: tuple[float, ...]  # offloaded req/s each site carries at the served rate
    pd_prefill_instances: int
    pd_decode_instances: int
    served_rps: float
    usd_per_hour: float


def cost_terms(space: ProcureSpace, k: int, n: tuple[int, ...], n_p: int, n_d: int) -> float:
    """$/h of a deployment before its link volume: the sites' links and instances, the PD pool."""
    fixed = sum(s.fixed_usd_per_hour for s, c in zip(space.sites, n, strict=True) if c > 0)
    gpus = sum(s.usd_per_instance_hour * c for s, c in zip(space.sites, n, strict=True))
    return fixed + gpus + space.pd_usd_per_instance_hour * (n_p + n_d)


def site_caps(space: ProcureSpace, k: int, n: tuple[int, ...]) -> FloatArray:
    """req/s each site carries at t_k with n_j instances: min(a_jk n_j, b_jk)."""
    return np.array(
        [
            min(s.compute_rps_per_instance[k] * c, s.link_rps[k])
            for s, c in zip(space.sites, n, strict=True)
        ]
    )


def capacity_rps(space: ProcureSpace, k: int, n: tuple[int, ...], n_p: int, n_d: int) -> float:
    """Λ_max of fixed counts at t_k: min(θ n_d, c_k n_p / s_k, Σ_j min(a_jk n_j, b_jk) / p_k)."""
    limits = [space.decode_rps_per_instance * n_d]
    if space.local_fraction[k] > 0:
        limits.append(space.pd_prefill_rps_per_instance[k] * n_p / space.local_fraction[k])
    if space.offload_fraction[k] > 0:
        limits.append(float(site_caps(space, k, n).sum()) / space.offload_fraction[k])
    return min(limits)


def volume_split(
    space: ProcureSpace, k: int, n: tuple[int, ...], offloaded_rps: float
) -> tuple[float, FloatArray]:
    """Cheapest split of `offloaded_rps` over the sites (cheapest volume first): ($/h, per site)."""
    caps = site_caps(space, k, n)
    price = np.array([units.per_s_to_per_hour(s.usd_per_offloaded_request[k]) for s in space.sites])
    share = np.zeros(len(space.sites))
    left = offloaded_rps
    for j in np.argsort(price, kind="stable"):
        share[j] = min(caps[j], left)
        left -= share[j]
    return float(price @ share), share


def brute_force(space: ProcureSpace, target_rps: float) -> ProcurePoint | None:
    """The cheapest point reaching `target_rps` by enumerating every threshold, count and split."""
    best: ProcurePoint | None = None
    ranges = [range(s.max_instances + 1) for s in space.sites]
    for k in range(space.thresholds_tokens.size):
        for n in itertools.product(*ranges):
            for n_p in range(space.max_pd_instances):
                for n_d in range(1, space.max_pd_instances - n_p + 1):
                    if capacity_rps(space, k, n, n_p, n_d) < target_rps * (1 - 1e-9):
                        continue
                    volume, share = volume_split(
                        space, k, n, space.offload_fraction[k] * target_rps
                    )
                    cost = cost_terms(space, k, n, n_p, n_d) + volume
                    if best is None or cost < best.usd_per_hour - 1e-9:
                        best = ProcurePoint(k, n, tuple(share), n_p, n_d, target_rps, cost)
                    break  # more decode instances only cost more
    return best
