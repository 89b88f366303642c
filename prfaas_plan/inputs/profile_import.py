"""Profile tables made from benchmark runs (inputs/benchmarks.py), and their meta.yaml; written
into a data directory by inputs/profile_writes.py. Units: seconds and tokens.

Prefill latency vs input length comes from the TTFT of requests that did not queue. A request
did not queue when it was alone on the server from being sent to its first token: every
request of a run at `max_concurrency` 1 (the client sends the next one only after the last
finished), or, where the file has per-request `start_times` and `latencies` (vLLM), a request
no other one overlapped in flight. A run where fewer than half of the requests were alone is
refused (its TTFT is dominated by queueing), as is a run at a higher or unlimited concurrency
without those timings. The kept requests are binned by input length in quantile bins of
enough requests each, neighbours within timing jitter pooled (inputs/prefill_bins.py); at least
3 bins are needed for the quadratic fit.

Decode step latency vs batch comes from closed-loop runs (`request_rate` inf) at several
`max_concurrency` values: batch = max_concurrency (the client keeps that many requests in
flight), step = median of every inter-token latency of the run. A run whose measured mean
concurrency is below half its max_concurrency is refused (too few prompts to fill the batch).
Dynamo's decode points carry their context length, written as a `context_tokens` column.
"""

import datetime
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.benchmark_run import BenchmarkRun
from prfaas_plan.inputs.benchmarks import DynamoDecode, DynamoPrefill
from prfaas_plan.inputs.decode_step import MULTI_TOKEN_CHUNKS, estimate_step
from prfaas_plan.inputs.dynamo_points import describe as describe_engine_points
from prfaas_plan.inputs.dynamo_points import engine_points
from prfaas_plan.inputs.prefill_bins import bin_requests

# use_cases/import_profile.py writes the tables through this module
from prfaas_plan.inputs.profile_writes import CSV_NAMES as CSV_NAMES
from prfaas_plan.inputs.profile_writes import check_data_dir as check_data_dir
from prfaas_plan.inputs.profile_writes import needs_initialising as needs_initialising
from prfaas_plan.inputs.profile_writes import profile_folder as profile_folder
from prfaas_plan.inputs.profile_writes import write_profiles as write_profiles

MIN_ALONE_SHARE = 0.5
MIN_FILLED_BATCH = 0.5


@dataclass(frozen=True)
class ImportedTable:
    kind: str  # prefill | decode
    columns: tuple[str, ...]
    values: tuple[np.ndarray, ...]
    requests: np.ndarray  # requests (prefill) or ITL samples (decode) behind each row
    method: str
    notes: tuple[str, ...] = field(default=())
    # where the latencies came from, for messages: the field, the unit it was given in, and the
    # run(s) behind each row
    value_name: str = ""
    seconds_per_unit: float = 1.0
    row_sources: tuple[str, ...] = field(default=())

    def csv_text(self) -> str:
        lines = [",".join(self.columns)]
        for row in zip(*self.values, strict=True):
            lines.append(
                ",".join(_cell(name, v) for name, v in zip(self.columns, row, strict=True))
            )
        return "\n".join(lines) + "\n"


def _cell(column: str, value: float) -> str:
    return f"{value:.0f}" if column.endswith(("_tokens", "batch_size")) else f"{value:.6g}"


def _alone(run: BenchmarkRun) -> np.ndarray:
    """Which requests of `run` were alone in flight from being sent to their first token."""
    if run.max_concurrency == 1:
        return np.ones(run.ttft_s.size, dtype=bool)
    if run.start_s is None or run.latency_s is None:
        raise ConfigError(
            f"{run.source}: max_concurrency is {run.max_concurrency or 'unlimited'} and the file "
            "has no start_times/latencies to tell which requests queued; measure prefill with "
            "--max-concurrency 1"
        )
    # another request j in flight during [start_i, first_i): start_j < first_i and end_j > start_i;
    # in start order that is an earlier one still running, or a later one starting before first_i
    order = np.argsort(run.start_s, kind="stable")
    start = run.start_s[order]
    first, end = start + run.ttft_s[order], start + run.latency_s[order]
    running_before = np.concatenate([[-np.inf], np.maximum.accumulate(end)[:-1]]) > start
    later_starts = np.searchsorted(start, first, side="left") - np.arange(1, start.size + 1)
    alone = np.empty(start.size, dtype=bool)
    alone[order] = ~running_before & ~(later_starts > 0)
    return alone


def prefill_from_runs(runs: Sequence[BenchmarkRun]) -> ImportedTable:
    """Prefill latency vs length from the queue-free requests of `runs` (module docstring)."""
    lengths, ttfts, notes = [], [], []
    for run in runs:
        alone = _alone(run)
        share = float(np.mean(alone)) if alone.size else 0.0
        if share < MIN_ALONE_SHARE:
            raise ConfigError(
                f"{run.source}: only {np.count_nonzero(alone)} of {alone.size} requests ran "
                "alone on the server: its TTFT is dominated by queueing; measure prefill with "
                "--max-concurrency 1"
            )
        lengths.append(run.input_tokens[alone])
        ttfts.append(run.ttft_s[alone])
        how = "max_concurrency 1" if run.max_concurrency == 1 else "no overlap in start_times"
        notes.append(
            f"{run.source}: {np.count_nonzero(alone)} requests used ({how}), "
            f"{alone.size - np.count_nonzero(alone)} dropped as queued, {run.failed} failed"
        )
    where = _joined(run.source for run in runs)
    bins = bin_requests(np.concatenate(lengths), np.concatenate(ttfts), where)
    return ImportedTable(
        "prefill", ("input_tokens", "prefill_latency_s"), (bins.input_tokens, bins.latency_s),
        bins.requests,
        "TTFT of requests that ran alone on the server (max_concurrency 1, or no other request "
        "in flight per start_times/latencies), in quantile bins by input length (median length, "
        "median TTFT per bin, neighbours within timing jitter pooled); TTFT includes the "
        "engine's request overhead.",
        (*notes, f"{where}: {bins.describe()}"), "ttfts", 1.0, (where,) * bins.requests.size,
    )  # fmt: skip


def _joined(sources: Iterable[str]) -> str:
    """Distinct sources in first-seen order, for a message."""
    return ", ".join(dict.fromkeys(sources))


def prefill_from_dynamo(points: Sequence[DynamoPrefill]) -> ImportedTable:
    bins = bin_requests(
        np.concatenate([p.input_tokens for p in points]),
        np.concatenate([p.ttft_s for p in points]),
        points[0].source,
        min_requests=1,  # each point the profiler's own measurement of one length
    )
    tokens = bins.input_tokens
    return ImportedTable(
        "prefill", ("input_tokens", "prefill_latency_s"), (tokens, bins.latency_s), bins.requests,
        "Dynamo profiler prefill sweep (prefill_isl, prefill_ttft in ms): one request at a time "
        "per input length; median TTFT per distinct length.",
        tuple(f"{p.source}: {p.input_tokens.size} points used" for p in points),
        "prefill_ttft", 1e-3, (_joined(p.source for p in points),) * tokens.size,
    )  # fmt: skip


def _first_drop(values: np.ndarray) -> int | None:
    """The first row after which `values` falls, if any (a latency must not fall)."""
    drops = np.flatnonzero(np.diff(values) < 0)
    return int(drops[0]) if drops.size else None


def decode_from_runs(runs: Sequence[BenchmarkRun]) -> ImportedTable:
    """Decode step latency vs batch from closed-loop runs at several concurrencies."""
    by_batch: dict[int, list[BenchmarkRun]] = {}
    sources: dict[int, list[str]] = {}
    notes = []
    for run in runs:
        if run.max_concurrency is None or run.request_rate_rps != np.inf:
            raise ConfigError(
                f"{run.source}: decode needs a closed-loop run (request_rate inf and a "
                f"max_concurrency), found request_rate {_rate(run)}, max_concurrency "
                f"{run.max_concurrency or 'unlimited'}"
            )
        if run.itl_s.size == 0:
            raise ConfigError(f"{run.source}: itls is empty: no decode steps were measured")
        mean = run.mean_concurrency
        if mean is not None and mean < MIN_FILLED_BATCH * run.max_concurrency:
            raise ConfigError(
                f"{run.source}: mean concurrency {mean:.3g} is below half of max_concurrency "
                f"{run.max_concurrency}: too few prompts to keep the batch full"
            )
        by_batch.setdefault(run.max_concurrency, []).append(run)
        sources.setdefault(run.max_concurrency, []).append(run.source)
        notes.append(
            f"{run.source}: batch {run.max_concurrency}, {run.itl_s.size} inter-token latencies"
            + (f", mean concurrency {mean:.3g}" if mean is not None else "")
            + f", {run.failed} failed requests dropped"
        )
    batches = sorted(by_batch)
    step, samples = np.empty(len(batches)), np.empty(len(batches), dtype=np.int64)
    per_token = False
    for row, b in enumerate(batches):  # one batch's ITLs pooled at a time (inputs/decode_step.py)
        estimate = estimate_step(by_batch[b])
        step[row], samples[row] = estimate.step_s, estimate.samples
        notes.append(f"batch {b}: step = {estimate.estimator}")
        per_token |= estimate.tokens_per_chunk >= MULTI_TOKEN_CHUNKS
    _check_rising(np.array(batches, float), step, runs[0].source)
    return ImportedTable(
        "decode", ("batch_size", "decode_step_latency_s"), (np.array(batches, float), step),
        samples,
        "Closed-loop runs (request_rate inf) at each max_concurrency: batch = max_concurrency, "
        "step latency = median inter-token latency of the run, or the median time per output "
        "token where streamed chunks carry several tokens (the notes say which).",
        tuple(notes), "the median time per output token" if per_token else "the median of itls",
        1.0, tuple(_joined(sources[b]) for b in batches),
    )  # fmt: skip


def _rate(run: BenchmarkRun) -> str:
    return "trace (a replay)" if run.request_rate_rps is None else f"{run.request_rate_rps:g}"


def _check_rising(batch: np.ndarray, step_s: np.ndarray, where: str) -> None:
    i = _first_drop(step_s)
    if i is not None:
        raise ConfigError(
            f"{where}: median ITL falls from {step_s[i] * 1e3:.4g} ms at batch {batch[i]:g} to "
            f"{step_s[i + 1] * 1e3:.4g} ms at batch {batch[i + 1]:g}: too noisy; measure longer runs"
        )


def decode_from_dynamo(points: Sequence[DynamoDecode]) -> ImportedTable:
    """The decode table of Dynamo sweeps, each point at the engine's batch: points where the
    client's concurrency was more than the engine batched dropped (inputs/dynamo_points.py)."""
    kept, notes = [], []
    for p in points:
        engine = engine_points(
            p.batch_size, p.context_tokens, p.itl_s, p.max_kv_tokens, p.throughput_per_gpu
        )
        kept.append(engine.keep)
        notes.append(describe_engine_points(engine, p.source, p.batch_size.size))
    batch = np.concatenate([p.batch_size[k] for p, k in zip(points, kept, strict=True)])
    context = np.concatenate([p.context_tokens[k] for p, k in zip(points, kept, strict=True)])
    itl = np.concatenate([p.itl_s[k] for p, k in zip(points, kept, strict=True)])
    point = np.repeat(np.arange(len(points)), [int(np.count_nonzero(k)) for k in kept])
    if not batch.size:
        raise ConfigError(f"{points[0].source}: no decode point left: {'; '.join(notes)}")
    order = np.lexsort((batch, context))
    batch, context, itl, point = batch[order], context[order], itl[order], point[order]
    keys = np.stack([context, batch], axis=1)
    if np.unique(keys, axis=0).shape[0] != keys.shape[0]:
        raise ConfigError(f"{points[0].source}: two decode points share a batch and context length")
    for c in np.unique(context):
        rows = context == c
        _check_rising(batch[rows], itl[rows], points[0].source)
    return ImportedTable(
        "decode", ("batch_size", "context_tokens", "decode_step_latency_s"),
        (batch, np.round(context), itl), np.ones(batch.size, dtype=int),
        "Dynamo profiler decode sweep (x_kv_usage, y_context_length, z_itl in ms, "
        "max_kv_tokens): batch = x_kv_usage * max_kv_tokens / y_context_length (the client's "
        "concurrency), kept where the engine batched it (z_thpt_per_gpu x z_itl), context = "
        "y_context_length (isl + osl/2), step = z_itl (mean ITL of the point).",
        tuple(notes), "z_itl", 1e-3, tuple(points[int(i)].source for i in point),
    )  # fmt: skip


@dataclass(frozen=True)
class SourceFile:
    path: Path
    sha256: str


def source_file(path: Path, limit_bytes: int | None = None) -> SourceFile:
    """The file's sha256, of at most `limit_bytes` + 1 bytes when a limit is given."""
    digest = hashlib.sha256()
    left = math.inf if limit_bytes is None else limit_bytes + 1
    with path.open("rb") as handle:
        while left > 0 and (chunk := handle.read(int(min(left, 1 << 20)))):
            digest.update(chunk)
            left -= len(chunk)
    return SourceFile(path, digest.hexdigest())


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def meta_text(
    table: ImportedTable,
    *,
    model: str,
    gpu: str,
    gpus_per_instance: int,
    parallelism: str,
    engine: str,
    engine_version: str,
    sources: Sequence[SourceFile],
    measured_on: str | None,
    provenance: str = "measured",
) -> str:
    quantity = "prefill_latency" if table.kind == "prefill" else "decode_step"
    lines = [
        f"quantity: {quantity}",
        f"model: {model}",
        f"gpu: {gpu}",
        f"gpus_per_instance: {gpus_per_instance}",
        f"parallelism: {_quote(parallelism)}",
        f"engine: {_quote(engine)}",
        f"engine_version: {_quote(engine_version)}",
        f"provenance: {provenance}",
        f"method: {_quote(table.method)}",
        f"source: {_quote('imported by prfaas-plan import-profile from ' + ', '.join(s.path.name for s in sources))}",
        f"imported_on: {_quote(datetime.date.today().isoformat())}",
    ]
    if measured_on:
        lines.append(f"measured_on: {_quote(measured_on)}")
    lines.append("source_files:")
    for s in sources:
        lines += [f"  - file: {_quote(s.path.name)}", f"    sha256: {s.sha256}"]
    return "\n".join(lines) + "\n"
