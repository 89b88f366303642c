"""One run of a vLLM or SGLang benchmark result read into a typed `BenchmarkRun`
(inputs/benchmarks.py reads the files): which tool wrote it, its settings, its successful
requests, every value within its plausible range (plausible.py) and the per-request medians
agreeing with the file's own. Units: seconds and tokens.

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
"""

import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.json_terms import NumberLists, Shape


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


# the per-request lists of a vLLM or SGLang result, read into arrays (inputs/bounded_json.py);
# `generated_texts` and anything else is walked and dropped
RESULT_SHAPES = {
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
        raise ConfigError(f"{where}: {field} must be a number, found {plausible.quoted(value)}")
    inside = (low < value if low_open else low <= value) and value <= high
    if not (math.isfinite(value) and inside) or (whole and value != round(value)):
        kind = "a whole number" if whole else "a number"
        raise ConfigError(
            f"{where}: {field} must be {kind} in {'(' if low_open else '['}{low:g}, {high:g}]{unit}"
            f"{' or inf' if allow_inf else ''}, found {plausible.quoted(value)}"
        )
    return float(value)


def check_each(
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
        raise ConfigError(f"{where}: {field} must be text, found {plausible.quoted(value)}")
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


TIME_HINT = ": a clock or unit problem"


def run_of(record: dict[str, object], where: str, engine: str) -> BenchmarkRun:
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
    tokens = (plausible.MIN_TOKENS, plausible.MAX_TOKENS)
    check_each(inputs, "input_lens", where, tokens, " tokens", label=label, whole=True)
    check_each(outputs, "output_lens", where, (0, plausible.MAX_TOKENS), " tokens", label=label,
                whole=True)  # fmt: skip
    seconds = (0.0, plausible.MAX_SECONDS)
    check_each(ttft, "ttfts", where, seconds, " s", label=label, low_open=True, hint=TIME_HINT)
    kept_itls = np.repeat(ok, itls.counts)
    itl = itls.values if ok.all() else itls.values[kept_itls]  # a copy only if some failed
    check_each(itl, "itls", where, seconds, " s", label=_ragged_labels(itls.counts, kept_itls),
                low_open=True, hint=TIME_HINT)  # fmt: skip
    if "latencies" in timing:
        latency = timing["latencies"]
        check_each(latency, "latencies", where, seconds, " s", label=label, low_open=True,
                    hint=TIME_HINT)  # fmt: skip
        short = np.flatnonzero(latency < ttft * (1 - 1e-6))  # rounding of either aside
        if short.size:
            i, k = int(label[short[0]]), int(short[0])
            raise ConfigError(
                f"{where}: latencies[{i}] is {latency[k]:g} s, shorter than ttfts[{i}] "
                f"{ttft[k]:g} s: a request's latency includes its time to first token"
            )
    _check_statistics(record, where, ttft, itl)
    concurrency = _setting(
        record, "max_concurrency", where, 1, plausible.MAX_BATCH_SIZE, whole=True
    )
    trace = record.get("request_rate") == "trace"  # SGLang replaying a trace's timestamps
    rate = None if trace else _setting(record, "request_rate", where, plausible.MIN_RATE_RPS,
                                       plausible.MAX_RATE_RPS, " req/s", allow_inf=True)  # fmt: skip
    mean_concurrency = _setting(record, "concurrency", where, 0, plausible.MAX_BATCH_SIZE)  # SGLang
    duration = _setting(record, "duration", where, 0, plausible.MAX_SECONDS, " s", low_open=True)
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
            f"{', backend ' + plausible.quoted(record['backend']) if 'backend' in record else ''}); "
            f"run import-profile {other}"
        )
