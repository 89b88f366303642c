"""A sweep's results directory: one Parquet file per chunk (`chunk-NNNNNN.parquet`) and the
manifest `_sweep.json` recording the sweep's fingerprint, made ready for a run (`prepare`:
created, or resumed only by the same sweep), each chunk written atomically, checked on resume
(`check_chunk`) and read back (`read_results`). A directory that cannot be created, listed or
written, and a damaged manifest or chunk, are one-line errors.
"""

import contextlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError, PrfaasPlanError
from prfaas_plan.inputs.files import shown, write_atomically, write_text
from prfaas_plan.inputs.reading import read_text
from prfaas_plan.sweep.rows import Chunk
from prfaas_plan.sweep.spec import Sweep

if TYPE_CHECKING:
    import pyarrow as pa


MANIFEST = "_sweep.json"


def chunk_file(results: Path, index: int) -> Path:
    return results / f"chunk-{index:06d}.parquet"


_CHUNK_NAME = re.compile(r"chunk-(\d{6,})\.parquet")


@dataclass(frozen=True)
class Found:
    """A results directory made ready for a run: the chunk files already in it (each checked
    when the run reaches it) and the directories this run created (removed if it fails before
    writing anything)."""

    directory: Path
    chunk_files: frozenset[int]


@dataclass(frozen=True)
class RunSummary:
    """What a run did: the study's size, and the chunks it kept (resumed), reran (found on disk
    but broken) and ran."""

    scenarios: int
    chunks: int
    chunks_resumed: int
    chunks_rerun: int
    scenarios_run: int


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _manifest_record(sweep: Sweep, summary: RunSummary | None) -> dict[str, Any]:
    return {
        "sweep": sweep.spec.name, "source": sweep.source, "fingerprint": sweep.fingerprint,
        "command": sweep.spec.command, "axes": list(sweep.spec.axes),
        "chunks": summary.chunks if summary else None,
        "scenarios": summary.scenarios if summary else None,
        "complete": summary is not None,
    }  # fmt: skip


def write_manifest(results: Path, sweep: Sweep, summary: RunSummary | None) -> None:
    """`_sweep.json`: the sweep's fingerprint, and what the run did once it is complete."""
    text = json.dumps(_manifest_record(sweep, summary), indent=2) + "\n"
    write_atomically(results / MANIFEST, lambda tmp: write_text(tmp, text), "results")


def _check_manifest(results: Path, sweep: Sweep) -> None:
    """Refuse to resume a directory whose manifest is not this sweep's (or not a manifest)."""
    manifest = results / MANIFEST
    if not (manifest.exists() or manifest.is_symlink()):
        raise ConfigError(f"results: {shown(results)} holds no {MANIFEST}; not a sweep's results")
    text = read_text(manifest, "sweep manifest", limit_bytes=plausible.MAX_SWEEP_MANIFEST_BYTES)
    damaged = (
        f"results: {shown(manifest)} is not a sweep manifest ({{}}), so which sweep wrote "
        f"{shown(results)} is unknown; run the sweep into a new directory"
    )
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(damaged.format("not JSON")) from None
    if not isinstance(found, dict):
        raise ConfigError(damaged.format(f"a JSON {type(found).__name__}, expected an object"))
    if not isinstance(found.get("fingerprint"), str):
        raise ConfigError(damaged.format("no fingerprint"))
    if found["fingerprint"] != sweep.fingerprint:
        raise ConfigError(
            f"results: {shown(results)} holds another sweep ({plausible.quoted(found.get('sweep'))}, "
            f"fingerprint {plausible.quoted(found['fingerprint'])}); `resume` continues only the "
            "same sweep file",
            parameter="resume",
        )


def _make_directory(results: Path) -> list[Path]:
    """Create `results` and its missing parents; the directories created, outermost first."""
    missing = []
    for directory in (results, *results.parents):
        if directory.exists() or directory.is_symlink():
            break
        missing.append(directory)
    missing.reverse()
    for directory in missing:
        try:
            directory.mkdir()
        except OSError as exc:
            _remove(missing[: missing.index(directory)])
            raise ConfigError(
                f"results: cannot create directory {shown(directory)}: {_reason(exc)}",
                parameter="results",
            ) from None
    return missing


def _remove(created: list[Path]) -> None:
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            directory.rmdir()


def prepare(sweep: Sweep, results: Path, resume: bool) -> Found:
    """Check the results directory (new or empty, or the same sweep's with `resume`), create
    it and write its manifest, or refuse in one line leaving the disk as it was."""
    try:
        if results.exists() and not results.is_dir():
            raise ConfigError(f"results: {shown(results)} exists and is not a directory")
        occupied = results.is_dir() and any(results.iterdir())
    except OSError as exc:  # no permission to list it, a name too long, ...
        raise ConfigError(
            f"results: cannot read {shown(results)}: {_reason(exc)}", parameter="results"
        ) from None
    if occupied:
        if not resume:
            raise ConfigError(
                f"results: {shown(results)} is not empty; pass `resume` to continue its study, "
                "or name a new directory",
                parameter="resume",
            )
        _check_manifest(results, sweep)
    created = _make_directory(results)
    try:
        write_manifest(results, sweep, None)
        files = frozenset(
            int(match.group(1))
            for name in os.listdir(results)
            if (match := _CHUNK_NAME.fullmatch(name)) is not None
        )
    except OSError as exc:
        _remove(created)
        raise ConfigError(
            f"results: cannot read {shown(results)}: {_reason(exc)}", parameter="results"
        ) from None
    except PrfaasPlanError:
        _remove(created)
        raise
    return Found(results, files)


def check_chunk(path: Path, chunk: Chunk, axes: list[str]) -> str | None:
    """Why the chunk file at `path` is not `chunk`'s rows, or None: a regular file whose Parquet
    footer reads, of len(chunk) rows with the scenario ids of `chunk` in order and the axis and
    error columns, every page of which decodes (and matches its checksum, where written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
        with pq.ParquetFile(path, page_checksum_verification=True) as file:
            rows = file.metadata.num_rows
            if rows != len(chunk):
                return f"{rows:,} rows, expected {len(chunk):,}"
            names = set(file.schema_arrow.names)
            for column in ("scenario_id", *(f"axis.{a}" for a in axes), "error_class"):
                if column not in names:
                    return f"no column {column}"
            table = file.read()
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"unreadable: {_arrow_reason(exc)}"
    ids = table.column("scenario_id").to_pylist()
    if ids != [scenario_id for scenario_id, _ in chunk]:
        return "its scenario ids are not this chunk's"
    return None


def _arrow_reason(exc: BaseException) -> str:
    """The gist of a pyarrow error, without the path it repeats."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = re.sub(r"^.*?source '[^']*': ", "", text)
    return text.split(". ")[0].rstrip(".")[:200]


def write_chunk(results: Path, index: int, table: "pa.Table") -> None:
    """One chunk's rows as Parquet with page checksums, atomically (a dot-file renamed into
    place: readers and --resume never see half a chunk; a failure names the file). Text
    columns are dictionary-encoded, numbers are not: a Latin-hypercube chunk's floats are all
    distinct, and trying a dictionary on them cost 35 ms of CPU against 21 ms for a chunk of
    4,000 rows, in a file 4.6 MB against 4.1 MB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = [f.name for f in table.schema if pa.types.is_string(f.type)]

    def write(tmp: Path) -> None:
        pq.write_table(table, tmp, write_page_checksum=True, use_dictionary=text)

    write_atomically(chunk_file(results, index), write, "results")


def chunk_files(results: Path) -> list[Path]:
    """The chunk files of a results directory, in chunk order (one line if it holds none)."""
    try:
        names = sorted(
            (name for name in os.listdir(results) if _CHUNK_NAME.fullmatch(name) is not None),
            key=lambda name: int(name[6:-8]),  # chunk-<index>.parquet: 7 digits after 999,999
        )
    except OSError as exc:
        raise ConfigError(f"results: cannot read {shown(results)}: {_reason(exc)}") from None
    if not names:
        raise ConfigError(f"results: {shown(results)} holds no chunk-*.parquet files")
    return [results / name for name in names]


def read_chunk(path: Path, columns: list[str] | None = None) -> "pa.Table":
    """One chunk file (only those of `columns` it has, if given: [] reads its schema alone),
    or one line naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError(f"results: {shown(path)}: not a regular file, expected a chunk")
        with pq.ParquetFile(path, page_checksum_verification=True) as file:
            schema = file.schema_arrow
            if "scenario_id" not in schema.names:
                raise ConfigError(f"results: {shown(path)}: not a sweep chunk (no scenario_id)")
            if columns == []:
                return schema.empty_table()
            present = set(schema.names)
            wanted = None if columns is None else [c for c in columns if c in present]
            return file.read(columns=wanted)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise ConfigError(
            f"results: {shown(path)}: not a readable Parquet chunk ({_arrow_reason(exc)}); "
            "running the sweep again with `resume` reruns it"
        ) from None


def unify_chunks(results: Path, count: int) -> int:
    """Give the study's `count` chunk files one schema, the union of theirs with types unified
    as `read_results` unifies them, rewriting (atomically) each that differs: a chunk where a
    column is null throughout (typed null) or absent (every scenario of it failed) would
    otherwise refuse or drop that column for readers that take the first file's schema for all
    (`pandas.read_parquet` of the directory: "Unsupported cast from string to null"). Chunks
    whose types cannot be unified (a number in one, text in another) are left as written. How
    many were rewritten."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = [chunk_file(results, i) for i in range(count)]
    if len(files) < 2:
        return 0
    try:
        schemas = [pq.read_schema(f) for f in files]
        unified = pa.unify_schemas(schemas, promote_options="permissive")
    except (OSError, pa.ArrowException):
        return 0
    rewritten = 0
    for index, (path, schema) in enumerate(zip(files, schemas, strict=True)):
        if schema.equals(unified):
            continue
        try:
            table = pa.concat_tables(
                [unified.empty_table(), read_chunk(path)], promote_options="permissive"
            ).cast(unified)
        except pa.ArrowException:  # left as written: read_results still reads it
            continue
        write_chunk(results, index, table)
        rewritten += 1
    return rewritten


def read_results(results: Path) -> "pa.Table":
    """Every chunk of a results directory as one table, sorted by scenario id (columns missing
    from a chunk are null; types unified)."""
    import pyarrow as pa

    tables = [read_chunk(f) for f in chunk_files(results)]
    table = pa.concat_tables(tables, promote_options="permissive")
    return table.sort_by("scenario_id")
