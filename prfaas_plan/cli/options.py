"""The options several commands share, the output-format choice, and the parsers of
comma-separated flag values (option types only: no command here)."""

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prfaas_plan.choices import Mode, RangePolicy
from prfaas_plan.errors import ConfigError

if TYPE_CHECKING:
    pass


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    MARKDOWN = "markdown"


ScenarioArg = Annotated[
    Path | None,
    typer.Argument(
        help="Scenario YAML; default: the paper's case study (examples/case_study.yaml)."
    ),
]
ModeOpt = Annotated[
    Mode,
    typer.Option(
        "--mode",
        help="paper: service time at the representative length (as the paper); "
        "exact: conditional mean service time.",
    ),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]


def _output_target(value: Path | None) -> Path | None:
    """--output is checked before any work (inputs/files.py: a regular file or a new path)."""
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "output")
    return value


def plot_target(value: Path | None) -> Path | None:
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "plot_path")
    return value


OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the result to this file (atomically).",
        callback=_output_target,
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Profile/GPU data directory (default: the shipped data/)."),
]
BandwidthOpt = Annotated[
    float | None,
    typer.Option("--bandwidth-gbps", help="Override link.bandwidth_gbps (10^9 bit/s)."),
]
RangeOpt = Annotated[
    RangePolicy,
    typer.Option(
        "--out-of-range",
        help="Lengths outside a profile table: extrapolate the fit (reported) or refuse.",
    ),
]


def percentile(text: str) -> int | str:
    """`--ttft-percentile`: 'mean' or a whole percentile; anything else is passed on as given
    (the library says what it accepts)."""
    return int(text) if text in ("50", "90", "99") else text


def int_list(text: str, flag: str) -> list[float]:
    try:
        return [float(int(part)) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(
            f"{flag}: expected comma-separated whole token counts, got {text!r}"
        ) from None


def float_list(text: str, flag: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{flag}: expected comma-separated numbers, got {text!r}") from None
