"""Tables we derive rather than measure (their meta.yaml says `provenance: derived`).

The paper's Table 3 gives the KV throughput Φ_kv = S_kv / T_prefill (Gbps, 8 x H200, SGLang
v0.5.9) of six public models at 1K/8K/32K/128K tokens (read as 1024/8192/32768/131072, see
model-configs.md). With S_kv from the architecture (bf16 KV, fp32 recurrent state, the
paper's convention) the prefill latency follows: T_prefill(l) = S_kv(l) / Φ_kv(l).
"""

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.architecture import KvFootprint
from prfaas_plan.analytic.arrays import ArrayLike, FloatArray


def prefill_latency_from_kv_throughput(
    footprint: KvFootprint, tokens: ArrayLike, kv_throughput_gbps: ArrayLike
) -> FloatArray:
    """T_prefill(l) = S_kv(l) / Φ_kv(l), seconds."""
    rate = units.gbps_to_bytes_per_s(np.asarray(kv_throughput_gbps, dtype=np.float64))
    latency: FloatArray = footprint.size_bytes(tokens) / rate
    return latency
