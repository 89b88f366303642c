"""Views and JSON for the catalog commands `kv` and `egress` (units converted here only)."""

import numpy as np

from prfaas_plan import __version__, units
from prfaas_plan.analytic.egress import Egress, EgressReport
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.use_cases.check import CheckReport
from prfaas_plan.use_cases.kv import KvReport


def kv_view(report: KvReport) -> View:
    lengths = [f"{t:g}" for t in report.lengths_tokens]
    longest = lengths[-1]
    rows = []
    for m in report.models:
        phi = m.kv_throughput_bytes_per_s
        table = m.table_kv_cache_bytes
        fixed = (
            m.footprint.fixed_state_bytes
            + m.footprint.swa_bytes_per_token * m.footprint.swa_window_tokens
        )
        deviation = "—" if table is None else f"{np.max(np.abs(table / m.kv_cache_bytes - 1)):.1%}"
        rows.append((m.name, [
            fmt(m.footprint.per_token_bytes, ",.0f"),
            fmt(fixed, ".1f", units.bytes_to_mib),
            *(fmt(float(v), ",.0f", units.bytes_to_mib) for v in m.kv_cache_bytes),
            *(["—"] * len(lengths) if phi is None
              else [fmt(float(v), ".2f", units.bytes_per_s_to_gbps) for v in phi]),
            fmt(float(m.full_attention_kv_cache_bytes[-1]), ",.0f", units.bytes_to_mib),
            f"{m.full_attention_kv_cache_bytes[-1] / m.kv_cache_bytes[-1]:.1f}×",
            deviation,
        ]))  # fmt: skip
    columns = [
        "KV/token (B)", "fixed (MiB)",
        *(f"S_kv {t} (MiB)" for t in lengths),
        *(f"Φ_kv {t} (Gbps)" for t in lengths),
        f"all-full S_kv {longest} (MiB)", "hybrid saving", "table vs arch.",
    ]  # fmt: skip
    notes = [
        f"KV {report.kv_dtype}, recurrent state {report.state_dtype}; lengths in tokens; MiB = 2^20 "
        "bytes, Gbps = 10^9 bit/s. fixed = linear-attention recurrent + conv state, or the SWA window.",
        f"Φ_kv = S_kv / T_prefill on {report.gpus_per_instance} × {report.gpu.upper()} "
        f"(data/profiles/<model>/prefill/{report.gpu}-x{report.gpus_per_instance}/); — where none exists.",
        "all-full: the same depth with every layer full attention (the hybrid design's saving at "
        f"{longest} tokens). table vs arch.: largest gap between the model's KV table and the "
        "architecture estimate.",
    ]
    notes += [f"{m.name}: {m.spec.attention}; inferred: {', '.join(m.spec.inferred)}"
              for m in report.models if m.spec.inferred]  # fmt: skip
    notes += [f"{m.name}: {'; '.join(m.extrapolated)}." for m in report.models if m.extrapolated]
    notes += [
        f"{m.name}: Φ_kv from the degree-{m.prefill_latency.degree} fit of {m.prefill_latency.source} "
        f"(max residual {m.prefill_latency.max_relative_residual:.1%}) and the "
        + ("KV table" if m.table_kv_cache_bytes is not None else "architecture S_kv")
        for m in report.models
        if m.prefill_latency is not None
    ]
    return View("prfaas-plan kv · KV footprint from architecture", columns, rows, notes)


def kv_json(report: KvReport) -> Document:
    out = []
    for m in report.models:
        phi = m.kv_throughput_bytes_per_s
        out.append({
            "model": m.name,
            "attention": m.spec.attention,
            "layer_pattern": m.spec.layer_pattern,
            "inferred": list(m.spec.inferred),
            "kv_bytes_per_token": m.footprint.per_token_bytes,
            "fixed_state_bytes": m.footprint.fixed_state_bytes,
            "swa_bytes_per_token": m.footprint.swa_bytes_per_token,
            "swa_window_tokens": m.footprint.swa_window_tokens,
            "kv_cache_bytes": m.kv_cache_bytes.tolist(),
            "table_kv_cache_bytes": None if m.table_kv_cache_bytes is None else m.table_kv_cache_bytes.tolist(),
            "table": m.table_source,
            "kv_throughput_bytes_per_s": None if phi is None else phi.tolist(),
            "extrapolated": m.extrapolated,
            "prefill_table": None if m.prefill_latency is None else m.prefill_latency.source,
            "all_full_attention_kv_bytes_per_token": m.full_attention.per_token_bytes,
            "all_full_attention_kv_cache_bytes": m.full_attention_kv_cache_bytes.tolist(),
        })  # fmt: skip
    return {
        "prfaas_plan_version": __version__,
        "lengths_tokens": report.lengths_tokens.tolist(),
        "kv_dtype": report.kv_dtype,
        "state_dtype": report.state_dtype,
        "gpu": report.gpu,
        "gpus_per_instance": report.gpus_per_instance,
        "models": out,
    }


def egress_view(report: EgressReport) -> View:
    def cells(e: Egress | None) -> list[str]:
        if e is None:
            return ["—"] * 7
        return [
            fmt(e.mean_offloaded_tokens, ".1f", units.tokens_to_ktokens),
            fmt(e.kv_throughput_bytes_per_s, ".2f", units.bytes_per_s_to_gbps),
            fmt(e.required_bytes_per_s, ",.1f", units.bytes_per_s_to_gbps),
            fmt(e.link_bandwidth_bytes_per_s, "g", units.bytes_per_s_to_gbps),
            f"{e.link_utilization:.0%}",
            "yes" if e.fits else "no",
            f"{e.max_instances_on_link * report.gpus_per_instance:,}",
        ]

    columns = [
        "L_avg (K tokens)", "Φ_kv per instance (Gbps)", "egress needed (Gbps)", "link (Gbps)",
        "link load", "fits", f"max {report.gpu.upper()} GPUs on link",
    ]  # fmt: skip
    rows = [(model, cells(e)) for model, e, _ in report.rows]
    notes = [
        f"B_out = (N/P) · Φ_kv(L_avg) with N = {report.prfaas_gpus} {report.gpu.upper()} GPUs, "
        f"P = {report.gpus_per_instance} per instance, every instance prefilling back to back "
        f"(mode {report.mode}). Gbps = 10^9 bit/s.",
    ]
    if report.threshold_tokens is not None:
        notes.append(
            f"L_avg = E[L | L > t] at t = {units.tokens_to_ktokens(report.threshold_tokens):.2f}K tokens."
        )
        t = report.smallest_fitting_threshold_tokens
        notes.append(
            "No threshold lets a saturated cluster fit the link." if t is None
            else "Every threshold fits the link (even offloading everything)." if t == 0
            else f"Smallest threshold that fits the link: t = {units.tokens_to_ktokens(t):.2f}K tokens."
        )  # fmt: skip
    notes += [f"{model}: {note}." for model, e, note in report.rows if note]
    return View(f"prfaas-plan egress · {report.title}", columns, rows, notes)


def egress_json(report: EgressReport) -> Document:
    def row(model: str, e: Egress | None, note: str) -> Document:
        if e is None:
            return {"model": model, "note": note}
        return {
            "model": model,
            "instances": e.instances,
            "mean_offloaded_tokens": e.mean_offloaded_tokens,
            "kv_throughput_bytes_per_s": e.kv_throughput_bytes_per_s,
            "required_bytes_per_s": e.required_bytes_per_s,
            "link_bandwidth_bytes_per_s": e.link_bandwidth_bytes_per_s,
            "link_utilization": e.link_utilization,
            "fits": e.fits,
            "max_gpus_on_link": e.max_instances_on_link * report.gpus_per_instance,
        }

    return {
        "prfaas_plan_version": __version__,
        "gpu": report.gpu,
        "gpus_per_instance": report.gpus_per_instance,
        "prfaas_gpus": report.prfaas_gpus,
        "mode": str(report.mode),
        "threshold_tokens": number(report.threshold_tokens),
        "smallest_fitting_threshold_tokens": number(report.smallest_fitting_threshold_tokens),
        "models": [row(*r) for r in report.rows],
    }


def check_view(report: CheckReport) -> View:
    rows = [
        (d.scenario, [d.key, fmt(d.expected, ",.6g", none="(none)"), fmt(d.found, ",.6g", none="(none)"),
                      fmt(d.change, "+.2%")])
        for d in report.drifts
    ]  # fmt: skip
    verdict = "updated" if report.updated else ("PASS" if report.ok else "FAIL")
    notes = [
        f"{report.tables_checked} files and tables checked in {report.data_dir}; golden scenarios: "
        f"{', '.join(report.scenarios)}; expectations: {report.expectations_file}.",
    ]
    notes += [f"{f.where}: {f.message}" if f.where else f.message for f in report.findings]
    notes += [
        f"{name} moved; inputs changed since the expectations were written: "
        + (
            ", ".join(files)
            if files
            else "none (the code changed, or the expectations were edited)"
        )
        for name, files in report.changed_inputs.items()
    ]
    if report.update_refused:
        notes.append(
            "--update refused: tables are broken (above); the expectations were not rewritten."
        )
    if report.updated:
        notes.append(
            "Expectations rewritten from the current data (--update); review and commit the diff."
        )
    elif not rows and report.expectations_present:
        rows = [(name, ["every output", "—", "—", "within tolerance"]) for name in report.planned]
    title = f"prfaas-plan check · {verdict} · {len(report.findings)} table problems, {len(report.drifts)} moved outputs"
    return View(title, ["output", "expected", "found", "change"], rows, notes)


def check_json(report: CheckReport) -> Document:
    return {
        "prfaas_plan_version": __version__,
        "ok": report.ok,
        "updated": report.updated,
        "data_dir": report.data_dir,
        "tables_checked": report.tables_checked,
        "expectations_file": report.expectations_file,
        "scenarios": list(report.scenarios),
        "update_refused": report.update_refused,
        "changed_inputs": {name: list(files) for name, files in report.changed_inputs.items()},
        "tables": list(report.tables),
        "findings": [
            {"where": f.where, "message": f.message, "case": f.case} for f in report.findings
        ],
        "moved": [
            {
                "scenario": d.scenario,
                "key": d.key,
                "expected": number(d.expected),
                "found": number(d.found),
                "relative_change": number(d.change),
            }
            for d in report.drifts
        ],
    }
