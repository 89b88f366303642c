"""CSV traces: the Azure LLM inference and BurstGPT traces (columns found by name, Azure's
wall-clock times taken relative to the earliest request, BurstGPT's failed requests dropped and
counted), and detecting a trace's format from its first line. The formats are described in
traces.py. Units: seconds and tokens inside."""

import csv
import datetime
import math
import re
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import bounded_lines, open_bounded, shown_header
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
_AZURE_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")


def detect_format(
    path: Path, what: str, lengths: bool = False, limit_bytes: int = plausible.MAX_TRACE_BYTES
) -> TraceFormat | None:
    """The trace format of `path` (a file of at most `limit_bytes`) from its first non-blank
    line: a JSON object is Mooncake, a CSV header naming the Azure or BurstGPT columns is that
    trace; anything else is, if `lengths`, a CSV of lengths (None), else refused in one line
    saying what was expected."""
    with open_bounded(path, what, limit_bytes) as handle:
        first = next((line for line in bounded_lines(handle, path, what) if line.strip()), "")
    if first.lstrip().startswith("{"):
        return TraceFormat.MOONCAKE
    header = [cell.strip() for cell in next(csv.reader([first]), [])]
    if all(c in header for c in AZURE_COLUMNS):
        return TraceFormat.AZURE
    if all(c in header for c in BURSTGPT_COLUMNS):
        return TraceFormat.BURSTGPT
    if lengths:  # a CSV of lengths, whose reader says what it expects
        return None
    raise ConfigError(
        f"{path}: not a trace format this reads: expected a Mooncake JSONL line, an Azure header "
        f"{','.join(AZURE_COLUMNS)} or a BurstGPT header with {', '.join(BURSTGPT_COLUMNS)}; "
        f"found {shown_header(path, header)}"
    )


def burstgpt_seconds(text: str, where: str) -> float:
    """A BurstGPT Timestamp: a finite number of seconds."""
    try:
        stamp = float(text)
    except ValueError:
        stamp = math.nan
    if not math.isfinite(stamp):
        raise ConfigError(
            f"{where}: Timestamp must be a number of seconds, found {plausible.quoted(text)}"
        )
    return stamp


def _azure_seconds(text: str, where: str) -> tuple[float, float]:
    """An Azure TIMESTAMP as (whole seconds since the epoch, fraction of a second), naive times
    read as UTC; kept apart so 100 ns ticks survive (a float at 1.7e9 s resolves 0.2 µs)."""
    match = _AZURE_TIME.match(text.strip())
    if match is None:
        raise ConfigError(
            f"{where}: TIMESTAMP must be a datetime like 2023-11-16 18:17:03.9799600, found "
            f"{plausible.quoted(text)}"
        )
    base, fraction, offset = match.groups()
    moment = datetime.datetime.fromisoformat(base.replace(" ", "T") + (offset or "+00:00"))
    return moment.timestamp(), float(fraction) if fraction else 0.0


def _csv_rows(
    path: Path,
    what: str,
    required: tuple[str, ...],
    name: str,
    limit_bytes: int = plausible.MAX_TRACE_BYTES,
) -> Iterator[tuple[int, dict[str, str]]]:
    with open_bounded(path, what, limit_bytes) as handle:
        lines = bounded_lines(handle, path, what)
        reader = csv.reader(lines)
        try:
            header = [cell.strip() for cell in next(reader, [])]
            missing = [c for c in required if c not in header]
            if missing:
                raise ConfigError(
                    f"{path}: a {name} CSV needs the columns {', '.join(required)}; missing "
                    f"{', '.join(missing)}, found {shown_header(path, header)}"
                )
            for number, row in enumerate(reader, start=2):
                if not row or not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    raise ConfigError(
                        f"{path}:{number}: {len(row)} cells, expected {len(header)} ({','.join(header)})"
                    )
                yield number, dict(zip(header, (cell.strip() for cell in row), strict=True))
        except csv.Error as exc:
            raise ConfigError(f"{path}: malformed CSV: {exc}") from None


def _csv_number(row: dict[str, str], key: str, where: str, minimum: float) -> float:
    try:
        value = float(row[key])
    except ValueError:
        raise ConfigError(
            f"{where}: {key} must be a number, found {plausible.quoted(row[key])}"
        ) from None
    if not (math.isfinite(value) and minimum <= value <= plausible.MAX_TOKENS):
        raise ConfigError(
            f"{where}: {key} must be in [{minimum:g}, {plausible.MAX_TOKENS:g}], found {plausible.quoted(row[key])}"
        )
    return value


def read_csv_trace(path: Path, fmt: TraceFormat, what: str) -> RequestTrace:
    """An Azure or BurstGPT CSV trace (module docstring) as a `RequestTrace` without prefixes."""
    times, fractions, inputs, outputs = array("d"), array("d"), array("d"), array("d")
    failed = 0
    columns = AZURE_COLUMNS if fmt is TraceFormat.AZURE else BURSTGPT_COLUMNS
    time_key, input_key, output_key = columns
    name = "Azure LLM inference trace" if fmt is TraceFormat.AZURE else "BurstGPT trace"
    for number, row in _csv_rows(path, what, columns, name):
        where = f"{path}:{number}"
        output = _csv_number(row, output_key, where, 0)
        if fmt is TraceFormat.BURSTGPT and output == 0:
            failed += 1
            continue
        inputs.append(_csv_number(row, input_key, where, plausible.MIN_TOKENS))
        outputs.append(output)
        if fmt is TraceFormat.AZURE:
            whole, fraction = _azure_seconds(row[time_key], where)
            times.append(whole)
            fractions.append(fraction)
        else:
            times.append(burstgpt_seconds(row[time_key], where))
            fractions.append(0.0)
        if len(times) > plausible.MAX_TRACE_REQUESTS:
            raise ConfigError(
                f"{where}: a trace holds at most {plausible.MAX_TRACE_REQUESTS:,} requests; replay a window of it"
            )
    if not times:
        raise ConfigError(
            f"{path}: no requests found"
            + (f" ({failed} failed requests with 0 Response tokens dropped)" if failed else "")
        )
    seconds = np.frombuffer(times, dtype=float)
    stamps = (seconds - seconds.min()) + np.frombuffer(fractions, dtype=float)
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order] - stamps[order[0]]
    if not stamps[-1] <= plausible.MAX_SECONDS:
        raise ConfigError(
            f"{path}: timestamps span {stamps[-1]:.3g} s, more than {plausible.MAX_SECONDS:g} s"
        )
    dropped = (
        f"; {failed} failed request(s) with 0 Response tokens dropped"
        if fmt is TraceFormat.BURSTGPT
        else ""
    )
    return RequestTrace(
        arrival_s=stamps,
        input_tokens=np.frombuffer(inputs, dtype=float)[order],
        output_tokens=np.frombuffer(outputs, dtype=float)[order],
        prefix_blocks=PrefixBlocks(
            np.empty(0, dtype=np.int64), np.zeros(stamps.size + 1, dtype=np.int64)
        ),
        source=f"{path} ({name}{dropped})",
    )
