"""Views and JSON of `prfaas-plan simulate` (units converted here only)."""

import dataclasses
from collections.abc import Callable
from typing import Any

from prfaas_plan import __version__, units
from prfaas_plan.render.views import View, fmt, number
from prfaas_plan.sim.stats import LatencyStats, SimulationResult
from prfaas_plan.use_cases.simulate import ComparisonReport, SimulationReport
from prfaas_plan.use_cases.simulation_spec import SimulationRequest


def _stats(s: LatencyStats) -> str:
    return " / ".join(fmt(v, ".2f") for v in (s.p50_s, s.p90_s, s.p99_s))


def simulation_view(report: SimulationReport) -> View:
    runs = report.runs
    columns = [
        f"{r.load_fraction:.0%} of Λ_max" if r.load_fraction is not None else "trace as recorded"
        for r in runs
    ]
    u = report.unloaded

    def row(label: str, get: Callable[[SimulationResult], str]) -> tuple[str, list[str]]:
        return (label, [get(r.result) for r in runs])

    rows = [
        ("offered (req/s)", [fmt(r.result.offered_rate_rps, ".3f") for r in runs]),
        row("throughput (req/s)", lambda s: fmt(s.throughput_rps, ".3f")),
        row("requests: done / in system at end", lambda s: f"{s.counts.completed:,} / {s.counts.in_system:,}"),
        row("offloaded share", lambda s: fmt(s.offload_fraction, ".1%")),
        row("TTFT mean (s)", lambda s: fmt(s.ttft.mean_s, ".2f")),
        row("TTFT P50 / P90 / P99 (s)", lambda s: _stats(s.ttft)),
        ("unloaded TTFT, model: mean, P90 (s)", [f"{u.mean_s:.2f}, {u.p90_s:.2f}"] * len(runs)),
        row("TTFT P90 local / offloaded (s)",
            lambda s: f"{fmt(s.ttft_local.p90_s, '.2f')} / {fmt(s.ttft_offloaded.p90_s, '.2f')}"),
        row("queue wait P90 PrfaaS / PD-P (s)",
            lambda s: f"{fmt(s.prfaas_prefill.wait.p90_s, '.2f')} / {fmt(s.pd_prefill.wait.p90_s, '.2f')}"),
        row("decode-slot wait P90 (s)", lambda s: fmt(s.pd_decode.wait.p90_s, ".2f")),
        row("utilisation PrfaaS / PD-P / PD-D",
            lambda s: " / ".join(fmt(p.utilization, ".0%") for p in (s.prfaas_prefill, s.pd_prefill, s.pd_decode))),
        row("link utilisation", lambda s: fmt(s.link.utilization, ".1%")),
        row("mean queue PrfaaS / PD-P / PD-D",
            lambda s: " / ".join(f"{p.mean_queue_length:.1f}" for p in (s.prfaas_prefill, s.pd_prefill, s.pd_decode))),
        row("PD role conversions; mean N_p / N_d",
            lambda s: f"{s.roles.conversions}; {s.roles.pd_prefill_instances_mean:.2f} / "
                      f"{s.roles.pd_decode_instances_mean:.2f}"),
        row("threshold mean / max (K tokens)",
            lambda s: f"{fmt(s.threshold_mean_tokens, '.1f', units.tokens_to_ktokens)} / "
                      f"{fmt(s.threshold_max_tokens, '.1f', units.tokens_to_ktokens)}"),
    ]  # fmt: skip
    c, spec = report.configuration, report.request
    a, dip = spec.arrivals, spec.stress
    source = f"trace {a.trace}" if a.trace else f"{a.process} arrivals"
    if a.process == "gamma":
        source += f" (CV {a.burst_cv:g})"
    if a.requests is not None:
        size = f"{a.requests:,} requests"
    elif a.duration_s is not None:
        size = f"{a.duration_s:g} s of arrivals"
    else:
        size = f"all {report.runs[0].result.counts.total:,} trace requests"
    notes = [
        f"Simulated plan ({report.plan_mode} mode): {c.prfaas_instances} PrfaaS / "
        f"{c.pd_prefill_instances} PD-P / {c.pd_decode_instances} PD-D at t = "
        f"{units.tokens_to_ktokens(c.threshold_tokens):.2f}K; Λ_max {report.exact_capacity_rps:.3f} req/s "
        f"exact mode ({report.paper_capacity_rps:.3f} paper mode); loads are fractions of the exact figure.",
        f"{source}, {size} per column, seed {a.seed}, policy {spec.policy.kind}"
        + (f", link latency {spec.link_latency_s:g} s" if spec.link_latency_s else "")
        + (f", link at {dip.dip_fraction:.0%} from {dip.dip_start_s:g} s for {dip.dip_duration_s:g} s"
           if dip.dip_start_s is not None and dip.dip_duration_s is not None else "") + ".",
        "TTFT = arrival to prefill done (+ KV transfer when offloaded), queueing included, decode "
        "excluded (decode-slot waits are reported separately). Requests still in the system at "
        "the end are counted, never dropped.",
    ]  # fmt: skip
    z = report.sustainable
    if z is not None:
        notes.insert(1, (
            f"Highest sustainable rate in simulation: {z.rate_rps:.3f} req/s (bracket {z.stable_rps:.3f}–"
            f"{z.unstable_rps:.3f}, {z.requests:,} requests, backlog ≤ {z.backlog_fraction:.1%}): exact-mode "
            f"Λ_max {report.exact_capacity_rps:.3f} is {report.exact_capacity_rps / z.rate_rps - 1:+.2%} from "
            f"it, paper-mode {report.paper_capacity_rps:.3f} is {report.paper_capacity_rps / z.rate_rps - 1:+.2%}."
        ))  # fmt: skip
    title = f"prfaas-plan simulate · {report.problem.scenario.name}"
    return View(title, columns, rows, notes)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "timeline"}  # fmt: skip
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (int, str, bool)) or value is None:
        return value
    return str(value)


def _spec_json(request: SimulationRequest) -> dict[str, Any]:
    """The request as one flat object (keys as the command's options)."""
    a, load, dip = request.arrivals, request.load, request.stress
    flat = {
        "load_fractions": load.fractions, "rate_rps": load.rate_rps, "requests": a.requests,
        "duration_s": a.duration_s, "seed": a.seed, "arrivals": a.process,
        "burst_cv": a.burst_cv, "period_s": a.period_s, "amplitude": a.amplitude,
        "trace": a.trace, "policy": request.policy.kind, "link_latency_s": request.link_latency_s,
        "dip_start_s": dip.dip_start_s, "dip_duration_s": dip.dip_duration_s,
        "dip_fraction": dip.dip_fraction,
    }  # fmt: skip
    return {key: _jsonable(value) for key, value in flat.items()}


def simulation_json(report: SimulationReport) -> dict[str, Any]:
    c = report.configuration
    return {
        "prfaas_plan_version": __version__,
        "scenario": report.problem.scenario.name,
        "plan_mode": str(report.plan_mode),
        "configuration": {
            "prfaas_instances": c.prfaas_instances,
            "pd_prefill_instances": c.pd_prefill_instances,
            "pd_decode_instances": c.pd_decode_instances,
            "threshold_tokens": number(c.threshold_tokens),
        },
        "exact_capacity_rps": report.exact_capacity_rps,
        "paper_capacity_rps": report.paper_capacity_rps,
        "unloaded_ttft": _jsonable(report.unloaded),
        "sustainable": _jsonable(report.sustainable),
        "spec": _spec_json(report.request),
        "runs": [
            {
                "load_fraction": number(r.load_fraction),
                "rate_rps": number(r.rate_rps),
                "result": _jsonable(r.result),
            }
            for r in report.runs
        ],
    }


def comparison_view(report: ComparisonReport) -> View:
    """`prfaas-plan compare-policies`: one row per scenario x policy."""
    c = report.comparison
    rows = []
    for r in c.rows:
        label = f"{r.scenario} · {r.policy}"
        if not r.ran:
            rows.append((label, ["—"] * 8 + [r.note]))
            continue
        rows.append((label, [
            fmt(r.offered_rps, ".3f"), fmt(r.throughput_rps, ".3f"), fmt(r.ttft_mean_s, ".2f"),
            fmt(r.ttft_p90_s, ".2f"), fmt(r.ttft_p99_s, ".2f"), fmt(r.decode_wait_mean_s, ".2f"),
            fmt(r.link_utilization, ".0%"), f"{r.threshold_changes} / {r.conversions}", r.note,
        ]))  # fmt: skip
    columns = [
        "offered (req/s)", "throughput (req/s)", "TTFT mean (s)", "TTFT P90 (s)", "TTFT P99 (s)",
        "decode wait mean (s)", "link load", "t changes / conversions", "note",
    ]  # fmt: skip
    cfg = c.configuration
    notes = [
        f"Plan ({report.plan_mode} mode) {cfg.prfaas_instances} PrfaaS / {cfg.pd_prefill_instances} PD-P / "
        f"{cfg.pd_decode_instances} PD-D at t = {units.tokens_to_ktokens(cfg.threshold_tokens):.2f}K; "
        f"offered {c.offered_rate_rps:.3f} req/s = {c.load_fraction:.0%} of its exact-mode Λ_max "
        f"{c.capacity_rps:.3f} req/s; {c.requests:,} requests per scenario, seed {c.seed}; every "
        "policy replays the same requests.",
        "burst: gamma inter-arrivals (CV 3), measured over the run. bandwidth_dip: the link at 10% "
        "for 30-60% of the run, measured over the dip. output_drift: output lengths x1.6 from "
        "half-way, measured from then on (where re-balancing PD roles matters).",
        "Policies: static t; adaptive (raise t while the link or PrfaaS queue is hot); rebalance "
        "(convert PD instances between prefill and decode, re-optimise t); dual (both); prefix "
        "(prefix-cache-aware, only with a trace carrying hash_ids). The paper gives no trigger "
        "values; these are the simulator's defaults (see prfaas_plan/sim/threshold_policies.py, sim/rebalance.py).",
    ]  # fmt: skip
    return View(
        f"prfaas-plan compare-policies · {report.problem.scenario.name}", columns, rows, notes
    )


def comparison_json(report: ComparisonReport) -> dict[str, Any]:
    c = report.comparison
    return {
        "prfaas_plan_version": __version__,
        "scenario": report.problem.scenario.name,
        "plan_mode": str(report.plan_mode),
        "capacity_rps": c.capacity_rps,
        "load_fraction": c.load_fraction,
        "offered_rps": c.offered_rate_rps,
        "configuration": {
            "prfaas_instances": c.configuration.prfaas_instances,
            "pd_prefill_instances": c.configuration.pd_prefill_instances,
            "pd_decode_instances": c.configuration.pd_decode_instances,
            "threshold_tokens": number(c.configuration.threshold_tokens),
        },
        "stress": {
            "burst": "gamma inter-arrivals, coefficient of variation 3, whole run",
            "bandwidth_dip": "link at 10% of its bandwidth from 30% to 60% of the run, measured over the dip",
            "output_drift": "output lengths x1.6 from half-way, measured from then on",
        },
        "requests": c.requests,
        "seed": c.seed,
        "rows": [_jsonable(r) for r in c.rows],
    }
