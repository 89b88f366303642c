"""Benchmark result files of the serving engines our users run, read into typed runs for
`import-profile`: vLLM `bench serve` JSON, SGLang `bench_serving` JSONL and the NVIDIA Dynamo
profiler's `raw_data.npz`. Units: seconds and tokens inside (Dynamo's milliseconds converted here).

Field names as the tools write them (read in their source, December 2026):
- vLLM, `vllm/benchmarks/serve.py` (vllm-project/vllm): `vllm bench serve --save-result
  --save-detailed` writes one JSON object with the run settings `date, backend, model_id,
  tokenizer_id, num_prompts, request_rate` (a number, or the string "inf"), `burstiness,
  max_concurrency` (null when unlimited), and per request `input_lens, output_lens, ttfts` (s),
  `itls` (a list of seconds per request), `errors` ("" when the request succeeded), and in newer
  versions `start_times, latencies` (s) and `queue_times`. `queue_times` is the client-side wait
  for a concurrency slot (`client_queue_time = start_time - arrival`), which TTFT excludes, so it
  says nothing about queueing inside the server and is not used.
- SGLang, `python/sglang/bench_serving.py` (sgl-project/sglang): `--output-file f.jsonl
  --output-details` appends one JSON line per run with `backend, dataset_name, request_rate,
  max_concurrency, random_input_len, random_output_len, duration, completed, ...,
  concurrency` (the measured mean number in flight) and the details `input_lens, output_lens,
  ttfts, itls, generated_texts, errors` (seconds; nested under `details` in some forks). The file
  names no model.

Which tool wrote a result is told by the run settings only that tool writes (`_SHAPES`), not by
`backend`: that names the server benchmarked, and each tool can benchmark the other's server
(vLLM's `--backend sglang`, SGLang's `--backend vllm`). A file that carries the other tool's
settings and none of its own is refused.
- Dynamo, `benchmarks/profiler/utils/profile_prefill.py` and `profile_decode.py`
  (ai-dynamo/dynamo): `np.savez(raw_data.npz, prefill_isl, prefill_ttft (ms),
  prefill_thpt_per_gpu)` and `np.savez(raw_data.npz, x_kv_usage, y_context_length, z_itl (ms),
  z_thpt_per_gpu, max_kv_tokens=[n])`, where x_kv_usage = (isl + osl/2) · num_request /
  max_kv_tokens and y_context_length = isl + osl/2, so a point's batch is
  num_request = x_kv_usage · max_kv_tokens / y_context_length.

Every message names the file (and line), the field and what was found.
"""

import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prfaas_plan import bounds, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import bounded_lines, open_bounded, read_text


@dataclass(frozen=True)
class BenchmarkRun:
    """One run of a serving benchmark: its settings and its successful requests."""

    source: str  # file (and line for JSONL)
    engine: str
    backend: str | None
    model_id: str | None
    date: str | None
    max_concurrency: int | None  # None: unlimited
    request_rate_rps: float  # inf: every request sent at once
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray
    itl_s: np.ndarray  # every inter-token latency of every request, pooled
    start_s: np.ndarray | None  # when each request was sent, if the file says
    latency_s: np.ndarray | None  # each request's end-to-end latency, if the file says
    failed: int  # requests with an error, dropped
    mean_concurrency: float | None  # measured mean number in flight, where known


@dataclass(frozen=True)
class DynamoPrefill:
    source: str
    input_tokens: np.ndarray
    ttft_s: np.ndarray


@dataclass(frozen=True)
class DynamoDecode:
    source: str
    batch_size: np.ndarray
    context_tokens: np.ndarray
    itl_s: np.ndarray
    max_kv_tokens: float


def _number(value: object, where: str, field: str, *, allow_inf: bool = False) -> float:
    if allow_inf and value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {field} must be a number, found {bounds.quoted(value)}")
    if not math.isfinite(value) and not (allow_inf and value == math.inf):
        raise ConfigError(f"{where}: {field} must be finite, found {bounds.quoted(value)}")
    return float(value)


def _numbers(record: dict[str, object], field: str, where: str, count: int | None) -> np.ndarray:
    values = record.get(field)
    if not isinstance(values, list):
        raise ConfigError(
            f"{where}: {field} must be a list of numbers (one per request), found "
            f"{bounds.quoted(values)}"
        )
    if count is not None and len(values) != count:
        raise ConfigError(
            f"{where}: {field} has {len(values)} entries, expected {count} (one per request)"
        )
    return np.array([_number(v, where, f"{field}[{i}]") for i, v in enumerate(values)])


def _text(record: dict[str, object], field: str, where: str) -> str | None:
    value = record.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {field} must be text, found {bounds.quoted(value)}")
    return value


def _positive(values: np.ndarray, field: str, where: str) -> None:
    bad = np.flatnonzero(~(values > 0))
    if bad.size:
        raise ConfigError(
            f"{where}: {field}[{bad[0]}] must be > 0 s, found {values[bad[0]]:g} "
            f"({bad.size} value(s) in all): a clock or unit problem"
        )


def _run(record: dict[str, object], where: str, engine: str) -> BenchmarkRun:
    """A run from one vLLM or SGLang result object (details possibly nested in `details`)."""
    details = record.get("details")
    fields = {**record, **details} if isinstance(details, dict) else record
    missing = [f for f in ("input_lens", "ttfts") if f not in fields]
    if missing:
        raise ConfigError(
            f"{where}: no per-request {', '.join(missing)}: not a detailed {engine} result "
            f"(run it with {'--save-result --save-detailed' if 'vLLM' in engine else '--output-details'})"
        )
    inputs = _numbers(fields, "input_lens", where, None)
    n = inputs.size
    ttft = _numbers(fields, "ttfts", where, n)
    outputs = _numbers(fields, "output_lens", where, n) if "output_lens" in fields else np.zeros(n)
    errors = fields.get("errors", [""] * n)
    if not isinstance(errors, list) or len(errors) != n:
        raise ConfigError(f"{where}: errors must be a list with one entry per request")
    ok = np.array([not e for e in errors], dtype=bool)
    itls_raw = fields.get("itls", [[] for _ in range(n)])
    if not isinstance(itls_raw, list) or len(itls_raw) != n:
        raise ConfigError(f"{where}: itls must be a list with one list per request")
    pooled: list[float] = []
    for i, per_request in enumerate(itls_raw):
        if not ok[i]:
            continue
        if not isinstance(per_request, list):
            raise ConfigError(
                f"{where}: itls[{i}] must be a list of seconds, found {bounds.quoted(per_request)}"
            )
        pooled += [_number(v, where, f"itls[{i}]") for v in per_request]
    itl = np.array(pooled)
    timing = {}
    for field in ("start_times", "latencies"):
        if field in fields:
            timing[field] = _numbers(fields, field, where, n)[ok]
    ttft, inputs, outputs = ttft[ok], inputs[ok], outputs[ok]
    _positive(ttft, "ttfts", where)
    _positive(itl, "itls", where)
    if inputs.size and not np.all((inputs >= bounds.MIN_TOKENS) & (inputs <= bounds.MAX_TOKENS)):
        bad = inputs[(inputs < bounds.MIN_TOKENS) | (inputs > bounds.MAX_TOKENS)][0]
        raise ConfigError(
            f"{where}: input_lens must be in [{bounds.MIN_TOKENS:g}, {bounds.MAX_TOKENS:g}] "
            f"tokens, found {bad:g}"
        )
    concurrency = record.get("max_concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ConfigError(
            f"{where}: max_concurrency must be a whole number >= 1 or null, found "
            f"{bounds.quoted(concurrency)}"
        )
    rate = _number(record.get("request_rate", math.inf), where, "request_rate", allow_inf=True)
    mean_concurrency = record.get("concurrency")  # SGLang measures it
    if "latencies" in timing and "duration" in record:
        duration = _number(record["duration"], where, "duration")
        mean_concurrency = float(np.sum(timing["latencies"])) / duration if duration > 0 else None
    return BenchmarkRun(
        source=where,
        engine=engine,
        backend=_text(record, "backend", where),
        model_id=_text(record, "model_id", where),
        date=_text(record, "date", where),
        max_concurrency=concurrency,
        request_rate_rps=rate,
        input_tokens=inputs,
        output_tokens=outputs,
        ttft_s=ttft,
        itl_s=itl,
        start_s=timing.get("start_times"),
        latency_s=timing.get("latencies"),
        failed=int(np.count_nonzero(~ok)),
        mean_concurrency=(
            float(mean_concurrency) if isinstance(mean_concurrency, int | float) else None
        ),
    )


# run settings and statistics only one tool writes: vLLM names the model and its run
# (`date, model_id, tokenizer_id, num_prompts, burstiness, endpoint_type`) and its end-to-end
# statistics `*_e2el_ms`; SGLang its dataset arguments and `*_e2e_latency_ms`, and measures
# `concurrency`
_SHAPES = {
    "vllm": (
        "a vLLM bench serve JSON",
        ("date", "model_id", "tokenizer_id", "num_prompts", "burstiness", "endpoint_type"),
        "_e2el_ms",
    ),
    "sglang": (
        "an SGLang bench_serving JSONL",
        ("dataset_name", "random_input_len", "random_output_len", "random_range_ratio",
         "total_output_tokens_retokenized", "concurrency"),
        "_e2e_latency_ms",
    ),
}  # fmt: skip


def _markers(record: dict[str, object], fmt: str) -> list[str]:
    """The keys of `record` only the tool of format `fmt` writes."""
    _, keys, suffix = _SHAPES[fmt]
    return [k for k in record if k in keys or k.endswith(suffix)]


def check_shape(record: dict[str, object], where: str, fmt: str) -> None:
    """Refuse a result of the other tool: one that has the other tool's settings and none of
    `fmt`'s (a file with neither, or both, is read as `fmt`)."""
    other = "sglang" if fmt == "vllm" else "vllm"
    found = _markers(record, other)
    if found and not _markers(record, fmt):
        raise ConfigError(
            f"{where}: import-profile {fmt} expects {_SHAPES[fmt][0]}, found "
            f"{_SHAPES[other][0]} (it has {', '.join(found[:4])}"
            f"{', backend ' + bounds.quoted(record['backend']) if 'backend' in record else ''}); "
            f"run import-profile {other}"
        )


def _json_object(text: str, where: str, what: str) -> dict[str, object]:
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{where}: not JSON; is this a {what}?") from None
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: expected a JSON object, found {type(record).__name__}")
    return record


def read_vllm(path: Path) -> list[BenchmarkRun]:
    """The run in a `vllm bench serve --save-result --save-detailed` JSON file."""
    text = read_text(path, "vLLM result", limit_bytes=bounds.MAX_BENCHMARK_BYTES)
    if text.lstrip().startswith("{") and "\n{" in text.strip():
        raise ConfigError(f"{path}: several JSON objects: a JSONL file (sglang format?)")
    record = _json_object(text, str(path), "vLLM result JSON")
    check_shape(record, str(path), "vllm")
    return [_run(record, str(path), "vLLM bench serve")]


def read_sglang(path: Path) -> list[BenchmarkRun]:
    """The runs in an SGLang `bench_serving --output-file --output-details` JSONL file, one
    per non-blank line."""
    runs = []
    with open_bounded(path, "SGLang result", bounds.MAX_BENCHMARK_BYTES) as handle:
        for number, line in enumerate(bounded_lines(handle, path, "SGLang result"), start=1):
            if line.strip():
                where = f"{path}:{number}"
                record = _json_object(line, where, "SGLang bench_serving JSONL line")
                check_shape(record, where, "sglang")
                runs.append(_run(record, where, "SGLang bench_serving"))
    if not runs:
        raise ConfigError(f"{path}: no runs found (an empty SGLang result file)")
    return runs


_PREFILL_KEYS = ("prefill_isl", "prefill_ttft")
_DECODE_KEYS = ("x_kv_usage", "y_context_length", "z_itl", "max_kv_tokens")


def read_dynamo(path: Path) -> DynamoPrefill | DynamoDecode:
    """A Dynamo profiler `raw_data.npz`, prefill or decode by the arrays it holds (read
    without pickles; ms converted to s)."""
    open_bounded(
        path, "Dynamo raw_data.npz", bounds.MAX_BENCHMARK_BYTES
    ).close()  # regular, bounded
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {k: np.asarray(archive[k]) for k in archive.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError):
        raise ConfigError(
            f"{path}: not a numpy .npz archive (the Dynamo profiler's raw_data.npz)"
        ) from None
    for name, array in arrays.items():
        if array.dtype.kind not in "fiu" or not np.all(np.isfinite(array)):
            raise ConfigError(f"{path}: {name} must hold finite numbers, found dtype {array.dtype}")
    where = str(path)
    if all(k in arrays for k in _PREFILL_KEYS):
        isl, ttft_ms = (arrays[k].astype(float).ravel() for k in _PREFILL_KEYS)
        if isl.size != ttft_ms.size:
            raise ConfigError(f"{where}: prefill_isl and prefill_ttft differ in length")
        _positive(ttft_ms, "prefill_ttft", where)
        return DynamoPrefill(where, isl, units.ms_to_s(ttft_ms))
    if all(k in arrays for k in _DECODE_KEYS):
        usage, context, itl_ms = (arrays[k].astype(float).ravel() for k in _DECODE_KEYS[:3])
        if not usage.size == context.size == itl_ms.size:
            raise ConfigError(f"{where}: x_kv_usage, y_context_length and z_itl differ in length")
        max_kv = arrays["max_kv_tokens"].astype(float).ravel()
        if max_kv.size != 1 or not max_kv[0] > 0:
            raise ConfigError(f"{where}: max_kv_tokens must be one number > 0, found {max_kv}")
        _positive(itl_ms, "z_itl", where)
        _positive(context, "y_context_length", where)
        batch = usage * max_kv[0] / context
        if np.any(np.abs(batch - np.round(batch)) > 0.05) or np.any(np.round(batch) < 1):
            i = int(np.argmax(np.abs(batch - np.round(batch))))
            raise ConfigError(
                f"{where}: x_kv_usage[{i}] x max_kv_tokens / y_context_length must be a whole "
                f"number of requests, found {batch[i]:.3g}"
            )
        return DynamoDecode(where, np.round(batch), context, units.ms_to_s(itl_ms), max_kv[0])
    raise ConfigError(
        f"{where}: a Dynamo raw_data.npz holds {', '.join(_PREFILL_KEYS)} (prefill) or "
        f"{', '.join(_DECODE_KEYS)} (decode); found {', '.join(sorted(arrays)) or 'no arrays'}"
    )
