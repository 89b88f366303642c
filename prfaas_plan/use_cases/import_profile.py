"""`prfaas-plan import-profile`: measured prefill and decode profiles from benchmark results
(vLLM, SGLang, Dynamo) written into a data directory, checked as `check` would before they land.

A new or empty `--data-dir` is initialised from the shipped data (GPUs, profiles, golden
expectations), so it is complete: `optimize --data-dir DIR` plans with it and `check DIR`
validates it. An existing profile is replaced only with `force`.
"""

import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from prfaas_plan import plausible
from prfaas_plan.analytic.decode_physics import DecodeInstance, implausible_step
from prfaas_plan.analytic.profiles import PREFILL_LATENCY_DEGREE, fit_curve
from prfaas_plan.choices import ProfileFormat, ProfileKind
from prfaas_plan.errors import ConfigError, ProfileError
from prfaas_plan.inputs import benchmarks as bench
from prfaas_plan.inputs import profile_import as imp
from prfaas_plan.inputs.benchmark_roles import assign as assign_roles
from prfaas_plan.inputs.catalog import Catalog


@dataclass(frozen=True)
class WrittenTable:
    table: imp.ImportedTable
    path: Path  # the CSV in the data directory
    fit_residual: float | None  # prefill: largest relative residual of the quadratic fit


@dataclass(frozen=True)
class ImportReport:
    format: str
    model: str
    gpu: str
    gpus_per_instance: int
    data_dir: Path
    initialised: bool
    tables: tuple[WrittenTable, ...]
    sources: tuple[imp.SourceFile, ...]
    provenance: str = "measured"  # or "estimated" (AIConfigurator), as meta.yaml says


_ENGINES = {
    ProfileFormat.VLLM: "vLLM (vllm bench serve)",
    ProfileFormat.SGLANG: "SGLang (sglang.bench_serving)",
    ProfileFormat.DYNAMO: "NVIDIA Dynamo profiler",
}


def _same(runs: Sequence[bench.BenchmarkRun], field: str) -> str | None:
    """The one value of `field` across runs (None where absent), or a ConfigError naming both."""
    seen: dict[str, str] = {}
    for run in runs:
        value = getattr(run, field)
        if value is not None:
            seen.setdefault(value, run.source)
    if len(seen) > 1:
        (a, wa), (b, wb) = list(seen.items())[:2]
        raise ConfigError(
            f"{wb}: {field} is {b!r} but {wa} has {a!r}: one import takes runs of one model on "
            "one deployment"
        )
    return next(iter(seen), None)


PROVENANCES = ("measured", "estimated")


def _provenance(asked: str | None, marks: dict[str, str]) -> str:
    """meta.yaml's provenance: `asked`, else estimated where a file says so (never measured
    for a file that says it was estimated); `marks` maps a file to what in it says so."""
    if asked is not None and asked not in PROVENANCES:
        raise ConfigError(
            f"provenance must be one of {', '.join(PROVENANCES)}, found {asked!r}",
            parameter="provenance",
        )
    if asked == "measured" and marks:
        source, mark = next(iter(marks.items()))
        raise ConfigError(
            f"{source}: estimated by AIConfigurator ({mark}), but provenance measured was "
            "asked; its latencies are a model's, not a measurement: give `provenance` estimated",
            parameter="provenance",
        )
    return asked or ("estimated" if marks else "measured")


def _each_file_once(files: Sequence[Path]) -> None:
    """ConfigError naming a file given twice, by the same name, through a link or as a copy
    (the same sha256), checked before any is read: its runs would count twice in the per-bin
    medians. Only regular files within the readers' size limit are hashed; the readers refuse
    the others."""
    inodes: dict[tuple[int, int], Path] = {}
    digests: dict[str, Path] = {}
    for f in files:
        try:
            status = f.stat()
        except OSError:
            continue  # the reader names it
        inode = (status.st_dev, status.st_ino)
        if inode in inodes:
            raise ConfigError(_twice(f, inodes[inode], "the same file as"))
        inodes[inode] = f
        if not stat.S_ISREG(status.st_mode) or status.st_size > plausible.MAX_BENCHMARK_BYTES:
            continue
        try:
            digest = imp.source_file(f, limit_bytes=plausible.MAX_BENCHMARK_BYTES).sha256
        except OSError:
            continue
        if digest in digests:
            raise ConfigError(
                _twice(f, digests[digest], f"the same bytes (sha256 {digest[:12]}…) as")
            )
        digests[digest] = f


def _twice(f: Path, first: Path, what: str) -> str:
    found = "given twice" if str(f) == str(first) else f"{what} {first}"
    return f"{f}: {found}; its runs would count twice in the medians: give each file once"


def _tables(
    fmt: ProfileFormat, files: Sequence[Path], kind: ProfileKind, marks: dict[str, str]
) -> tuple[list[imp.ImportedTable], str, str | None]:
    """(tables, engine description, the runs' own date) from the files; a file that says it
    was estimated is entered into `marks`."""
    if fmt is ProfileFormat.DYNAMO:
        points = [bench.read_dynamo(f) for f in files]
        marks.update({p.source: p.estimated_by for p in points if p.estimated_by})
        prefill = [p for p in points if isinstance(p, bench.DynamoPrefill)]
        decode = [p for p in points if isinstance(p, bench.DynamoDecode)]
        wanted = {ProfileKind.PREFILL: (prefill, []), ProfileKind.DECODE: ([], decode)}.get(
            kind, (prefill, decode)
        )
        if (kind is ProfileKind.PREFILL and not prefill) or (
            kind is ProfileKind.DECODE and not decode
        ):
            raise ConfigError(f"{files[0]}: no Dynamo {kind.value} raw_data.npz among the files")
        tables = [imp.prefill_from_dynamo(wanted[0])] if wanted[0] else []
        tables += [imp.decode_from_dynamo(wanted[1])] if wanted[1] else []
        return tables, _ENGINES[fmt], None
    reader = bench.read_vllm if fmt is ProfileFormat.VLLM else bench.read_sglang
    budget = bench.import_budget()  # shared by the files (plausible.py)
    runs = [run for f in files for run in reader(f, budget)]
    model_id, backend = _same(runs, "model_id"), _same(runs, "backend")
    roles = assign_roles(runs, kind)  # each run its own role; settings never pooled
    tables = [imp.prefill_from_runs(roles.prefill)] if roles.prefill else []
    tables += [imp.decode_from_runs(roles.decode)] if roles.decode else []
    tables[0] = replace(tables[0], notes=tables[0].notes + roles.notes)
    engine = _ENGINES[fmt] + (f", backend {backend}" if backend else "")
    engine += f", model_id {model_id}" if model_id else ""
    return tables, engine, _same(runs, "date")


_UNIT_NAMES = {1.0: "seconds", 1e-3: "milliseconds"}
_UNIT_SYMBOLS = {1.0: "s", 1e-3: "ms"}


def _sources(table: imp.ImportedTable) -> str:
    return ", ".join(dict.fromkeys(table.row_sources))


def _check_decode_physics(table: imp.ImportedTable, instance: DecodeInstance) -> None:
    """ProfileError naming the run and field of the first decode step outside the physical
    bounds (analytic/decode_physics.py), and the unit it looks like it was given in."""
    batch, step_s = table.values[0], table.values[-1]
    step = implausible_step(instance, batch, step_s, table.seconds_per_unit)
    if step is None:
        return
    expected = _UNIT_NAMES[table.seconds_per_unit]
    if step.likely_unit:
        hint = f"the values look like {step.likely_unit}, expected {expected}"
    elif step.too_fast:
        hint = (
            "were the runs made with speculative decoding, or are `model` (its active_params "
            "in models.yaml) and gpus_per_instance right?"
        )
    else:
        hint = f"are the values in {expected}, and `model` and gpus_per_instance right?"
    given = step.step_s / table.seconds_per_unit
    raise ProfileError(
        f"{table.row_sources[step.row]}: {table.value_name} {given:.4g} "
        f"{_UNIT_SYMBOLS[table.seconds_per_unit]} at batch {step.batch_size:g} "
        f"({step.rows} row(s) in all) is {step.reason(instance)}; {hint}"
    )


def import_profile(
    fmt: ProfileFormat,
    files: Sequence[Path],
    *,
    model: str,
    gpu: str,
    gpus_per_instance: int,
    data_dir: Path,
    kind: ProfileKind = ProfileKind.AUTO,
    engine_version: str | None = None,
    parallelism: str | None = None,
    force: bool = False,
    provenance: str | None = None,
) -> ImportReport:
    """Read `files`, build the profile table(s) and write them into `data_dir` (module docstring)."""
    for name, text in (("engine_version", engine_version), ("parallelism", parallelism)):
        if text is not None:  # written into the table's meta.yaml
            plausible.check_text(name, text)
    imp.check_data_dir(data_dir)
    _each_file_once(files)
    marks: dict[str, str] = {}
    tables, engine, measured_on = _tables(fmt, files, kind, marks)
    sources = tuple(imp.source_file(f) for f in files)  # read and bounded by now
    provenance = _provenance(provenance, marks)
    target = Catalog.open(data_dir if not imp.needs_initialising(data_dir) else None)
    target.model(model, where="`model`: ")
    target.gpu(gpu, where="`gpu`: ", parameter="gpu")
    for t in tables:
        if t.kind == "decode":
            _check_decode_physics(t, target.decode_instance(model, gpu, gpus_per_instance))
    texts = {
        t.kind: (
            t.csv_text(),
            imp.meta_text(
                t, model=model, gpu=gpu, gpus_per_instance=gpus_per_instance,
                parallelism=parallelism or f"{gpus_per_instance} GPUs per instance",
                engine=engine, engine_version=engine_version or "not recorded in the benchmark file",
                sources=sources, measured_on=measured_on, provenance=provenance,
            ),
        )
        for t in tables
    }  # fmt: skip
    models_file = target.models_file

    def validate(staged: Path) -> None:  # the checks `check` runs on these tables
        catalog = Catalog(staged, models_file)
        for t in tables:
            try:
                if t.kind == "prefill":
                    catalog.prefill_latency(model, gpu, gpus_per_instance)
                else:
                    catalog.decode_table(model, gpu, gpus_per_instance)
            except ProfileError as exc:  # named by its sources and where it would have gone
                table = str(exc).replace(str(staged), str(data_dir))
                unit = _UNIT_SYMBOLS[t.seconds_per_unit]
                raise ProfileError(
                    f"{_sources(t)}: {t.value_name} ({unit}), imported as {table}"
                ) from None

    initialised = imp.write_profiles(
        data_dir, model, gpu, gpus_per_instance, texts, force=force, validate=validate
    )
    written = []
    for t in tables:
        folder = imp.profile_folder(data_dir, model, t.kind, gpu, gpus_per_instance)
        residual = None
        if t.kind == "prefill":
            curve = fit_curve(
                t.values[0], t.values[1], degree=PREFILL_LATENCY_DEGREE,
                quantity="prefill_latency_s", provenance=provenance, source=str(folder),
            )  # fmt: skip
            residual = float(curve.max_relative_residual)
        written.append(WrittenTable(t, folder / imp.CSV_NAMES[t.kind], residual))
    return ImportReport(
        fmt.value, model, gpu, gpus_per_instance, data_dir, initialised, tuple(written), sources,
        provenance,
    )  # fmt: skip
