"""Tables we derive rather than measure (their meta.yaml says `provenance: derived`).

The paper's Table 3 gives the KV throughput Φ_kv = S_kv / T_prefill (Gbps, 8 x H200, SGLang
v0.5.9) of six public models at 1K/8K/32K/128K tokens (read as 1024/8192/32768/131072, see
model-configs.md). With S_kv from the architecture (bf16 KV, fp32 recurrent state, the
paper's convention) the prefill latency follows: T_prefill(l) = S_kv(l) / Φ_kv(l).

The paper gives one decode point for the case-study H20 instance (batch 20 at 25 ms); a
memory-bandwidth roofline (`DecodeRoofline`) calibrated to it gives the step time at other
batches and contexts.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.architecture import KvFootprint
from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.errors import ProfileError


def prefill_latency_from_kv_throughput(
    footprint: KvFootprint, tokens: ArrayLike, kv_throughput_gbps: ArrayLike
) -> FloatArray:
    """T_prefill(l) = S_kv(l) / Φ_kv(l), seconds."""
    rate = units.gbps_to_bytes_per_s(np.asarray(kv_throughput_gbps, dtype=np.float64))
    latency: FloatArray = footprint.size_bytes(tokens) / rate
    return latency


@dataclass(frozen=True)
class DecodeRoofline:
    """A memory-bandwidth roofline of one decode step on one instance, in seconds:

        T(b, c) = W / B + b · S_kv(c) / (η · B)

    W: weight bytes read once per step, B: the instance's HBM bandwidth (bytes/s), S_kv(c): the
    KV and recurrent state one request at context c reads per step, η: the fraction of B the
    batch-dependent part achieves, calibrated to one measured point (`calibrate_decode_roofline`).
    η absorbs what grows with the batch besides the KV read (experts touched, attention)."""

    weights_bytes: float
    footprint: KvFootprint
    hbm_bytes_per_s: float
    efficiency: float  # η

    def step_s(self, batch_size: ArrayLike, context_tokens: ArrayLike) -> FloatArray:
        batch = np.asarray(batch_size, dtype=np.float64)
        kv_read = batch * self.footprint.size_bytes(context_tokens)
        step: FloatArray = self.weights_bytes / self.hbm_bytes_per_s + kv_read / (
            self.efficiency * self.hbm_bytes_per_s
        )
        return step


def calibrate_decode_roofline(
    weights_bytes: float,
    footprint: KvFootprint,
    hbm_bytes_per_s: float,
    *,
    batch_size: float,
    context_tokens: float,
    step_s: float,
) -> DecodeRoofline:
    """The roofline through one point: η = b · S_kv(c) / (B · (T - W / B))."""
    weights_s = weights_bytes / hbm_bytes_per_s
    if not step_s > weights_s:
        raise ProfileError(
            f"decode calibration point {step_s:g} s at batch {batch_size:g} is faster than reading "
            f"the weights once ({weights_s:g} s); check the point and the weights bytes"
        )
    kv_bytes = batch_size * float(footprint.size_bytes(context_tokens))
    efficiency = kv_bytes / (hbm_bytes_per_s * (step_s - weights_s))
    if not 0 < efficiency <= 1:
        raise ProfileError(
            f"decode calibration point {step_s:g} s at batch {batch_size:g}, context "
            f"{context_tokens:g} tokens needs {efficiency:.3g} of the HBM bandwidth (must be in (0, 1])"
        )
    return DecodeRoofline(weights_bytes, footprint, hbm_bytes_per_s, efficiency)
