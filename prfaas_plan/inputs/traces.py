"""Trace and length files: Mooncake JSONL traces and CSV length tables, read once here for the
simulator (`simulate --trace`, `compare-policies --trace`) and for observed length
distributions in scenarios. Units: milliseconds in the files, seconds and tokens inside.

Mooncake JSONL: one `{"timestamp": ms, "input_length": tokens, "output_length": tokens,
"hash_ids": [...]}` per line (blank lines skipped); `hash_ids` are ids of the prompt's prefix
blocks (512 tokens each in the Mooncake traces) and may be absent. Every message names the
file and line. A CSV of lengths has the single column `input_tokens`.
"""

import errno
import json
import math
import os
from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from prfaas_plan import bounds, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import bounded_lines, open_bounded, read_csv_columns
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace


def _trace_number(
    record: dict[str, object], key: str, where: str, *, minimum: float, maximum: float
) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: expected a numeric {key}, found {bounds.quoted(value)}")
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
            f"{where}: hash_ids must be a list of integers, found {bounds.quoted(blocks)}"
        )
    if any(not _MIN_HASH_ID <= b <= _MAX_HASH_ID for b in blocks):
        bad = next(b for b in blocks if not _MIN_HASH_ID <= b <= _MAX_HASH_ID)
        raise ConfigError(
            f"{where}: hash_ids must fit in 64 bits ([-2^63, 2^63 - 1]), found {bounds.quoted(bad)}"
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


def parse_mooncake_trace(lines: Iterable[str], source: str = "trace") -> RequestTrace:
    """Parse Mooncake JSONL lines (blank lines skipped) into a `RequestTrace`.

    Times are shifted so the earliest request arrives at 0 s (timestamps are milliseconds);
    requests are ordered by timestamp (stable, so equal timestamps keep file order).
    `hash_ids` may be absent (no prefix information). Lengths lie in [bounds.MIN_TOKENS (inputs)
    or 0 (outputs), bounds.MAX_TOKENS]; the trace spans at most bounds.MAX_SECONDS. Columns are
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
                f"{where}: duplicate key {bounds.quoted(exc.key)} in one object"
            ) from None
        except (ValueError, RecursionError):  # JSONDecodeError, an int over 4,300 digits
            raise ConfigError(f"{where}: not a JSON object: {line[:60]!r}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{where}: expected a JSON object, found {line[:60]!r}")
        inputs.append(
            _trace_number(
                record, "input_length", where, minimum=bounds.MIN_TOKENS, maximum=bounds.MAX_TOKENS
            )
        )
        outputs.append(
            _trace_number(record, "output_length", where, minimum=0, maximum=bounds.MAX_TOKENS)
        )
        timestamps.append(
            _trace_number(record, "timestamp", where, minimum=-math.inf, maximum=math.inf)
        )
        blocks = _hash_ids(record, where)
        ids.extend(blocks)
        counts.append(len(blocks))
        if len(counts) > bounds.MAX_TRACE_REQUESTS or len(ids) > bounds.MAX_TRACE_HASH_IDS:
            raise ConfigError(
                f"{where}: a trace holds at most {bounds.MAX_TRACE_REQUESTS:,} requests and "
                f"{bounds.MAX_TRACE_HASH_IDS:,} hash_ids in all; replay a window of it"
            )
    if not timestamps:
        raise ConfigError(f"{source}: no requests found")
    stamps = np.frombuffer(timestamps, dtype=float)
    span_s = units.ms_to_s(float(stamps.max()) - float(stamps.min()))
    if not span_s <= bounds.MAX_SECONDS:
        raise ConfigError(
            f"{source}: timestamps (ms) span {span_s:.3g} s, more than {bounds.MAX_SECONDS:g} s"
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


def _read_trace(path: Path, what: str) -> RequestTrace:
    """`parse_mooncake_trace` of a regular file of at most bounds.MAX_TRACE_BYTES, read line by
    line (each at most bounds.MAX_LINE_CHARS)."""
    with open_bounded(path, what, bounds.MAX_TRACE_BYTES) as handle:
        return parse_mooncake_trace(bounded_lines(handle, path, what), str(path))


def read_mooncake_trace(path: Path) -> RequestTrace:
    """The request trace in `path` (UTF-8 JSONL, a BOM allowed) for the simulator: as
    `parse_mooncake_trace`, and at least one output token in all (decode time per request
    is a mean over the trace's output lengths)."""
    if not path.exists():  # the simulator's own wording, kept
        raise ConfigError(f"{path}: cannot read the trace ({os.strerror(errno.ENOENT)})")
    trace = _read_trace(path, "trace")
    if not np.any(trace.output_tokens > 0):
        raise ConfigError(
            f"{path}: every output_length is 0; the simulator needs output tokens to decode"
        )
    return trace


def read_observed_lengths(path: Path) -> np.ndarray:
    """Input lengths (tokens) of a Mooncake JSONL trace (`.jsonl`, validated as a trace) or of a
    CSV with the one column `input_tokens`, each in [bounds.MIN_TOKENS, bounds.MAX_TOKENS]."""
    where = str(path)
    if path.suffix == ".jsonl":
        return _read_trace(path, "observed-lengths").input_tokens
    (lengths,) = read_csv_columns(
        path,
        ("input_tokens",),
        what="observed-lengths",
        error=ConfigError,
        limit_bytes=bounds.MAX_TRACE_BYTES,
        max_rows=bounds.MAX_OBSERVED_LENGTHS,
    )
    if lengths.size == 0:
        raise ConfigError(f"{where}: no lengths found")
    if np.any(~np.isfinite(lengths) | (lengths <= 0)):
        bad = lengths[~np.isfinite(lengths) | (lengths <= 0)][0]
        raise ConfigError(f"{where}: input lengths must be finite and > 0 tokens, found {bad:g}")
    outside = (lengths < bounds.MIN_TOKENS) | (lengths > bounds.MAX_TOKENS)
    if np.any(outside):
        raise ConfigError(
            f"{where}: input lengths must be in [{bounds.MIN_TOKENS:g}, {bounds.MAX_TOKENS:g}] "
            f"tokens, found {lengths[outside][0]:g} ({np.count_nonzero(outside)} row(s) in all)"
        )
    return lengths
