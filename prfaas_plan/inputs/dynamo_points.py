"""The engine's batch behind each point of a Dynamo profiler decode sweep. Units: requests,
tokens, seconds.

The profiler (`profile_decode.py`) sweeps the number of requests its client keeps in flight,
`num_request`, up to min(max_kv_tokens // (isl + osl), DECODE_MAX_CONCURRENCY = 2000), and
records x_kv_usage = (isl + osl/2) * num_request / max_kv_tokens: what it calls the batch is the
client's concurrency. The engine batches at most its own limit (vLLM's max_num_seqs, SGLang's
max_running_requests) and what its KV cache holds; the requests beyond wait in its queue, their
waiting counted in TTFT, not in the ITL. A point past that limit measures the ITL of a smaller
batch than its concurrency says (the real H200 TP1 sweep: 46.6 ms at "1049", 41.0 ms at "1311").

The engine's batch is read from the point's own throughput (Little's law on the decoding
requests): output tokens/s = batch / ITL, so batch = z_thpt_per_gpu x GPUs x ITL, up to the share
of time a request spends in prefill. That share is the same for the points of one context, so
the ratio engine batch / concurrency is compared within a context: a point whose ratio falls
below SATURATION_SHARE of the best of its context ran fewer requests than its client sent, and
is dropped, as is one whose concurrency is over what the KV cache holds at its context
(max_kv_tokens / context); the note says how many and why. Without z_thpt_per_gpu only the KV
bound is checked, and the note says so.
"""

from dataclasses import dataclass

import numpy as np

# a point is saturated when its engine batch (throughput x ITL) is below this share of its
# concurrency, relative to the best point of its context: the unsaturated points of the real H200
# sweep agree within 2% (0.97-0.99 of their concurrency), the saturated ones fall to 0.86 and less
SATURATION_SHARE = 0.9


@dataclass(frozen=True)
class EnginePoints:
    keep: np.ndarray  # bool, a point the engine batched as the client sent it
    over_kv: int  # points whose concurrency the KV cache cannot hold at their context
    saturated: int  # points whose throughput says the engine batched fewer
    checked_throughput: bool


def engine_points(
    batch: np.ndarray,
    context_tokens: np.ndarray,
    itl_s: np.ndarray,
    max_kv_tokens: float,
    throughput_per_gpu: np.ndarray | None,
) -> EnginePoints:
    """Which points measured the engine at the client's concurrency (module docstring)."""
    over_kv = batch > np.floor(max_kv_tokens / context_tokens)
    saturated = np.zeros(batch.size, dtype=bool)
    if throughput_per_gpu is not None:
        ratio = throughput_per_gpu * itl_s / batch  # engine batch / concurrency, per GPU
        for c in np.unique(context_tokens):
            row = context_tokens == c
            saturated[row] = ratio[row] < SATURATION_SHARE * np.max(ratio[row])
    saturated &= ~over_kv
    return EnginePoints(
        ~(over_kv | saturated),
        int(np.count_nonzero(over_kv)),
        int(np.count_nonzero(saturated)),
        throughput_per_gpu is not None,
    )


def describe(points: EnginePoints, source: str, total: int) -> str:
    """The note of what was dropped and why."""
    kept = int(np.count_nonzero(points.keep))
    parts = [f"{source}: {kept} of {total} points used"]
    if points.saturated:
        parts.append(
            f"{points.saturated} dropped as saturated: the profiler's client kept more requests "
            "in flight than the engine batched (z_thpt_per_gpu x z_itl, the engine's batch, "
            f"below {SATURATION_SHARE:.0%} of the concurrency, against the best point of the "
            "same context): the rest queued (the engine's max_num_seqs)"
        )
    if points.over_kv:
        parts.append(
            f"{points.over_kv} dropped as over the KV cache: concurrency above max_kv_tokens / "
            "context"
        )
    if not points.checked_throughput:
        parts.append("no z_thpt_per_gpu: saturation by the engine's batch limit not checked")
    return "; ".join(parts)
