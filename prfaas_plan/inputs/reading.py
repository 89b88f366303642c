"""Reading input files safely: bounded text reads, a strict YAML loader, strict schemas.

Every file a user names is hostile until read: it may be a device (`/dev/zero`), a FIFO, a
multi-GB file, YAML with duplicate keys, aliases that expand to gigabytes ("billion laughs") or
nesting thousands deep. Here, and nowhere else:
- `open_bounded` / `read_text` refuse anything but a regular file of at most `limit_bytes`
  (stat first, then a read of at most limit + 1 bytes); a UTF-8 byte-order mark is skipped
  (utf-8-sig: spreadsheets write one);
- `read_yaml` refuses duplicate keys (naming the key and line), aliases (`*name`: the only
  way a small YAML document grows large when loaded) and nesting deeper than
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
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError, PlanError, ProfileError

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
    path: Path, what: str, limit_bytes: int, error: type[PlanError] = ConfigError
) -> IO[str]:
    """`path` opened as UTF-8 text (a leading BOM skipped) if it is a regular file of at most
    `limit_bytes`, else one line saying why not. The caller closes the handle."""
    return open(_open_regular(path, what, limit_bytes, error), encoding="utf-8-sig")


def open_bounded_binary(
    path: Path, what: str, limit_bytes: int, error: type[PlanError] = ConfigError
) -> IO[bytes]:
    """`path` opened for reading bytes, on the terms of `open_bounded`."""
    return open(_open_regular(path, what, limit_bytes, error), "rb")


def _open_regular(path: Path, what: str, limit_bytes: int, error: type[PlanError]) -> int:
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
    error: type[PlanError] = ConfigError,
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


class _YamlRefusedError(Exception):
    """A structural problem the strict loader refuses; carries the line."""

    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.line = mark.line + 1 if mark is not None else None


class _StrictComposer(yaml.composer.Composer):
    """The composer (events -> nodes, in Python) without aliases or deep nesting, and the
    constructor without duplicate keys: whichever parser produces the events."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
            event = self.peek_event()  # type: ignore[attr-defined]
            raise _YamlRefusedError(
                "aliases (*name) are not allowed in prfaas-plan files; write the value out",
                event.start_mark,
            )
        self._depth += 1
        if self._depth > plausible.MAX_YAML_DEPTH:
            raise _YamlRefusedError(
                f"nested deeper than {plausible.MAX_YAML_DEPTH} levels",
                self.peek_event().start_mark,  # type: ignore[attr-defined]
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            if isinstance(key, Hashable) and key in seen:
                raise _YamlRefusedError(
                    f"duplicate key {plausible.quoted(key)} in one mapping", key_node.start_mark
                )
            if isinstance(key, Hashable):
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        return mapping


# libyaml's scanner and parser (C) when PyYAML was built with it: they were most of a
# command's start-up (15 catalog files read by the pure-Python scanner). Its events go through
# the same Python composer and constructor, so every refusal above holds with either parser;
# tests/inputs/test_hostile_files.py runs both.
_CParser: Any = getattr(getattr(yaml, "cyaml", None), "CParser", None)


class _PureStrictLoader(
    _StrictComposer,
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """SafeLoader's pure-Python parts, strict."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)  # refuses a control character (NUL) here
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _StrictComposer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


if _CParser is not None:

    class _CStrictLoader(
        _StrictComposer,
        _CParser,  # type: ignore[misc]  # Any to mypy: a C extension type
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    ):
        """libyaml's scanner and parser; the composer and constructor are _StrictComposer's
        (before CParser in the method order: its own composer in C would allow aliases)."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _StrictComposer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _LOADERS: tuple[type[Any], ...] = (_CStrictLoader, _PureStrictLoader)
else:  # pragma: no cover - PyYAML built without libyaml
    _LOADERS = (_PureStrictLoader,)
_StrictLoader = _LOADERS[0]


# YAML 1.1 (PyYAML) reads `1.0e12` as a string, since its exponent has no sign; YAML 1.2 and
# every reader reads a number. Lax parsing hid this by coercing the string; strict schemas need
# the number, so the loader resolves floats as YAML 1.2 does (quoted "1e12" stays a string).
_FLOAT_TAG = "tag:yaml.org,2002:float"
_FLOAT_1_2 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_RESOLVERS_1_2 = {  # a deep copy: SafeLoader's own lists stay as they are
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _first in "-+0123456789.":
    _RESOLVERS_1_2.setdefault(_first, []).append((_FLOAT_TAG, _FLOAT_1_2))


# YAML 1.1 (PyYAML) also reads `010` as octal 8, `1:40` as base-60 100, `0b100` as 4 and `1_000`
# as 1000, where YAML 1.2 (which the README promises) reads a decimal 10 or a string. Rather than
# guess which the author meant, the loader refuses those forms; decimals and 0x hex (the same in
# both) are read as usual.
_INT_1_2 = re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$")
_FLOAT_1_1_ONLY = re.compile(r"[_:]")


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    value = str(node.value)
    if not _INT_1_2.match(value):
        digits = value.replace("_", "").lstrip("+-")
        sign = "-" if value.startswith("-") else ""
        hint = f"write {sign}{int(digits)}, not {value}" if digits.isdigit() else "write a decimal"
        raise _YamlRefusedError(
            f"integer {plausible.quoted(value)} has a YAML 1.1 form (leading zero, base 60, "
            f"underscores or 0b) whose meaning differs in YAML 1.2; {hint}",
            node.start_mark,
        )
    return loader.construct_yaml_int(node)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    value = str(node.value)
    if _FLOAT_1_1_ONLY.search(value):
        raise _YamlRefusedError(
            f"number {plausible.quoted(value)} has a YAML 1.1 form (base 60 or underscores) that "
            "YAML 1.2 reads as a string; write a plain decimal",
            node.start_mark,
        )
    return loader.construct_yaml_float(node)


for _loader in _LOADERS:
    _loader.yaml_implicit_resolvers = _RESOLVERS_1_2
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    _loader.add_constructor(_FLOAT_TAG, _construct_float)


def read_yaml(path: Path, what: str, error: type[PlanError] = ConfigError) -> Any:
    """The YAML document in `path` (a bounded read, strict loader), or one line saying why not."""
    return parse_yaml_text(read_text(path, what, error), str(path), error)


def parse_yaml_text(
    text: str, where: str, error: type[PlanError] = ConfigError, loader: type[Any] | None = None
) -> Any:
    """The YAML document in `text` (strict loader; `where` names it in messages, as a path
    does), or one line saying why not. For text that did not come from a file (an upload).
    `loader`: the pure-Python one, for tests (default: libyaml's parser when available)."""
    path = where
    try:
        reader = (loader or _StrictLoader)(text)  # the pure reader refuses a NUL here
    except yaml.YAMLError as exc:
        raise error(_control_character(path, exc)) from None
    try:
        return reader.get_single_data()
    except _YamlRefusedError as exc:
        line = f" line {exc.line}" if exc.line is not None else ""
        raise error(f"{path}:{line}: {exc}") from None
    except yaml.reader.ReaderError as exc:  # libyaml's reader refuses it while parsing
        raise error(_control_character(path, exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        if "maximum nesting depth" in problem:  # libyaml's own limit (1,000) met first
            raise error(
                f"{path}:{line}: nested deeper than {plausible.MAX_YAML_DEPTH} levels"
            ) from None
        raise error(f"{path}:{line}: malformed YAML: {problem}") from None
    except ValueError:  # the only one PyYAML lets through: int()'s 4,300-digit limit
        raise error(f"{path}: malformed YAML: an integer of more than 4,300 digits") from None
    finally:
        if "reader" in locals():
            reader.dispose()


def _control_character(path: str, exc: yaml.YAMLError) -> str:
    position = getattr(exc, "position", None)
    at = f" at character {position:,}" if isinstance(position, int) else ""
    return f"{path}: malformed YAML: a control character{at} (not YAML text)"


def parse(schema: type[M], data: Any, where: str, error: type[PlanError] = ConfigError) -> M:
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
    error: type[PlanError] = ConfigError,
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
    error: type[PlanError] = ProfileError,
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
    error: type[PlanError],
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
