"""Render planner results: rich table (terminal), Markdown, and JSON (the machine contract).

JSON is SI throughout with the unit in every key (`_s`, `_bytes`, `_bytes_per_s`, `_rps`,
`_tokens`); values that do not exist (e.g. l_long when nothing is offloaded) are null.
The table and Markdown views convert at this edge only: K tokens, Gbps, MiB.
"""

import math
from collections.abc import Callable, Iterable
from typing import Any

from prfaas_plan import __version__, units
from prfaas_plan.analytic.capacity import Evaluation
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.render.cost import DEPLOYMENT_COST, PRICES, cost_notes, cost_rows, plan_cost_fields
from prfaas_plan.render.fields import Const, Fields, Leaf, Maybe, Present, at, columns, document
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


# ---------------------------------------------------------------- JSON (render/fields.py)


TTFT: Fields = {  # of a TtftSummary
    "mean_s": Leaf("mean_s", number),
    "p50_s": Leaf("p50_s", number),
    "p90_s": Leaf("p90_s", number),
    "p99_s": Leaf("p99_s", number),
    "local_mean_s": Leaf("local_mean_s", number),
    "offloaded_mean_s": Leaf("offloaded_mean_s", number),
    "queueing_included": Const(False),
}


def _strings(values: Iterable[object]) -> list[str]:
    return [str(v) for v in values]


EVALUATION: Fields = {  # of an Evaluation
    "mode": Leaf("mode", str),
    "prfaas_instances": Leaf("configuration.prfaas_instances"),
    "pd_prefill_instances": Leaf("configuration.pd_prefill_instances"),
    "pd_decode_instances": Leaf("configuration.pd_decode_instances"),
    "threshold_tokens": Leaf("configuration.threshold_tokens", number),
    "offload_fraction": Leaf("offload_fraction"),
    "long_mean_tokens": Leaf("long_mean_tokens", number),
    "short_mean_tokens": Leaf("short_mean_tokens", number),
    "prfaas_service_time_s": Leaf("prfaas_service_time_s", number),
    "pd_prefill_service_time_s": Leaf("pd_prefill_service_time_s", number),
    "throughput_rps": {
        "prfaas": Leaf("throughput.prfaas_rps", number),
        "prfaas_compute": Leaf("throughput.prfaas_compute_rps", number),
        "prfaas_link": Leaf("throughput.prfaas_link_rps", number),
        "pd_prefill": Leaf("throughput.pd_prefill_rps", number),
        "pd_decode": Leaf("throughput.pd_decode_rps", number),
        "system": Leaf("system_throughput_rps", number),
    },
    "bounds": Leaf("bounds", _strings),
    "kv_egress_bytes_per_s": Leaf("kv_egress_bytes_per_s"),
    "link_bandwidth_bytes_per_s": Leaf("link_bandwidth_bytes_per_s"),
    "link_utilization": Leaf("link_utilization"),
}

UNPRICED_DEPLOYMENT: Fields = {  # of a Deployment, but its cost
    "prfaas_gpus": Leaf("prfaas_gpus"),
    "pd_gpus": Leaf("pd_gpus"),
    **at("evaluation", EVALUATION),
    "ttft": at("ttft", TTFT),
}
DEPLOYMENT: Fields = {  # of a Deployment: its cost only when prices are available
    **UNPRICED_DEPLOYMENT,
    "cost": Present(("cost",), at("cost", DEPLOYMENT_COST)),
}


def _priced(deployment: str) -> Fields:
    """The report's deployment at `deployment` with its cost and the equal-cost comparisons
    of the report's PlanCost (a report's deployments are priced together, or none is:
    use_cases/plan_reports.py)."""
    return {
        **at(deployment, UNPRICED_DEPLOYMENT),
        "cost": Present(
            ("plan_cost",),
            plan_cost_fields("plan_cost", f"{deployment}.evaluation.system_throughput_rps"),
        ),
    }


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


def _describe(workload: LengthDistribution) -> str:
    return workload.describe()


def _representation(degree: int) -> str:
    return f"least-squares polynomial, degree {degree}"


PROFILE: Fields = {  # of a FittedCurve
    "table": Leaf("source"),
    "provenance": Leaf("provenance"),
    "representation": Leaf("degree", _representation),
    "coefficients_ascending": Leaf("coefficients", list),
    "max_relative_residual": Leaf("max_relative_residual"),
    "table_min_tokens": Leaf("table_min_tokens"),
    "table_max_tokens": Leaf("table_max_tokens"),
}
PROFILES = ("prfaas_prefill_latency", "pd_prefill_latency", "kv_cache_size")

INPUTS: Fields = {  # of a report (plan or evaluation), from its problem
    "scenario": Leaf("problem.scenario.name"),
    "scenario_file": Leaf("problem.source"),
    "model": Leaf("problem.scenario.model"),
    "workload": Leaf("problem.workload", _describe),
    "mean_input_tokens": Leaf("problem.workload.mean_tokens"),
    "output_tokens": Leaf("problem.system.output_tokens"),
    "link_bandwidth_bytes_per_s": Leaf("problem.system.link_bandwidth_bytes_per_s"),
    "decode": {
        "slo_tokens_per_s": Leaf("problem.scenario.slo.decode_tokens_per_s"),
        "batch_size": Leaf("problem.system.decode.batch_size"),
        "step_latency_s": Leaf("problem.system.decode.step_latency_s"),
        "throughput_rps_per_instance": Leaf("problem.system.decode_rps_per_instance"),
        "table": Leaf("problem.system.decode.source"),
    },
    "profiles": {name: at(f"problem.system.{name}", PROFILE) for name in PROFILES},
    "out_of_range": Leaf("range_notes", _range_json),
    "prices": Present(("plan_cost",), at("plan_cost.pricing", PRICES)),
}

TTFT_CONSTRAINT: Fields = {  # of a plan report with a TTFT target
    "target_s": Leaf("ttft_target.target_s"),
    "percentile": Leaf("ttft_target.percentile", str),
    "load_rps": Leaf("loaded_ttft.arrival_rate_rps"),
    "stable": Leaf("loaded_ttft.stable"),
    "ttft_under_load": {
        "mean_s": Leaf("loaded_ttft.mean_s", number),
        "p50_s": Leaf("loaded_ttft.p50_s", number),
        "p90_s": Leaf("loaded_ttft.p90_s", number),
        "p99_s": Leaf("loaded_ttft.p99_s", number),
        "queueing_included": Const(True),
    },
    "utilization": {
        "prfaas_prefill": Leaf("loaded_ttft.prfaas_prefill.utilization"),
        "pd_prefill": Leaf("loaded_ttft.pd_prefill.utilization"),
        "pd_decode": Leaf("loaded_ttft.pd_decode.utilization"),
        "link": Leaf("loaded_ttft.link.utilization"),
    },
    "mean_wait_s": {
        "prfaas_prefill": Leaf("loaded_ttft.prfaas_prefill.mean_wait_s", number),
        "pd_prefill": Leaf("loaded_ttft.pd_prefill.mean_wait_s", number),
    },
    "approximation": Const("M/G/c prefill pools (Allen-Cunneen), M/G/1 processor-sharing link"),
}

SIZING: Fields = {  # of a sized plan report
    "target_rps": Leaf("sizing.target_rps"),
    "max_prfaas_instances": Leaf("sizing.max_prfaas_instances"),
    "solver": Leaf("sizing.solver", str),
    "milp_thresholds": Leaf("sizing.milp_thresholds"),
    "milp_prfaas_instances": Leaf("sizing.milp_prfaas_instances"),
    "prfaas_instances": Leaf("sizing.evaluation.configuration.prfaas_instances"),
    "bounds": Leaf("sizing.evaluation.bounds", _strings),
}

PLAN: Fields = {  # of a PlanReport: `optimize`'s document
    "prfaas_plan_version": Const(__version__),
    "mode": Leaf("mode", str),
    "inputs": INPUTS,
    "plan": _priced("plan"),
    "baselines": {
        "homogeneous_pd": at("homogeneous", DEPLOYMENT),
        "naive_heterogeneous": at("naive", DEPLOYMENT),
    },
    "speedup_vs_homogeneous": Leaf("speedup_vs_homogeneous", number),
    "speedup_vs_naive_heterogeneous": Leaf("speedup_vs_naive", number),
    "mode_comparison": {
        "paper_optimum": at("modes.paper", EVALUATION),
        "exact_optimum": at("modes.exact", EVALUATION),
        "paper_plan_exact_system_rps": Leaf("modes.paper_plan_exact_rps"),
        "paper_overstatement": Leaf("modes.paper_overstatement", number),
    },
    "sizing": Maybe(("sizing",), SIZING),
    "ttft_constraint": Maybe(("ttft_target", "loaded_ttft"), TTFT_CONSTRAINT),
    "notes": Const([TTFT_NOTE]),
}

EVALUATION_REPORT: Fields = {  # of an EvaluationReport: `evaluate`'s document
    "prfaas_plan_version": Const(__version__),
    "inputs": INPUTS,
    "configuration": _priced("deployment"),
    "notes": Const([TTFT_NOTE]),
}


def plan_to_json(report: PlanReport) -> Document:
    return document(PLAN, report)


def plan_columns(reports: list[PlanReport]) -> dict[str, list[Any]]:
    """The flattened documents of `reports` as columns (a sweep's block), as
    sweep/flat.py `columns_of([flatten(plan_to_json(r)) for r in reports])` writes them;
    render/fields.py `columns`, whose NotColumnarError says where they cannot be."""
    return columns(PLAN, reports)


def evaluation_to_json(report: EvaluationReport) -> Document:
    return document(EVALUATION_REPORT, report)


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
