"""The schemas of the data directory's files (inputs/catalog.py reads them): a GPU's datasheet
facts and prices, a link offering, the model catalog (models.yaml: each model's layers) and a
profile table's meta.yaml, every figure with its provenance (basis, source, date). Units as the
files write them: GB, TB/s, TFLOP/s, Gbps, USD per GPU-hour, per month and per GB, ms.
"""

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from prfaas_plan import plausible
from prfaas_plan.inputs.reading import (
    Strict,
)

if TYPE_CHECKING:  # the architecture's layer groups: for the KV footprint, off the plan's path
    from prfaas_plan.analytic.architecture import LayerGroup

Basis = Literal["quoted", "datasheet", "estimate", "unknown"]
_DATE_PATTERN = r"^\d{4}-\d{2}(-\d{2})?$"  # YYYY-MM or YYYY-MM-DD


class Provenance(Strict):
    """Where a price comes from: `quoted` (a published price list or offer), `datasheet`,
    `estimate` (the `note` says its basis) or `unknown` (no public figure: value null, the
    `note` says why)."""

    basis: Basis
    source: str = Field(min_length=1)
    date: str = Field(pattern=_DATE_PATTERN)  # when the figure was published or read
    note: str = ""

    @model_validator(mode="after")
    def _basis_explained(self) -> "Provenance":
        if self.basis in ("estimate", "unknown") and not self.note:
            raise ValueError(f"a {self.basis} figure needs a note saying its basis")
        return self


class Figure(Provenance):
    """A priced figure: `value` in the unit its field name says, null when unknown."""

    value: float | None = Field(ge=0)

    @model_validator(mode="after")
    def _null_iff_unknown(self) -> "Figure":
        if (self.value is None) != (self.basis == "unknown"):
            raise ValueError("value must be null exactly when basis is unknown")
        return self


# (low, high) plausibility of each GpuPrices figure (plausible.py: unit slips, not market limits)
_PRICE_RANGES = {
    "on_demand_usd_per_gpu_hour": (0.0, plausible.MAX_USD_PER_GPU_HOUR),
    "purchase_usd_per_gpu": (0.0, plausible.MAX_USD_PER_GPU),
    "depreciation_years": (0.5, plausible.MAX_DEPRECIATION_YEARS),
    "board_power_w": (1.0, plausible.MAX_BOARD_POWER_W),
    "pue": (1.0, plausible.MAX_PUE),
    "electricity_usd_per_kwh": (0.0, plausible.MAX_USD_PER_KWH),
}


class GpuPrices(Strict):
    """What a GPU costs: rented on demand, or owned (total cost of ownership: purchase
    amortised over the depreciation years, plus board power x PUE x electricity price)."""

    on_demand_usd_per_gpu_hour: Figure
    purchase_usd_per_gpu: Figure
    depreciation_years: Figure
    board_power_w: Figure
    pue: Figure
    electricity_usd_per_kwh: Figure

    @model_validator(mode="after")
    def _plausible(self) -> "GpuPrices":
        for name, (low, high) in _PRICE_RANGES.items():
            value = getattr(self, name).value
            if value is not None and not low <= value <= high:
                raise ValueError(f"{name}.value must lie in [{low:g}, {high:g}], got {value:g}")
        return self


# the name of a link already owned (inputs/links.py): no file of data/links/ may take it
OWNED_LINK = "owned"


class LinkOffering(Strict):
    """A link one can buy between the PrfaaS site and the PD cluster: a fixed port/circuit
    price per month plus a price per GB carried (cloud egress is billed by volume; a leased
    wavelength, dark fibre or a cross-connect is flat-rate, 0 per GB)."""

    name: str
    description: str = ""
    bandwidth_gbps: float = Field(ge=plausible.MIN_BANDWIDTH_GBPS, le=plausible.MAX_BANDWIDTH_GBPS)
    monthly_usd: float = Field(ge=0, le=plausible.MAX_LINK_USD_PER_MONTH)
    usd_per_gb: float = Field(ge=0, le=plausible.MAX_LINK_USD_PER_GB)
    rtt_ms: float = Field(ge=0, le=plausible.MAX_RTT_MS)
    prices: Provenance  # of monthly_usd and usd_per_gb
    rtt: Provenance
    # both clusters in one facility or campus (a cross-connect): not a link between
    # datacentres, so never bought unasked (optimize's cheapest offering, procure's default
    # sites); a plan that names it (--link-offering, procurement.sites) states the colocation
    colocated: bool = False


class GpuSpec(Strict):
    """Datasheet facts; the bounds catch unit slips (TFLOP/s vs FLOP/s, GB vs bytes) for any
    accelerator of the last decade, not precision."""

    name: str
    vendor: str
    dense_bf16_tflops: float = Field(ge=10, le=20_000)
    dense_fp8_tflops: float = Field(ge=10, le=40_000)
    hbm_capacity_gb: float = Field(ge=8, le=2_000)
    hbm_bandwidth_tbytes_per_s: float = Field(ge=0.2, le=100)
    source: str = Field(min_length=1)
    prices: GpuPrices | None = None  # None: no prices, so no cost is computed

    @model_validator(mode="after")
    def _fp8_not_slower(self) -> "GpuSpec":
        if not self.dense_bf16_tflops <= self.dense_fp8_tflops <= 2.5 * self.dense_bf16_tflops:
            raise ValueError(
                f"dense_fp8_tflops ({self.dense_fp8_tflops:g}) must lie between 1x and 2.5x "
                f"dense_bf16_tflops ({self.dense_bf16_tflops:g})"
            )
        return self


_LAYER_DIMENSIONS = {
    "gqa": ("kv_heads", "key_head_dim", "value_head_dim"),
    "swa": ("kv_heads", "key_head_dim", "value_head_dim", "window_tokens"),
    "mla": ("kv_lora_rank", "qk_rope_head_dim"),
    "linear": ("heads", "key_head_dim", "value_head_dim"),
}
_ALL_DIMENSIONS = (
    "kv_heads", "key_head_dim", "value_head_dim", "kv_lora_rank", "qk_rope_head_dim",
    "window_tokens", "heads", "conv_channels", "conv_kernel",
)  # fmt: skip


Dimension = Annotated[int, Field(ge=0, le=plausible.MAX_LAYER_DIMENSION)]


class LayerSpec(Strict):
    """A group of layers of one attention type (see architecture.py for what each stores)."""

    type: Literal["gqa", "mla", "swa", "linear"]
    count: int = Field(gt=0, le=plausible.MAX_LAYERS)
    variant: str = ""
    kv_heads: Dimension = 0
    key_head_dim: Dimension = 0
    value_head_dim: Dimension = 0
    kv_lora_rank: Dimension = 0
    qk_rope_head_dim: Dimension = 0
    window_tokens: int = Field(default=0, ge=0, le=plausible.MAX_TOKENS)
    heads: Dimension = 0
    conv_channels: Dimension = 0
    conv_kernel: Dimension = 0

    @model_validator(mode="after")
    def _dimensions_present(self) -> "LayerSpec":
        needed = _LAYER_DIMENSIONS[self.type]
        missing = [name for name in needed if getattr(self, name) <= 0]
        if missing:
            raise ValueError(f"a {self.type} layer group needs {', '.join(missing)} > 0")
        optional = ("conv_channels", "conv_kernel") if self.type == "linear" else ()
        foreign = [
            name for name in _ALL_DIMENSIONS
            if name not in needed and name not in optional and getattr(self, name) != 0
        ]  # fmt: skip
        if foreign:  # e.g. an SWA layer mistyped as gqa would silently become full attention
            raise ValueError(f"a {self.type} layer group has no {', '.join(foreign)}")
        return self


class ModelSpec(Strict):
    display_name: str
    attention: str
    layer_pattern: str = Field(min_length=1)  # where the full-attention layers sit
    total_params: float = Field(gt=0, le=plausible.MAX_PARAMS)
    active_params: float | None = Field(gt=0, le=plausible.MAX_PARAMS)  # None: not published
    max_context_tokens: int = Field(gt=0, le=plausible.MAX_TOKENS)
    layers: list[LayerSpec] = Field(min_length=1)
    sources: dict[str, str]
    inferred: list[str]
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> "ModelSpec":
        missing = [
            k for k in ("params", "attention", "layers", "context") if not self.sources.get(k)
        ]
        if missing:
            raise ValueError(f"sources needs a non-empty entry for {', '.join(missing)}")
        if self.active_params is not None and self.active_params > self.total_params:
            raise ValueError(
                f"active_params ({self.active_params:g}) cannot exceed total_params ({self.total_params:g})"
            )
        windows = {g.window_tokens for g in self.layers if g.type == "swa"}
        if len(windows) > 1:
            raise ValueError(f"all swa groups must share one window_tokens, got {sorted(windows)}")
        return self

    def layer_groups(self) -> tuple["LayerGroup", ...]:
        from prfaas_plan.analytic.architecture import LayerGroup

        return tuple(LayerGroup(**g.model_dump()) for g in self.layers)


class ModelCatalogFile(Strict):
    models: dict[str, ModelSpec]


class SourceFileMeta(Strict):
    """A file a table was imported from (`prfaas-plan import-profile`), by name and digest."""

    file: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ProfileMeta(Strict):
    quantity: Literal["prefill_latency", "decode_step", "kv_cache_size"]
    model: str
    gpu: str | None = None
    gpus_per_instance: int | None = Field(default=None, gt=0, le=plausible.MAX_GPUS_PER_INSTANCE)
    kv_dtype: Literal["fp32", "bf16", "fp16", "fp8"] | None = None
    recurrent_state_dtype: Literal["fp32", "bf16", "fp16", "fp8"] | None = None
    parallelism: str | None = None
    engine: str
    engine_version: str
    provenance: Literal["measured", "recovered", "derived", "estimated"]
    method: str = Field(min_length=1)
    source: str = Field(min_length=1)
    # written by `import-profile` (optional, so the hand-written tables stay valid)
    imported_on: str | None = None  # ISO date of the import
    measured_on: str | None = None  # the benchmark's own date, where its file records one
    source_files: list[SourceFileMeta] | None = None
