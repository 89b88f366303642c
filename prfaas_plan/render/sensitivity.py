"""Render `sensitivity`: what binds, the marginal gain per resource (req/s), the LP's shadow
prices and the routing bound, as a table/Markdown view and as JSON (SI, units in the keys); the
curves as JSON or CSV."""

import csv

import numpy as np

from prfaas_plan import __version__
from prfaas_plan.analytic.capacity import Bound, Evaluation
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.solve.relaxation import RoutingOptimum
from prfaas_plan.use_cases.sensitivity import SHADOW_UNITS, Curve, RoutingBound, SensitivityReport


def _plan_text(e: Evaluation) -> str:
    c = e.configuration
    return (
        f"{c.prfaas_instances}/{c.pd_prefill_instances}/{c.pd_decode_instances} "
        f"at t = {fmt(c.threshold_tokens, ',.0f')} tokens"
    )


def _shape(r: RoutingOptimum) -> str:
    if r.shadow_prices[Bound.PD_DECODE] > 0 and r.shadow_prices[Bound.PD_PREFILL] == 0:
        return "decode-bound: many routings reach it"
    fractional = r.fractional_bins
    shape = "a threshold" if r.is_threshold else "not a threshold"
    if fractional.size == 0:
        return f"{shape}, no fractional bin"
    lo, hi = r.edges_tokens[fractional[0]], r.edges_tokens[fractional[-1] + 1]
    return f"{shape}, {fractional.size} fractional bin(s) in ({lo:,.0f}, {hi:,.0f}] tokens"


def _offload_start_tokens(r: RoutingOptimum) -> float | None:
    """The lowest bin edge from which something is offloaded (None: nothing is)."""
    offloaded = np.flatnonzero(r.offloaded_fraction > 0.5)
    return float(r.edges_tokens[offloaded[0]]) if offloaded.size else None


def sensitivity_view(report: SensitivityReport) -> View:
    base = report.plan.system_throughput_rps
    rows = [
        ("Plan (N_prfaas/N_p/N_d)", [_plan_text(report.plan), "", ""]),
        ("Λ_max (req/s)", [fmt(base, ".3f"), "", ""]),
        ("Binds", [", ".join(str(b) for b in report.plan.bounds), "", ""]),
    ]
    priced = bool(report.step_cost_usd_per_hour)
    for resource, m in report.marginal_gains.items():
        note = _plan_text(m.plan)
        if resource in report.step_cost_usd_per_hour:
            per = report.rps_per_usd_per_hour(resource)
            note += f"; +{report.step_cost_usd_per_hour[resource]:,.2f} $/h"
            note += f" → {per * 100:.3f} req/s per 100 $/h" if per is not None else ""
        rows.append(
            (
                f"{m.step}",
                [
                    fmt(m.plan.system_throughput_rps, ".3f"),
                    fmt(report.gain_rps(resource), "+.3f"),
                    note,
                ],
            )
        )
    for bound, price in report.shadow.shadow_prices.items():
        rows.append((f"shadow price {bound} ({SHADOW_UNITS[bound]})", [fmt(price, ".4f"), "", ""]))
    r: RoutingBound = report.routing
    best = r.best
    rows += [
        (
            "routing LP bound (exact, req/s)",
            [
                fmt(r.bound_rps, ".4f"),
                f"N_p/N_d {best.pd_prefill_instances}/{best.pd_decode_instances}",
                _shape(best),
            ],
        ),
        (
            "threshold optimum (exact, req/s)",
            [fmt(r.threshold_plan.system_throughput_rps, ".4f"), "", _plan_text(r.threshold_plan)],
        ),
        ("gap of threshold routing to the bound", [fmt(r.gap, ".3%"), "", ""]),
    ]
    return View(
        title=f"Sensitivity: {report.problem.scenario.name} ({report.mode} mode)",
        columns=["Λ_max (req/s)", "gain (req/s)", "plan / note"],
        rows=rows,
        notes=[
            "Gains re-optimise t and the PD split with the unit added.",
            "Shadow prices are duals of the routing LP (exact mode, fractional routing per "
            f"length bin, {r.bins} bins) at the exact-mode plan's split: ∂Λ/∂capacity; for a "
            "role with no instances there, what its first unit is worth (the slope from 0 up).",
            "The LP bound holds for every length-based routing policy on this hardware.",
            *(
                [
                    "$/h of a step: the re-optimised deployment with the unit added, priced at the "
                    "same utilisation (GPUs, link port, link volume at its egress), minus the "
                    "plan's; +10% link: 10% of the bought offering's port price plus the extra "
                    "volume where that offering still carries the new egress, else the "
                    "deployment re-priced with the cheapest offering that does, minus the "
                    "plan's (the new port replaces the old). The decode SLO is not bought.",
                    "Best buy (most req/s per $/h): "
                    + (
                        report.marginal_gains[report.best_buy].step
                        if report.best_buy is not None
                        else "none of the priced steps gains throughput"
                    )
                    + ".",
                ]
                if priced
                else []
            ),
        ],
    )


def _routing_json(r: RoutingOptimum) -> Document:
    return {
        "pd_prefill_instances": r.pd_prefill_instances,
        "pd_decode_instances": r.pd_decode_instances,
        "system_throughput_rps": number(r.system_throughput_rps),
        "is_threshold": r.is_threshold,
        "fractional_bins": int(r.fractional_bins.size),
        "offload_starts_at_tokens": _offload_start_tokens(r),
    }


def sensitivity_to_json(report: SensitivityReport) -> Document:
    base = report.plan.system_throughput_rps
    shadow_keys = {
        "prfaas_compute": "rps_per_prfaas_instance",
        "prfaas_link": "rps_per_gbps",
        "pd_prefill": "rps_per_pd_prefill_instance",
        "pd_decode": "rps_per_pd_decode_instance",
    }
    r = report.routing
    return {
        "version": __version__,
        "scenario": report.problem.scenario.name,
        "mode": str(report.mode),
        "plan": {
            "prfaas_instances": report.plan.configuration.prfaas_instances,
            "pd_prefill_instances": report.plan.configuration.pd_prefill_instances,
            "pd_decode_instances": report.plan.configuration.pd_decode_instances,
            "threshold_tokens": number(report.plan.configuration.threshold_tokens),
            "system_throughput_rps": number(base),
            "bounds": [str(b) for b in report.plan.bounds],
        },
        # keyed by resource so that a per-dollar figure can sit beside each gain
        "marginal_gains": {
            str(resource): {
                "step": m.step,
                "system_throughput_rps": number(m.plan.system_throughput_rps),
                "gain_rps": number(report.gain_rps(resource)),
                "pd_prefill_instances": m.plan.configuration.pd_prefill_instances,
                "pd_decode_instances": m.plan.configuration.pd_decode_instances,
                "threshold_tokens": number(m.plan.configuration.threshold_tokens),
                **(
                    {
                        "cost_usd_per_hour": number(report.step_cost_usd_per_hour[resource]),
                        "gain_rps_per_usd_per_hour": number(report.rps_per_usd_per_hour(resource)),
                    }
                    if resource in report.step_cost_usd_per_hour
                    else {}
                ),
            }
            for resource, m in report.marginal_gains.items()
        },
        "best_buy": None if report.best_buy is None else str(report.best_buy),
        "shadow_prices": {
            "mode": "exact",
            "pd_prefill_instances": report.shadow.pd_prefill_instances,
            "pd_decode_instances": report.shadow.pd_decode_instances,
            **{
                f"{bound}_{shadow_keys[str(bound)]}": number(price)
                for bound, price in report.shadow.shadow_prices.items()
            },
        },
        "routing_bound": {
            "mode": "exact",
            "bins": r.bins,
            "bound_rps": number(r.bound_rps),
            "threshold_optimum_rps": number(r.threshold_plan.system_throughput_rps),
            "threshold_tokens": number(r.threshold_plan.configuration.threshold_tokens),
            "gap_fraction": number(r.gap),
            "per_split": [_routing_json(s) for s in r.per_split],
        },
    }


CURVE_COLUMNS = (
    "curve", "x_name", "x", "system_throughput_rps", "threshold_tokens", "prfaas_instances",
    "pd_prefill_instances", "pd_decode_instances", "bounds",
)  # fmt: skip


def _curve_rows(curves: tuple[Curve, ...]) -> list[list[object]]:
    rows: list[list[object]] = []
    for c in curves:
        for x, plan in zip(c.x, c.plans, strict=True):
            k = plan.configuration
            rows.append(
                [c.name, c.x_label, x, number(plan.system_throughput_rps),
                 number(k.threshold_tokens), k.prfaas_instances, k.pd_prefill_instances,
                 k.pd_decode_instances, "+".join(str(b) for b in plan.bounds)]
            )  # fmt: skip
    return rows


def curves_to_json(curves: tuple[Curve, ...]) -> Document:
    """{curve name: {x name: [...], points: [{...}, ...]}}, nulls for t = inf (nothing offloaded)."""
    out: Document = {"version": __version__}
    for c in curves:
        rows = [r for r in _curve_rows((c,))]
        out[c.name] = {
            "x_name": c.x_label,
            "points": [dict(zip(CURVE_COLUMNS[2:], r[2:], strict=True)) for r in rows],
        }
    return out


def curves_to_csv(curves: tuple[Curve, ...]) -> str:
    """One row per point of every curve (long format); an empty cell for t = inf."""
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CURVE_COLUMNS)
    for row in _curve_rows(curves):
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()
