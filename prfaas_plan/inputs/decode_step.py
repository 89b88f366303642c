"""The decode step of closed-loop runs at one batch, from their streamed inter-token latencies.
Units: seconds and tokens.

vLLM's and SGLang's `itls` are the gaps between streamed chunks. A chunk carries one token,
except with speculative decoding (a step accepts several draft tokens) or a stream interval
(SGLang's `--stream-interval`, vLLM's multi-step), where a chunk carries several and the median
gap is the time of several tokens: the step per token would be overstated by the tokens per
chunk. So the tokens per chunk are counted (output tokens - 1 against the gaps of each request)
and where chunks carry several (MULTI_TOKEN_CHUNKS), the step is the median over requests of the
time per output token, (latency - TTFT) / (output tokens - 1), latency - TTFT being the sum of a
request's gaps where the file has no latencies. The estimator used is named in the table's notes.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.inputs.benchmark_run import BenchmarkRun

# tokens per streamed chunk above which chunks carry several tokens: one token a chunk gives
# exactly 1 (output - 1 gaps); a few requests cut short or a lost chunk stay well under 1.2
MULTI_TOKEN_CHUNKS = 1.2


@dataclass(frozen=True)
class StepEstimate:
    step_s: float
    samples: int  # ITLs (median ITL) or requests (time per output token)
    estimator: str
    tokens_per_chunk: float


def estimate_step(runs: Sequence[BenchmarkRun]) -> StepEstimate:
    """The step of `runs` (all at one batch), by the estimator the chunks call for."""
    tokens, chunks, per_token = 0.0, 0, []
    for run in runs:
        if run.itl_counts is None or run.decode_time_s is None:
            continue
        decoding = (run.output_tokens >= 2) & (run.itl_counts >= 1)
        tokens += float(np.sum(run.output_tokens[decoding] - 1))
        chunks += int(np.sum(run.itl_counts[decoding]))
        per_token.append(run.decode_time_s[decoding] / (run.output_tokens[decoding] - 1))
    tokens_per_chunk = tokens / chunks if chunks else 1.0
    if tokens_per_chunk >= MULTI_TOKEN_CHUNKS:
        tpot = np.concatenate(per_token)
        return StepEstimate(
            float(np.median(tpot)),
            int(tpot.size),
            f"median time per output token ((latency - TTFT) / (output tokens - 1)) of "
            f"{tpot.size} requests: the streamed chunks carried {tokens_per_chunk:.2f} tokens "
            "each (speculative decoding or a stream interval), so the median chunk gap would "
            "overstate the step",
            tokens_per_chunk,
        )
    pooled = np.concatenate([run.itl_s for run in runs])  # a copy of this batch's ITLs
    return StepEstimate(
        float(np.median(pooled, overwrite_input=True)),
        int(pooled.size),
        f"median inter-token latency of {pooled.size} gaps (one token a chunk)",
        tokens_per_chunk,
    )
