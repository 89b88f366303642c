"""Scenario files (YAML): what is deployed, over which link, for which workload and SLO.

Units are in every key: `bandwidth_gbps` is 10^9 bit/s (the paper's unit), lengths in tokens.
`build_problem` turns a validated scenario plus the catalog into the model's inputs
(SI units inside).
"""

import dataclasses
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator, model_validator
from pydantic_core import PydanticCustomError

from prfaas_plan import bounds, units
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.distributions import (
    Histogram,
    LengthDistribution,
    UncachedLengths,
    truncated_log_normal,
)
from prfaas_plan.analytic.profiles import (
    DecodePoint,
    decode_point_at_context,
    decode_point_for_slo,
    mean_decode_context_tokens,
)
from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import NAME_PATTERN, Catalog, DecodeTable
from prfaas_plan.inputs.prom_metrics import MetricsWorkload, read_metrics_workload
from prfaas_plan.inputs.reading import Strict, parse, read_yaml
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.trace_select import TraceLengths
from prfaas_plan.inputs.trace_stream import read_trace_lengths, select_prefix_trace
from prfaas_plan.inputs.traces import prefix_hit_rates_by_band, read_observed_trace
from prfaas_plan.inputs.workload_files import (
    CellText,
    LogType,
    MetricsLengths,
    OutputFromMetrics,
    TraceSample,
    TraceWindow,
    selection_of,
)
from prfaas_plan.sim.arrivals import MOONCAKE_BLOCK_TOKENS

_MIN_GBPS = units.bytes_per_s_to_gbps(bounds.MIN_BANDWIDTH_BYTES_PER_S)
_MAX_GBPS = units.bytes_per_s_to_gbps(bounds.MAX_BANDWIDTH_BYTES_PER_S)
# a GPU, model or dtype name (it names a file or folder of the catalog)
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


def _printable(text: str) -> str:
    """Free text (a scenario's name and description) every view can print: no control
    character (a newline would split a one-line message) and no lone surrogate (not encodable
    in UTF-8: it broke the table and Markdown views)."""
    bad = next((c for c in text if not c.isprintable() and c != " "), None)
    if bad is not None:
        raise ValueError(f"must be printable text, found the character U+{ord(bad):04X}")
    return text


Label = Annotated[str, Field(max_length=bounds.MAX_LABEL_CHARS), AfterValidator(_printable)]
# a length in tokens, as every length field takes it
Tokens = Annotated[float, Field(ge=bounds.MIN_TOKENS, le=bounds.MAX_TOKENS)]


class ClusterSpec(Strict):
    gpu: Name
    gpus_per_instance: int = Field(gt=0, le=bounds.MAX_GPUS_PER_INSTANCE)
    instances: int = Field(ge=0, le=bounds.MAX_INSTANCES)

    @property
    def gpus(self) -> int:
        return self.gpus_per_instance * self.instances


class LinkSpec(Strict):
    bandwidth_gbps: float = Field(gt=0, le=_MAX_GBPS)

    @model_validator(mode="after")
    def _plausible(self) -> "LinkSpec":
        if self.bandwidth_gbps < _MIN_GBPS:
            raise ValueError(
                f"bandwidth_gbps must be >= {_MIN_GBPS:g} (1 kbit/s), got {self.bandwidth_gbps:g}"
            )
        return self


class LogNormalLengths(Strict):
    distribution: Literal["truncated_lognormal"]
    mu_log: float = Field(ge=-bounds.MAX_ABS_MU_LOG, le=bounds.MAX_ABS_MU_LOG)  # mean of ln(tokens)
    sigma_log: float = Field(  # std of ln(tokens); its bounds checked below, with their reason
        json_schema_extra={"minimum": bounds.MIN_SIGMA_LOG, "maximum": bounds.MAX_SIGMA_LOG}
    )
    min_tokens: Tokens
    max_tokens: Tokens

    @field_validator("sigma_log")
    @classmethod
    def _plausible_sigma(cls, sigma_log: float) -> float:
        low, high = bounds.MIN_SIGMA_LOG, bounds.MAX_SIGMA_LOG
        if not low <= sigma_log <= high:  # the value found is added by the message's writer
            why = " (a narrower log-normal is a fixed length: give a histogram of one narrow bin)"
            raise PydanticCustomError(
                "sigma_log", f"must be in [{low:g}, {high:g}]" + (why if sigma_log < low else "")
            )
        return sigma_log

    @model_validator(mode="after")
    def _ordered(self) -> "LogNormalLengths":
        if self.max_tokens <= self.min_tokens:
            raise ValueError(
                f"max_tokens must exceed min_tokens, got {self.max_tokens:g} <= {self.min_tokens:g}"
            )
        return self


class HistogramLengths(Strict):
    distribution: Literal["histogram"]
    bin_edges_tokens: list[Tokens] = Field(min_length=2, max_length=bounds.MAX_HISTOGRAM_BINS + 1)
    weights: list[Annotated[float, Field(ge=0)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> "HistogramLengths":
        if len(self.weights) != len(self.bin_edges_tokens) - 1:
            raise ValueError(
                f"needs one weight per bin ({len(self.bin_edges_tokens) - 1}), got {len(self.weights)}"
            )
        if any(
            b <= a for a, b in zip(self.bin_edges_tokens, self.bin_edges_tokens[1:], strict=False)
        ):
            raise ValueError(
                "bin_edges_tokens must be strictly increasing, "
                f"got {bounds.quoted(self.bin_edges_tokens)}"
            )
        if max(self.weights) > bounds.MAX_HISTOGRAM_WEIGHT:  # their sum stays finite
            raise ValueError(
                f"weights must each be <= {bounds.MAX_HISTOGRAM_WEIGHT:g} (they are relative), "
                f"got {max(self.weights):g}"
            )
        if sum(self.weights) <= 0:
            raise ValueError("weights must not all be zero")
        return self


class ObservedLengthsFile(Strict):
    distribution: Literal["observed"]
    file: str  # relative to the scenario file; CSV with input_tokens column, or a trace
    # the trace format (inputs/traces.py); auto: Mooncake for .jsonl, else by the CSV header
    format: Literal["auto", "mooncake", "azure", "burstgpt"] = "auto"
    # the part of the trace to plan for (inputs/workload_files.py)
    window: TraceWindow | None = None
    sample: TraceSample | None = None
    model: CellText | None = None  # BurstGPT's Model cell: ChatGPT (GPT-3.5) or GPT-4
    log_type: LogType | None = None  # BurstGPT's Log Type: API log or Conversation log


InputLengths = Annotated[
    LogNormalLengths | HistogramLengths | ObservedLengthsFile | MetricsLengths,
    Field(discriminator="distribution"),
]


class OutputFromTrace(Strict):
    # output lengths observed jointly with the input lengths of workload.input_tokens (a trace)
    distribution: Literal["from_trace"]


def _output_form(value: object) -> str:
    """Which form of workload.output_tokens a value is: a mapping names its distribution."""
    if isinstance(value, dict):
        return str(value.get("distribution"))
    return str(getattr(value, "distribution", "constant"))


ConstantTokens = Annotated[float, Field(ge=bounds.MIN_TOKENS, le=bounds.MAX_TOKENS)]
OutputLengthsSpec = Annotated[
    Annotated[ConstantTokens, Tag("constant")]
    | Annotated[LogNormalLengths, Tag("truncated_lognormal")]
    | Annotated[HistogramLengths, Tag("histogram")]
    | Annotated[OutputFromTrace, Tag("from_trace")]
    | Annotated[OutputFromMetrics, Tag("from_metrics")],
    Discriminator(
        _output_form,
        custom_error_type="output_tokens_form",
        custom_error_message="expected a number of tokens, or a mapping with distribution "
        "truncated_lognormal, histogram, from_trace or from_metrics",
    ),
]


HitRate = Annotated[float, Field(ge=0, le=bounds.MAX_PREFIX_CACHE_HIT_RATE)]


class HitRateBand(Strict):
    # requests of at most this many input tokens (above the previous band's) find `hit_rate`
    # of them cached; the last band has no bound (it holds every longer request)
    max_input_tokens: Tokens | None = None
    hit_rate: HitRate


def _band_edges_problem(edges: list[float], field: str) -> str | None:
    """Why a list of band upper edges (tokens), named `field`, is not strictly increasing."""
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        if b <= a:
            return (
                f"{field} must be strictly increasing from band to band, "
                f"got {b:g} after {a:g} (band {i + 1})"
            )
    return None


class BandedHitRates(Strict):
    """A hit-rate per band of the full input length, bands in increasing order, the last
    open-ended: `{bands: [{max_input_tokens: 8000, hit_rate: 0.1}, {hit_rate: 0.5}]}`."""

    bands: list[HitRateBand] = Field(min_length=1, max_length=bounds.MAX_PREFIX_CACHE_BANDS)

    @model_validator(mode="after")
    def _ordered(self) -> "BandedHitRates":
        *bounded, last = self.bands
        if last.max_input_tokens is not None:
            raise ValueError(
                "the last band must be open-ended (no max_input_tokens: it holds every longer "
                f"request), got max_input_tokens {last.max_input_tokens:g}"
            )
        for i, band in enumerate(bounded):
            if band.max_input_tokens is None:
                raise ValueError(
                    f"band {i} needs max_input_tokens (only the last band is open-ended)"
                )
        problem = _band_edges_problem(
            [b.max_input_tokens or 0.0 for b in bounded], "max_input_tokens"
        )
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def band_max_tokens(self) -> tuple[float, ...]:
        return tuple(float(b.max_input_tokens or 0.0) for b in self.bands[:-1])


class BandedHitRatesFromTrace(Strict):
    """Per-band hit-rates measured on the observed trace's hash_ids: the band upper edges
    (tokens), the last band open-ended above them."""

    from_trace_band_max_input_tokens: list[Tokens] = Field(
        min_length=1, max_length=bounds.MAX_PREFIX_CACHE_BANDS - 1
    )

    @model_validator(mode="after")
    def _ordered(self) -> "BandedHitRatesFromTrace":
        edges = self.from_trace_band_max_input_tokens
        problem = _band_edges_problem(edges, "from_trace_band_max_input_tokens")
        if problem is not None:
            raise ValueError(problem)
        return self


def _hit_rate_form(value: object) -> str | None:
    """Which form of workload.prefix_cache_hit_rate a value is (a mapping by its key); None
    for a value of no form (a list, a mapping with neither key)."""
    keys = type(value).model_fields if isinstance(value, Strict) else value
    if isinstance(keys, dict):
        if "bands" in keys:
            return "banded"
        return "banded_from_trace" if "from_trace_band_max_input_tokens" in keys else None
    if isinstance(value, list | tuple):
        return None
    return "from_trace" if isinstance(value, str) else "constant"


HitRateSpec = Annotated[
    Annotated[HitRate, Tag("constant")]
    | Annotated[Literal["from_trace"], Tag("from_trace")]
    | Annotated[BandedHitRates, Tag("banded")]
    | Annotated[BandedHitRatesFromTrace, Tag("banded_from_trace")],
    Discriminator(
        _hit_rate_form,
        custom_error_type="prefix_cache_hit_rate_form",
        custom_error_message=f"expected a hit-rate in [0, {bounds.MAX_PREFIX_CACHE_HIT_RATE:g}], "
        "from_trace, a mapping {bands: [{max_input_tokens, hit_rate}, ..., {hit_rate}]} or "
        "{from_trace_band_max_input_tokens: [...]}",
    ),
]


class WorkloadSpec(Strict):
    input_tokens: InputLengths
    # a constant (every request, >= 1), a distribution, or `from_trace`
    output_tokens: OutputLengthsSpec
    # share h of every request's input tokens found in a prefix cache (in both clusters): prefill,
    # routing and the KV transfer use the uncached (1 - h)·L, decode the full context. h is a
    # constant, `from_trace` (measured on the observed trace's hash_ids,
    # inputs/traces.prefix_hit_rate), a rate per band of the input length
    # ({bands: [...]}), or per band measured on the trace ({from_trace_band_max_input_tokens: [...]})
    prefix_cache_hit_rate: HitRateSpec = 0.0


@dataclass(frozen=True)
class OutputLengths:
    """Output lengths as the model uses them: their first two moments (equation 5 uses the mean,
    the decode context the second moment), what the simulator samples, and for lengths read
    from a trace jointly with the inputs E[L_in·L_out] (None: independent of the input)."""

    mean_tokens: float
    mean_squared_tokens: float
    distribution: LengthDistribution | None  # None: every request has mean_tokens
    mean_input_times_output_tokens: float | None = None

    @classmethod
    def constant(cls, tokens: float) -> "OutputLengths":
        return cls(tokens, tokens * tokens, None)

    @classmethod
    def of(cls, distribution: LengthDistribution) -> "OutputLengths":
        m = distribution.partial_moments(-math.inf, math.inf, max_order=2)
        return cls(float(m[1] / m[0]), float(m[2] / m[0]), distribution)


class SloSpec(Strict):
    decode_tokens_per_s: float = Field(
        ge=bounds.MIN_DECODE_TOKENS_PER_S, le=bounds.MAX_DECODE_TOKENS_PER_S
    )


# the share of Λ_max a deployment is priced at (its tokens per dollar); stated in every result
DEFAULT_UTILIZATION = 0.7


class CostSpec(Strict):
    """Prices for this scenario, over those of the GPU files and data/links/ (inputs/pricing.py)."""

    cost_model: Literal["on-demand", "tco"] = "on-demand"
    gpu_prices_usd_per_gpu_hour: dict[
        Name, Annotated[float, Field(ge=0, le=bounds.MAX_USD_PER_GPU_HOUR)]
    ] = Field(default_factory=dict)
    link_offering: Name | None = None  # None: the cheapest shipped offering wide enough
    utilization: float = Field(default=DEFAULT_UTILIZATION, ge=bounds.MIN_UTILIZATION, le=1.0)


class SiteSpec(Strict):
    """A candidate PrfaaS site for `procure`: a GPU type, a link offering, optional overrides."""

    name: Name
    gpu: Name
    link_offering: Name
    usd_per_gpu_hour: float | None = Field(default=None, ge=0, le=bounds.MAX_USD_PER_GPU_HOUR)
    rtt_ms: float | None = Field(default=None, ge=0, le=bounds.MAX_RTT_MS)  # None: the offering's
    max_instances: int = Field(default=32, ge=0, le=bounds.MAX_PROCURE_INSTANCES_PER_SITE)


class ProcurementSpec(Strict):
    """`procure`'s candidate space (default sites: every GPU with a prefill profile for the
    model x every link offering of data/links/)."""

    # None (absent): the default sites; [] no PrfaaS site at all (the PD cluster alone)
    sites: list[SiteSpec] | None = Field(default=None, max_length=bounds.MAX_PROCURE_SITES)
    max_pd_instances: int = Field(default=32, ge=1, le=bounds.MAX_PROCURE_INSTANCES_PER_SITE)

    @model_validator(mode="after")
    def _names_unique(self) -> "ProcurementSpec":
        names = [s.name for s in self.sites or ()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"site names must be unique, {', '.join(map(repr, twice))} repeats")
        return self


class Scenario(Strict):
    name: Label
    description: Label = ""
    model: Name
    kv_dtype: Name = "bf16"
    prfaas_cluster: ClusterSpec
    pd_cluster: ClusterSpec
    link: LinkSpec
    workload: WorkloadSpec
    slo: SloSpec
    cost: CostSpec | None = None
    procurement: ProcurementSpec | None = None


def load_scenario(path: Path) -> Scenario:
    return scenario_from_data(read_yaml(path, "scenario"), str(path))


def scenario_from_data(data: object, path: str) -> Scenario:
    """A scenario from parsed YAML or JSON (`path` names its source in messages): the schema,
    then the checks across fields."""
    return check_scenario(parse(Scenario, data, path), path)


def check_scenario(scenario: Scenario, where: str) -> Scenario:
    """The checks across fields a schema cannot state (a file's, or a generated scenario's)."""
    if scenario.pd_cluster.instances < 1:
        raise ConfigError(
            f"{where}: pd_cluster.instances must be >= 1 (every request is decoded in the PD cluster), "
            f"got {scenario.pd_cluster.instances}"
        )
    for name in ("prfaas_cluster", "pd_cluster"):
        cluster: ClusterSpec = getattr(scenario, name)
        if cluster.gpus > bounds.MAX_GPUS:
            raise ConfigError(
                f"{where}: {name}: gpus_per_instance x instances must be <= {bounds.MAX_GPUS:,} "
                f"GPUs, got {cluster.gpus_per_instance} x {cluster.instances} = {cluster.gpus:,}"
            )
    return scenario


MIN_LOGNORMAL_MASS = 1e-12


def build_output_lengths(
    spec: float | LogNormalLengths | HistogramLengths | OutputFromTrace | OutputFromMetrics,
    input_spec: InputLengths,
    base_dir: Path,
    where: str = "",
) -> OutputLengths:
    """workload.output_tokens as OutputLengths; `from_trace` needs workload.input_tokens to be
    an observed trace with output lengths (the lengths are then read jointly), `from_metrics` a
    metrics snapshot (its generation lengths, independent of the input lengths)."""
    if isinstance(spec, float | int):
        return OutputLengths.constant(float(spec))
    if isinstance(spec, OutputFromMetrics):
        if not isinstance(input_spec, MetricsLengths):
            raise ConfigError(
                f"{where}workload.output_tokens: from_metrics needs workload.input_tokens to be "
                f"`distribution: metrics`, found {input_spec.distribution}"
            )
        return OutputLengths.of(_metrics(input_spec, base_dir).outputs)
    if not isinstance(spec, OutputFromTrace):
        return OutputLengths.of(build_workload(spec, base_dir, where, "output_tokens"))
    if not isinstance(input_spec, ObservedLengthsFile):
        raise ConfigError(
            f"{where}workload.output_tokens: from_trace needs workload.input_tokens to be "
            "`distribution: observed` with a trace (Mooncake JSONL, Azure or BurstGPT CSV), found "
            f"{input_spec.distribution}"
        )
    trace = _trace_lengths(input_spec, base_dir)
    if trace.outputs is None or trace.mean_input_times_output_tokens is None:
        raise ConfigError(
            f"{where}workload.output_tokens: from_trace: {input_spec.file} holds input lengths "
            "only (a CSV length table); give a trace with output lengths"
        )
    outputs = trace.outputs
    if not outputs.min_tokens >= bounds.MIN_TOKENS:
        raise ConfigError(
            f"{where}workload.output_tokens: from_trace: every output_length in {input_spec.file} "
            f"must be >= {bounds.MIN_TOKENS:g} token, found {outputs.min_tokens:g}"
        )
    m = outputs.partial_moments(-math.inf, math.inf, max_order=2)
    return OutputLengths(
        float(m[1] / m[0]), float(m[2] / m[0]), outputs, trace.mean_input_times_output_tokens
    )


def _trace_lengths(spec: ObservedLengthsFile, base_dir: Path) -> TraceLengths:
    selection = selection_of(spec.window, spec.sample, spec.model, spec.log_type)
    return read_trace_lengths((base_dir / spec.file).resolve(), TraceFormat(spec.format), selection)


def _metrics(spec: MetricsLengths, base_dir: Path) -> MetricsWorkload:
    baseline = None if spec.baseline_file is None else (base_dir / spec.baseline_file).resolve()
    return read_metrics_workload(
        (base_dir / spec.file).resolve(), baseline, spec.interval_s, spec.model_name
    )


def build_workload(
    spec: InputLengths | LogNormalLengths | HistogramLengths,
    base_dir: Path,
    where: str = "",
    field: str = "input_tokens",
) -> LengthDistribution:
    if isinstance(spec, LogNormalLengths):
        d = truncated_log_normal(spec.mu_log, spec.sigma_log, spec.min_tokens, spec.max_tokens)
        try:  # bounds.py keeps this finite; outside commands/numerics.py's guard, so guarded here
            with np.errstate(over="raise", invalid="raise", divide="raise"):
                mass = d.untruncated_mass
        except FloatingPointError as exc:
            raise ConfigError(
                f"{where}workload.{field}: the log-normal (mu_log={spec.mu_log:g}, "
                f"sigma_log={spec.sigma_log:g}) cannot be computed with ({exc})"
            ) from None
        if not mass > MIN_LOGNORMAL_MASS:
            raise ConfigError(
                f"{where}workload.{field}: the log-normal (mu_log={spec.mu_log:g}, "
                f"sigma_log={spec.sigma_log:g}) puts {mass:.3g} of its probability on "
                f"[{spec.min_tokens:g}, {spec.max_tokens:g}] tokens; expected > {MIN_LOGNORMAL_MASS:g} "
                "(mu_log is the mean of ln(tokens), e.g. 9.9 for a ~20K-token median)"
            )
        return d
    if isinstance(spec, HistogramLengths):
        return Histogram(tuple(spec.bin_edges_tokens), tuple(spec.weights))
    if isinstance(spec, MetricsLengths):
        return _metrics(spec, base_dir).inputs
    return _trace_lengths(spec, base_dir).inputs


def _hit_rates(
    workload: WorkloadSpec, base_dir: Path, where: str
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """workload.prefix_cache_hit_rate as (hit-rate per band, band upper edges in tokens): one
    band for a constant; `from_trace` forms measure the rates on the observed trace's hash_ids
    (Mooncake JSONL), bounded like a given rate."""
    spec, inputs = workload.prefix_cache_hit_rate, workload.input_tokens
    if isinstance(spec, float | int):
        return (float(spec),), ()
    if isinstance(spec, BandedHitRates):
        return tuple(b.hit_rate for b in spec.bands), spec.band_max_tokens
    edges = () if spec == "from_trace" else tuple(spec.from_trace_band_max_input_tokens)
    field = f"{where}workload.prefix_cache_hit_rate: " + (
        "from_trace" if spec == "from_trace" else "from_trace_band_max_input_tokens"
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
        if rate > bounds.MAX_PREFIX_CACHE_HIT_RATE:
            band = f" in band {i}" if edges else ""
            raise ConfigError(
                f"{field}: {inputs.file} gives {rate:.4f}{band}, expected <= "
                f"{bounds.MAX_PREFIX_CACHE_HIT_RATE:g} (the closed form's bound)"
            )
    return rates, edges


def decode_point(
    table: DecodeTable, slo_tokens_per_s: float, inputs: LengthDistribution, output: OutputLengths
) -> DecodePoint:
    """BS_max and its step time at the SLO; where the table has a context column, at the
    workload's mean decode context (profiles.mean_decode_context_tokens)."""
    if table.context_tokens is None:
        return decode_point_for_slo(
            table.batch_sizes, table.step_latencies_s, slo_tokens_per_s=slo_tokens_per_s,
            source=table.source,
        )  # fmt: skip
    joint = output.mean_input_times_output_tokens
    context = mean_decode_context_tokens(
        inputs.mean_tokens * output.mean_tokens if joint is None else joint,
        output.mean_tokens, output.mean_squared_tokens,
    )  # fmt: skip
    return decode_point_at_context(
        table.context_tokens, table.batch_sizes, table.step_latencies_s,
        decode_context_tokens=context, slo_tokens_per_s=slo_tokens_per_s, source=table.source,
        contexts=table.contexts,
    )  # fmt: skip


@dataclass(frozen=True)
class Problem:
    """Everything the planner needs, in SI units."""

    scenario: Scenario
    source: str
    system: ServingSystem
    workload: LengthDistribution
    prfaas_instances: int
    pd_instances: int
    output_lengths: OutputLengths | None = None  # None: every request has system.output_tokens


def build_problem(
    scenario: Scenario,
    source: Path,
    catalog: Catalog,
    bandwidth_gbps: float | None = None,
) -> Problem:
    """Scenario + catalog -> model inputs. `bandwidth_gbps` overrides link.bandwidth_gbps."""
    catalog.model(scenario.model, where=f"{source}: model: ")
    for cluster in ("prfaas_cluster", "pd_cluster"):
        catalog.gpu(getattr(scenario, cluster).gpu, where=f"{source}: {cluster}.gpu: ")
    if bandwidth_gbps is not None:
        if not (bandwidth_gbps > 0 and math.isfinite(bandwidth_gbps)):
            raise ConfigError(
                f"bandwidth_gbps must be a finite number > 0, got {bandwidth_gbps:g}",
                parameter="bandwidth_gbps",
            )
        # the override is held to the file field's own bound
        bounds.check_in_range(
            "bandwidth_gbps", bandwidth_gbps, bounds.MIN_BANDWIDTH_GBPS,
            bounds.MAX_BANDWIDTH_GBPS, "Gbps",
        )  # fmt: skip
    full = build_workload(scenario.workload.input_tokens, source.parent, f"{source}: ")
    hit_rates, band_max_tokens = _hit_rates(scenario.workload, source.parent, f"{source}: ")
    workload = UncachedLengths(full, hit_rates, band_max_tokens) if max(hit_rates) > 0 else full
    output = build_output_lengths(
        scenario.workload.output_tokens, scenario.workload.input_tokens, source.parent,
        f"{source}: ",
    )  # fmt: skip
    reach = workload.max_tokens
    model, prfaas, pd = scenario.model, scenario.prfaas_cluster, scenario.pd_cluster
    decode = catalog.decode_table(
        model, pd.gpu, pd.gpus_per_instance, where=f"{source}: pd_cluster: "
    )
    system = ServingSystem(
        prfaas_prefill_latency=catalog.prefill_latency(
            model, prfaas.gpu, prfaas.gpus_per_instance, reach, where=f"{source}: prfaas_cluster: "
        ),
        pd_prefill_latency=catalog.prefill_latency(
            model, pd.gpu, pd.gpus_per_instance, reach, where=f"{source}: pd_cluster: "
        ),
        kv_cache_size=catalog.kv_cache_size(
            model, scenario.kv_dtype, reach, where=f"{source}: kv_dtype: "
        ),
        decode=decode_point(decode, scenario.slo.decode_tokens_per_s, full, output),
        output_tokens=output.mean_tokens,
        link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(
            scenario.link.bandwidth_gbps if bandwidth_gbps is None else bandwidth_gbps
        ),
    )
    return Problem(scenario, str(source), system, workload, prfaas.instances, pd.instances, output)


def problem_like(problem: Problem, scenario: Scenario) -> Problem:
    """`build_problem(scenario)` for a scenario that differs from `problem.scenario` only in the
    instance counts and the link's bandwidth (a sweep's group: study/fast.py), without reading
    the catalog again: the same Problem, field for field."""
    return dataclasses.replace(
        problem, scenario=scenario,
        system=dataclasses.replace(
            problem.system,
            link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(scenario.link.bandwidth_gbps),
        ),
        prfaas_instances=scenario.prfaas_cluster.instances, pd_instances=scenario.pd_cluster.instances,
    )  # fmt: skip


def open_problem(
    scenario: Path | None = None,
    data_dir: Path | None = None,
    bandwidth_gbps: float | None = None,
) -> Problem:
    """Read a scenario file (default: the paper's case study) against the catalog in
    `data_dir` (default: the shipped data) and build its Problem."""
    path = scenario if scenario is not None else default_scenario_file()
    return build_problem(load_scenario(path), path, Catalog.open(data_dir), bandwidth_gbps)
