"""The views of `sweep` (what ran, how fast, where the dataset is) and `sweep-report`."""

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from prfaas_plan.render.views import Document, View, fmt

if TYPE_CHECKING:
    from prfaas_plan.sweep.report import SweepSummary
    from prfaas_plan.sweep.results import RunSummary
    from prfaas_plan.sweep.spec import Sweep


def run_json(sweep: "Sweep", summary: "RunSummary", results: Path, elapsed_s: float) -> Document:
    ran = summary.scenarios_run
    return {
        "sweep": sweep.spec.name,
        "command": sweep.spec.command,
        "results": str(results),
        "scenarios": summary.scenarios,
        "chunks": summary.chunks,
        "chunks_resumed": summary.chunks_resumed,
        "chunks_rerun": summary.chunks_rerun,
        "scenarios_run": ran,
        "elapsed_s": elapsed_s,
        "scenarios_per_s": ran / elapsed_s if elapsed_s > 0 else None,
    }


def run_view(sweep: "Sweep", summary: "RunSummary", results: Path, elapsed_s: float) -> View:
    d = run_json(sweep, summary, results, elapsed_s)
    notes = [f"Results: {results}/chunk-*.parquet (one row per scenario); "
             f"`prfaas-plan sweep-report {results}` summarises them."]  # fmt: skip
    if summary.chunks_rerun:
        notes.append(
            f"{summary.chunks_rerun} chunk file(s) on disk did not read back as their chunk "
            "(truncated, damaged or another study's): rerun and replaced."
        )
    return View(
        title=f"prfaas-plan sweep · {sweep.spec.name} · {sweep.spec.command}",
        columns=["value"],
        rows=[
            ("scenarios", [f"{d['scenarios']:,}"]),
            ("chunks (resumed, rerun)",
             [f"{d['chunks']} ({d['chunks_resumed']}, {d['chunks_rerun']})"]),
            ("scenarios run", [f"{d['scenarios_run']:,}"]),
            ("elapsed (s)", [f"{elapsed_s:.1f}"]),
            ("scenarios/s", [fmt(d["scenarios_per_s"], ",.0f")]),
        ],
        notes=notes,
    )  # fmt: skip


def summary_json(s: "SweepSummary") -> Document:
    return asdict(s)


def summary_view(s: "SweepSummary") -> View:
    rows = [
        ("scenarios", [f"{s.scenarios:,}", "", "", ""]),
        ("failed", [f"{s.failed:,}", ", ".join(f"{k}: {v}" for k, v in s.errors.items()), "", ""]),
    ]
    if s.beats is not None:
        rows.append((
            "PrfaaS beats homogeneous",
            [f"{s.beats:,}", f"median {fmt(s.speedup_median, '.2f')}×",
             f"max {fmt(s.speedup_max, '.2f')}×", ""],
        ))  # fmt: skip
    for best in s.best:
        key = best.get(f"axis.{s.group_axis}")
        others = ", ".join(
            f"{k.removeprefix('axis.')}={v:g}"
            if isinstance(v, int | float)
            else f"{k.removeprefix('axis.')}={v}"
            for k, v in best.items()
            if k.startswith("axis.") and k != f"axis.{s.group_axis}"
        )
        rows.append((
            f"best at {s.group_axis} = {key}",
            [fmt(best.get("plan.throughput_rps.system"), ".3f"),
             fmt(best.get("speedup_vs_homogeneous"), ".2f") + "×",
             fmt(best.get("plan.threshold_tokens"), ",.0f"), others],
        ))  # fmt: skip
    return View(
        title=f"prfaas-plan sweep-report · {s.results}",
        columns=["count / Λ_max (req/s)", "detail / vs homogeneous", "max / t (tokens)", "where"],
        rows=rows,
        notes=["best: the scenario with the highest plan Λ_max for each value of the group axis."],
    )
