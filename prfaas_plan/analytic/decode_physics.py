"""Physical bounds on a decode step table: no faster than reading the active weights once, no
slower than reading all of HBM and computing every parameter for every request at a small
fraction of the hardware's speed. Units: bytes, bytes/s, FLOP/s, seconds.

- Speed of light: a step sends each request's next token through every layer, so it reads
  every active weight from HBM at least once: with N active parameters (prefill_physics'
  lower bound where they are not published) stored in at least MIN_WEIGHT_BYTES_PER_PARAM
  bytes each, on an instance of HBM bandwidth B (all its GPUs), T >= N · w / B at any batch.
- Ceiling: a step reads at most all that HBM holds (C bytes: weights and KV cache) and does
  at most 2 · N_total FLOP for each of the b requests; at EFFICIENCY_FLOOR of the bandwidth
  and of the BF16 peak P, T <= (C / B + 2 · N_total · b / P) / EFFICIENCY_FLOOR.
Both are generous on purpose: they refuse a table in the wrong unit (1000x off), not a slow
engine. A step column in milliseconds under a seconds name is over the ceiling once steps
exceed a few ms; one in seconds under a milliseconds name (Dynamo's z_itl) beats the speed of
light, and one in microseconds is over the ceiling.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

# 2-bit weights: below any quantisation served (4-bit is the narrowest common one), which also
# leaves room for an engine that emits two or more tokens a step (speculative decoding, MTP),
# whose inter-token latency is a step divided among them
MIN_WEIGHT_BYTES_PER_PARAM = 0.25
# 1% of the HBM bandwidth and of the BF16 peak: real decode reaches 30-90% of the bandwidth;
# the 100x margin also covers pipeline stages reading their HBM in turn (up to ~10 stages at
# 10% each) and an engine's per-step overhead
EFFICIENCY_FLOOR = 0.01
# the unit whose factor names a slip (seconds per unit)
_UNITS = {1.0: "seconds", 1e-3: "milliseconds", 1e-6: "microseconds", 1e-9: "nanoseconds"}


@dataclass(frozen=True)
class DecodeInstance:
    """What bounds one decode step: the model and all the GPUs of one instance."""

    active_params: float  # N: published, or prefill_physics' lower bound
    total_params: float
    hbm_bytes: float
    hbm_bytes_per_s: float
    peak_flops_per_s: float  # dense BF16

    def fastest_step_s(self) -> float:
        """N · w / B: the active weights read once."""
        return self.active_params * MIN_WEIGHT_BYTES_PER_PARAM / self.hbm_bytes_per_s

    def slowest_step_s(self, batch_size: ArrayLike) -> NDArray[np.float64]:
        """(C / B + 2 · N_total · b / P) / EFFICIENCY_FLOOR."""
        batch = np.asarray(batch_size, dtype=np.float64)
        work_s = (
            self.hbm_bytes / self.hbm_bytes_per_s
            + 2.0 * self.total_params * batch / self.peak_flops_per_s
        )
        return work_s / EFFICIENCY_FLOOR

    def describe(self) -> str:
        return (
            f"{self.active_params:.3g} active params of >= {MIN_WEIGHT_BYTES_PER_PARAM:g} "
            f"bytes read at {self.hbm_bytes_per_s:.3g} bytes/s"
        )


@dataclass(frozen=True)
class ImplausibleStep:
    """The first row of a decode table outside the bounds, and the unit that would fit."""

    row: int  # 0-based
    step_s: float
    batch_size: float
    bound_s: float
    too_fast: bool
    rows: int  # rows outside the same bound
    likely_unit: str | None  # a unit in which every row would be plausible, if one is

    def reason(self, instance: DecodeInstance) -> str:
        """What the step breaks: "faster than ..." or "slower than ...", with the bound."""
        if self.too_fast:
            return (
                f"faster than reading the active weights once ({self.bound_s:.3g} s: "
                f"{instance.describe()})"
            )
        return (
            f"slower than any decode step of this instance ({self.bound_s:.3g} s: all of HBM "
            f"read and 2 x {instance.total_params:.3g} params x batch computed at "
            f"{EFFICIENCY_FLOOR:.0%} of the hardware)"
        )


def implausible_step(
    instance: DecodeInstance,
    batch_size: ArrayLike,
    step_s: ArrayLike,
    seconds_per_unit: float = 1.0,
) -> ImplausibleStep | None:
    """The first row whose step lies outside [fastest, slowest], if any. `seconds_per_unit`
    is the unit the table was given in (1e-3: ms), to name the unit that would fit instead."""
    batch = np.asarray(batch_size, dtype=np.float64)
    step = np.asarray(step_s, dtype=np.float64)
    fastest, slowest = instance.fastest_step_s(), instance.slowest_step_s(batch)
    too_fast, too_slow = step < fastest, step > slowest
    if not (np.any(too_fast) or np.any(too_slow)):
        return None
    fast = bool(np.any(too_fast))
    bad = too_fast if fast else too_slow
    i = int(np.flatnonzero(bad)[0])
    likely = None
    for factor in (1e-3, 1e-6, 1e3, 1e6):
        scaled = step * factor
        unit = _UNITS.get(round(seconds_per_unit * factor, 12))
        if unit is not None and np.all((scaled >= fastest) & (scaled <= slowest)):
            likely = unit
            break
    return ImplausibleStep(
        row=i,
        step_s=float(step[i]),
        batch_size=float(batch[i]),
        bound_s=float(fastest if fast else slowest[i]),
        too_fast=fast,
        rows=int(np.count_nonzero(bad)),
        likely_unit=likely,
    )
