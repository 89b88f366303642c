"""Load and validate the shipped (or user-supplied) data directory: GPU facts, model
catalog and profile tables. File I/O lives here; the tables become `profiles.FittedCurve`s; the
files' schemas are inputs/catalog_files.py's.

Layout (keyed by exactly what each table depends on):
    data/gpus/<gpu>.yaml               (datasheet facts and prices with their provenance)
    data/links/<offering>.yaml         (link offerings: bandwidth, prices, RTT)
    data/profiles/<model>/prefill/<gpu>-x<gpus_per_instance>/{meta.yaml,prefill_latency.csv}
    data/profiles/<model>/decode/<gpu>-x<gpus_per_instance>/{meta.yaml,decode_step.csv}
    data/profiles/<model>/kv/<kv_dtype>/{meta.yaml,kv_cache_size.csv}
    models.yaml
CSV headers carry units; the KV table is in MiB (the paper's unit) and converted here.

Files are read through inputs/reading.py (bounded, strict YAML and schemas); every column and
field has a plausibility bound (plausible.py), and a prefill table must lie between the speed of
light and the MFU floor of analytic/prefill_physics.py (a latency column in ms under a `_s`
header is too slow, one 1000x too fast beats the speed of light); a decode table between
reading the active weights once and the ceiling of analytic/decode_physics.py.
"""

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.analytic.decode_physics import DecodeInstance, implausible_step
from prfaas_plan.analytic.decode_point import ContextSteps, validate_context_table
from prfaas_plan.analytic.prefill_physics import (
    MFU_FLOOR,
    active_params_lower_bound,
    fastest_prefill_s,
    prefill_mfu,
)
from prfaas_plan.analytic.profiles import (
    KV_CACHE_SIZE_DEGREE,
    PREFILL_LATENCY_DEGREE,
    FittedCurve,
    fit_curve,
    validate_table,
)
from prfaas_plan.errors import ConfigError, ProfileError
from prfaas_plan.inputs.catalog_files import (
    OWNED_LINK,
    GpuSpec,
    LinkOffering,
    ModelCatalogFile,
    ModelSpec,
    ProfileMeta,
)
from prfaas_plan.inputs.reading import (
    bounded_lines,
    open_bounded,
    parse,
    read_csv_columns,
    read_yaml,
)
from prfaas_plan.inputs.resources import default_data_dir, default_models_file

T = TypeVar("T")

# a GPU, model or dtype name: it names a file or folder in data/, so no separators or `..`
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{plausible.MAX_NAME_CHARS - 1}}}$"
_NAME = re.compile(NAME_PATTERN)


# plausibility bounds of profile columns (plausible.py); a larger value is a unit slip
_COLUMN_MAX = {
    "input_tokens": plausible.MAX_TOKENS,
    "batch_size": plausible.MAX_BATCH_SIZE,
    "context_tokens": plausible.MAX_TOKENS,
    "prefill_latency_s": plausible.MAX_SECONDS,
    "decode_step_latency_s": plausible.MAX_SECONDS,
    "kv_cache_mib": plausible.MAX_KV_CACHE_MIB,
}


@dataclass(frozen=True)
class DecodeTable:
    batch_sizes: np.ndarray
    step_latencies_s: np.ndarray
    meta: ProfileMeta
    source: str
    context_tokens: np.ndarray | None = None  # the context of each row, when profiled
    # its distinct contexts, ascending, once the table is validated (validate_context_table)
    contexts: np.ndarray | None = None

    @cached_property
    def context_steps(self) -> ContextSteps | None:
        """Each batch's step at each profiled context, kept for every decode point read on this
        table (None without a context column)."""
        if self.context_tokens is None:
            return None
        return ContextSteps(
            np.asarray(self.context_tokens, dtype=float),
            np.asarray(self.batch_sizes, dtype=float),
            np.asarray(self.step_latencies_s, dtype=float),
        )


@dataclass(frozen=True)
class Catalog:
    """A data directory and a models file, read on demand."""

    data_dir: Path
    models_file: Path
    shipped: bool = False  # the package's own data: shown as data/... in messages

    @classmethod
    def open(cls, data_dir: Path | None = None, models_file: Path | None = None) -> "Catalog":
        shipped = data_dir is None
        data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        if not data_dir.is_dir():
            raise ConfigError(f"data directory {data_dir} is not a directory")
        if models_file is None:
            beside = data_dir.parent / "models.yaml"
            models_file = beside if beside.is_file() else default_models_file()
        return cls(data_dir, Path(models_file), shipped)

    def resolve(self, shown: str) -> Path:
        """The file behind a name produced by `shown`."""
        path = Path(shown)
        # only the shipped data is shown relative to its root; other names are paths as given
        return self.data_dir.parent / path if self.shipped and not path.is_absolute() else path

    def shown(self, path: Path) -> str:
        """How a data file is named in results and messages."""
        if self.shipped and path.is_relative_to(self.data_dir.parent):
            return str(path.relative_to(self.data_dir.parent))
        return str(path)

    def memoised(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`: what a catalog derives from its files (a CachedCatalog keeps it under
        `key`, as it keeps what it reads)."""
        return compute()

    def _known(self, folder: Path) -> str:
        names = sorted(p.stem for p in folder.iterdir()) if folder.is_dir() else []
        return ", ".join(names) or "none"

    def gpu(self, name: str, where: str = "", parameter: str | None = None) -> GpuSpec:
        """The GPU's facts; `where` prefixes, and `parameter` tags, an unknown-GPU error. Read
        once per catalog, as the models are (a plan asks for each of its GPUs at each table it
        reads: 7 reads of 2 files in `optimize`); an error is not kept."""
        if name in self._gpus:
            return self._gpus[name]
        folder = self.data_dir / "gpus"
        path = folder / f"{name}.yaml"
        if (
            not _NAME.match(name) or not path.exists()
        ):  # anything else there is refused by read_yaml, saying why
            raise ConfigError(
                f"{where}unknown GPU {plausible.quoted(name)}; known: {self._known(folder)} ({folder}/)",
                parameter=parameter,
            )
        spec = parse(GpuSpec, read_yaml(path, "GPU"), str(path))
        if spec.name != name:
            raise ConfigError(
                f"{path}: name must match the file name {name!r}, found {spec.name!r}"
            )
        self._gpus[name] = spec
        return spec

    @cached_property
    def _gpus(self) -> dict[str, GpuSpec]:  # `gpu`'s, by name
        return {}

    def link_offering(
        self, name: str, where: str = "", parameter: str | None = None
    ) -> LinkOffering:
        """A link offering of data/links/; `where` prefixes, and `parameter` tags, an unknown one."""
        folder = self.data_dir / "links"
        path = folder / f"{name}.yaml"
        if not _NAME.match(name) or not path.exists():
            raise ConfigError(
                f"{where}unknown link offering {plausible.quoted(name)}; known: "
                f"{self._known(folder)} ({folder}/)",
                parameter=parameter,
            )
        if name == OWNED_LINK:
            raise ConfigError(
                f"{path}: the name {OWNED_LINK!r} is reserved for a link already owned "
                "(link_offering: owned, at no cost); rename the file and its name:"
            )
        offering = parse(LinkOffering, read_yaml(path, "link offering"), str(path))
        if offering.name != name:
            raise ConfigError(
                f"{path}: name must match the file name {name!r}, found {offering.name!r}"
            )
        return offering

    def prefill_gpus(self, model: str, gpus_per_instance: int) -> tuple[str, ...]:
        """The GPUs with a prefill latency table for `model` at `gpus_per_instance` GPUs."""
        folder = self.data_dir / "profiles" / model / "prefill"
        suffix = f"-x{gpus_per_instance}"
        return tuple(
            sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}") if p.is_dir())
        )

    def link_offering_names(self) -> tuple[str, ...]:
        folder = self.data_dir / "links"
        return tuple(sorted(p.stem for p in folder.glob("*.yaml"))) if folder.is_dir() else ()

    def models(self) -> dict[str, ModelSpec]:
        return self._models

    @cached_property
    def _models(self) -> dict[str, ModelSpec]:  # read once: model() is called per table
        data = read_yaml(self.models_file, "model catalog")
        return parse(ModelCatalogFile, data, str(self.models_file)).models

    def model(self, name: str, where: str = "") -> ModelSpec:
        models = self.models()
        if name not in models:
            raise ConfigError(
                f"{where}unknown model {plausible.quoted(name)}; known: {', '.join(sorted(models)) or 'none'} ({self.models_file})"
            )
        return models[name]

    def _table(
        self,
        model: str,
        kind: str,
        key: str,
        csv_name: str,
        columns: tuple[str, ...],
        where: str,
        **expected_meta: object,
    ) -> tuple[ProfileMeta, Path, tuple[np.ndarray, ...]]:
        """(meta, path, columns) of data/profiles/<model>/<kind>/<key>/<csv_name>, validated."""
        folder = self.data_dir / "profiles" / model / kind
        if not _NAME.match(key):  # before any path is built from it
            raise ConfigError(
                f"{where}no {kind} profile for model {model!r} at {plausible.quoted(key)} (not a "
                f"name of at most {plausible.MAX_NAME_CHARS} letters, digits, '.', '_' or '-'); "
                f"available: {self._known(folder)}"
            )
        if not (folder / key).is_dir():
            raise ConfigError(
                f"{where}no {kind} profile for model {model!r} at {key!r} (expected "
                f"{folder / key}/); available: {self._known(folder)}"
            )
        meta_path = folder / key / "meta.yaml"
        try:
            raw = read_yaml(meta_path, "profile metadata")
        except ConfigError as exc:  # a table without metadata is a broken table
            raise ProfileError(str(exc)) from None
        meta = parse(ProfileMeta, raw, str(meta_path), ProfileError)
        for field, value in {"model": model, **expected_meta}.items():
            if getattr(meta, field) != value:
                raise ProfileError(
                    f"{meta_path}: {field} must be {value!r} to match its directory, "
                    f"found {getattr(meta, field)!r}"
                )
        path = folder / key / csv_name
        values = read_csv_columns(path, columns)
        for name, column in zip(columns, values, strict=True):
            high = _COLUMN_MAX[name]
            if np.any(column > high):  # the lower bounds (> 0, sorted) are validate_table's
                row = int(np.flatnonzero(column > high)[0]) + 1
                raise ProfileError(
                    f"{path}: data row {row}, column {name}: must be <= {high:g}, "
                    f"found {column[row - 1]:g}"
                )
        return meta, path, values

    def prefill_latency(
        self,
        model: str,
        gpu: str,
        gpus_per_instance: int,
        check_up_to_tokens: float | None = None,
        where: str = "",
    ) -> FittedCurve:
        meta, path, (tokens, latency_s) = self._table(
            model, "prefill", f"{gpu}-x{gpus_per_instance}", "prefill_latency.csv",
            ("input_tokens", "prefill_latency_s"), where,
            quantity="prefill_latency", gpu=gpu, gpus_per_instance=gpus_per_instance,
        )  # fmt: skip
        curve = fit_curve(
            tokens,
            latency_s,
            degree=PREFILL_LATENCY_DEGREE,
            quantity="prefill_latency_s",
            provenance=meta.provenance,
            source=self.shown(path),
            check_up_to_tokens=check_up_to_tokens,
        )
        self._check_physics(model, gpu, gpus_per_instance, tokens, latency_s, curve.source)
        return curve

    def _check_physics(
        self,
        model: str,
        gpu: str,
        gpus: int,
        tokens: np.ndarray,
        latency_s: np.ndarray,
        source: str,
    ) -> None:
        """ProfileError if a row beats the speed of light (prefill_physics.fastest_prefill_s at
        the GPUs' FP8 peak: a column 1000x too fast, or in ks), or if the longest row (where
        compute dominates the fixed overhead) is slower than MFU_FLOOR of the BF16 peak allows."""
        spec, facts = self.model(model), self.gpu(gpu)
        n = active_params_lower_bound(spec.total_params, spec.active_params)
        fastest_s = fastest_prefill_s(
            n, tokens, units.tflops_to_flops(facts.dense_fp8_tflops) * gpus
        )
        too_fast = np.flatnonzero(latency_s < fastest_s)
        if too_fast.size:
            i = too_fast[0]
            raise ProfileError(
                f"{source}: {latency_s[i]:g} s at {tokens[i]:g} tokens ({too_fast.size} row(s) in "
                f"all) beats the speed of light {fastest_s[i]:.3g} s (2 x {n:.3g} active params "
                f"x tokens at {gpus} x {facts.dense_fp8_tflops:g} TFLOP/s FP8); is the column in "
                "seconds, and active_params in models.yaml right?"
            )
        mfu = prefill_mfu(
            n, tokens[-1], latency_s[-1], units.tflops_to_flops(facts.dense_bf16_tflops) * gpus
        )
        if mfu < MFU_FLOOR:
            raise ProfileError(
                f"{source}: {latency_s[-1]:g} s at {tokens[-1]:g} tokens uses only {mfu:.2g} of "
                f"{gpus} x {facts.name} BF16 peak (floor {MFU_FLOOR:g}), far too slow for a "
                "prefill: is the column in ms instead of s?"
            )

    def kv_cache_size(
        self, model: str, kv_dtype: str, check_up_to_tokens: float | None = None, where: str = ""
    ) -> FittedCurve:
        meta, path, (tokens, size_mib) = self._table(
            model, "kv", kv_dtype, "kv_cache_size.csv", ("input_tokens", "kv_cache_mib"), where,
            quantity="kv_cache_size", kv_dtype=kv_dtype,
        )  # fmt: skip
        validate_table(tokens, size_mib, source=str(path), value_name="kv_cache_mib")
        return fit_curve(
            tokens,
            units.mib_to_bytes(size_mib),
            degree=KV_CACHE_SIZE_DEGREE,
            quantity="kv_cache_bytes",
            provenance=meta.provenance,
            source=self.shown(path),
            check_up_to_tokens=check_up_to_tokens,
        )

    def decode_table(
        self, model: str, gpu: str, gpus_per_instance: int, where: str = ""
    ) -> DecodeTable:
        """The decode table; columns batch_size,decode_step_latency_s, optionally with a
        context_tokens column (first or second) giving the context each row was measured at."""
        key = f"{gpu}-x{gpus_per_instance}"
        columns = _decode_columns(self.data_dir / "profiles" / model / "decode" / key)
        meta, path, values = self._table(
            model, "decode", key, "decode_step.csv", columns, where,
            quantity="decode_step", gpu=gpu, gpus_per_instance=gpus_per_instance,
        )  # fmt: skip
        named = dict(zip(columns, values, strict=True))
        batch, step_s = named["batch_size"], named["decode_step_latency_s"]
        context = named.get("context_tokens")
        contexts = None
        if context is None:
            validate_table(
                batch, step_s, source=str(path), value_name="decode_step_latency_s",
                key_name="batch_size", min_rows=1,
            )  # fmt: skip
        elif np.any(~np.isfinite(context) | (context <= 0)) or np.any(np.diff(context) < 0):
            raise ProfileError(
                f"{path}: context_tokens must be finite, > 0 and sorted (rows grouped by context), "
                f"found {plausible.quoted(context.tolist())}"
            )
        else:
            contexts = validate_context_table(context, batch, step_s, source=str(path))
        if np.any(batch != np.round(batch)):
            raise ProfileError(f"{path}: batch_size must be whole numbers, found {batch.tolist()}")
        instance = self.decode_instance(model, gpu, gpus_per_instance)
        step = implausible_step(instance, batch, step_s)
        if step is not None:
            hint = (
                f"the column looks like {step.likely_unit}, expected seconds"
                if step.likely_unit
                else "is the column in seconds, and are active_params in models.yaml and the "
                "GPUs per instance right?"
            )
            raise ProfileError(
                f"{self.shown(path)}: data row {step.row + 1}: {step.step_s:.4g} s at batch "
                f"{step.batch_size:g} ({step.rows} row(s) in all) is {step.reason(instance)}; "
                f"{hint}"
            )
        return DecodeTable(batch, step_s, meta, self.shown(path), context, contexts)

    def decode_instance(self, model: str, gpu: str, gpus_per_instance: int) -> DecodeInstance:
        """What bounds a decode step of `model` on `gpus_per_instance` x `gpu`
        (analytic/decode_physics.py)."""
        spec, facts = self.model(model), self.gpu(gpu)
        return DecodeInstance(
            active_params=active_params_lower_bound(spec.total_params, spec.active_params),
            total_params=spec.total_params,
            hbm_bytes=units.gb_to_bytes(facts.hbm_capacity_gb) * gpus_per_instance,
            hbm_bytes_per_s=units.tbytes_per_s_to_bytes_per_s(facts.hbm_bandwidth_tbytes_per_s)
            * gpus_per_instance,
            peak_flops_per_s=units.tflops_to_flops(facts.dense_bf16_tflops) * gpus_per_instance,
        )


_DECODE_COLUMNS = ("batch_size", "decode_step_latency_s")


def _decode_columns(folder: Path) -> tuple[str, ...]:
    """The decode table's header: the two columns, or with context_tokens first or second."""
    path = folder / "decode_step.csv"
    try:
        with open_bounded(
            path, "profile table", plausible.MAX_SCENARIO_BYTES, ProfileError
        ) as handle:
            first = next(bounded_lines(handle, path, "profile table", ProfileError), "")
    except ProfileError:
        return _DECODE_COLUMNS  # the ordinary read reports it
    header = tuple(cell.strip() for cell in first.strip().split(","))
    with_context = [("context_tokens", *_DECODE_COLUMNS), ("batch_size", "context_tokens",
                    "decode_step_latency_s")]  # fmt: skip
    return header if header in with_context else _DECODE_COLUMNS
