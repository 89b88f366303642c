"""What a plan keeps of a trace: the selected requests' distinct lengths with counts.

A block of requests at a time: the scenario's part of it
(BurstGPT `model` / `log_type`, a `window` of time, a uniform `sample`) and, of that part, only
the distinct input and output lengths with their counts and Σ L_in·L_out. Memory grows with the
distinct lengths (plausible.MAX_TRACE_DISTINCT_LENGTHS) and the sample, never with the rows.
Units: seconds (relative to the trace's earliest request) and tokens.
"""

import collections
import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.analytic.distributions import ObservedLengths
from prfaas_plan.errors import ConfigError

# BurstGPT's `Log Type` cells, by the scenario's log_type
LOG_TYPES = {"api": "API log", "conversation": "Conversation log"}


@dataclass(frozen=True)
class TraceSelection:
    """The part of a trace a scenario plans for (None: no such restriction). Rows are kept when
    they pass the filters, then the window (window_start_s <= t − t_0 < window_start_s +
    window_duration_s, t_0 the trace's earliest request), then the sample (sample_requests of
    them, uniformly without replacement: the ones with the smallest of independent uniform keys
    drawn from `sample_seed` in file order, so the sample does not depend on how the file is cut
    into blocks)."""

    model: str | None = None
    log_type: str | None = None  # the scenario's name: api | conversation
    window_start_s: float | None = None
    window_duration_s: float | None = None
    sample_requests: int | None = None
    sample_seed: int = 0

    @property
    def windowed(self) -> bool:
        return self.window_start_s is not None

    def describe(self) -> str:
        parts = []
        if self.model is not None:
            parts.append(f"Model {self.model}")
        if self.log_type is not None:
            parts.append(f"Log Type {LOG_TYPES[self.log_type]}")
        if self.window_start_s is not None and self.window_duration_s is not None:
            end_s = self.window_start_s + self.window_duration_s
            parts.append(f"window [{self.window_start_s:.10g}, {end_s:.10g}) s")
        if self.sample_requests is not None:
            parts.append(f"sample of {self.sample_requests:,} (seed {self.sample_seed})")
        return ", ".join(parts)


@dataclass(frozen=True)
class Block:
    """Consecutive rows of a trace: arrival times (s, from any fixed origin), lengths (tokens;
    outputs None for a table of input lengths), BurstGPT's Model and Log Type cells (else None),
    and which rows are failed requests (BurstGPT: 0 response tokens)."""

    times_s: np.ndarray | None
    inputs: np.ndarray
    outputs: np.ndarray | None
    models: np.ndarray | None = None
    log_types: np.ndarray | None = None


class _Counts:
    """Distinct values and their counts, merged every ~10^6 pending distinct values."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._values: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._pending = 0

    def add(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        distinct, counts = np.unique(values, return_counts=True)
        self._values.append(distinct)
        self._counts.append(counts.astype(float))
        self._pending += distinct.size
        if self._pending > 2**20:
            self._merge()

    def _merge(self) -> None:
        values, inverse = np.unique(np.concatenate(self._values), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate(self._counts), minlength=values.size)
        if values.size > plausible.MAX_TRACE_DISTINCT_LENGTHS:
            raise ConfigError(
                f"more than {plausible.MAX_TRACE_DISTINCT_LENGTHS:,} distinct {self.what}; "
                "plan on a sample of the trace (workload.input_tokens.sample)"
            )
        self._values, self._counts, self._pending = [values], [counts], values.size

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._values:
            return np.empty(0), np.empty(0)
        self._merge()
        return self._values[0], self._counts[0]


class _Sample:
    """The `requests` rows with the smallest uniform keys seen so far."""

    def __init__(self, requests: int, seed: int) -> None:
        self.requests = requests
        self._rng = np.random.default_rng(seed)
        self._keys = np.empty(0)
        self._inputs = np.empty(0)
        self._outputs: np.ndarray | None = None

    def add(self, inputs: np.ndarray, outputs: np.ndarray | None) -> None:
        keys = self._rng.random(inputs.size)
        self._keys = np.concatenate([self._keys, keys])
        self._inputs = np.concatenate([self._inputs, inputs])
        if outputs is not None:
            previous = np.empty(0) if self._outputs is None else self._outputs
            self._outputs = np.concatenate([previous, outputs])
        if self._keys.size >= 2 * self.requests:
            self._cut()

    def _cut(self) -> None:
        if self._keys.size > self.requests:
            kept = np.argpartition(self._keys, self.requests - 1)[: self.requests]
            kept.sort()  # file order
            self._keys, self._inputs = self._keys[kept], self._inputs[kept]
            if self._outputs is not None:
                self._outputs = self._outputs[kept]

    def result(self) -> tuple[np.ndarray, np.ndarray | None]:
        self._cut()
        return self._inputs, self._outputs


@dataclass(frozen=True)
class TraceLengths:
    """A trace as the plan uses it: its (selected) requests' input and output lengths, each
    as distinct values with counts, and E[L_in·L_out] (None without output lengths)."""

    inputs: ObservedLengths
    outputs: ObservedLengths | None
    mean_input_times_output_tokens: float | None
    source: str


class Selector:
    """Feeds blocks of one trace through a TraceSelection; `origin_s` is t_0 in the blocks'
    time origin when known (a window needs it: None takes the first row's time, and
    `needs_second_pass` then says whether an earlier row came later in the file)."""

    def __init__(self, selection: TraceSelection, origin_s: float | None = None) -> None:
        self.selection = selection
        self.origin_s = origin_s
        self.first_s: float | None = None
        self.min_s, self.max_s = math.inf, -math.inf
        self.rows = 0  # requests read (failed ones excluded)
        self.kept = 0
        self.kinds: collections.Counter[tuple[str, str]] = collections.Counter()
        self._selected_kinds: collections.Counter[tuple[str, str]] = collections.Counter()
        self._inputs = _Counts("input lengths")
        self._outputs = _Counts("output lengths")
        self._joint = 0.0
        self._has_outputs = True
        self._sample = (
            _Sample(selection.sample_requests, selection.sample_seed)
            if selection.sample_requests is not None
            else None
        )

    def add(self, block: Block) -> None:
        keep = np.ones(block.inputs.size, dtype=bool)
        self.rows += block.inputs.size
        if block.times_s is not None and block.times_s.size:
            if self.first_s is None:
                self.first_s = float(block.times_s[0])
            self.min_s = min(self.min_s, float(block.times_s.min()))
            self.max_s = max(self.max_s, float(block.times_s.max()))
        if block.models is not None and block.log_types is not None:
            self.kinds.update(zip(block.models.tolist(), block.log_types.tolist(), strict=True))
            if self.selection.model is not None:
                keep &= block.models == self.selection.model
            if self.selection.log_type is not None:
                keep &= block.log_types == LOG_TYPES[self.selection.log_type]
            self._selected_kinds.update(
                zip(block.models[keep].tolist(), block.log_types[keep].tolist(), strict=True)
            )
        if self.selection.windowed and block.times_s is not None:
            start_s = self.selection.window_start_s or 0.0
            origin_s = self.origin_s if self.origin_s is not None else self.first_s or 0.0
            since_s = block.times_s - origin_s
            keep &= (since_s >= start_s) & (
                since_s < start_s + (self.selection.window_duration_s or 0)
            )
        inputs = block.inputs[keep]
        outputs = None if block.outputs is None else block.outputs[keep]
        self._has_outputs = self._has_outputs and outputs is not None
        self.kept += inputs.size
        if self._sample is not None:
            self._sample.add(inputs, outputs)
        else:
            self._count(inputs, outputs)

    def _count(self, inputs: np.ndarray, outputs: np.ndarray | None) -> None:
        self._inputs.add(inputs)
        if outputs is not None:
            self._outputs.add(outputs)
            self._joint += float(np.dot(inputs, outputs))

    @property
    def needs_second_pass(self) -> bool:
        return (
            self.selection.windowed
            and self.origin_s is None
            and self.first_s is not None
            and self.min_s < self.first_s
        )

    def result(self, source: str, where: str) -> TraceLengths:
        if self._sample is not None:
            inputs, outputs = self._sample.result()
            self._count(inputs, outputs)
        chosen = self.kept if self._sample is None else min(self.kept, self._sample.requests)
        if chosen == 0:
            raise ConfigError(f"{where}: {self._nothing_kept()}")
        values, counts = self._inputs.result()
        description = source
        if self.selection.describe():
            description += f"; {self.selection.describe()}: {chosen:,} of {self.rows:,} requests"
        if len(self._selected_kinds) > 1:
            description += f"; mixes {self._mix()}"
        output_lengths, joint = None, None
        if self._has_outputs:
            out_values, out_counts = self._outputs.result()
            output_lengths = ObservedLengths(
                out_values, f"output lengths of {description}", out_counts
            )
            joint = self._joint / chosen
        return TraceLengths(
            ObservedLengths(values, description, counts), output_lengths, joint, description
        )

    def _mix(self) -> str:
        total = sum(self._selected_kinds.values())
        shares = [f"{m}/{t} {n / total:.1%}" for (m, t), n in self._selected_kinds.most_common(4)]
        return ", ".join(shares) + " (Model/Log Type: pick one with model and log_type)"

    def _nothing_kept(self) -> str:
        s = self.selection
        found = ", ".join(f"{m}/{t} ({n:,})" for (m, t), n in self.kinds.most_common(6))
        if s.model is not None and not any(m == s.model for m, _ in self.kinds):
            return f"model {s.model!r} matches no request; the trace holds Model/Log Type {found}"
        if s.log_type is not None and self.kinds:
            return (
                f"no request has model {s.model!r} and log_type {s.log_type} "
                f"({LOG_TYPES[s.log_type]!r}); the trace holds Model/Log Type {found}"
            )
        if s.windowed:
            span_s = self.max_s - self.min_s if self.rows else 0.0
            return (
                f"window [{s.window_start_s:.10g}, "
                f"{(s.window_start_s or 0) + (s.window_duration_s or 0):.10g})"
                f" s holds no request; the trace spans {span_s:.6g} s from its earliest request"
            )
        return "no requests found"
