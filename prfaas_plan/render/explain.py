"""Render `explain`: each equation of the model (reference §4) as LaTeX, the same with the
scenario's numbers substituted, and its value; then the elasticities of Λ_max. Table and Markdown
show the same rows (Markdown renders the `$…$` LaTeX); JSON holds the numbers (SI)."""

import math

from prfaas_plan import __version__, units
from prfaas_plan.analytic.capacity import Bound, Evaluation
from prfaas_plan.analytic.decode_point import DecodeContextSide
from prfaas_plan.choices import Mode
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.symbolic.branches import Regime
from prfaas_plan.symbolic.closed_forms import ClosedForms
from prfaas_plan.symbolic.terms import INPUTS
from prfaas_plan.use_cases.explain import ExplainReport

ELASTICITY_LABELS = {
    "prfaas_instances": r"N_{prfaas}",
    "pd_prefill_instances": r"N_p",
    "pd_decode_instances": r"N_d",
    "link_bandwidth": r"B_{out}",
    "mu_log": r"\mu",
    "sigma_log": r"\sigma",
    "output_tokens": r"L_{out}",
}


# the unit of ∂Λ/∂θ per input (SI inside: per byte/s, shown here per Gbps)
DERIVATIVE_UNITS = {
    "prfaas_instances": "req/s per instance",
    "pd_prefill_instances": "req/s per instance",
    "pd_decode_instances": "req/s per instance",
    "link_bandwidth": "req/s per Gbps",
    "mu_log": "req/s per unit of μ",
    "sigma_log": "req/s per unit of σ",
    "output_tokens": "req/s per output token",
}


def _g(x: float) -> str:
    return fmt(x, ".4g")


def _balanced(e: Evaluation) -> bool:
    """PrfaaS (compute or link) and PD-P saturate together (eq. 7)."""
    prfaas = {Bound.PRFAAS_COMPUTE, Bound.PRFAAS_LINK}
    return Bound.PD_PREFILL in e.bounds and bool(prfaas & set(e.bounds))


def _per_share(rps: float, share: float) -> float:
    """Θ / share, inf for a role that serves nobody (share 0: it never binds)."""
    return rps / share if share > 0 else math.inf


def _limit(x: float) -> str:
    return "∞ (serves nobody)" if x == math.inf else _g(x)


def _shown_derivative(name: str, x: float) -> float:
    """∂Λ/∂θ in the unit DERIVATIVE_UNITS names (per Gbps, not per byte/s)."""
    return x * units.gbps_to_bytes_per_s(1.0) if name == "link_bandwidth" else x


def _elasticity_cell(forms: ClosedForms, name: str) -> str:
    if forms.differentiable(name) or forms.at_zero(name) or forms.regime == Regime.NOTHING_SERVED:
        return fmt(forms.elasticities_up[name], "+.4f")
    up, down = forms.elasticities_up[name], forms.elasticities_down[name]
    return f"{_signed(up)} up / {_signed(down)} down"


def _signed(x: float) -> str:
    """A one-sided elasticity: ±∞ where Λ jumps, — where it is not defined."""
    if math.isinf(x):
        return "+∞" if x > 0 else "-∞"
    return fmt(x, "+.4f")


def _derivative_cell(forms: ClosedForms, name: str) -> str:
    up = _shown_derivative(name, forms.derivatives_up[name])
    down = _shown_derivative(name, forms.derivatives_down[name])
    if forms.differentiable(name) or forms.regime == Regime.NOTHING_SERVED:
        return f"∂Λ/∂θ = {fmt(up, '.4g')} {DERIVATIVE_UNITS[name]}"
    if forms.at_zero(name):
        return f"∂Λ/∂θ = {fmt(up, '.4g')} {DERIVATIVE_UNITS[name]} (from 0: one-sided)"
    return f"∂Λ/∂θ = {_signed_g(up)} up, {_signed_g(down)} down ({DERIVATIVE_UNITS[name]})"


def _signed_g(x: float) -> str:
    if math.isinf(x):
        return "+∞" if x > 0 else "-∞"
    return fmt(x, ".4g")


def _decode_context_row(report: ExplainReport) -> tuple[str, list[str]] | None:
    """The decode point's context dependence (a table with a context column): C, the bracket
    T_decode is linear in, and the contexts over which BS_max holds."""
    decode = report.problem.system.decode
    if decode.context_sides is None or decode.context_tokens is None:
        return None
    below, above = decode.context_sides
    bracket = (above or below).bracket_tokens  # type: ignore[union-attr]
    plateau = (
        below.plateau_end_tokens if below is not None else decode.context_tokens,
        above.plateau_end_tokens if above is not None else decode.context_tokens,
    )
    slopes = sorted(
        {side.step_slope_s_per_token for side in decode.context_sides if side is not None}
    )
    slope = " / ".join(f"{x:.4g}" for x in slopes)
    return (
        "(5c) decode context",
        [r"$C = E[L_{in}] + E[L_{out}^2] / (2 E[L_{out}]),\ T_{decode}(C)$",
         f"C = {decode.context_tokens:,.0f} tokens; BS_max {decode.batch_size} for C in "
         f"{plateau[0]:,.0f}..{plateau[1]:,.0f}; T linear in C on "
         f"{bracket[0]:,.0f}..{bracket[1]:,.0f}",
         f"∂T/∂C = {slope} s/token"],
    )  # fmt: skip


def explain_view(report: ExplainReport) -> View:
    e, s = report.plan, report.problem.system
    c, th = e.configuration, e.throughput
    p = e.offload_fraction
    gbps = units.bytes_per_s_to_gbps(s.link_bandwidth_bytes_per_s)
    kv_gbit = units.bytes_per_s_to_gbps(report.kv_cache_long_bytes)  # bytes -> Gbit, same factor
    exact = e.mode is Mode.EXACT
    t_f = r"E[T_{prfaas}(L) \mid L>t]" if exact else r"T_{prfaas}(l_{long})"
    t_p = r"E[T_{pd}(L) \mid L \le t]" if exact else r"T_{pd}(l_{short})"
    decode = s.decode
    # a role that serves nobody (p = 0 or 1) has no term: inf, it never binds
    terms = (_per_share(th.prfaas_rps, p), _per_share(th.pd_prefill_rps, 1 - p))
    # what the producers complete: a role that serves nobody produces nothing
    producers = sum(x for x in (th.prfaas_rps, th.pd_prefill_rps) if math.isfinite(x))
    rows: list[tuple[str, list[str]]] = [
        ("(p) offloaded share", [r"$p = P(L > t)$", f"t = {c.threshold_tokens:,.0f} tokens", _g(p)]),
        (
            "(l) representative lengths",
            [r"$l_{long} = E[L \mid L>t],\ l_{short} = E[L \mid L \le t]$", "",
             f"{fmt(e.long_mean_tokens, ',.0f')}, {fmt(e.short_mean_tokens, ',.0f')} tokens"],
        ),
        (
            "(3) PrfaaS compute",
            [f"$N_{{prfaas}} / {t_f}$", f"{c.prfaas_instances} / {_g(e.prfaas_service_time_s)} s",
             f"{_g(th.prfaas_compute_rps)} req/s"],
        ),
        (
            "(3) PrfaaS link",
            [r"$B_{out} / S_{kv}(l_{long})$", f"{gbps:g} Gbps / {_g(kv_gbit)} Gbit",
             f"{_g(th.prfaas_link_rps)} req/s"],
        ),
        (
            "(4) PD prefill",
            [f"$N_p / {t_p}$", f"{c.pd_prefill_instances} / {_g(e.pd_prefill_service_time_s)} s",
             f"{_g(th.pd_prefill_rps)} req/s"],
        ),
        (
            "(5) PD decode",
            [r"$N_d \cdot BS_{max} / (T_{decode} \cdot L_{out})$",
             f"{c.pd_decode_instances} · {decode.batch_size} / ({_g(decode.step_latency_s)} s · "
             f"{s.output_tokens:g})", f"{_g(th.pd_decode_rps)} req/s"],
        ),
    ]  # fmt: skip
    context_row = _decode_context_row(report)
    if context_row is not None:
        rows.append(context_row)
    rows += [
        (
            "(6) system",
            [r"$\Lambda_{max} = \min(\Theta_{prfaas}/p,\ \Theta_{pd-p}/(1-p),\ \Theta_{pd-d})$",
             f"min({_limit(terms[0])}, {_limit(terms[1])}, {_g(th.pd_decode_rps)})",
             f"{_g(e.system_throughput_rps)} req/s"],
        ),
        (
            "(7) threshold balance",
            [r"$\Theta_{prfaas}/p = \Theta_{pd-p}/(1-p)$",
             f"{_limit(terms[0])} vs {_limit(terms[1])}",
             "holds" if _balanced(e) else "does not bind"],
        ),
        (
            "(8) role ratio",
            [r"$\Theta_{prfaas} + \Theta_{pd-p} = \Theta_{pd-d}$",
             f"{_g(producers)} vs {_g(th.pd_decode_rps)}",
             "producers ahead" if producers > th.pd_decode_rps else "consumer ahead"],
        ),
    ]  # fmt: skip
    notes = [
        f"Binds: {', '.join(str(b) for b in e.bounds)}.",
        f"Workload: {report.problem.workload.describe()}.",
    ]
    forms = report.closed_forms
    if forms is None:
        notes.append(
            "Elasticities need a truncated_lognormal workload without prefix-cache hits "
            "(closed-form moments)."
        )
    else:
        for name, _ in INPUTS:
            rows.append(
                (
                    f"elasticity in {name}",
                    [f"$\\varepsilon_{{{ELASTICITY_LABELS[name]}}} = "
                     f"\\frac{{{ELASTICITY_LABELS[name]}}}{{\\Lambda}}"
                     f"\\frac{{\\partial\\Lambda}}{{\\partial {ELASTICITY_LABELS[name]}}}$",
                     _derivative_cell(forms, name), _elasticity_cell(forms, name)],
                )
            )  # fmt: skip
        if forms.regime != Regime.NOTHING_SERVED:
            notes.append(
                f"Elasticities (sympy, {forms.regime} regime, the plan's split held, t "
                f"re-optimised): ${forms.derivative_latex}$; +1% of an input changes Λ_max by "
                "ε %. L_out means scaling every output length (for a constant output, L_out "
                "itself); it moves decode capacity and, through the decode context, BS_max and "
                "T_decode."
            )
        if report.problem.system.decode.context_sides is None:
            notes.append(
                "The decode table has no context column: BS_max and T_decode do not depend on "
                "the lengths (only L_out's 1 / L_out moves decode)."
            )
        notes += list(forms.notes)
    return View(
        title=f"Explain: {report.problem.scenario.name} ({e.mode} mode)",
        columns=["equation", "with the scenario's numbers", "value"],
        rows=rows,
        notes=notes,
    )


def _context_json(report: ExplainReport) -> Document | None:
    decode = report.problem.system.decode
    if decode.context_sides is None:
        return None

    def side(x: DecodeContextSide | None) -> Document | None:
        if x is None:
            return None
        return {
            "bracket_tokens": list(x.bracket_tokens),
            "step_latency_s": [number(v) for v in x.step_latency_s],
            "step_slope_s_per_token": number(x.step_slope_s_per_token),
            "plateau_end_tokens": x.plateau_end_tokens,
            "batch_change": x.batch_change,
        }

    below, above = decode.context_sides
    return {
        "context_tokens": decode.context_tokens,
        "batch_size": decode.batch_size,
        "step_latency_s": decode.step_latency_s,
        "below": side(below),
        "above": side(above),
    }


def explain_to_json(report: ExplainReport) -> Document:
    e, th = report.plan, report.plan.throughput
    forms = report.closed_forms
    return {
        "version": __version__,
        "scenario": report.problem.scenario.name,
        "mode": str(e.mode),
        "threshold_tokens": number(e.configuration.threshold_tokens),
        "prfaas_instances": e.configuration.prfaas_instances,
        "pd_prefill_instances": e.configuration.pd_prefill_instances,
        "pd_decode_instances": e.configuration.pd_decode_instances,
        "offload_fraction": e.offload_fraction,
        "long_mean_tokens": number(e.long_mean_tokens),
        "short_mean_tokens": number(e.short_mean_tokens),
        "prfaas_service_time_s": number(e.prfaas_service_time_s),
        "pd_prefill_service_time_s": number(e.pd_prefill_service_time_s),
        "long_kv_cache_bytes": number(report.kv_cache_long_bytes),
        "throughput_rps": {
            "prfaas_compute": number(th.prfaas_compute_rps),
            "prfaas_link": number(th.prfaas_link_rps),
            "pd_prefill": number(th.pd_prefill_rps),
            "pd_decode": number(th.pd_decode_rps),
            "system": number(e.system_throughput_rps),
        },
        "bounds": [str(b) for b in e.bounds],
        "decode_context": _context_json(report),
        "closed_forms": None
        if forms is None
        else {
            "regime": forms.regime,
            "offloaded": forms.offloaded,
            "balance_residual": number(forms.balance_residual),
            # null where Λ_max is not differentiable in the input: see the one-sided values
            "elasticities": {k: number(v) for k, v in forms.elasticities.items()},
            "elasticities_up": {k: number(v) for k, v in forms.elasticities_up.items()},
            "elasticities_down": {k: number(v) for k, v in forms.elasticities_down.items()},
            # ∂Λ/∂θ in SI: req/s per instance, per byte/s, per unit of μ, σ, per output token
            "derivatives_rps_per_unit_up": {k: number(v) for k, v in forms.derivatives_up.items()},
            "derivatives_rps_per_unit_down": {
                k: number(v) for k, v in forms.derivatives_down.items()
            },
            # ∂C/∂θ of the mean decode context (tokens per unit; empty without a context column)
            "decode_context_tokens_per_unit": {
                k: number(v) for k, v in forms.decode_context_per_input.items()
            },
            "derivative_latex": forms.derivative_latex,
            "notes": list(forms.notes),
        },
    }
