"""Scenario fields for part of a trace and for a metrics workload, with their bounds.

Fields of a workload read from files beyond a length table: the part of a trace to
plan for (`window`, `sample`, BurstGPT's `model` and `log_type`) and the production-metrics
workload (`distribution: metrics`), with their bounds. inputs/scenario.py holds them in its
schema; inputs/trace_stream.py and inputs/prom_metrics.py read the files. Units: seconds, tokens.
"""

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from prfaas_plan import plausible
from prfaas_plan.inputs.reading import Strict


def _printable(text: str) -> str:
    bad = next((c for c in text if not c.isprintable() and c != " "), None)
    if bad is not None:
        raise ValueError(f"must be printable text, found the character U+{ord(bad):04X}")
    return text


# a cell of a trace or a label of a metric (a BurstGPT Model such as GPT-4, a served model name)
CellText = Annotated[
    str, Field(min_length=1, max_length=plausible.MAX_LABEL_CHARS), AfterValidator(_printable)
]


class TraceWindow(Strict):
    """Requests arriving in [start_s, start_s + duration_s) after the trace's earliest one."""

    start_s: float = Field(ge=0, le=plausible.MAX_SECONDS)
    duration_s: float = Field(gt=0, le=plausible.MAX_SECONDS)


class TraceSample(Strict):
    """`requests` of the trace's (selected) requests, uniformly without replacement."""

    requests: int = Field(ge=1, le=plausible.MAX_TRACE_SAMPLE_REQUESTS)
    seed: int = Field(default=0, ge=0, le=plausible.MAX_SEED)


# BurstGPT's Log Type, by the kind of traffic (its cells read "API log", "Conversation log")
LogType = Literal["api", "conversation"]


class MetricsLengths(Strict):
    """Input lengths from a vLLM or SGLang /metrics snapshot (inputs/prom_metrics.py)."""

    distribution: Literal["metrics"]
    file: str  # a `curl /metrics` snapshot, relative to the scenario file
    # an earlier snapshot of the same server run: the workload is the difference (a window)
    baseline_file: str | None = None
    # seconds between the snapshots (or since the server started, without baseline_file):
    # gives the arrival rate, stated in the workload's description
    interval_s: float | None = Field(default=None, gt=0, le=plausible.MAX_SECONDS)
    model_name: CellText | None = None  # the model_name label, when the server serves several


class OutputFromMetrics(Strict):
    # the generation-length histogram of workload.input_tokens' metrics snapshot(s)
    distribution: Literal["from_metrics"]
