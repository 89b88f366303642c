"""Rendering shared by every command: a `View` (title, columns, labelled rows, notes) drawn as a
rich table or Markdown, and JSON serialisation (non-finite numbers become null)."""

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

Document = dict[str, Any]  # a JSON object


@dataclass(frozen=True)
class View:
    title: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]  # (row label with unit, one cell per column)
    notes: list[str]


def number(x: float | None) -> float | None:
    """A JSON number, or None for values that do not exist (nan, inf)."""
    if type(x) is float:  # the common case first (a document has ~90): inf - inf is nan
        return x if x - x == 0 else None
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def fmt(
    x: float | None,
    spec: str,
    scale: Callable[[float], float] | None = None,
    none: str = "—",
) -> str:
    """`x` formatted by `spec` (after `scale`), or `none` for a value that does not exist."""
    if x is None or not math.isfinite(x):
        return none
    return format(scale(x) if scale else x, spec)


def dumps(document: Document, *, compact: bool = False) -> str:
    """The document as JSON text: indented for people (the CLI), or `compact` for programs
    (the HTTP API: json's C encoder, a third of the time; the indented form is Python code)."""
    if compact:
        return json.dumps(document, allow_nan=False, separators=(",", ":")) + "\n"
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def _cell(text: str) -> str:
    """A table cell's text: a "|" inside it escaped, so that it cannot split the cell."""
    return text.replace("|", "\\|")


def render_markdown(v: View) -> str:
    lines = [
        f"## {v.title}",
        "",
        "| | " + " | ".join(map(_cell, v.columns)) + " |",
        "|---|" + "---|" * len(v.columns),
    ]
    lines += [
        f"| {_cell(label)} | " + " | ".join(map(_cell, cells)) + " |" for label, cells in v.rows
    ]
    lines += [""] + [f"- {n}" for n in v.notes]
    return "\n".join(lines) + "\n"


FILE_TABLE_WIDTH = 130  # a table written to a file is not bound by a terminal


def render_text(v: View, document: Document, fmt: str) -> str:
    """The result as text in `fmt` ('table', 'json' or 'markdown'); a table without colours."""
    if fmt == "table":
        import io

        from rich.console import Console

        buffer = io.StringIO()
        render_table(v, Console(file=buffer, width=FILE_TABLE_WIDTH, color_system=None))
        return buffer.getvalue()
    if fmt == "json":
        return dumps(document)
    return render_markdown(v)


def render_table(v: View, console: "Console") -> None:
    from rich.table import Table

    # never squeeze numbers into ellipses: cells keep their width (headers may wrap at
    # spaces), and a table wider than the terminal wraps instead
    headers = [max(header.split(), key=len, default="") for header in ["", *v.columns]]
    cells = [[label, *row] for label, row in v.rows]
    widths = [max(len(c) for c in column) for column in zip(headers, *cells, strict=True)]
    table = Table(title=v.title, title_justify="left")
    table.add_column("", style="bold", min_width=widths[0])
    for column, width in zip(v.columns, widths[1:], strict=True):
        table.add_column(column, justify="right", min_width=width)
    for label, row in v.rows:
        table.add_row(label, *row)
    from rich.measure import Measurement

    needed = Measurement.get(console, console.options.update(max_width=10_000), table).minimum
    console.width = max(console.width, needed)
    console.print(table, crop=False)
    for n in v.notes:
        console.print(f"• {n}", highlight=False, soft_wrap=False)
