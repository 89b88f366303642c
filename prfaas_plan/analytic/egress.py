"""The bandwidth wall (reference §4 eq. 2): the KV egress a saturated prefill cluster emits.

    B_out ≈ (N / P) · Φ_kv(L_avg),   Φ_kv(l) = S_kv(l) / T_prefill(l)

with N GPUs, P per instance, and L_avg the mean uncached length of the requests the cluster
receives: a fixed length, or E[L | L > t] for a length distribution routed at threshold t.
`Mode.EXACT` replaces Φ_kv(L_avg) by E[S_kv | L > t] / E[T_prefill | L > t], the byte rate of a
pool that is busy all the time. Units: bytes/s, tokens.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.choices import Mode

THRESHOLD_GRID_POINTS = 2049
BISECTION_STEPS = 60


@dataclass(frozen=True)
class Egress:
    instances: int  # N / P
    mean_offloaded_tokens: float  # L_avg
    kv_throughput_bytes_per_s: float  # Φ_kv per instance
    link_bandwidth_bytes_per_s: float

    @property
    def required_bytes_per_s(self) -> float:
        return self.instances * self.kv_throughput_bytes_per_s

    @property
    def link_utilization(self) -> float:
        return self.required_bytes_per_s / self.link_bandwidth_bytes_per_s

    @property
    def fits(self) -> bool:
        return self.required_bytes_per_s <= self.link_bandwidth_bytes_per_s

    @property
    def max_instances_on_link(self) -> int:
        """How many saturated instances the link carries."""
        return int(self.link_bandwidth_bytes_per_s // self.kv_throughput_bytes_per_s)


def egress_at_length(
    prefill: FittedCurve, kv: FittedCurve, instances: int, tokens: float, link_bytes_per_s: float
) -> Egress:
    """Eq. 2 for requests of one length."""
    phi = float(kv(tokens) / prefill(tokens))
    return Egress(instances, float(tokens), phi, link_bytes_per_s)


def _phi_above(
    prefill: FittedCurve,
    kv: FittedCurve,
    workload: LengthDistribution,
    thresholds: ArrayLike,
    mode: Mode,
) -> tuple[FloatArray, FloatArray]:
    """(Φ_kv, mean length) of the requests above each threshold (nan where none is above)."""
    long = workload.partial_moments(thresholds, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = long[1] / long[0]
        if mode is Mode.PAPER:
            phi = kv(mean) / prefill(mean)
        else:
            phi = kv.expectation(long) / prefill.expectation(long)
    return np.where(long[0] > 0, phi, np.nan), np.where(long[0] > 0, mean, np.nan)


def egress_at_threshold(
    prefill: FittedCurve,
    kv: FittedCurve,
    instances: int,
    workload: LengthDistribution,
    threshold_tokens: float,
    link_bytes_per_s: float,
    mode: Mode = Mode.PAPER,
) -> Egress | None:
    """Eq. 2 for the requests longer than the threshold; None if no request is."""
    phi, mean = _phi_above(prefill, kv, workload, np.asarray(float(threshold_tokens)), mode)
    if not np.isfinite(phi):
        return None
    return Egress(instances, float(mean), float(phi), link_bytes_per_s)


def smallest_fitting_threshold(
    prefill: FittedCurve,
    kv: FittedCurve,
    instances: int,
    workload: LengthDistribution,
    link_bytes_per_s: float,
    mode: Mode = Mode.PAPER,
) -> float | None:
    """Smallest t whose offloaded requests a saturated cluster can ship over the link
    (0 if every threshold fits, None if none does). Φ_kv need not be monotone in length, so
    the whole range is scanned and the first crossing refined by bisection."""
    grid = np.concatenate(
        [[0.0], np.geomspace(workload.min_tokens, workload.max_tokens, THRESHOLD_GRID_POINTS)]
    )
    phi, _ = _phi_above(prefill, kv, workload, grid, mode)
    fits = instances * phi <= link_bytes_per_s
    if not fits.any():
        return None
    first = int(np.argmax(fits))
    if first == 0:
        return 0.0
    lo, hi = grid[first - 1], grid[first]
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        phi_mid, _ = _phi_above(prefill, kv, workload, np.asarray(mid), mode)
        if instances * phi_mid <= link_bytes_per_s:
            hi = mid
        else:
            lo = mid
    return float(hi)


@dataclass(frozen=True)
class EgressReport:
    """Eq. 2 for several models (fixed length) or one scenario (threshold)."""

    title: str
    gpu: str
    gpus_per_instance: int
    prfaas_gpus: int
    mode: Mode
    rows: tuple[tuple[str, Egress | None, str], ...]  # (model, egress or None, note)
    threshold_tokens: float | None = None  # scenario mode: L_avg = E[L | L > t]
    smallest_fitting_threshold_tokens: float | None = None  # scenario mode only
