"""Workloads read from files a scenario names: an observed trace's lengths (Mooncake JSONL,
Azure or BurstGPT CSV, a length table), its output lengths read jointly with the inputs, the
prefix-cache hit-rates measured on its hash_ids, and a metrics snapshot's histograms. Only a
scenario that names such a file imports this module (inputs/scenario.py), so a plan from closed
forms never loads the trace and metrics readers.
"""

import math
from pathlib import Path
from typing import Literal

from prfaas_plan import plausible
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.prom_metrics import MetricsWorkload, read_metrics_workload
from prfaas_plan.inputs.scenario_schema import (
    BandedHitRatesFromTrace,
    InputLengths,
    ObservedLengthsFile,
)
from prfaas_plan.inputs.trace_select import TraceLengths, TraceSelection
from prfaas_plan.inputs.trace_stream import read_trace_lengths, select_prefix_trace
from prfaas_plan.inputs.traces import prefix_hit_rates_by_band, read_observed_trace
from prfaas_plan.inputs.workload_files import MetricsLengths, TraceSample, TraceWindow
from prfaas_plan.sim.arrivals import MOONCAKE_BLOCK_TOKENS


def selection_of(
    window: TraceWindow | None,
    sample: TraceSample | None,
    model: str | None,
    log_type: str | None,
) -> TraceSelection:
    """The part of a trace a scenario's `window`, `sample`, `model` and `log_type` select."""
    return TraceSelection(
        model=model,
        log_type=log_type,
        window_start_s=None if window is None else window.start_s,
        window_duration_s=None if window is None else window.duration_s,
        sample_requests=None if sample is None else sample.requests,
        sample_seed=0 if sample is None else sample.seed,
    )


def trace_lengths(spec: ObservedLengthsFile, base_dir: Path) -> TraceLengths:
    """The lengths of the part of the trace `spec` names (relative to `base_dir`)."""
    selection = selection_of(spec.window, spec.sample, spec.model, spec.log_type)
    return read_trace_lengths((base_dir / spec.file).resolve(), TraceFormat(spec.format), selection)


def metrics_workload(spec: MetricsLengths, base_dir: Path) -> MetricsWorkload:
    """The input and output histograms of the metrics snapshot `spec` names."""
    baseline = None if spec.baseline_file is None else (base_dir / spec.baseline_file).resolve()
    return read_metrics_workload(
        (base_dir / spec.file).resolve(), baseline, spec.interval_s, spec.model_name
    )


def outputs_of_trace(
    spec: ObservedLengthsFile, base_dir: Path, where: str
) -> tuple[float, float, LengthDistribution, float]:
    """workload.output_tokens `from_trace`: the trace's output lengths, read jointly with its
    inputs, as (mean, mean square, distribution, E[L_in·L_out])."""
    trace = trace_lengths(spec, base_dir)
    if trace.outputs is None or trace.mean_input_times_output_tokens is None:
        raise ConfigError(
            f"{where}workload.output_tokens: from_trace: {spec.file} holds input lengths "
            "only (a CSV length table); give a trace with output lengths"
        )
    outputs = trace.outputs
    if not outputs.min_tokens >= plausible.MIN_TOKENS:
        raise ConfigError(
            f"{where}workload.output_tokens: from_trace: every output_length in {spec.file} "
            f"must be >= {plausible.MIN_TOKENS:g} token, found {outputs.min_tokens:g}"
        )
    m = outputs.partial_moments(-math.inf, math.inf, max_order=2)
    return float(m[1] / m[0]), float(m[2] / m[0]), outputs, trace.mean_input_times_output_tokens


def trace_hit_rates(
    spec: BandedHitRatesFromTrace | Literal["from_trace"],
    inputs: InputLengths,
    base_dir: Path,
    where: str,
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """workload.prefix_cache_hit_rate measured on the observed trace's hash_ids (Mooncake
    JSONL): (hit-rate per band, band upper edges in tokens), bounded like a given rate."""
    banded = isinstance(spec, BandedHitRatesFromTrace)
    edges = (
        tuple(spec.from_trace_band_max_input_tokens)
        if isinstance(spec, BandedHitRatesFromTrace)
        else ()
    )
    field = f"{where}workload.prefix_cache_hit_rate: " + (
        "from_trace_band_max_input_tokens" if banded else "from_trace"
    )
    need = "needs workload.input_tokens to be an observed trace with hash_ids (Mooncake JSONL)"
    if not isinstance(inputs, ObservedLengthsFile):
        raise ConfigError(f"{field} {need}, found {inputs.distribution}")
    if inputs.sample is not None:
        raise ConfigError(
            f"{field} measures prefix reuse between consecutive requests, which a sample "
            "breaks; use a window, or give the hit-rate"
        )
    trace = read_observed_trace((base_dir / inputs.file).resolve(), TraceFormat(inputs.format))
    trace = select_prefix_trace(trace, inputs.window, str(base_dir / inputs.file))
    if trace.prefix_blocks.values.size == 0:
        raise ConfigError(f"{field} {need}, found {inputs.file} without hash_ids")
    rates = prefix_hit_rates_by_band(trace, MOONCAKE_BLOCK_TOKENS, edges)
    for i, rate in enumerate(rates):
        if rate > plausible.MAX_PREFIX_CACHE_HIT_RATE:
            band = f" in band {i}" if edges else ""
            raise ConfigError(
                f"{field}: {inputs.file} gives {rate:.4f}{band}, expected <= "
                f"{plausible.MAX_PREFIX_CACHE_HIT_RATE:g} (the closed form's bound)"
            )
    return rates, edges
