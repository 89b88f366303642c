"""Views and JSON of `prfaas-plan import-profile`: the rows written, what was used and dropped
(units converted here only)."""

from prfaas_plan import __version__
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.use_cases.import_profile import ImportReport


def import_view(report: ImportReport) -> View:
    rows = []
    for written in report.tables:
        t = written.table
        key, value = t.values[0], t.values[-1]
        context = t.values[1] if len(t.columns) == 3 else None
        for i in range(key.size):
            label = (
                f"{t.kind} · {key[i]:,.0f} tokens"
                if t.kind == "prefill"
                else f"{t.kind} · batch {key[i]:g}"
                + (f" · context {context[i]:,.0f}" if context is not None else "")
            )
            step = (
                fmt(float(value[i]), ".4f")
                if t.kind == "prefill"
                else fmt(float(value[i]) * 1e3, ".2f")
            )
            rows.append((label, [step if t.kind == "prefill" else "—",
                                 step if t.kind == "decode" else "—", f"{int(t.requests[i]):,}"]))  # fmt: skip
    notes = []
    if report.initialised:
        notes.append(
            f"{report.data_dir} was new: initialised from the shipped data (GPUs, profiles, golden expectations)."
        )
    for written in report.tables:
        t = written.table
        notes.append(
            f"Wrote {written.path} and meta.yaml (provenance {report.provenance}): {t.method}"
        )
        if written.fit_residual is not None:
            notes.append(
                f"Quadratic fit of the prefill table: max residual {written.fit_residual:.2%}."
            )
        notes += list(t.notes)
    notes += [f"{s.path}: sha256 {s.sha256}" for s in report.sources]
    title = (
        f"prfaas-plan import-profile · {report.format} · {report.model} on "
        f"{report.gpu}-x{report.gpus_per_instance}"
    )
    return View(title, ["prefill latency (s)", "decode step (ms)", "samples"], rows, notes)


def import_json(report: ImportReport) -> Document:
    return {
        "prfaas_plan_version": __version__,
        "format": report.format,
        "model": report.model,
        "gpu": report.gpu,
        "gpus_per_instance": report.gpus_per_instance,
        "data_dir": str(report.data_dir),
        "initialised_from_shipped_data": report.initialised,
        "provenance": report.provenance,
        "tables": [
            {
                "kind": w.table.kind,
                "path": str(w.path),
                "columns": list(w.table.columns),
                "rows": [
                    [number(float(v)) for v in row] for row in zip(*w.table.values, strict=True)
                ],
                "samples_per_row": [int(n) for n in w.table.requests],
                "fit_max_relative_residual": number(w.fit_residual),
                "method": w.table.method,
                "notes": list(w.table.notes),
            }
            for w in report.tables
        ],
        "source_files": [{"file": str(s.path), "sha256": s.sha256} for s in report.sources],
    }
