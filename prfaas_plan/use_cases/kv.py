"""`prfaas-plan kv`: KV footprint of catalog models from their architecture, next to their
measured or derived tables and the KV throughput Φ_kv = S_kv / T_prefill on a reference GPU.
Units: bytes, seconds, bytes/s, tokens.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.analytic.architecture import (
    DTYPE_BYTES,
    KvFootprint,
    all_full_attention,
    kv_footprint,
)
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.catalog_files import ModelSpec
from prfaas_plan.use_cases.numerics import model_numerics


@dataclass(frozen=True)
class ModelKv:
    name: str
    spec: ModelSpec
    lengths_tokens: np.ndarray
    footprint: KvFootprint  # from the architecture, chosen dtypes
    full_attention: KvFootprint  # every layer full attention, same KV dtype
    kv_cache_bytes: np.ndarray  # S_kv at the report's lengths, architecture
    full_attention_kv_cache_bytes: np.ndarray
    table_kv_cache_bytes: np.ndarray | None  # the model's KV table (fit) at the lengths, if any
    table_source: str | None
    prefill_latency: FittedCurve | None  # reference GPU profile, if any

    @property
    def kv_throughput_bytes_per_s(self) -> np.ndarray | None:
        """Φ_kv(l) = S_kv(l) / T_prefill(l) on the reference GPU, with the model's KV table
        where it has one (measured beats inferred), else the architecture estimate."""
        if self.prefill_latency is None:
            return None
        size = (
            self.kv_cache_bytes if self.table_kv_cache_bytes is None else self.table_kv_cache_bytes
        )
        phi: np.ndarray = size / self.prefill_latency(self.lengths_tokens)
        return phi

    @property
    def extrapolated(self) -> list[str]:
        """Why some of the report's lengths are beyond what the data covers."""
        longest = float(self.lengths_tokens.max())
        notes = []
        if longest > self.spec.max_context_tokens:
            notes.append(
                f"{longest:g} tokens exceeds the model's context ({self.spec.max_context_tokens:g})"
            )
        p = self.prefill_latency
        if p is not None and (
            longest > p.table_max_tokens or self.lengths_tokens.min() < p.table_min_tokens
        ):
            notes.append(
                f"Φ_kv extrapolates its prefill fit beyond [{p.table_min_tokens:g}, {p.table_max_tokens:g}] tokens"
            )
        return notes


@dataclass(frozen=True)
class KvReport:
    lengths_tokens: np.ndarray
    kv_dtype: str
    state_dtype: str
    gpu: str
    gpus_per_instance: int
    models: tuple[ModelKv, ...]


def _check_dtype(name: str, parameter: str) -> None:
    if name not in DTYPE_BYTES:
        raise ConfigError(
            f"{parameter}: unknown dtype {name!r}; known: {', '.join(DTYPE_BYTES)}",
            parameter=parameter,
        )


@model_numerics("kv")
def kv_report(
    catalog: Catalog,
    models: list[str] | None,
    lengths_tokens: Sequence[float] | np.ndarray,
    *,
    kv_dtype: str = "bf16",
    state_dtype: str = "fp32",
    gpu: str = "h200",
    gpus_per_instance: int = 8,
) -> KvReport:
    """KV footprint of `models` (default: every catalog model) at `lengths_tokens`."""
    _check_dtype(kv_dtype, "kv_dtype")
    _check_dtype(state_dtype, "state_dtype")
    if gpus_per_instance < 1:
        raise ConfigError(
            f"gpus_per_instance must be >= 1, got {gpus_per_instance}",
            parameter="gpus_per_instance",
        )
    catalog.gpu(gpu, where="gpu: ", parameter="gpu")
    lengths = np.asarray(lengths_tokens, dtype=float)
    if lengths.size == 0 or np.any(~np.isfinite(lengths) | (lengths <= 0)):
        raise ConfigError(
            f"lengths_tokens: expected positive token counts, got {plausible.quoted(lengths.tolist())}",
            parameter="lengths_tokens",
        )
    for length in lengths.tolist():
        plausible.check_in_range(
            "lengths_tokens", length, plausible.MIN_TOKENS, plausible.MAX_TOKENS, "tokens"
        )
    plausible.check_in_range("gpus_per_instance", gpus_per_instance, 1, plausible.MAX_GPUS, "GPUs")
    names = models or list(catalog.models())
    rows = []
    for name in names:
        spec = catalog.model(name)
        layers = spec.layer_groups()
        footprint = kv_footprint(layers, kv_dtype, state_dtype)
        full = all_full_attention(layers, kv_dtype)
        table, table_source = None, None
        try:
            curve = catalog.kv_cache_size(name, kv_dtype)
            table, table_source = curve(lengths), curve.source
        except ConfigError:
            pass  # no KV table for this model and dtype: architecture only
        try:
            prefill = catalog.prefill_latency(name, gpu, gpus_per_instance)
        except ConfigError:
            prefill = None  # no profile on the reference GPU: no Φ_kv
        rows.append(
            ModelKv(
                name=name,
                spec=spec,
                lengths_tokens=lengths,
                footprint=footprint,
                full_attention=full,
                kv_cache_bytes=footprint.size_bytes(lengths),
                full_attention_kv_cache_bytes=full.size_bytes(lengths),
                table_kv_cache_bytes=table,
                table_source=table_source,
                prefill_latency=prefill,
            )
        )
    return KvReport(lengths, kv_dtype, state_dtype, gpu, gpus_per_instance, tuple(rows))
