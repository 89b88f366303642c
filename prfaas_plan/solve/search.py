"""Search helpers shared by the optimisers: the threshold grids (each grid's size and the
tolerances declared once), golden-section maximisation and bisection, all vectorised over rows
(one independent search per split or candidate).

Units: thresholds in tokens; the searched functions return whatever the caller maximises.
"""

import math
from collections.abc import Callable

import numpy as np

from prfaas_plan.analytic.arrays import BoolArray, FloatArray
from prfaas_plan.analytic.length_distribution import LengthDistribution

GOLDEN_RATIO = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618...: a golden step keeps this share
GOLDEN_STEPS = 45  # shrinks a bracket by 0.618^45 ~ 4e-10
TIE_RTOL = 1e-9  # rates within this (relative) of the best are tied
# thresholds of the grids the searches start from (each then refined, but the MILP's)
COARSE_GRID_POINTS = 65  # the threshold optimiser's, and procure's exact budget search
TTFT_GRID_POINTS = 97  # the TTFT-constrained search's, per split
MILP_THRESHOLDS = 129  # the sizing and procurement MILPs' choices over a continuous law
MAX_OBSERVED_THRESHOLDS = 2000  # ... over observed lengths, quantiles beyond this many


def geometric_threshold_grid(
    workload: LengthDistribution, points: int, *, offload_all: bool = False
) -> FloatArray:
    """`points` geometric thresholds over [min_tokens, max_tokens]; with `offload_all`,
    preceded by min_tokens − 1, below every length also when the shortest one has mass."""
    grid = np.geomspace(workload.min_tokens, workload.max_tokens, points)
    if offload_all:
        grid = np.concatenate([[workload.min_tokens - 1.0], grid])
    return grid


def threshold_grid(workload: LengthDistribution, points: int) -> FloatArray:
    """Thresholds covering 'offload everything' to 'offload nothing': below the shortest and
    at every distinct length of a discrete distribution (where P(L > t) jumps), else the
    geometric grid."""
    candidates = workload.threshold_candidates()
    if candidates is not None:
        return np.concatenate([[candidates[0] - 1.0], candidates])
    return geometric_threshold_grid(workload, points)


def golden_section_max(
    f: Callable[[FloatArray], FloatArray], lo: FloatArray, hi: FloatArray, steps: int
) -> tuple[FloatArray, FloatArray]:
    """Maximise f on [lo, hi] per row by golden-section search (f unimodal there): one new
    evaluation per step, the bracket shrinks by GOLDEN_RATIO each step. f maps an array of
    points (one per row) to their values. Returns (argmax, max) per row."""
    x1, x2 = hi - GOLDEN_RATIO * (hi - lo), lo + GOLDEN_RATIO * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(steps):
        left = f1 >= f2  # the maximum lies in [lo, x2]: x1 becomes the new x2
        lo, hi = np.where(left, lo, x1), np.where(left, x2, hi)
        x1, x2, f1, f2 = (
            np.where(left, hi - GOLDEN_RATIO * (hi - lo), x2),
            np.where(left, x1, lo + GOLDEN_RATIO * (hi - lo)),
            np.where(left, np.nan, f2),  # placeholders, replaced just below
            np.where(left, f1, np.nan),
        )
        new = f(np.where(left, x1, x2))
        f1, f2 = np.where(left, new, f1), np.where(left, f2, new)
    return np.where(f1 >= f2, x1, x2), np.maximum(f1, f2)


def bisect(
    lo: FloatArray, hi: FloatArray, left_of: Callable[[FloatArray], BoolArray], steps: int
) -> tuple[FloatArray, FloatArray]:
    """Shrink brackets [lo, hi] (per row) around a change of `left_of(t)` (True on the side
    of `lo`) by `steps` bisections, keeping both ends."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        left = left_of(mid)
        lo, hi = np.where(left, mid, lo), np.where(left, hi, mid)
    return lo, hi


def ttft_threshold_grid(workload: LengthDistribution) -> FloatArray:
    """From 'offload everything' (below the shortest length) to 'offload nothing'.

    Geometric also for observed lengths: a grid at every distinct length (what
    optimize_fixed_hardware evaluates) would cost thousands of thresholds × splits × the TTFT
    mesh; the bisections to the edges of the feasible set find the steps between grid points."""
    return geometric_threshold_grid(workload, TTFT_GRID_POINTS, offload_all=True)


def milp_threshold_grid(workload: LengthDistribution) -> FloatArray:
    """Thresholds the MILP may choose: 'offload all' (0), a grid over the support, 'offload none'."""
    observed = workload.threshold_candidates()
    if observed is not None:
        if observed.size > MAX_OBSERVED_THRESHOLDS:
            observed = np.quantile(observed, np.linspace(0, 1, MAX_OBSERVED_THRESHOLDS))
        inner = observed
    else:
        inner = geometric_threshold_grid(workload, MILP_THRESHOLDS)
    return np.unique(np.concatenate([[0.0], inner, [np.inf]]))
