"""The catalog for many plans in one process (a long-running server, a sweep's workers): each
link offering and profile table read, validated and fitted once (and each GPU file, as any
catalog reads it: Catalog.gpu), then served from memory (a plan
otherwise spends two thirds of its time re-reading the same YAML and CSV files). The data
directory is taken to stay as it was when the catalog was opened: restart `serve` after editing
it."""

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.inputs.catalog import Catalog, DecodeTable
from prfaas_plan.inputs.catalog_files import LinkOffering

T = TypeVar("T")
MAX_ENTRIES = (
    4096  # distinct (table, reach) keys kept; a what-if session or a study makes a few dozen
)


@dataclass(frozen=True)
class CachedCatalog(Catalog):
    """A Catalog whose reads are memoised (results are frozen values; errors are not kept)."""

    memo: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def memoised(self, key: Hashable, compute: Callable[[], T]) -> T:
        return self._once(("memoised", key), compute)

    def _once(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self.lock:
            if key in self.memo:
                return self.memo[key]  # type: ignore[return-value]
        value = compute()
        with self.lock:
            if len(self.memo) >= MAX_ENTRIES:
                self.memo.clear()
            self.memo[key] = value
        return value

    def link_offering(
        self, name: str, where: str = "", parameter: str | None = None
    ) -> LinkOffering:
        return self._once(
            ("link", name, where, parameter),
            lambda: super(CachedCatalog, self).link_offering(name, where, parameter),
        )

    def link_offering_names(self) -> tuple[str, ...]:
        return self._once(("links",), lambda: super(CachedCatalog, self).link_offering_names())

    def prefill_gpus(self, model: str, gpus_per_instance: int) -> tuple[str, ...]:
        # a priced plan's check of its prices lists the folder (sweep: once per scenario)
        return self._once(
            ("prefill_gpus", model, gpus_per_instance),
            lambda: super(CachedCatalog, self).prefill_gpus(model, gpus_per_instance),
        )

    def prefill_latency(
        self,
        model: str,
        gpu: str,
        gpus_per_instance: int,
        check_up_to_tokens: float | None = None,
        where: str = "",
    ) -> FittedCurve:
        return self._once(
            ("prefill", model, gpu, gpus_per_instance, check_up_to_tokens, where),
            lambda: super(CachedCatalog, self).prefill_latency(
                model, gpu, gpus_per_instance, check_up_to_tokens, where
            ),
        )

    def kv_cache_size(
        self, model: str, kv_dtype: str, check_up_to_tokens: float | None = None, where: str = ""
    ) -> FittedCurve:
        return self._once(
            ("kv", model, kv_dtype, check_up_to_tokens, where),
            lambda: super(CachedCatalog, self).kv_cache_size(
                model, kv_dtype, check_up_to_tokens, where
            ),
        )

    def decode_table(
        self, model: str, gpu: str, gpus_per_instance: int, where: str = ""
    ) -> DecodeTable:
        return self._once(
            ("decode", model, gpu, gpus_per_instance, where),
            lambda: super(CachedCatalog, self).decode_table(model, gpu, gpus_per_instance, where),
        )
