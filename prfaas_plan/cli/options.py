"""The options several commands share, the output-format choice, and the parsers of
comma-separated flag values (option types only: no command here)."""

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from prfaas_plan.choices import Mode, RangePolicy
from prfaas_plan.errors import ConfigError
from prfaas_plan.use_cases.field_docs import SHARED


class Sets:
    """Annotated metadata on an option: the library names it sets besides its own parameter
    name (`Annotated[int, typer.Option("--requests"), Sets("arrivals.requests")]`). An error
    naming one of them is shown with the option's flag (cli/failures.py derives the table)."""

    def __init__(self, *names: str) -> None:
        self.names = names


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"


def source(parameter: str) -> Callable[[Any], Any]:
    """A callback refusing an input path (or list of paths) the system cannot look up, as one
    line naming `parameter` (inputs/files.py check_source); the file's reader does the rest."""

    def check(value: Any) -> Any:
        from prfaas_plan.inputs.files import check_source

        for path in value if isinstance(value, list) else [value]:
            if path is not None:
                check_source(path, parameter)
        return value

    return check


ScenarioArg = Annotated[
    Path | None,
    typer.Argument(
        help="Scenario YAML; default: the paper's case study (examples/case_study.yaml).",
        callback=source("scenario file"),
    ),
]
# an option that sets a request field takes the field's meaning (use_cases/field_docs.py) as its
# help and None as its default: the request's default stands (stated in the meaning)
ModeOpt = Annotated[Mode | None, typer.Option("--mode", help=SHARED["mode"])]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]


def _output_name(text: str) -> Path:
    """--output as given (an empty name or a trailing slash refused: inputs/files.py)."""
    from prfaas_plan.inputs.files import check_name

    return check_name(text, "output")


def plot_name(text: str) -> Path:
    from prfaas_plan.inputs.files import check_name

    return check_name(text, "plot")


def _output_target(value: Path | None) -> Path | None:
    """--output is checked before any work (inputs/files.py: a regular file or a new path)."""
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "output")
    return value


def plot_target(value: Path | None) -> Path | None:
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "plot")
    return value


OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the result to this file (atomically).",
        callback=_output_target,
        parser=_output_name,
    ),
]

DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Profile/GPU data directory (default: the shipped data/).",
        callback=source("data_dir"),
    ),
]
BandwidthOpt = Annotated[
    float | None,
    typer.Option("--bandwidth-gbps", help="Override link.bandwidth_gbps (10^9 bit/s)."),
]
RangeOpt = Annotated[
    RangePolicy | None, typer.Option("--out-of-range", help=SHARED["out_of_range"])
]


def percentile(text: str) -> int | str:
    """`--ttft-percentile`: 'mean' or a whole percentile; anything else is passed on as given
    (the library says what it accepts)."""
    return int(text) if text in ("50", "90", "99") else text


TtftTargetOpt = Annotated[
    float | None, typer.Option("--ttft-target-s", help=SHARED["ttft_target_s"])
]
TtftPercentileOpt = Annotated[
    str | None, typer.Option("--ttft-percentile", help=SHARED["ttft_percentile"])
]
TtftLoadRpsOpt = Annotated[
    float | None, typer.Option("--ttft-load-rps", help=SHARED["ttft_load_rps"])
]


def _items(text: str, flag: str, what: str) -> list[str]:
    """The comma-separated items of `text`, none of them empty (`0.5,,0.8` is a typo)."""
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise ConfigError(f"{flag}: expected comma-separated {what} with none empty, got {text!r}")
    return parts


def token_counts(text: str, flag: str) -> list[float]:
    """Whole token counts (`--lengths`), as floats."""
    parts = _items(text, flag, "whole token counts")
    try:
        return [float(int(part)) for part in parts]
    except ValueError:
        raise ConfigError(
            f"{flag}: expected comma-separated whole token counts, got {text!r}"
        ) from None


def float_list(text: str, flag: str) -> tuple[float, ...]:
    parts = _items(text, flag, "numbers")
    try:
        return tuple(float(part) for part in parts)
    except ValueError:
        raise ConfigError(f"{flag}: expected comma-separated numbers, got {text!r}") from None


def given(**values: float | None) -> dict[str, float]:
    """The options given (not None), as keyword arguments: a spec's own default stands for the
    others, so each default is defined once (use_cases/simulation_spec.py)."""
    return {name: value for name, value in values.items() if value is not None}


def same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def check_distinct_outputs(output: Path | None, plot: Path | None, **others: Path | None) -> None:
    """No two of --output, --plot (and a command's other output flags, by name) naming one
    file: one result would overwrite another."""
    given = [(name, path) for name, path in {"output": output, "plot": plot, **others}.items()
             if path is not None]  # fmt: skip
    for i, (name, path) in enumerate(given):
        for other, other_path in given[i + 1 :]:
            if same_file(path, other_path):
                raise ConfigError(
                    f"--{name} and --{other} name the same file ({path}): one result would "
                    "overwrite the other; give two file names"
                )
