"""`prfaas-plan sweep` (a study over many scenarios, locally or on a Dask cluster, into a Parquet
dataset) and `prfaas-plan sweep-report` (its summary and a figure over two axes)."""

import os
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import (
    DataDirOpt,
    FormatOpt,
    OutputFormat,
    OutputOpt,
    plot_name,
    plot_target,
    source,
)
from prfaas_plan.cli.output import emit
from prfaas_plan.errors import ConfigError

if TYPE_CHECKING:
    from prfaas_plan.sweep.spec import Sweep


@app.command("sweep", cls=CliCommand)
def sweep_command(
    sweep_file: Annotated[
        Path,
        typer.Argument(
            help="Sweep file (YAML, examples/sweep_*.yaml).", callback=source("sweep file")
        ),
    ],
    results: Annotated[
        Path, typer.Argument(help="Results directory: one Parquet file per chunk of scenarios.")
    ],
    workers: Annotated[
        int | None, typer.Option("--workers", help="Local worker processes (default: all cores).")
    ] = None,
    dask_scheduler: Annotated[
        str | None,
        typer.Option(
            "--dask-scheduler",
            help="Run the chunks on an existing Dask distributed cluster (tcp://HOST:PORT).",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the study in RESULTS (same sweep file).")
    ] = False,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Run a command (optimize, evaluate, simulate, sensitivity, procure) over every scenario of a sweep file and
    write one row per scenario, its inputs and every output, as a Parquet dataset."""
    from prfaas_plan.sweep.commands import parameter_names
    from prfaas_plan.sweep.results import prepare
    from prfaas_plan.sweep.run import execute, in_process, on_dask, on_processes
    from prfaas_plan.sweep.spec import load_sweep
    from prfaas_plan.sweep.views import run_json, run_view

    if workers is not None and not 1 <= workers <= 1024:
        raise ConfigError(f"--workers must be in [1, 1024], got {workers}")
    if workers is not None and dask_scheduler is not None:
        raise ConfigError(
            "--workers and --dask-scheduler exclude each other (the cluster has its own)"
        )
    sweep = load_sweep(sweep_file, parameter_names)
    data = str(data_dir) if data_dir else None
    local = workers or os.cpu_count() or 1
    with ExitStack() as stack:
        # the scheduler is reached before the results directory is touched
        if dask_scheduler is not None:
            runner = stack.enter_context(on_dask(sweep, dask_scheduler, data))
        elif local == 1:
            runner = in_process(sweep, data)
        else:
            runner = on_processes(sweep, local, data)
        found = prepare(sweep, results, resume)
        started = time.perf_counter()
        line = _announcement(sweep, None if dask_scheduler is not None else local)
        if line is not None:
            sys.stderr.write(line + "\n")
        with _progress(sweep.generated, logged=line is not None) as step:
            summary = execute(sweep, found, runner, step)
    elapsed = time.perf_counter() - started
    emit(
        run_view(sweep, summary, results, elapsed),
        run_json(sweep, summary, results, elapsed),
        fmt,
        output,
    )


# a study estimated shorter than this is not announced (tests, examples, quick what-ifs)
ANNOUNCE_FROM_S = 10.0
# how often an announced study writes its progress on a stderr that is not a terminal (a log)
LOG_EVERY_S = 30.0


def _announcement(sweep: "Sweep", workers: int | None) -> str | None:
    """One line for stderr before a study estimated at ANNOUNCE_FROM_S or more (sweep/
    estimate.py; None for a shorter or unknown one): its size, the estimate, that it resumes.
    `workers`: local processes, or None on a Dask cluster (its size unknown here)."""
    from prfaas_plan.sweep.estimate import seconds_per_scenario

    per_s = seconds_per_scenario(sweep)
    if per_s is None:
        return None
    scenarios = sweep.generated
    total_s = scenarios * per_s / (workers or 1)
    if total_s < ANNOUNCE_FROM_S:
        return None
    up_to = "up to " if sweep.filters else ""
    where = f"on {workers} worker{'s' if workers != 1 else ''}" if workers else "per worker"
    return (
        f"sweep: {up_to}{scenarios:,} scenarios of {sweep.spec.command}, about "
        f"{_duration(per_s)} each: about {_duration(total_s)} {where} (an estimate); each "
        f"chunk of {sweep.spec.chunk_size:,} is written as it finishes, and --resume continues "
        "an interrupted study"
    )


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _progress(total: int, logged: bool = False):  # type: ignore[no-untyped-def]
    """A rich progress bar on stderr (a terminal only): the sweep's points covered (those its
    filters drop included, so the total is known before the study), scenarios/s and ETA. On a
    stderr that is not a terminal, an announced (`logged`) study writes one line instead at
    most every LOG_EVERY_S: the points covered, the time spent and the time left at that pace."""

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    @contextmanager
    def bar():  # type: ignore[no-untyped-def]
        with Progress(
            TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=Console(stderr=True), transient=True,
            disable=not sys.stderr.isatty(),
        ) as progress:  # fmt: skip
            task = progress.add_task("sweep", total=total, rate="")
            started = time.perf_counter()
            done, covered, logged_at = [0], [0], [started]
            log = logged and not sys.stderr.isatty()

            def step(points: int, scenarios: int) -> None:
                done[0] += scenarios
                covered[0] += points
                now = time.perf_counter()
                rate = done[0] / max(now - started, 1e-9)
                progress.update(task, advance=points, rate=f"{rate:,.0f} scenarios/s")
                if log and now - logged_at[0] >= LOG_EVERY_S and covered[0] < total:
                    logged_at[0] = now
                    left_s = (now - started) * (total - covered[0]) / max(covered[0], 1)
                    sys.stderr.write(
                        f"sweep: {covered[0]:,} of {total:,} points in {_duration(now - started)}"
                        f", about {_duration(left_s)} left\n"
                    )
                    sys.stderr.flush()

            yield step

    return bar()


@app.command("sweep-report", cls=CliCommand)
def sweep_report_command(
    results: Annotated[Path, typer.Argument(help="A results directory written by `sweep`.")],
    group: Annotated[
        str | None,
        typer.Option("--group", help="Axis to group the best plans by (default: first axis)."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Draw --value over --x and --y (.png/.svg/.pdf).",
            callback=plot_target,
            parser=plot_name,
        ),
    ] = None,
    x: Annotated[str | None, typer.Option("--x", help="Axis along x of the figure.")] = None,
    y: Annotated[str | None, typer.Option("--y", help="Axis along y of the figure.")] = None,
    value: Annotated[
        str, typer.Option("--value", help="Output column to draw (mean over other axes).")
    ] = "speedup_vs_homogeneous",
    kind: Annotated[str, typer.Option("--kind", help="heatmap or lines.")] = "heatmap",
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
) -> None:
    """Summarise a sweep's results: failures, best plans per group, where PrfaaS beats
    homogeneous PD and by how much; optionally a heat map or line plot over two axes."""
    from prfaas_plan.sweep.report import grid, summarize
    from prfaas_plan.sweep.views import summary_json, summary_view

    if plot is None:
        unused = [flag for flag, used in (("--x", x is not None), ("--y", y is not None),
                  ("--kind", kind != "heatmap"), ("--value", value != "speedup_vs_homogeneous"))
                  if used]  # fmt: skip
        if unused:
            raise ConfigError(f"{', '.join(unused)} draw the figure: give --plot FILE with them")
    if plot is not None:
        if x is None or y is None:
            raise ConfigError("--plot needs --x and --y (two axes of the sweep)")
        if kind not in ("heatmap", "lines"):
            raise ConfigError(f"--kind must be heatmap or lines, got {kind!r}")
    summary = summarize(results, group)
    if plot is not None and x is not None and y is not None:
        from prfaas_plan.render.plot import plot_over_two_axes

        xs, ys, cells = grid(results, x, y, value)
        plot_over_two_axes(xs, ys, cells, (x, y, value), plot, kind)
    emit(summary_view(summary), summary_json(summary), fmt, output)
