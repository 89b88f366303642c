"""What a command does around its use-case: load the scenario, show a spinner or progress bar on
stderr, and write the result (a view to stdout, or a document to --output, atomically)."""

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.scenario import Problem
    from prfaas_plan.render.views import Document, View

import errno

from prfaas_plan.cli.options import OutputFormat, same_file
from prfaas_plan.errors import ConfigError

# the files the running command reads as its inputs (a scenario, benchmark results): --output
# must not replace one. Cleared as each command starts (cli/failures.py CliCommand)
INPUTS: list[Path] = []


def note_inputs(*paths: Path | None) -> None:
    """Files the running command reads: `emit` refuses to write its result over one."""
    INPUTS.extend(p for p in paths if p is not None)


def guard_output(output: Path | None) -> None:
    """Refuse an --output that names one of the command's inputs read so far (a command with
    side effects calls this before them; `emit` again before writing)."""
    if output is not None:
        for source in INPUTS:
            if same_file(output, source):
                raise ConfigError(
                    f"--output {output} is an input of this command: writing the result there "
                    "would replace it; give another file name"
                )


def load_problem(
    scenario: Path | None, data_dir: Path | None, bandwidth_gbps: float | None
) -> "tuple[Problem, Catalog]":
    """The scenario's problem (`bandwidth_gbps` overrides link.bandwidth_gbps), and the
    catalog it was read against, for the command's use-case."""
    from prfaas_plan.inputs.scenario import open_problem_and_catalog

    note_inputs(scenario)
    return open_problem_and_catalog(scenario, data_dir, bandwidth_gbps)


def emit(view: "View", document: "Document", fmt: OutputFormat, output: Path | None) -> None:
    """Write a result: `view` (views.View) for table/Markdown, `document` for JSON; never over
    one of the command's inputs."""
    from prfaas_plan.render import views

    guard_output(output)

    if output is None:
        with _stdout_errors():
            if fmt is OutputFormat.TABLE:
                from rich.console import Console

                views.render_table(view, Console())
            else:
                sys.stdout.write(views.render_text(view, document, fmt))
            sys.stdout.flush()
        return
    from prfaas_plan.inputs.files import write_atomically, write_text

    text = views.render_text(view, document, fmt)
    write_atomically(output, lambda tmp: write_text(tmp, text), "output")


@contextmanager
def _stdout_errors() -> Iterator[None]:
    """A failing write to stdout (a full device, ...) as one line; a closed pipe stays typer's
    (exit 1, silent). The unwritable rest is dropped so that Python's exit does not retry it."""
    import os

    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        from prfaas_plan.inputs.files import write_error

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # no file descriptor (typer's CliRunner): nothing is retried
        raise write_error("the result", exc, "stdout") from None


def spinner(show: bool, label: str) -> AbstractContextManager[object]:
    """A rich status spinner on stderr (for a terminal table), or nothing."""
    if not show:
        return nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(label)


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[float], None]]:
    """A rich progress bar on stderr (only on a terminal); yields a callback taking 0..1."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(label), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty(),
    ) as bar:  # fmt: skip
        task = bar.add_task(label, total=1.0)
        yield lambda done: bar.update(task, completed=done)
