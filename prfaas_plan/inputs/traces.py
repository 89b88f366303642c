"""Trace and length files: Mooncake JSONL traces and CSV length tables, read once here for the
simulator (`simulate --trace`, `compare-policies --trace`) and for observed length
distributions in scenarios. Units: milliseconds in the files, seconds and tokens inside.

Mooncake JSONL: one `{"timestamp": ms, "input_length": tokens, "output_length": tokens,
"hash_ids": [...]}` per line (blank lines skipped); `hash_ids` are ids of the prompt's prefix
blocks (512 tokens each in the Mooncake traces) and may be absent. Every message names the
file and line. A CSV of lengths has the single column `input_tokens`.
"""

import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from prfaas_plan import units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import read_csv_columns, read_text
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace


def _trace_number(record: dict[str, object], key: str, where: str, *, minimum: float) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: expected a numeric {key}, found {value!r}")
    if value < minimum:
        raise ConfigError(f"{where}: {key} must be >= {minimum:g}, found {value:g}")
    return float(value)


def parse_mooncake_trace(lines: Iterable[str], source: str = "trace") -> RequestTrace:
    """Parse Mooncake JSONL lines (blank lines skipped) into a `RequestTrace`.

    Times are shifted so the earliest request arrives at 0 s (timestamps are milliseconds);
    requests are ordered by timestamp (stable, so equal timestamps keep file order).
    `hash_ids` may be absent (no prefix information)."""
    timestamps, inputs, outputs, ids, counts = [], [], [], [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"{where}: not a JSON object: {line[:60]!r}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{where}: expected a JSON object, found {line[:60]!r}")
        inputs.append(_trace_number(record, "input_length", where, minimum=1))
        outputs.append(_trace_number(record, "output_length", where, minimum=0))
        timestamps.append(_trace_number(record, "timestamp", where, minimum=-math.inf))
        blocks = record.get("hash_ids", [])
        if not isinstance(blocks, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) for b in blocks
        ):
            raise ConfigError(f"{where}: hash_ids must be a list of integers, found {blocks!r}")
        ids.extend(blocks)
        counts.append(len(blocks))
    if not timestamps:
        raise ConfigError(f"{source}: no requests found")
    stamps = np.asarray(timestamps)
    order = np.argsort(stamps, kind="stable")
    counts_arr = np.asarray(counts, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts_arr)])
    values = np.asarray(ids, dtype=np.int64)
    if not np.array_equal(order, np.arange(order.size)):
        values = np.concatenate(
            [values[offsets[i] : offsets[i + 1]] for i in order] or [np.empty(0, np.int64)]
        )
        counts_arr = counts_arr[order]
        offsets = np.concatenate([[0], np.cumsum(counts_arr)])
    arrival_s = units.ms_to_s(stamps[order] - stamps[order[0]])
    return RequestTrace(
        arrival_s=np.asarray(arrival_s, dtype=float),
        input_tokens=np.asarray(inputs)[order],
        output_tokens=np.asarray(outputs)[order],
        prefix_blocks=PrefixBlocks(values, offsets),
        source=source,
    )


def read_mooncake_trace(path: Path) -> RequestTrace:
    """`parse_mooncake_trace` of a file (UTF-8 JSONL)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_mooncake_trace(handle, str(path))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the trace ({error.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def read_observed_lengths(path: Path) -> np.ndarray:
    """Input lengths (tokens) of a Mooncake JSONL trace (`.jsonl`, validated as a trace) or of a
    CSV with the one column `input_tokens`."""
    where = str(path)
    if path.suffix == ".jsonl":
        text = read_text(path, "observed-lengths")
        return parse_mooncake_trace(text.splitlines(), where).input_tokens
    (lengths,) = read_csv_columns(
        path, ("input_tokens",), what="observed-lengths", error=ConfigError
    )
    if lengths.size == 0:
        raise ConfigError(f"{where}: no lengths found")
    if np.any(~np.isfinite(lengths) | (lengths <= 0)):
        bad = lengths[~np.isfinite(lengths) | (lengths <= 0)][0]
        raise ConfigError(f"{where}: input lengths must be finite and > 0 tokens, found {bad:g}")
    return lengths
