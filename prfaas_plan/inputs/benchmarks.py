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

Reading is bounded before memory is spent (inputs/bounded_json.py: the per-request lists become
float64 arrays, a key given twice in one object is refused, every number is charged to a budget
shared by the files of one import (bounds.py); a Dynamo archive's members are
checked by their zip entry and `.npy` header before their data is read, and read with a cap).
Every value has its plausible range (bounds.py), checked on the successful requests; the
medians of `ttfts` and `itls` must agree with the file's own `median_ttft_ms` and
`median_itl_ms` where it has them (a list written in ms under a seconds name is 1000x off).
Every message names the file (and line), the field (and request) and what was found.
"""

import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from prfaas_plan import bounds, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.bounded_json import Budget, NumberLists, Shape, read_object, skip_whitespace
from prfaas_plan.inputs.reading import bounded_lines, open_bounded, open_bounded_binary, read_text


@dataclass(frozen=True)
class BenchmarkRun:
    """One run of a serving benchmark: its settings and its successful requests."""

    source: str  # file (and line for JSONL)
    engine: str
    backend: str | None
    model_id: str | None
    date: str | None
    max_concurrency: int | None  # None: unlimited
    request_rate_rps: float | None  # inf: every request sent at once; None: a trace replayed
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray
    itl_s: np.ndarray  # every inter-token latency of every request, pooled
    start_s: np.ndarray | None  # when each request was sent, if the file says
    latency_s: np.ndarray | None  # each request's end-to-end latency, if the file says
    failed: int  # requests with an error, dropped
    mean_concurrency: float | None  # measured mean number in flight, where known
    # the run's dataset settings (SGLang's dataset_name, random_input_len, ...), as written
    settings: tuple[tuple[str, str], ...] = ()
    # per kept request: its inter-token latencies and their sum (latency - TTFT), for the time
    # per output token where a streamed chunk carries several tokens (inputs/decode_step.py)
    itl_counts: np.ndarray | None = None
    decode_time_s: np.ndarray | None = None


@dataclass(frozen=True)
class DynamoPrefill:
    source: str
    input_tokens: np.ndarray
    ttft_s: np.ndarray
    estimated_by: str | None = None  # what in the file says its latencies were estimated


@dataclass(frozen=True)
class DynamoDecode:
    source: str
    batch_size: np.ndarray  # the client's concurrency (inputs/dynamo_points.py: the engine's)
    context_tokens: np.ndarray
    itl_s: np.ndarray
    max_kv_tokens: float
    throughput_per_gpu: np.ndarray | None = None  # z_thpt_per_gpu, tokens/s per GPU
    estimated_by: str | None = None


def import_budget() -> Budget:
    """The values the files of one import may hold, shared by them (bounds.py:
    MAX_BENCHMARK_NUMBERS, MAX_BENCHMARK_WALKED_VALUES)."""
    return Budget(
        bounds.MAX_BENCHMARK_NUMBERS, bounds.MAX_BENCHMARK_WALKED_VALUES, "the files of one import"
    )


# the per-request lists of a vLLM or SGLang result, read into arrays (inputs/bounded_json.py);
# `generated_texts` and anything else is walked and dropped
_RESULT_SHAPES = {
    "input_lens": Shape.NUMBERS,
    "output_lens": Shape.NUMBERS,
    "ttfts": Shape.NUMBERS,
    "start_times": Shape.NUMBERS,
    "latencies": Shape.NUMBERS,
    "queue_times": Shape.NUMBERS,
    "itls": Shape.NUMBER_LISTS,
    "errors": Shape.TEXTS,
}


def _setting(
    record: dict[str, object],
    field: str,
    where: str,
    low: float,
    high: float,
    unit: str = "",
    *,
    allow_inf: bool = False,
    whole: bool = False,
    low_open: bool = False,
) -> float | None:
    """The run setting `field` (None when absent or null): a number in [low, high] ((low,
    high] with `low_open`), whole with `whole`; with `allow_inf`, also inf or the string "inf"
    (vLLM's request_rate)."""
    value = record.get(field)
    if value is None:
        return None
    if allow_inf and value in ("inf", math.inf):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {field} must be a number, found {bounds.quoted(value)}")
    inside = (low < value if low_open else low <= value) and value <= high
    if not (math.isfinite(value) and inside) or (whole and value != round(value)):
        kind = "a whole number" if whole else "a number"
        raise ConfigError(
            f"{where}: {field} must be {kind} in {'(' if low_open else '['}{low:g}, {high:g}]{unit}"
            f"{' or inf' if allow_inf else ''}, found {bounds.quoted(value)}"
        )
    return float(value)


def _check_each(
    values: np.ndarray,
    field: str,
    where: str,
    interval: tuple[float, float],
    unit: str,
    *,
    label: "np.ndarray | _RaggedLabels | None" = None,
    low_open: bool = False,
    whole: bool = False,
    hint: str = "",
) -> None:
    """Refuse the first value outside [low, high] ((low, high] with `low_open`), or not a whole
    number with `whole`, naming it by its index in the file (`label[k]`: the request, or
    `i][j` for a list of lists)."""
    low, high = interval
    bad = (values <= low if low_open else values < low) | (values > high)
    if whole:
        bad |= values != np.round(values)
    if not bad.any():
        return
    where_bad = np.flatnonzero(bad)
    k = int(where_bad[0])
    index = label[k] if label is not None else k
    kind = "a whole number in " if whole else "in "
    bracket = "(" if low_open else "["
    raise ConfigError(
        f"{where}: {field}[{index}] must be {kind}{bracket}{low:g}, {high:g}]{unit}, found "
        f"{values[k]:g} ({where_bad.size} value(s) in all){hint}"
    )


def _list_field(fields: dict[str, object], field: str, where: str, count: int | None) -> np.ndarray:
    values = fields[field]
    if not isinstance(values, np.ndarray):  # the reader makes every one an array
        raise ConfigError(f"{where}: {field} must be a list of numbers (one per request)")
    if count is not None and values.size != count:
        raise ConfigError(
            f"{where}: {field} has {values.size} entries, expected {count} (one per request)"
        )
    return values


def _text(record: dict[str, object], field: str, where: str) -> str | None:
    value = record.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {field} must be text, found {bounds.quoted(value)}")
    return value


def _fields(record: dict[str, object], where: str) -> dict[str, object]:
    """The run's fields, the per-request details nested under `details` (some SGLang forks)
    taken as top-level ones; a field in both is refused (which would count?)."""
    details = record.get("details")
    if not isinstance(details, dict):
        return record
    both = sorted(set(record) & set(details) - {"details"})
    if both:
        raise ConfigError(
            f"{where}: {', '.join(both[:4])} given both at the top level and under details; "
            "keep one"
        )
    return {**record, **details}


_TIME_HINT = ": a clock or unit problem"


def _run(record: dict[str, object], where: str, engine: str) -> BenchmarkRun:
    """A run from one vLLM or SGLang result object, its values checked on the successful
    requests (each named by its index in the file)."""
    fields = _fields(record, where)
    missing = [f for f in ("input_lens", "ttfts") if f not in fields]
    if missing:
        raise ConfigError(
            f"{where}: no per-request {', '.join(missing)}: not a detailed {engine} result "
            f"(run it with {'--save-result --save-detailed' if 'vLLM' in engine else '--output-details'})"
        )
    inputs = _list_field(fields, "input_lens", where, None)
    n = inputs.size
    ttft = _list_field(fields, "ttfts", where, n)
    outputs = _list_field(fields, "output_lens", where, n) if "output_lens" in fields else None
    errors = fields.get("errors")
    if errors is None:
        ok = np.ones(n, dtype=bool)
    elif not isinstance(errors, list) or len(errors) != n:
        raise ConfigError(f"{where}: errors must be a list with one entry per request")
    else:
        ok = np.array([not e for e in errors], dtype=bool)
    itls = fields.get("itls")
    if itls is None:
        itls = NumberLists(np.empty(0), np.zeros(n, dtype=np.int64))
    if not isinstance(itls, NumberLists) or itls.counts.size != n:
        raise ConfigError(f"{where}: itls must be a list with one list per request")
    timing = {
        f: _list_field(fields, f, where, n)[ok] for f in ("start_times", "latencies") if f in fields
    }
    label = np.flatnonzero(ok)  # a kept request's index in the file
    inputs, ttft = inputs[ok], ttft[ok]
    outputs = outputs[ok] if outputs is not None else np.zeros(inputs.size)
    tokens = (bounds.MIN_TOKENS, bounds.MAX_TOKENS)
    _check_each(inputs, "input_lens", where, tokens, " tokens", label=label, whole=True)
    _check_each(outputs, "output_lens", where, (0, bounds.MAX_TOKENS), " tokens", label=label,
                whole=True)  # fmt: skip
    seconds = (0.0, bounds.MAX_SECONDS)
    _check_each(ttft, "ttfts", where, seconds, " s", label=label, low_open=True, hint=_TIME_HINT)
    kept_itls = np.repeat(ok, itls.counts)
    itl = itls.values if ok.all() else itls.values[kept_itls]  # a copy only if some failed
    _check_each(itl, "itls", where, seconds, " s", label=_ragged_labels(itls.counts, kept_itls),
                low_open=True, hint=_TIME_HINT)  # fmt: skip
    if "latencies" in timing:
        latency = timing["latencies"]
        _check_each(latency, "latencies", where, seconds, " s", label=label, low_open=True,
                    hint=_TIME_HINT)  # fmt: skip
        short = np.flatnonzero(latency < ttft * (1 - 1e-6))  # rounding of either aside
        if short.size:
            i, k = int(label[short[0]]), int(short[0])
            raise ConfigError(
                f"{where}: latencies[{i}] is {latency[k]:g} s, shorter than ttfts[{i}] "
                f"{ttft[k]:g} s: a request's latency includes its time to first token"
            )
    _check_statistics(record, where, ttft, itl)
    concurrency = _setting(record, "max_concurrency", where, 1, bounds.MAX_BATCH_SIZE, whole=True)
    trace = record.get("request_rate") == "trace"  # SGLang replaying a trace's timestamps
    rate = None if trace else _setting(record, "request_rate", where, bounds.MIN_RATE_RPS,
                                       bounds.MAX_RATE_RPS, " req/s", allow_inf=True)  # fmt: skip
    mean_concurrency = _setting(record, "concurrency", where, 0, bounds.MAX_BATCH_SIZE)  # SGLang
    duration = _setting(record, "duration", where, 0, bounds.MAX_SECONDS, " s", low_open=True)
    if "latencies" in timing and duration is not None:
        mean_concurrency = float(np.sum(timing["latencies"])) / duration
    return BenchmarkRun(
        source=where,
        engine=engine,
        backend=_text(record, "backend", where),
        model_id=_text(record, "model_id", where),
        date=_text(record, "date", where),
        max_concurrency=int(concurrency) if concurrency is not None else None,
        request_rate_rps=None if trace else math.inf if rate is None else rate,
        input_tokens=inputs,
        output_tokens=outputs,
        ttft_s=ttft,
        itl_s=itl,
        start_s=timing.get("start_times"),
        latency_s=timing.get("latencies"),
        failed=int(np.count_nonzero(~ok)),
        mean_concurrency=mean_concurrency,
        settings=_settings(record),
        itl_counts=itls.counts[ok],
        decode_time_s=_decode_times(itls, ok, timing.get("latencies"), ttft),
    )


# SGLang's dataset settings, which tell one sweep's runs from another's (vLLM writes none)
_SETTINGS = ("dataset_name", "random_input_len", "random_output_len", "random_range_ratio")


def _settings(record: dict[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(record[k])) for k in _SETTINGS if record.get(k) is not None)


def _decode_times(
    itls: NumberLists, ok: np.ndarray, latency_s: np.ndarray | None, ttft_s: np.ndarray
) -> np.ndarray:
    """Each kept request's decode time: latency - TTFT where the file has latencies, else the
    sum of its inter-token latencies (the same interval, chunk by chunk)."""
    if latency_s is not None:
        decode_s: np.ndarray = latency_s - ttft_s
        return decode_s
    sums: np.ndarray = np.zeros(itls.counts.size)
    some = itls.counts > 0
    if some.any():  # reduceat over the first value of each non-empty list
        starts = (np.cumsum(itls.counts) - itls.counts)[some]
        sums[some] = np.add.reduceat(itls.values, starts)
    kept: np.ndarray = sums[ok]
    return kept


def _ragged_labels(counts: np.ndarray, kept: np.ndarray) -> "_RaggedLabels":
    return _RaggedLabels(counts, np.flatnonzero(kept))


@dataclass(frozen=True)
class _RaggedLabels:
    """`i][j` of the k-th kept value of a list of lists, computed only when a message needs it."""

    counts: np.ndarray
    kept: np.ndarray  # flat index of each kept value

    def __getitem__(self, k: int) -> str:
        flat = int(self.kept[k])
        ends = np.cumsum(self.counts)
        i = int(np.searchsorted(ends, flat, side="right"))
        return f"{i}][{flat - int(ends[i] - self.counts[i])}"


# a median that disagrees with the file's own by this factor is a unit slip, not a difference of
# versions (a list in ms under a seconds name is 1000x off)
STATISTIC_TOLERANCE = 30.0
_STATISTICS = (("ttfts", "median_ttft_ms"), ("itls", "median_itl_ms"))
_SLIPS = {1: "milliseconds", 2: "microseconds", 3: "nanoseconds"}


def _check_statistics(
    record: dict[str, object], where: str, ttft_s: np.ndarray, itl_s: np.ndarray
) -> None:
    """The medians of the kept ttfts and itls against the file's median_ttft_ms and
    median_itl_ms (computed by the tool from the same successful requests), where it has them."""
    for field, values in zip(("ttfts", "itls"), (ttft_s, itl_s), strict=True):
        key = dict(_STATISTICS)[field]
        stated = record.get(key)
        if (
            not values.size
            or isinstance(stated, bool)
            or not isinstance(stated, int | float)
            or not (math.isfinite(stated) and stated > 0)
        ):
            continue
        median_s = float(np.median(values))
        ratio = units.s_to_ms(median_s) / stated
        if 1 / STATISTIC_TOLERANCE <= ratio <= STATISTIC_TOLERANCE:
            continue
        slip = _SLIPS.get(round(math.log10(ratio) / 3))
        likely = (
            f"{field} look like {slip}, expected seconds"
            if slip
            else f"{field} or {key} is in the wrong unit"
        )
        raise ConfigError(
            f"{where}: the median of {field} is {median_s:.4g} s but the file's own {key} is "
            f"{stated:.4g} ms ({ratio:.3g}x): {likely}"
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


def read_vllm(path: Path, budget: Budget | None = None) -> list[BenchmarkRun]:
    """The runs in a `vllm bench serve --save-result --save-detailed` JSON file: one object,
    or with `--append-result` one object per run, each after a newline (serve.py writes "\n"
    then the next result into the same file); a run of a file of several is named by the line
    it starts on. Values are charged to `budget` (one import's, else a fresh one)."""
    budget = budget or import_budget()
    text = read_text(path, "vLLM result", limit_bytes=bounds.MAX_BENCHMARK_BYTES)
    runs: list[BenchmarkRun] = []
    start = skip_whitespace(text, 0)
    line = text.count("\n", 0, start) + 1
    several = False
    while True:
        where = f"{path}:{line}" if several else str(path)
        record, end = read_object(text, where, "a vLLM result JSON", _RESULT_SHAPES, budget,
                                  nested=("details",), start=start)  # fmt: skip
        after = skip_whitespace(text, end)
        if after < len(text) and not text.startswith("{", after):
            line += text.count("\n", start, after)
            raise ConfigError(f"{path}: not JSON (text after the object, line {line})")
        several = several or after < len(text)
        where = f"{path}:{line}" if several else str(path)
        check_shape(record, where, "vllm")
        runs.append(_run(record, where, "vLLM bench serve"))
        _check_run_count(runs, where)
        if after == len(text):
            return runs
        line += text.count("\n", start, after)
        start = after


# runs one file may hold: a sweep appends tens; a file of a million tiny runs is refused before
# their arrays add up
MAX_RUNS_PER_FILE = 10_000


def _check_run_count(runs: list[BenchmarkRun], where: str) -> None:
    if len(runs) > MAX_RUNS_PER_FILE:
        raise ConfigError(
            f"{where}: more than {MAX_RUNS_PER_FILE:,} runs in one file; a sweep appends tens: "
            "import its runs in parts"
        )


def read_sglang(path: Path, budget: Budget | None = None) -> list[BenchmarkRun]:
    """The runs in an SGLang `bench_serving --output-file --output-details` JSONL file, one
    per non-blank line (a line may be as long as the file may be); values charged to `budget`."""
    budget = budget or import_budget()
    runs = []
    with open_bounded(path, "SGLang result", bounds.MAX_BENCHMARK_BYTES) as handle:
        lines = bounded_lines(handle, path, "SGLang result", limit_chars=bounds.MAX_BENCHMARK_BYTES)
        for number, line in enumerate(lines, start=1):
            if skip_whitespace(line, 0) == len(line):
                continue
            where = f"{path}:{number}"
            record, end = read_object(line, where, "an SGLang bench_serving JSONL line",
                                      _RESULT_SHAPES, budget, nested=("details",))  # fmt: skip
            if skip_whitespace(line, end) < len(line):
                raise ConfigError(f"{where}: text after the JSON object (one run per line)")
            check_shape(record, where, "sglang")
            runs.append(_run(record, where, "SGLang bench_serving"))
            _check_run_count(runs, where)
    if not runs:
        raise ConfigError(f"{path}: no runs found (an empty SGLang result file)")
    return runs


_PREFILL_KEYS = ("prefill_isl", "prefill_ttft")
_DECODE_KEYS = ("x_kv_usage", "y_context_length", "z_itl", "max_kv_tokens")
# numpy's own cap on a .npy header (numpy.lib.format, max_header_size)
_MAX_NPY_HEADER_BYTES = 10_000
_NPY_VERSIONS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_MAX_ITEM_BYTES = 8  # float64 and int64, the widest dtypes the profiler writes


def read_dynamo(path: Path) -> DynamoPrefill | DynamoDecode:
    """A Dynamo profiler `raw_data.npz`, prefill or decode by the arrays it holds; only the
    arrays used are read, each checked by its zip entry and `.npy` header before its data is
    read (never a pickle); ms converted to s. A file that is not a zip archive is read as the
    ConfigMap JSON form of the same arrays (inputs/dynamo_json.py)."""
    where = str(path)
    with open_bounded_binary(path, "Dynamo raw_data.npz", bounds.MAX_DYNAMO_BYTES) as handle:
        head = handle.read(64)
        handle.seek(0)
        if head.lstrip(b" \t\r\n").startswith(b"{"):  # a zip archive starts with "PK"
            from prfaas_plan.inputs.dynamo_json import read_dynamo_json

            return read_dynamo_json(path)
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            raise ConfigError(
                f"{where}: not a numpy .npz archive (the Dynamo profiler's raw_data.npz)"
            ) from None
        with archive:
            members: dict[str, zipfile.ZipInfo] = {}
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                if name in members:
                    raise ConfigError(
                        f"{where}: the archive holds {bounds.quoted(name)} twice (a duplicate "
                        "key: which one would count?)"
                    )
                members[name] = info
            if all(k in members for k in _PREFILL_KEYS):
                isl, ttft_ms = (_npy(archive, members[k], where, k) for k in _PREFILL_KEYS)
                return dynamo_prefill(where, isl, ttft_ms)
            if all(k in members for k in _DECODE_KEYS):
                usage, context, itl_ms, max_kv = (
                    _npy(archive, members[k], where, k) for k in _DECODE_KEYS
                )
                thpt = members.get("z_thpt_per_gpu")
                return dynamo_decode(
                    where, usage, context, itl_ms, max_kv,
                    None if thpt is None else _npy(archive, thpt, where, "z_thpt_per_gpu"),
                )  # fmt: skip
    names = sorted(members)
    shown = ", ".join(bounds.quoted(n)[1:-1] for n in names[:8])
    more = f" and {len(names) - 8:,} more" if len(names) > 8 else ""
    raise ConfigError(
        f"{where}: a Dynamo raw_data.npz holds {', '.join(_PREFILL_KEYS)} (prefill) or "
        f"{', '.join(_DECODE_KEYS)} (decode); found {shown + more or 'no arrays'}"
    )


def _npy(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, name: str) -> np.ndarray:
    """The `.npy` member `info` as float64 values, refused before its data is read unless its
    zip entry (stored or deflated, declared size) and header (a numeric dtype, at most
    bounds.MAX_PROFILE_POINTS values, matching the declared size) say it is a profiler array;
    read with a cap, so a member that inflates past its declared size is refused (zip CRC)."""
    if info.flag_bits & 0x1:
        raise ConfigError(f"{where}: {name} is encrypted; the profiler writes plain arrays")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ConfigError(
            f"{where}: {name} uses zip compression method {info.compress_type}; numpy writes "
            "stored or deflated members"
        )
    limit = _MAX_NPY_HEADER_BYTES + bounds.MAX_PROFILE_POINTS * _MAX_ITEM_BYTES
    if info.file_size > limit:
        raise ConfigError(
            f"{where}: {name} declares {info.file_size:,} bytes uncompressed, over the "
            f"{limit:,} of {bounds.MAX_PROFILE_POINTS:,} numbers (a profile table's rows); "
            "not a profiler sweep"
        )
    # deflate adds at most ~0.03% and a few bytes to what it cannot compress; a member holding
    # more compressed bytes than that is one whose data goes on past its declared size
    if info.compress_size > info.file_size + info.file_size // 1000 + 64:
        raise ConfigError(
            f"{where}: {name}'s zip entry holds {info.compress_size:,} compressed bytes for "
            f"{info.file_size:,} bytes of data: a damaged or forged archive"
        )
    try:
        with archive.open(info) as member:
            data, dtype, shape, fortran = _npy_data(member, info.file_size, where, name)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, zlib.error) as exc:
        raise ConfigError(f"{where}: {name} is not a readable .npy array ({exc})") from None
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    values = array.astype(np.float64).ravel()
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ConfigError(f"{where}: {name}[{bad[0]}] must be finite, found {values[bad[0]]:g}")
    return values


def _npy_data(
    member: IO[bytes], declared_bytes: int, where: str, name: str
) -> tuple[bytes, np.dtype, tuple[int, ...], bool]:
    version = np.lib.format.read_magic(member)
    read_header = _NPY_VERSIONS.get(version)
    if read_header is None:
        raise ConfigError(f"{where}: {name} is a .npy of version {version}; expected 1.0 or 2.0")
    shape, fortran, dtype = read_header(member, max_header_size=_MAX_NPY_HEADER_BYTES)
    if dtype.kind not in "fiu" or dtype.itemsize > _MAX_ITEM_BYTES:
        raise ConfigError(
            f"{where}: {name} must hold numbers (int or float), found dtype {bounds.quoted(str(dtype))}"
        )
    count = math.prod(shape)
    if count > bounds.MAX_PROFILE_POINTS:
        raise ConfigError(
            f"{where}: {name} declares {count:,} values (shape {bounds.quoted(shape)}), over "
            f"the {bounds.MAX_PROFILE_POINTS:,} rows a profile table may have; not a profiler sweep"
        )
    data_bytes = count * dtype.itemsize
    header_bytes = member.tell()
    if header_bytes + data_bytes != declared_bytes:
        raise ConfigError(
            f"{where}: {name}'s header says {data_bytes:,} bytes of data but its zip entry "
            f"{declared_bytes - header_bytes:,}: a damaged or forged archive"
        )
    data = member.read(data_bytes)
    if len(data) != data_bytes or member.read(1):
        raise ConfigError(f"{where}: {name} holds {len(data):,} bytes, expected {data_bytes:,}")
    return data, dtype, shape, fortran


def dynamo_prefill(where: str, isl: np.ndarray, ttft_ms: np.ndarray) -> DynamoPrefill:
    if isl.size != ttft_ms.size:
        raise ConfigError(f"{where}: prefill_isl and prefill_ttft differ in length")
    tokens = (bounds.MIN_TOKENS, bounds.MAX_TOKENS)
    _check_each(isl, "prefill_isl", where, tokens, " tokens", whole=True)
    _check_each(ttft_ms, "prefill_ttft", where, (0.0, units.s_to_ms(bounds.MAX_SECONDS)), " ms",
                low_open=True, hint=_TIME_HINT)  # fmt: skip
    return DynamoPrefill(where, isl, units.ms_to_s(ttft_ms))


def dynamo_decode(
    where: str,
    usage: np.ndarray,
    context: np.ndarray,
    itl_ms: np.ndarray,
    max_kv: np.ndarray,
    thpt: np.ndarray | None = None,
) -> DynamoDecode:
    if not usage.size == context.size == itl_ms.size:
        raise ConfigError(f"{where}: x_kv_usage, y_context_length and z_itl differ in length")
    if thpt is not None:
        if thpt.size != usage.size:
            raise ConfigError(f"{where}: z_thpt_per_gpu and z_itl differ in length")
        _check_each(thpt, "z_thpt_per_gpu", where, (0.0, bounds.MAX_TOKENS), " tokens/s",
                    low_open=True)  # fmt: skip
    if max_kv.size != 1:
        raise ConfigError(f"{where}: max_kv_tokens must be one number, found {max_kv.size}")
    _check_each(max_kv, "max_kv_tokens", where, (1.0, bounds.MAX_TOKENS), " tokens", whole=True)
    _check_each(itl_ms, "z_itl", where, (0.0, units.s_to_ms(bounds.MAX_SECONDS)), " ms",
                low_open=True, hint=_TIME_HINT)  # fmt: skip
    tokens = (bounds.MIN_TOKENS, bounds.MAX_TOKENS)
    _check_each(context, "y_context_length", where, tokens, " tokens")
    _check_each(usage, "x_kv_usage", where, (0.0, math.inf), "", low_open=True)
    batch = usage * max_kv[0] / context
    if np.any(np.abs(batch - np.round(batch)) > 0.05) or np.any(np.round(batch) < 1):
        i = int(np.argmax(np.abs(batch - np.round(batch)) + (np.round(batch) < 1)))
        raise ConfigError(
            f"{where}: x_kv_usage[{i}] x max_kv_tokens / y_context_length must be a whole "
            f"number of requests >= 1, found {batch[i]:.3g}"
        )
    big = np.flatnonzero(np.round(batch) > bounds.MAX_BATCH_SIZE)
    if big.size:
        raise ConfigError(
            f"{where}: x_kv_usage[{big[0]}] x max_kv_tokens / y_context_length is a batch of "
            f"{batch[big[0]]:.3g} requests, over {bounds.MAX_BATCH_SIZE:g}"
        )
    return DynamoDecode(
        where, np.round(batch), context, units.ms_to_s(itl_ms), float(max_kv[0]), thpt
    )
