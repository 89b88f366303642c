"""Physical bounds on a prefill latency table: FLOPs, the speed of light and the MFU floor.

A prefill of l tokens on a model with N active parameters does at least F = 2 · N · l FLOP
(the matmuls; attention only adds). On g GPUs of peak P FLOP/s it cannot finish before
F / (g · P) (the speed of light), and a real engine reaches at least MFU_FLOOR of the BF16 peak
at long prompts, where compute dominates the fixed overhead: MFU = F / (T · g · P_bf16).
A latency column entered in milliseconds under a `_s` header fails the floor by 1000x.
Units: FLOP, FLOP/s, seconds, tokens.
"""

import numpy as np
from numpy.typing import ArrayLike, NDArray

MFU_FLOOR = 5e-4  # 0.05% of BF16 peak: ~10x below the slowest real 1K-token prefill we know
# models whose active parameters are not published: every MoE in the catalog activates > 3%
ACTIVE_FRACTION_FLOOR = 0.01


def active_params_lower_bound(total_params: float, active_params: float | None) -> float:
    """N: the published active parameters, else total_params · ACTIVE_FRACTION_FLOOR."""
    return active_params or total_params * ACTIVE_FRACTION_FLOOR


def prefill_flops(active_params: float, tokens: ArrayLike) -> NDArray[np.float64]:
    """F = 2 · N · l FLOP."""
    return 2.0 * active_params * np.asarray(tokens, dtype=float)


def fastest_prefill_s(
    active_params: float, tokens: ArrayLike, peak_flops_per_s: float
) -> NDArray[np.float64]:
    """The speed of light F / P, with P the peak of all the instance's GPUs (FLOP/s)."""
    return prefill_flops(active_params, tokens) / peak_flops_per_s


def prefill_mfu(
    active_params: float, tokens: float, latency_s: float, peak_flops_per_s: float
) -> float:
    """MFU = F / (T · P) of one table row, P the peak of all the instance's GPUs."""
    return float(prefill_flops(active_params, tokens)) / (latency_s * peak_flops_per_s)
