"""Whole public traces for a plan, streamed in blocks to distinct lengths with counts.

For `distribution: observed`: an Azure LLM inference or
BurstGPT CSV is read in blocks of ~8 MB by pyarrow's CSV reader (imported here only) and reduced
at once by trace_select.Selector to distinct lengths with counts, so a 27.3M-row trace plans in
bounded memory. A file the block reader cannot take as it is (a malformed cell, a value out of
range, padding it does not trim) is read again by traces.py's row-by-row reader, which names the
line at fault or reads it. Mooncake JSONL and tables of input lengths are small (the public
Mooncake traces hold ~2·10^4 requests) and are read whole by traces.py, then selected the same way.

`simulate --trace` replays every request and keeps them all (traces.read_trace, at most
plausible.MAX_TRACE_REQUESTS): this reader is the plan's, not the replay's.
Units: seconds and tokens.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import open_bounded_binary
from prfaas_plan.inputs.trace_csv import (
    AZURE_COLUMNS,
    BURSTGPT_COLUMNS,
    _azure_seconds,
    _csv_number,
    _csv_rows,
    burstgpt_seconds,
    detect_format,
)
from prfaas_plan.inputs.trace_select import Block, Selector, TraceLengths, TraceSelection
from prfaas_plan.inputs.traces import read_observed_trace
from prfaas_plan.inputs.workload_files import TraceWindow
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace

BLOCK_BYTES = 8 * 2**20  # pyarrow's block: ~2·10^5 Azure rows, a few tens of MB decoded
_SLOW_BLOCK_ROWS = 100_000
_BURSTGPT_KINDS = ("Model", "Log Type")
_NAMES = {TraceFormat.AZURE: "Azure LLM inference trace", TraceFormat.BURSTGPT: "BurstGPT trace"}


class _NotForBlocksError(Exception):
    """The block reader met something only the row reader can judge (or name the line of)."""


def _header(path: Path) -> list[str]:
    with open_bounded_binary(
        path, "observed-lengths", plausible.MAX_STREAMED_TRACE_BYTES
    ) as handle:
        first = handle.readline(plausible.MAX_LINE_CHARS).decode("utf-8-sig", errors="replace")
    return [cell.strip() for cell in first.rstrip("\r\n").split(",")]


def _columns(fmt: TraceFormat, header: list[str]) -> list[str]:
    wanted = list(AZURE_COLUMNS if fmt is TraceFormat.AZURE else BURSTGPT_COLUMNS)
    if fmt is TraceFormat.BURSTGPT and all(c in header for c in _BURSTGPT_KINDS):
        wanted += _BURSTGPT_KINDS
    return wanted


def _arrow_blocks(
    path: Path, fmt: TraceFormat, header: list[str], columns: list[str]
) -> Iterator[tuple[Block, int]]:
    """(block, failed requests in it) from pyarrow; times in s from the first row's."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if len(set(header)) != len(header) or any(c not in header for c in columns):
        raise _NotForBlocksError
    time_key, input_key, output_key = columns[:3]
    types = {input_key: pa.float64(), output_key: pa.float64()}
    types[time_key] = pa.string() if fmt is TraceFormat.AZURE else pa.float64()
    types.update({c: pa.string() for c in columns[3:]})
    reference: int | float | None = None
    with open_bounded_binary(
        path, "observed-lengths", plausible.MAX_STREAMED_TRACE_BYTES
    ) as handle:
        try:
            reader = pacsv.open_csv(
                handle,
                read_options=pacsv.ReadOptions(
                    column_names=header, skip_rows=1, block_size=BLOCK_BYTES
                ),
                parse_options=pacsv.ParseOptions(newlines_in_values=False),
                convert_options=pacsv.ConvertOptions(
                    include_columns=columns, column_types=types, strings_can_be_null=False
                ),
            )
            for batch in reader:
                if any(batch.column(c).null_count for c in columns):
                    raise _NotForBlocksError
                stamps = batch.column(time_key)
                if fmt is TraceFormat.AZURE:
                    if batch.num_rows and pc.min(pc.utf8_length(stamps)).as_py() < 19:
                        raise _NotForBlocksError  # a date without a time of day
                    try:
                        ns = stamps.cast(pa.timestamp("ns", tz="UTC"))
                    except pa.ArrowInvalid:
                        ns = stamps.cast(pa.timestamp("ns"))  # naive: UTC, as traces.py
                    ticks = ns.cast(pa.int64()).to_numpy()
                    if reference is None and ticks.size:
                        reference = int(ticks[0])
                    times_s = (ticks - (reference or 0)) / 1e9
                else:
                    times_s = stamps.to_numpy()
                inputs = batch.column(input_key).to_numpy()
                outputs = batch.column(output_key).to_numpy()
                _check_block(times_s, inputs, outputs)
                kinds = [batch.column(c).to_numpy(zero_copy_only=False) for c in columns[3:]]
                failed = outputs == 0 if fmt is TraceFormat.BURSTGPT else np.zeros(0, bool)
                if failed.any():
                    ok = ~failed
                    times_s, inputs, outputs = times_s[ok], inputs[ok], outputs[ok]
                    kinds = [k[ok] for k in kinds]
                yield (
                    Block(times_s, inputs, outputs, *(kinds if kinds else (None, None))),
                    int(failed.sum()),
                )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            raise _NotForBlocksError from None


def _check_block(times_s: np.ndarray, inputs: np.ndarray, outputs: np.ndarray) -> None:
    """What the row reader would refuse: the block reader hands the file over to it."""
    if not (
        np.all(np.isfinite(times_s))
        and np.all((inputs >= plausible.MIN_TOKENS) & (inputs <= plausible.MAX_TOKENS))
        and np.all((outputs >= 0) & (outputs <= plausible.MAX_TOKENS))
    ):
        raise _NotForBlocksError


def _row_blocks(path: Path, fmt: TraceFormat, columns: list[str]) -> Iterator[tuple[Block, int]]:
    """The same blocks from traces.py's row reader (exact line numbers in every refusal)."""
    time_key, input_key, output_key = columns[:3]
    kinds = columns[3:]
    rows: list[tuple[float, float, float, str, str]] = []
    failed, reference = 0, None
    name = _NAMES[fmt]
    for number, row in _csv_rows(path, "observed-lengths", tuple(columns[:3]), name,
                                 plausible.MAX_STREAMED_TRACE_BYTES):  # fmt: skip
        where = f"{path}:{number}"
        output = _csv_number(row, output_key, where, 0)
        if fmt is TraceFormat.BURSTGPT and output == 0:
            failed += 1
            continue
        length = _csv_number(row, input_key, where, plausible.MIN_TOKENS)
        if fmt is TraceFormat.AZURE:
            whole, fraction = _azure_seconds(row[time_key], where)
            reference = whole if reference is None else reference
            stamp = (whole - reference) + fraction
        else:
            stamp = burstgpt_seconds(row[time_key], where)
        cells = [row[k] for k in kinds] if kinds else ["", ""]
        rows.append((stamp, length, output, cells[0], cells[1]))
        if len(rows) == _SLOW_BLOCK_ROWS:
            yield _block_of(rows, bool(kinds)), failed
            rows, failed = [], 0
    yield _block_of(rows, bool(kinds)), failed


def _block_of(rows: list[tuple[float, float, float, str, str]], kinds: bool) -> Block:
    if not rows:
        return Block(np.empty(0), np.empty(0), np.empty(0))
    times_s, inputs, outputs, models, logs = zip(*rows, strict=True)
    return Block(
        np.array(times_s), np.array(inputs), np.array(outputs),
        np.array(models, dtype=object) if kinds else None,
        np.array(logs, dtype=object) if kinds else None,
    )  # fmt: skip


def _stream(
    path: Path, fmt: TraceFormat, selection: TraceSelection, origin_s: float | None, fast: bool
) -> tuple[Selector, int]:
    header = _header(path)
    columns = _columns(fmt, header)
    if (selection.model or selection.log_type) and len(columns) == 3:
        raise ConfigError(
            f"{path}: model and log_type select among a BurstGPT trace's requests by its "
            f"columns {', '.join(_BURSTGPT_KINDS)}; this {_NAMES[fmt]} has none"
        )
    selector, failed = Selector(selection, origin_s), 0
    blocks = _arrow_blocks(path, fmt, header, columns) if fast else _row_blocks(path, fmt, columns)
    for block, dropped in blocks:
        selector.add(block)
        failed += dropped
        if selector.rows > plausible.MAX_STREAMED_TRACE_REQUESTS:
            raise ConfigError(
                f"{path}: a trace holds at most {plausible.MAX_STREAMED_TRACE_REQUESTS:,} requests "
                "for a plan (plausible.py); cut the file"
            )
    return selector, failed


def _read_csv_lengths(path: Path, fmt: TraceFormat, selection: TraceSelection) -> TraceLengths:
    origin_s = None
    while True:
        try:
            selector, failed = _stream(path, fmt, selection, origin_s, fast=True)
        except _NotForBlocksError:
            selector, failed = _stream(path, fmt, selection, origin_s, fast=False)
        if not selector.needs_second_pass:
            break
        origin_s = selector.min_s  # out of time order: the window needs the earliest request
    if selector.rows and not selector.max_s - selector.min_s <= plausible.MAX_SECONDS:
        raise ConfigError(
            f"{path}: timestamps span {selector.max_s - selector.min_s:.3g} s, more than "
            f"{plausible.MAX_SECONDS:g} s"
        )
    dropped = f"; {failed:,} failed request(s) with 0 Response tokens dropped" if failed else ""
    if selector.rows == 0:
        raise ConfigError(f"{path}: no requests found" + (f" ({dropped[2:]})" if failed else ""))
    return selector.result(f"{path} ({_NAMES[fmt]}{dropped})", str(path))


def _read_small(path: Path, fmt: TraceFormat, selection: TraceSelection) -> TraceLengths:
    """Mooncake JSONL or a table of input lengths, read whole (traces.py's limits)."""
    if selection.model is not None or selection.log_type is not None:
        raise ConfigError(
            f"{path}: model and log_type select among a BurstGPT trace's requests; this file "
            "is not one"
        )
    trace = read_observed_trace(path, fmt)
    no_outputs = bool(np.isnan(trace.output_tokens).any())
    if selection.windowed and no_outputs:
        raise ConfigError(f"{path}: a window needs arrival times; a table of lengths has none")
    selector = Selector(selection, 0.0)
    selector.add(
        Block(trace.arrival_s, trace.input_tokens, None if no_outputs else trace.output_tokens)
    )
    return selector.result(trace.source, str(path))


def select_prefix_trace(
    trace: RequestTrace, window: TraceWindow | None, where: str
) -> RequestTrace:
    """The requests of `trace` (times from its earliest request) inside `window`, their prefix
    blocks with them: `prefix_cache_hit_rate: from_trace` on a window (the cache warm from the
    window's start)."""
    if window is None:
        return trace
    since_s = trace.arrival_s - trace.arrival_s.min()
    kept = np.flatnonzero(
        (since_s >= window.start_s) & (since_s < window.start_s + window.duration_s)
    )
    if kept.size == 0:
        raise ConfigError(
            f"{where}: window [{window.start_s:g}, {window.start_s + window.duration_s:g}) s holds "
            f"no request; the trace spans {float(since_s.max()):.6g} s"
        )
    offsets = trace.prefix_blocks.offsets
    counts = offsets[kept + 1] - offsets[kept]
    blocks = np.concatenate([trace.prefix_blocks.values[offsets[i] : offsets[i + 1]] for i in kept])
    return RequestTrace(
        trace.arrival_s[kept], trace.input_tokens[kept], trace.output_tokens[kept],
        PrefixBlocks(blocks, np.concatenate([[0], np.cumsum(counts)])), trace.source,
    )  # fmt: skip


_CACHE: dict[tuple[object, ...], TraceLengths] = {}
_CACHE_ENTRIES = 4


def read_trace_lengths(
    path: Path, fmt: TraceFormat = TraceFormat.AUTO, selection: TraceSelection | None = None
) -> TraceLengths:
    """The lengths a plan needs of the trace or length table in `path` (formats: traces.py),
    of the part `selection` names. The last few results are kept by the file's identity (device,
    inode, size, modification time) and the selection: a scenario's input and output lengths
    come from one read."""
    selection = selection or TraceSelection()
    try:
        info = os.stat(path)
        key: tuple[object, ...] | None = (
            str(path),
            info.st_dev,
            info.st_ino,
            info.st_size,
            info.st_mtime_ns,
            fmt,
            selection,
        )
    except OSError:
        key = None  # the reader says why
    if key is not None and key in _CACHE:
        return _CACHE[key]
    found: TraceFormat | None = fmt
    if fmt is TraceFormat.AUTO:
        found = TraceFormat.MOONCAKE if path.suffix == ".jsonl" else None
        if found is None:
            found = detect_format(
                path,
                "observed-lengths",
                lengths=True,
                limit_bytes=plausible.MAX_STREAMED_TRACE_BYTES,
            )
    if found is TraceFormat.AZURE or found is TraceFormat.BURSTGPT:
        result = _read_csv_lengths(path, found, selection)
    else:
        result = _read_small(path, found or TraceFormat.AUTO, selection)
    if key is not None:
        while len(_CACHE) >= _CACHE_ENTRIES:
            del _CACHE[next(iter(_CACHE))]
        _CACHE[key] = result
    return result
