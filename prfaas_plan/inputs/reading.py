"""Reading input files safely: bounded text reads, YAML files through the strict loader, strict
schemas, CSV columns.

Every file a user names is hostile until read: it may be a device (`/dev/zero`), a FIFO, a
multi-GB file, YAML with duplicate keys, aliases that expand to gigabytes ("billion laughs") or
nesting thousands deep. Here, and nowhere else:
- `open_bounded` / `read_text` refuse anything but a regular file of at most `limit_bytes`
  (stat first, then a read of at most limit + 1 bytes); a UTF-8 byte-order mark is skipped
  (utf-8-sig: spreadsheets write one);
- `read_yaml` reads such a file and loads it with the strict loader of inputs/strict_yaml.py,
  which refuses duplicate keys (naming the key and line), aliases (`*name`: the only way a
  small YAML document grows large when loaded) and nesting deeper than
  plausible.MAX_YAML_DEPTH;
- `Strict` schemas take a number field from a YAML number only (not a boolean or a string;
  an int is accepted where a float is expected), and error messages quote at most
  plausible.MAX_QUOTED_CHARS of a value.
"""

import csv
import os
import re
import stat
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError, PrfaasPlanError, ProfileError
from prfaas_plan.inputs.strict_yaml import parse_yaml_text

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base of every file schema: unknown keys refused, values frozen, no NaN/inf, and no
    coercion (`true` or `"100"` is not a number; 100 is a float)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False, strict=True, defer_build=True
    )


def format_validation_error(where: str, error: ValidationError) -> str:
    """One line: `file: field.path: what was expected, got <short value>` (+ how many more)."""
    errors = error.errors(include_url=False, include_context=False)
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    got = first.get("input")
    message = first["msg"][0].lower() + first["msg"][1:]
    text = f"{where}: {field}: {message}"
    if first["type"] != "missing" and not isinstance(got, dict) and " got " not in message:
        text += f", got {plausible.quoted(got)}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return text


def open_bounded(
    path: Path, what: str, limit_bytes: int, error: type[PrfaasPlanError] = ConfigError
) -> IO[str]:
    """`path` opened as UTF-8 text (a leading BOM skipped) if it is a regular file of at most
    `limit_bytes`, else one line saying why not. The caller closes the handle."""
    return open(_open_regular(path, what, limit_bytes, error), encoding="utf-8-sig")


def open_bounded_binary(
    path: Path, what: str, limit_bytes: int, error: type[PrfaasPlanError] = ConfigError
) -> IO[bytes]:
    """`path` opened for reading bytes, on the terms of `open_bounded`."""
    return open(_open_regular(path, what, limit_bytes, error), "rb")


def _open_regular(path: Path, what: str, limit_bytes: int, error: type[PrfaasPlanError]) -> int:
    """A blocking descriptor of `path` if it is a regular file of at most `limit_bytes`."""
    try:  # non-blocking: opening a FIFO without a writer must not hang
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected the {what} file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    info = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(info.st_mode):
        problem = f"is a directory, expected the {what} file"
    elif not stat.S_ISREG(info.st_mode):
        problem = f"{what} must be a regular file, not a device, pipe or socket"
    elif info.st_size > limit_bytes:
        problem = f"{what} file is {info.st_size:,} bytes, over the limit of {limit_bytes:,} bytes"
    if problem is not None:
        os.close(fd)
        raise error(f"{path}: {problem}")
    os.set_blocking(fd, True)
    return fd


def read_text(
    path: Path,
    what: str,
    error: type[PrfaasPlanError] = ConfigError,
    limit_bytes: int = plausible.MAX_SCENARIO_BYTES,
) -> str:
    """A UTF-8 text file of at most `limit_bytes`, or one line saying why not."""
    handle = open_bounded(path, what, limit_bytes, error)
    with handle:
        try:
            text = handle.read(limit_bytes + 1)  # characters >= bytes/4: enough to see overflow
        except UnicodeDecodeError as exc:
            raise error(f"{path}: {what} file is not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    # it grew while we read it (ASCII text, the usual case, is as long in characters as in bytes)
    if len(text) > limit_bytes or (not text.isascii() and len(text.encode("utf-8")) > limit_bytes):
        raise error(f"{path}: {what} file is over the limit of {limit_bytes:,} bytes")
    return text


def read_yaml(path: Path, what: str, error: type[PrfaasPlanError] = ConfigError) -> Any:
    """The YAML document in `path` (a bounded read, strict loader), or one line saying why not."""
    return parse_yaml_text(read_text(path, what, error), str(path), error)


def parse(schema: type[M], data: Any, where: str, error: type[PrfaasPlanError] = ConfigError) -> M:
    """`data` validated against `schema`, or one line naming `where` and the first problem."""
    if not isinstance(data, dict):
        raise error(f"{where}: expected a mapping of fields, found {type(data).__name__}")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise error(format_validation_error(where, exc)) from None


def bounded_lines(
    handle: IO[str],
    path: Path,
    what: str,
    error: type[PrfaasPlanError] = ConfigError,
    limit_chars: int | None = None,
) -> Iterator[str]:
    """The lines of `handle`, each at most `limit_chars` (default plausible.MAX_LINE_CHARS)
    characters (else `error`), read one at a time so a file without newlines never sits in
    memory whole."""
    limit_chars = plausible.MAX_LINE_CHARS if limit_chars is None else limit_chars
    number = 0
    while True:
        try:
            line = handle.readline(limit_chars + 1)
        except UnicodeDecodeError as exc:
            raise error(f"{path}: {what} file is not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
        if not line:
            return
        number += 1
        if len(line) > limit_chars:
            raise error(
                f"{path}:{number}: line longer than {limit_chars:,} characters; "
                f"is this a {what} file?"
            )
        yield line


_HEADER_CELL = re.compile(r"[A-Za-z_][A-Za-z0-9_ ().%/-]*")


def shown_header(path: Path | str, cells: Sequence[str]) -> str:
    """The first line of `path` as a message may show it: quoted only when the file is a table
    in the expected format, a `.csv` file whose first line is a CSV header (column names: a
    letter or _, then letters, digits, spaces and _ ( ) . % / -); of any other file (a password
    file, a README, a binary named by mistake) it says so without echoing the content."""
    found = ",".join(cells)
    if (
        str(path).lower().endswith(".csv")
        and cells
        and all(_HEADER_CELL.fullmatch(cell) for cell in cells)
    ):
        return found if len(found) <= plausible.MAX_QUOTED_CHARS else plausible.quoted(found)
    return "a first line that is not a header of column names (not quoted)"


def read_csv_columns(
    path: Path,
    columns: tuple[str, ...],
    *,
    what: str = "profile table",
    error: type[PrfaasPlanError] = ProfileError,
    limit_bytes: int = plausible.MAX_SCENARIO_BYTES,
    max_rows: int | None = None,
) -> tuple[np.ndarray, ...]:
    """Numeric columns of a CSV whose header must be exactly `columns` (units in the names),
    read as a stream of at most `limit_bytes` and `max_rows` data rows (refused on the row
    after, before it is stored); a failure raises `error`, naming the file as `what`."""
    with open_bounded(path, what, limit_bytes, error) as handle:
        rows = (
            row
            for row in csv.reader(bounded_lines(handle, path, what, error))
            if row and any(cell.strip() for cell in row)
        )
        try:
            header = tuple(cell.strip() for cell in next(rows))
        except StopIteration:
            raise error(f"{path}: empty file, expected header {','.join(columns)}") from None
        except csv.Error as exc:
            raise error(f"{path}: malformed CSV: {exc}") from None
        if header != columns:
            raise error(
                f"{path}: header must be {','.join(columns)} (units in the column names), "
                f"found {shown_header(path, header)}"
            )
        values = [array("d") for _ in columns]
        try:
            for r, row in enumerate(rows, start=1):
                if max_rows is not None and r > max_rows:
                    raise error(
                        f"{path}: data row {r:,}: {what} file has more than {max_rows:,} rows; "
                        "use a sample of it"
                    )
                _append_row(values, row, r, columns, path, error)
        except csv.Error as exc:
            raise error(f"{path}: malformed CSV: {exc}") from None
    return tuple(np.frombuffer(column, dtype=float).copy() for column in values)


def _append_row(
    values: list["array[float]"],
    row: list[str],
    r: int,
    columns: tuple[str, ...],
    path: Path,
    error: type[PrfaasPlanError],
) -> None:
    if len(row) != len(columns):
        raise error(f"{path}: data row {r} has {len(row)} cells, expected {len(columns)}")
    for c, cell in enumerate(row):
        try:
            values[c].append(float(cell))
        except ValueError:
            raise error(
                f"{path}: data row {r}, column {columns[c]}: expected a number, "
                f"found {plausible.quoted(cell.strip())}"
            ) from None
