"""Trace and length files: Mooncake JSONL, Azure LLM inference and BurstGPT CSV traces and CSV
length tables, read once here for the simulator (`simulate --trace`, `compare-policies --trace`)
and for observed length distributions in scenarios. Units: seconds and tokens inside;
the CSV traces and format detection are trace_csv.py.

Formats (detected from the first line, or named by `fmt`; the field names as the public files
have them, checked against the published files in December 2026):
- Mooncake JSONL (kvcache-ai/Mooncake): one `{"timestamp": ms, "input_length": tokens,
  "output_length": tokens, "hash_ids": [...]}` per line (blank lines skipped); `hash_ids` are
  ids of the prompt's prefix blocks (512 tokens each in the Mooncake traces) and may be absent.
- Azure LLM inference traces 2023/2024 (Azure/AzurePublicDataset,
  data/AzureLLMInferenceTrace_{code,conv}.csv): CSV `TIMESTAMP,ContextTokens,GeneratedTokens`,
  TIMESTAMP a wall-clock datetime, `2023-11-16 18:17:03.9799600` (7 fractional digits) in 2023,
  with a UTC offset (`+00:00`) in 2024; times are taken relative to the earliest request.
- BurstGPT (HPMLL/BurstGPT, data/BurstGPT_*.csv): CSV `Timestamp,Model,Request tokens,Response
  tokens,Total tokens,Log Type` (newer files add `Session ID`, `Elapsed time`; columns are found
  by name), Timestamp in seconds. Failed requests have 0 response tokens: they are dropped and
  their count is said in the trace's source description.
- A CSV of lengths (observed lengths only) has the single column `input_tokens`.
Input and output lengths are read jointly into one `RequestTrace`. Every message names the file
and line.
"""

import errno
import json
import math
import os
from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import (
    bounded_lines,
    open_bounded,
    read_csv_columns,
)
from prfaas_plan.inputs.trace_csv import detect_format, read_csv_trace
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace


def _trace_number(
    record: dict[str, object], key: str, where: str, *, minimum: float, maximum: float
) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: expected a numeric {key}, found {plausible.quoted(value)}")
    if value < minimum:
        raise ConfigError(f"{where}: {key} must be >= {minimum:g}, found {value:g}")
    if value > maximum:
        raise ConfigError(f"{where}: {key} must be <= {maximum:g}, found {value:g}")
    return float(value)


def _hash_ids(record: dict[str, object], where: str) -> list[int]:
    blocks = record.get("hash_ids", [])
    if not isinstance(blocks, list) or not all(
        isinstance(b, int) and not isinstance(b, bool) for b in blocks
    ):
        raise ConfigError(
            f"{where}: hash_ids must be a list of integers, found {plausible.quoted(blocks)}"
        )
    if any(not _MIN_HASH_ID <= b <= _MAX_HASH_ID for b in blocks):
        bad = next(b for b in blocks if not _MIN_HASH_ID <= b <= _MAX_HASH_ID)
        raise ConfigError(
            f"{where}: hash_ids must fit in 64 bits ([-2^63, 2^63 - 1]), found {plausible.quoted(bad)}"
        )
    return blocks


_MIN_HASH_ID, _MAX_HASH_ID = -(2**63), 2**63 - 1


class _DuplicateKeyError(Exception):
    """A JSON object with one key twice (json.loads would keep the last value silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    record: dict[str, object] = {}
    for key, value in pairs:
        if key in record:
            raise _DuplicateKeyError(key)
        record[key] = value
    return record


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool) or value is None:
        return "literal"
    return "number"


def parse_mooncake_trace(lines: Iterable[str], source: str = "trace") -> RequestTrace:
    """Parse Mooncake JSONL lines (blank lines skipped) into a `RequestTrace`.

    Times are shifted so the earliest request arrives at 0 s (timestamps are milliseconds);
    requests are ordered by timestamp (stable, so equal timestamps keep file order).
    `hash_ids` may be absent (no prefix information). Lengths lie in [plausible.MIN_TOKENS (inputs)
    or 0 (outputs), plausible.MAX_TOKENS]; the trace spans at most plausible.MAX_SECONDS. Columns are
    kept in typed arrays (8 bytes a value), not lists of Python numbers."""
    timestamps, inputs, outputs = array("d"), array("d"), array("d")
    ids, counts = array("q"), array("q")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            record = json.loads(line, object_pairs_hook=_unique_keys)
        except _DuplicateKeyError as exc:
            raise ConfigError(
                f"{where}: duplicate key {plausible.quoted(exc.key)} in one object"
            ) from None
        except (ValueError, RecursionError):  # JSONDecodeError, an int over 4,300 digits
            # the line is quoted once the file has shown itself a trace (a record read)
            shown = f": {line[:60]!r}" if counts else " (not quoted: no record before it)"
            raise ConfigError(f"{where}: not a JSON object{shown}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{where}: expected a JSON object, found a JSON {_json_kind(record)}")
        inputs.append(
            _trace_number(
                record,
                "input_length",
                where,
                minimum=plausible.MIN_TOKENS,
                maximum=plausible.MAX_TOKENS,
            )
        )
        outputs.append(
            _trace_number(record, "output_length", where, minimum=0, maximum=plausible.MAX_TOKENS)
        )
        timestamps.append(
            _trace_number(record, "timestamp", where, minimum=-math.inf, maximum=math.inf)
        )
        blocks = _hash_ids(record, where)
        ids.extend(blocks)
        counts.append(len(blocks))
        if len(counts) > plausible.MAX_TRACE_REQUESTS or len(ids) > plausible.MAX_TRACE_HASH_IDS:
            raise ConfigError(
                f"{where}: a trace holds at most {plausible.MAX_TRACE_REQUESTS:,} requests and "
                f"{plausible.MAX_TRACE_HASH_IDS:,} hash_ids in all; replay a window of it"
            )
    if not timestamps:
        raise ConfigError(f"{source}: no requests found")
    stamps = np.frombuffer(timestamps, dtype=float)
    span_s = units.ms_to_s(float(stamps.max()) - float(stamps.min()))
    if not span_s <= plausible.MAX_SECONDS:
        raise ConfigError(
            f"{source}: timestamps (ms) span {span_s:.3g} s, more than {plausible.MAX_SECONDS:g} s"
        )
    input_tokens = np.frombuffer(inputs, dtype=float)
    output_tokens = np.frombuffer(outputs, dtype=float)
    counts_arr = np.frombuffer(counts, dtype=np.int64)
    values = np.frombuffer(ids, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts_arr)])
    if np.any(np.diff(stamps) < 0):  # in file order already (the usual case): no copies
        order = np.argsort(stamps, kind="stable")
        stamps, input_tokens, output_tokens = (
            stamps[order],
            input_tokens[order],
            output_tokens[order],
        )
        starts, counts_arr = offsets[:-1][order], counts_arr[order]
        offsets = np.concatenate([[0], np.cumsum(counts_arr)])
        # block j of request k moves from starts[k] + j to offsets[k] + j
        moved = np.arange(values.size) + np.repeat(starts - offsets[:-1], counts_arr)
        values = values[moved]
    return RequestTrace(
        arrival_s=np.asarray(units.ms_to_s(stamps - stamps[0]), dtype=float),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        prefix_blocks=PrefixBlocks(values, offsets),
        source=source,
    )


def _read_trace(path: Path, what: str, fmt: TraceFormat = TraceFormat.AUTO) -> RequestTrace:
    """A trace of any format (detected when `fmt` is auto), read as a bounded stream of lines
    (each at most plausible.MAX_LINE_CHARS)."""
    found: TraceFormat | None = fmt
    if fmt is TraceFormat.AUTO:  # a .jsonl file is Mooncake JSONL, whatever it holds
        found = TraceFormat.MOONCAKE if path.suffix == ".jsonl" else detect_format(path, what)
    if found is not TraceFormat.MOONCAKE and found is not None:
        return read_csv_trace(path, found, what)
    with open_bounded(path, what, plausible.MAX_TRACE_BYTES) as handle:
        return parse_mooncake_trace(bounded_lines(handle, path, what), str(path))


def read_trace(path: Path, fmt: TraceFormat = TraceFormat.AUTO) -> RequestTrace:
    """The request trace in `path` (Mooncake JSONL, Azure or BurstGPT CSV; UTF-8, a BOM
    allowed) for the simulator, with at least one output token in all (decode time per
    request is a mean over the trace's output lengths)."""
    if not path.exists():  # the simulator's own wording, kept
        raise ConfigError(f"{path}: cannot read the trace ({os.strerror(errno.ENOENT)})")
    trace = _read_trace(path, "trace", fmt)
    if not np.any(trace.output_tokens > 0):
        raise ConfigError(
            f"{path}: every output_length is 0; the simulator needs output tokens to decode"
        )
    return trace


read_mooncake_trace = read_trace  # the simulator's name for it, from when it read only Mooncake


def read_observed_trace(path: Path, fmt: TraceFormat = TraceFormat.AUTO) -> RequestTrace:
    """Input and output lengths (jointly) of a trace, or of a CSV with the one column
    `input_tokens` (output lengths unknown: NaN), each input in [plausible.MIN_TOKENS,
    plausible.MAX_TOKENS]. Auto: Mooncake for `.jsonl`, else by the first line."""
    found: TraceFormat | None = fmt
    if fmt is TraceFormat.AUTO:
        found = TraceFormat.MOONCAKE if path.suffix == ".jsonl" else None
        if found is None:
            found = detect_format(path, "observed-lengths", lengths=True)
    if found is not None:
        return _read_trace(path, "observed-lengths", found)
    lengths = _read_length_column(path)
    return RequestTrace(
        np.zeros(lengths.size), lengths, np.full(lengths.size, np.nan),
        PrefixBlocks(np.empty(0, dtype=np.int64), np.zeros(lengths.size + 1, dtype=np.int64)),
        str(path),
    )  # fmt: skip


def read_observed_lengths(path: Path, fmt: TraceFormat = TraceFormat.AUTO) -> np.ndarray:
    """Input lengths (tokens) of `read_observed_trace`."""
    return read_observed_trace(path, fmt).input_tokens


def _read_length_column(path: Path) -> np.ndarray:
    where = str(path)
    (lengths,) = read_csv_columns(
        path,
        ("input_tokens",),
        what="observed-lengths",
        error=ConfigError,
        limit_bytes=plausible.MAX_TRACE_BYTES,
        max_rows=plausible.MAX_OBSERVED_LENGTHS,
    )
    if lengths.size == 0:
        raise ConfigError(f"{where}: no lengths found")
    if np.any(~np.isfinite(lengths) | (lengths <= 0)):
        bad = lengths[~np.isfinite(lengths) | (lengths <= 0)][0]
        raise ConfigError(f"{where}: input lengths must be finite and > 0 tokens, found {bad:g}")
    outside = (lengths < plausible.MIN_TOKENS) | (lengths > plausible.MAX_TOKENS)
    if np.any(outside):
        raise ConfigError(
            f"{where}: input lengths must be in [{plausible.MIN_TOKENS:g}, {plausible.MAX_TOKENS:g}] "
            f"tokens, found {lengths[outside][0]:g} ({np.count_nonzero(outside)} row(s) in all)"
        )
    return lengths


def prefix_hit_rate(trace: RequestTrace, block_tokens: int) -> float:
    """Share of the trace's input tokens a prefix cache holding every earlier request's blocks
    would serve (an unbounded cache, warm from the trace's own start): a request's block counts
    as cached when an earlier request carried the same id (ids are prefix hashes, so the cached
    blocks are a prefix of the prompt), each worth `block_tokens`, capped at the request's length.
    The closed form's `prefix_cache_hit_rate: from_trace`."""
    return prefix_hit_rates_by_band(trace, block_tokens, ())[0]


def prefix_hit_rates_by_band(
    trace: RequestTrace, block_tokens: int, band_max_tokens: tuple[float, ...]
) -> tuple[float, ...]:
    """`prefix_hit_rate` within each band of the input length: band i holds the requests with
    band_max_tokens[i − 1] < input_tokens <= band_max_tokens[i] (the last band open-ended), and
    its rate is their cached tokens over their input tokens (0 for a band with no request). Token
    weighting makes the closed form's uncached work of every band match the trace's."""
    blocks = trace.prefix_blocks
    counts = np.diff(blocks.offsets)
    owner = np.repeat(np.arange(counts.size), counts)  # the request each block belongs to
    _, first, inverse = np.unique(blocks.values, return_index=True, return_inverse=True)
    cached_blocks = np.bincount(owner[owner[first][inverse] < owner], minlength=counts.size)
    cached_tokens = np.minimum(cached_blocks * float(block_tokens), trace.input_tokens)
    band = np.searchsorted(np.asarray(band_max_tokens, float), trace.input_tokens, side="left")
    bands = len(band_max_tokens) + 1
    total = np.bincount(band, weights=trace.input_tokens, minlength=bands)
    cached = np.bincount(band, weights=cached_tokens, minlength=bands)
    return tuple(float(c / t) if t > 0 else 0.0 for c, t in zip(cached, total, strict=True))
