"""Render planner results: rich table (terminal), Markdown, and JSON (the machine contract).

JSON is SI throughout with the unit in every key (`_s`, `_bytes`, `_bytes_per_s`, `_rps`,
`_tokens`); values that do not exist (e.g. l_long when nothing is offloaded) are null.
The table and Markdown views convert at this edge only: K tokens, Gbps, MiB.
"""

import math
from collections.abc import Callable

from prfaas_plan import __version__, units
from prfaas_plan.analytic.capacity import Evaluation
from prfaas_plan.analytic.ttft import TtftSummary
from prfaas_plan.render.cost import (
    cost_notes,
    cost_rows,
    deployment_cost_json,
    plan_cost_json,
    prices_json,
)
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.use_cases.plan import Deployment, EvaluationReport, PlanReport, RangeNote

TTFT_NOTE = (
    "TTFT is unloaded: own prefill (+ KV transfer if offloaded), no queueing, no decode step."
)
DEPLOYMENT_TITLES = {
    "prfaas_pd": "PrfaaS-PD (plan)",
    "homogeneous_pd": "Homogeneous PD",
    "naive_heterogeneous": "Naive heterogeneous",
    "evaluated": "Configuration",
}


# ---------------------------------------------------------------- JSON


def _ttft_json(t: TtftSummary) -> Document:
    return {
        "mean_s": number(t.mean_s),
        "p50_s": number(t.p50_s),
        "p90_s": number(t.p90_s),
        "p99_s": number(t.p99_s),
        "local_mean_s": number(t.local_mean_s),
        "offloaded_mean_s": number(t.offloaded_mean_s),
        "queueing_included": False,
    }


def _evaluation_json(e: Evaluation) -> Document:
    c, th = e.configuration, e.throughput
    return {
        "mode": str(e.mode),
        "prfaas_instances": c.prfaas_instances,
        "pd_prefill_instances": c.pd_prefill_instances,
        "pd_decode_instances": c.pd_decode_instances,
        "threshold_tokens": number(c.threshold_tokens),
        "offload_fraction": e.offload_fraction,
        "long_mean_tokens": number(e.long_mean_tokens),
        "short_mean_tokens": number(e.short_mean_tokens),
        "prfaas_service_time_s": number(e.prfaas_service_time_s),
        "pd_prefill_service_time_s": number(e.pd_prefill_service_time_s),
        "throughput_rps": {
            "prfaas": number(th.prfaas_rps),
            "prfaas_compute": number(th.prfaas_compute_rps),
            "prfaas_link": number(th.prfaas_link_rps),
            "pd_prefill": number(th.pd_prefill_rps),
            "pd_decode": number(th.pd_decode_rps),
            "system": number(e.system_throughput_rps),
        },
        "bounds": [str(b) for b in e.bounds],
        "kv_egress_bytes_per_s": e.kv_egress_bytes_per_s,
        "link_bandwidth_bytes_per_s": e.link_bandwidth_bytes_per_s,
        "link_utilization": e.link_utilization,
    }


def _deployment_json(d: Deployment) -> Document:
    out: Document = {
        "prfaas_gpus": d.prfaas_gpus,
        "pd_gpus": d.pd_gpus,
        **_evaluation_json(d.evaluation),
        "ttft": _ttft_json(d.ttft),
    }
    if d.cost is not None:  # only when prices are available
        out["cost"] = deployment_cost_json(d.cost)
    return out


def _add_plan_cost(out: Document, report: PlanReport | EvaluationReport, key: str) -> Document:
    """The priced deployment's `cost` block gains the equal-cost comparison."""
    if report.plan_cost is not None:
        deployment = report.plan if isinstance(report, PlanReport) else report.deployment
        rps = deployment.evaluation.system_throughput_rps
        block, inputs = out[key], out["inputs"]
        assert isinstance(block, dict) and isinstance(inputs, dict)
        block["cost"] = plan_cost_json(report.plan_cost, rps)
        inputs["prices"] = prices_json(report.plan_cost.pricing)
    return out


def _range_json(notes: tuple[RangeNote, ...]) -> list[Document]:
    return [
        {
            "tables": [c.source for c in n.curves],
            "table_min_tokens": n.table_min_tokens,
            "table_max_tokens": n.table_max_tokens,
            "fraction_below": n.fraction_below,
            "fraction_above": n.fraction_above,
            "policy": "extrapolate",
        }
        for n in notes
    ]


def _inputs_json(report: PlanReport | EvaluationReport) -> Document:
    p = report.problem
    s = p.system
    curves = {
        "prfaas_prefill_latency": s.prfaas_prefill_latency,
        "pd_prefill_latency": s.pd_prefill_latency,
        "kv_cache_size": s.kv_cache_size,
    }
    return {
        "scenario": p.scenario.name,
        "scenario_file": p.source,
        "model": p.scenario.model,
        "workload": p.workload.describe(),
        "mean_input_tokens": p.workload.mean_tokens,
        "output_tokens": s.output_tokens,
        "link_bandwidth_bytes_per_s": s.link_bandwidth_bytes_per_s,
        "decode": {
            "slo_tokens_per_s": p.scenario.slo.decode_tokens_per_s,
            "batch_size": s.decode.batch_size,
            "step_latency_s": s.decode.step_latency_s,
            "throughput_rps_per_instance": s.decode_rps_per_instance,
            "table": s.decode.source,
        },
        "profiles": {
            name: {
                "table": c.source,
                "provenance": c.provenance,
                "representation": f"least-squares polynomial, degree {c.degree}",
                "coefficients_ascending": list(c.coefficients),
                "max_relative_residual": c.max_relative_residual,
                "table_min_tokens": c.table_min_tokens,
                "table_max_tokens": c.table_max_tokens,
            }
            for name, c in curves.items()
        },
        "out_of_range": _range_json(report.range_notes),
    }


def _ttft_constraint_json(report: PlanReport) -> Document | None:
    t, q = report.ttft_target, report.loaded_ttft
    if t is None or q is None:
        return None
    return {
        "target_s": t.target_s,
        "percentile": str(t.percentile),
        "load_rps": q.arrival_rate_rps,
        "stable": q.stable,
        "ttft_under_load": {
            "mean_s": number(q.mean_s), "p50_s": number(q.p50_s), "p90_s": number(q.p90_s),
            "p99_s": number(q.p99_s), "queueing_included": True,
        },
        "utilization": {
            "prfaas_prefill": q.prfaas_prefill.utilization, "pd_prefill": q.pd_prefill.utilization,
            "pd_decode": q.pd_decode.utilization, "link": q.link.utilization,
        },
        "mean_wait_s": {"prfaas_prefill": number(q.prfaas_prefill.mean_wait_s),
                        "pd_prefill": number(q.pd_prefill.mean_wait_s)},
        "approximation": "M/G/c prefill pools (Allen-Cunneen), M/G/1 processor-sharing link",
    }  # fmt: skip


def plan_to_json(report: PlanReport) -> Document:
    m = report.modes
    out: Document = {
        "prfaas_plan_version": __version__,
        "mode": str(report.mode),
        "inputs": _inputs_json(report),
        "plan": _deployment_json(report.plan),
        "baselines": {
            "homogeneous_pd": _deployment_json(report.homogeneous),
            "naive_heterogeneous": _deployment_json(report.naive),
        },
        "speedup_vs_homogeneous": number(report.speedup_vs_homogeneous),
        "speedup_vs_naive_heterogeneous": number(report.speedup_vs_naive),
        "mode_comparison": {
            "paper_optimum": _evaluation_json(m.paper),
            "exact_optimum": _evaluation_json(m.exact),
            "paper_plan_exact_system_rps": m.paper_plan_exact_rps,
            "paper_overstatement": number(m.paper_overstatement),
        },
        "sizing": None,
        "ttft_constraint": _ttft_constraint_json(report),
        "notes": [TTFT_NOTE],
    }
    if report.sizing is not None:
        z = report.sizing
        out["sizing"] = {
            "target_rps": z.target_rps,
            "max_prfaas_instances": z.max_prfaas_instances,
            "solver": str(z.solver),
            "milp_thresholds": z.milp_thresholds,
            "milp_prfaas_instances": z.milp_prfaas_instances,
            "prfaas_instances": z.evaluation.configuration.prfaas_instances,
            "bounds": [str(b) for b in z.evaluation.bounds],
        }
    return _add_plan_cost(out, report, "plan")


def evaluation_to_json(report: EvaluationReport) -> Document:
    out: Document = {
        "prfaas_plan_version": __version__,
        "inputs": _inputs_json(report),
        "configuration": _deployment_json(report.deployment),
        "notes": [TTFT_NOTE],
    }
    return _add_plan_cost(out, report, "configuration")


# ---------------------------------------------------------------- human views


Cell = Callable[[Deployment], str]


def _instances_text(d: Deployment) -> str:
    c = d.evaluation.configuration
    return f"{c.prfaas_instances} / {c.pd_prefill_instances} / {c.pd_decode_instances}"


def _lengths_text(d: Deployment) -> str:
    e = d.evaluation
    return "{} / {}".format(
        fmt(e.long_mean_tokens, ".1f", units.tokens_to_ktokens),
        fmt(e.short_mean_tokens, ".1f", units.tokens_to_ktokens),
    )


def _percentiles_text(d: Deployment) -> str:
    t = d.ttft
    return f"{fmt(t.p50_s, '.2f')} / {fmt(t.p90_s, '.2f')} / {fmt(t.p99_s, '.2f')}"


ROWS: tuple[tuple[str, Cell], ...] = (
    ("instances PrfaaS / PD-P / PD-D", _instances_text),
    ("threshold t (K tokens)", lambda d: _threshold_text(d.evaluation)),
    ("offloaded share p", lambda d: fmt(d.evaluation.offload_fraction, ".1%")),
    ("l_long / l_short (K tokens)", _lengths_text),
    ("Θ PrfaaS (req/s)", lambda d: fmt(d.evaluation.throughput.prfaas_rps, ".2f")),
    ("Θ PD-P (req/s)", lambda d: fmt(d.evaluation.throughput.pd_prefill_rps, ".2f")),
    ("Θ PD-D (req/s)", lambda d: fmt(d.evaluation.throughput.pd_decode_rps, ".2f")),
    ("Λ_max (req/s)", lambda d: fmt(d.evaluation.system_throughput_rps, ".3f")),
    ("bound by", lambda d: " = ".join(d.evaluation.bounds)),
    ("KV egress (Gbps)",
     lambda d: fmt(d.evaluation.kv_egress_bytes_per_s, ".2f", units.bytes_per_s_to_gbps)),
    ("link utilisation", lambda d: fmt(d.evaluation.link_utilization, ".1%")),
    ("TTFT mean (s)", lambda d: fmt(d.ttft.mean_s, ".2f")),
    ("TTFT P50 / P90 / P99 (s)", _percentiles_text),
)  # fmt: skip


def _rows(deployments: list[Deployment]) -> list[tuple[str, list[str]]]:
    """(label with unit, one cell per deployment): shared by the terminal and Markdown views."""
    rows = [("GPUs (PrfaaS + PD)", [f"{d.prfaas_gpus} + {d.pd_gpus}" for d in deployments])]
    rows += [(label, [cell(d) for d in deployments]) for label, cell in ROWS]
    return rows + cost_rows(deployments)


def _threshold_text(e: Evaluation) -> str:
    t = e.configuration.threshold_tokens
    if e.offload_fraction == 0:
        return "— (none offloaded)"
    if e.offload_fraction == 1:
        return "— (all offloaded)"
    return fmt(t, ".2f", units.tokens_to_ktokens)


def _range_lines(notes: tuple[RangeNote, ...]) -> list[str]:
    return [
        f"{n.fraction_below:.2%} of requests are shorter than {n.table_min_tokens:g} and "
        f"{n.fraction_above:.2%} longer than {n.table_max_tokens:g} tokens, the profiled range of "
        f"{len(n.curves)} table(s): their fits are extrapolated there (out_of_range: error refuses)."
        for n in notes
    ]


def _common_notes(report: PlanReport | EvaluationReport) -> list[str]:
    p = report.problem
    s = p.system
    lines = [
        f"Workload: {p.workload.describe()}, mean {units.tokens_to_ktokens(p.workload.mean_tokens):.2f}K "
        f"input tokens, {s.output_tokens:g} output tokens; link "
        f"{units.bytes_per_s_to_gbps(s.link_bandwidth_bytes_per_s):g} Gbps.",
        f"Decode: batch {s.decode.batch_size} at {units.s_to_ms(s.decode.step_latency_s):g} ms/step "
        f"meets {p.scenario.slo.decode_tokens_per_s:g} tokens/s"
        + (
            ""
            if s.decode.context_tokens is None
            else f" at the mean decode context {units.tokens_to_ktokens(s.decode.context_tokens):.2f}K tokens"
        )
        + f" → {s.decode_rps_per_instance:.4f} req/s per instance.",
    ]
    for name, c in (
        ("PrfaaS prefill", s.prfaas_prefill_latency),
        ("PD prefill", s.pd_prefill_latency),
        ("KV size", s.kv_cache_size),
    ):
        lines.append(
            f"{name}: degree-{c.degree} least-squares fit of a {c.provenance} table, max residual "
            f"{c.max_relative_residual:.2%} ({c.source})."
        )
    return lines + _range_lines(report.range_notes) + [TTFT_NOTE]


def _inverse(ratio: float) -> float:
    """1 / ratio, inf for 0 (a plan serving nothing: the baseline's throughput over it)."""
    return math.inf if ratio == 0 else 1 / ratio


def _at_threshold(threshold_tokens: float) -> str:
    """Where a plan routes: `at t = 19.44K`, or that it offloads nothing (t = inf)."""
    if math.isinf(threshold_tokens):
        return "offloading nothing"
    return f"at t = {units.tokens_to_ktokens(threshold_tokens):.2f}K"


def plan_view(report: PlanReport) -> View:
    deployments = [report.plan, report.homogeneous, report.naive]
    rows = _rows(deployments)
    rows.append(
        (
            "throughput vs this plan",
            [
                "1.00×",
                fmt(_inverse(report.speedup_vs_homogeneous), ".2f") + "×",
                fmt(_inverse(report.speedup_vs_naive), ".2f") + "×",
            ],
        )
    )
    m = report.modes
    notes = [
        f"Plan: {fmt(report.speedup_vs_homogeneous, '.2f')}× the homogeneous PD baseline, "
        f"{fmt(report.speedup_vs_naive, '.2f')}× the naive heterogeneous one (— where a "
        f"baseline serves nothing; mode: {report.mode}).",
        f"Mode check: paper mode Λ_max {m.paper.system_throughput_rps:.3f} req/s "
        f"{_at_threshold(m.paper.configuration.threshold_tokens)}; exact mode "
        f"{m.exact.system_throughput_rps:.3f} req/s "
        f"{_at_threshold(m.exact.configuration.threshold_tokens)}. The paper plan "
        f"sustains {m.paper_plan_exact_rps:.3f} req/s with exact mean service times: representative "
        f"lengths overstate it by {fmt(m.paper_overstatement, '.1%')}.",
    ]
    t, q = report.ttft_target, report.loaded_ttft
    if t is not None and q is not None:
        which = "mean" if t.percentile == "mean" else f"P{t.percentile}"
        notes.insert(0, (
            f"TTFT target: {which} TTFT <= {t.target_s:g} s at {q.arrival_rate_rps:.3f} req/s. The plan "
            f"gives mean {q.mean_s:.2f} s, P50/P90/P99 {q.p50_s:.2f}/{q.p90_s:.2f}/{q.p99_s:.2f} s under "
            f"that load (queueing included; M/G/c prefill pools + processor-sharing link "
            f"approximation: mean and P90 within ~2% of the simulator up to 95% load, P50/P99 "
            f"within ~4-6%); utilisation PrfaaS "
            f"{q.prfaas_prefill.utilization:.0%}, PD-P {q.pd_prefill.utilization:.0%}, link {q.link.utilization:.0%}."
        ))  # fmt: skip
    if report.sizing is not None:
        z = report.sizing
        goal = (
            f"reach {z.target_rps:g} req/s"
            if z.target_rps is not None
            else f"maximise Λ_max under {z.max_prfaas_instances} PrfaaS instances"
        )
        if z.target_rps is not None and z.max_prfaas_instances is not None:
            goal += f" with at most {z.max_prfaas_instances} PrfaaS instances"
        notes.insert(
            0,
            (
                f"Sizing ({goal}): {z.evaluation.configuration.prfaas_instances} PrfaaS instances; "
                f"MILP ({z.solver}, {z.milp_thresholds} candidate thresholds) chose "
                f"{z.milp_prfaas_instances}, exact threshold refinement confirmed "
                f"{z.evaluation.configuration.prfaas_instances}; binding: {' = '.join(z.evaluation.bounds)}."
            ),
        )
    notes += cost_notes(report.plan_cost, report.plan.evaluation.system_throughput_rps)
    title = f"prfaas-plan · {report.problem.scenario.name} · mode {report.mode}"
    columns = [DEPLOYMENT_TITLES[d.name] for d in deployments]
    return View(title, columns, rows, notes + _common_notes(report))


def evaluation_view(report: EvaluationReport) -> View:
    title = f"prfaas-plan evaluate · {report.problem.scenario.name} · mode {report.deployment.evaluation.mode}"
    rps = report.deployment.evaluation.system_throughput_rps
    notes = cost_notes(report.plan_cost, rps) + _common_notes(report)
    return View(title, [DEPLOYMENT_TITLES["evaluated"]], _rows([report.deployment]), notes)
