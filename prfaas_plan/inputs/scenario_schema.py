"""The scenario file's schema: what is deployed, over which link, for which workload and SLO,
at what prices and over which procurement sites, each field with its unit in its key and the
bounds it is held to. Reading a scenario and building its Problem: scenario.py."""

import itertools
from typing import Annotated, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator, model_validator
from pydantic_core import PydanticCustomError

from prfaas_plan import plausible
from prfaas_plan.inputs.catalog import NAME_PATTERN
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.workload_files import (
    CellText,
    LogType,
    MetricsLengths,
    OutputFromMetrics,
    TraceSample,
    TraceWindow,
)

# a GPU, model or dtype name (it names a file or folder of the catalog)
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


def _printable(text: str) -> str:
    """Free text (a scenario's name and description) every view can print: no control
    character (a newline would split a one-line message) and no lone surrogate (not encodable
    in UTF-8: it broke the table and Markdown views)."""
    if text.isprintable():  # the common case, in C: a space is printable, the others are not
        return text
    bad = next((c for c in text if not c.isprintable() and c != " "), None)
    if bad is not None:
        raise ValueError(f"must be printable text, found the character U+{ord(bad):04X}")
    return text


Label = Annotated[str, Field(max_length=plausible.MAX_LABEL_CHARS), AfterValidator(_printable)]
# a length in tokens, as every length field takes it
Tokens = Annotated[float, Field(ge=plausible.MIN_TOKENS, le=plausible.MAX_TOKENS)]


class ClusterSpec(Strict):
    gpu: Name
    gpus_per_instance: int = Field(gt=0, le=plausible.MAX_GPUS_PER_INSTANCE)
    instances: int = Field(ge=0, le=plausible.MAX_INSTANCES)

    @property
    def gpus(self) -> int:
        return self.gpus_per_instance * self.instances


class LinkSpec(Strict):
    bandwidth_gbps: float = Field(gt=0, le=plausible.MAX_BANDWIDTH_GBPS)

    @model_validator(mode="after")
    def _plausible(self) -> "LinkSpec":
        if self.bandwidth_gbps < plausible.MIN_BANDWIDTH_GBPS:
            raise ValueError(
                f"bandwidth_gbps must be >= {plausible.MIN_BANDWIDTH_GBPS:g} (1 kbit/s), got {self.bandwidth_gbps:g}"
            )
        return self


class LogNormalLengths(Strict):
    distribution: Literal["truncated_lognormal"]
    mu_log: float = Field(
        ge=-plausible.MAX_ABS_MU_LOG, le=plausible.MAX_ABS_MU_LOG
    )  # mean of ln(tokens)
    sigma_log: float = Field(  # std of ln(tokens); its bounds checked below, with their reason
        json_schema_extra={"minimum": plausible.MIN_SIGMA_LOG, "maximum": plausible.MAX_SIGMA_LOG}
    )
    min_tokens: Tokens
    max_tokens: Tokens

    @field_validator("sigma_log")
    @classmethod
    def _plausible_sigma(cls, sigma_log: float) -> float:
        low, high = plausible.MIN_SIGMA_LOG, plausible.MAX_SIGMA_LOG
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
    bin_edges_tokens: list[Tokens] = Field(
        min_length=2, max_length=plausible.MAX_HISTOGRAM_BINS + 1
    )
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
                f"got {plausible.quoted(self.bin_edges_tokens)}"
            )
        if max(self.weights) > plausible.MAX_HISTOGRAM_WEIGHT:  # their sum stays finite
            raise ValueError(
                f"weights must each be <= {plausible.MAX_HISTOGRAM_WEIGHT:g} (they are relative), "
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


ConstantTokens = Annotated[float, Field(ge=plausible.MIN_TOKENS, le=plausible.MAX_TOKENS)]
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


HitRate = Annotated[float, Field(ge=0, le=plausible.MAX_PREFIX_CACHE_HIT_RATE)]


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

    bands: list[HitRateBand] = Field(min_length=1, max_length=plausible.MAX_PREFIX_CACHE_BANDS)

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
        min_length=1, max_length=plausible.MAX_PREFIX_CACHE_BANDS - 1
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
        custom_error_message=f"expected a hit-rate in [0, {plausible.MAX_PREFIX_CACHE_HIT_RATE:g}], "
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


class SloSpec(Strict):
    decode_tokens_per_s: float = Field(
        ge=plausible.MIN_DECODE_TOKENS_PER_S, le=plausible.MAX_DECODE_TOKENS_PER_S
    )


# the share of Λ_max a deployment is priced at (its tokens per dollar); stated in every result
DEFAULT_UTILIZATION = 0.7


class CostSpec(Strict):
    """Prices for this scenario, over those of the GPU files and data/links/ (inputs/pricing.py)."""

    cost_model: Literal["on-demand", "tco"] = "on-demand"
    gpu_prices_usd_per_gpu_hour: dict[
        Name, Annotated[float, Field(ge=0, le=plausible.MAX_USD_PER_GPU_HOUR)]
    ] = Field(default_factory=dict)
    link_offering: Name | None = None  # None: the cheapest shipped offering wide enough
    utilization: float = Field(default=DEFAULT_UTILIZATION, ge=plausible.MIN_UTILIZATION, le=1.0)


class SiteSpec(Strict):
    """A candidate PrfaaS site for `procure`: a GPU type, a link offering, optional overrides."""

    name: Name
    gpu: Name
    link_offering: Name
    usd_per_gpu_hour: float | None = Field(default=None, ge=0, le=plausible.MAX_USD_PER_GPU_HOUR)
    rtt_ms: float | None = Field(
        default=None, ge=0, le=plausible.MAX_RTT_MS
    )  # None: the offering's
    max_instances: int = Field(default=32, ge=0, le=plausible.MAX_PROCURE_INSTANCES_PER_SITE)


class ProcurementSpec(Strict):
    """`procure`'s candidate space (default sites: every GPU with a prefill profile for the
    model x every link offering of data/links/)."""

    # None (absent): the default sites; [] no PrfaaS site at all (the PD cluster alone)
    sites: list[SiteSpec] | None = Field(default=None, max_length=plausible.MAX_PROCURE_SITES)
    max_pd_instances: int = Field(default=32, ge=1, le=plausible.MAX_PROCURE_INSTANCES_PER_SITE)

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
