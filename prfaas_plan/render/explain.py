"""Render `explain`: each equation of the model (reference §4) as LaTeX, the same with the
scenario's numbers substituted, and its value; then the elasticities of Λ_max. Table and Markdown
show the same rows (Markdown renders the `$…$` LaTeX); JSON holds the numbers (SI)."""

from prfaas_plan import __version__, units
from prfaas_plan.analytic.capacity import Bound, Evaluation
from prfaas_plan.choices import Mode
from prfaas_plan.commands.explain import ExplainReport
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.symbolic.closed_forms import INPUTS

ELASTICITY_LABELS = {
    "prfaas_instances": r"N_{prfaas}",
    "pd_prefill_instances": r"N_p",
    "pd_decode_instances": r"N_d",
    "link_bandwidth": r"B_{out}",
    "mu_log": r"\mu",
    "sigma_log": r"\sigma",
    "output_tokens": r"L_{out}",
}


def _g(x: float) -> str:
    return fmt(x, ".4g")


def _balanced(e: Evaluation) -> bool:
    """PrfaaS (compute or link) and PD-P saturate together (eq. 7)."""
    prfaas = {Bound.PRFAAS_COMPUTE, Bound.PRFAAS_LINK}
    return Bound.PD_PREFILL in e.bounds and bool(prfaas & set(e.bounds))


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
    terms = (th.prfaas_rps / p if p > 0 else float("inf"), th.pd_prefill_rps / (1 - p))
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
        (
            "(6) system",
            [r"$\Lambda_{max} = \min(\Theta_{prfaas}/p,\ \Theta_{pd-p}/(1-p),\ \Theta_{pd-d})$",
             f"min({_g(terms[0])}, {_g(terms[1])}, {_g(th.pd_decode_rps)})",
             f"{_g(e.system_throughput_rps)} req/s"],
        ),
        (
            "(7) threshold balance",
            [r"$\Theta_{prfaas}/p = \Theta_{pd-p}/(1-p)$",
             f"{_g(terms[0])} vs {_g(terms[1])}", "holds" if _balanced(e) else "does not bind"],
        ),
        (
            "(8) role ratio",
            [r"$\Theta_{prfaas} + \Theta_{pd-p} = \Theta_{pd-d}$",
             f"{_g(th.prfaas_rps + th.pd_prefill_rps)} vs {_g(th.pd_decode_rps)}",
             "producers ahead" if th.prfaas_rps + th.pd_prefill_rps > th.pd_decode_rps
             else "consumer ahead"],
        ),
    ]  # fmt: skip
    notes = [
        f"Binds: {', '.join(str(b) for b in e.bounds)}.",
        f"Workload: {report.problem.workload.describe()}.",
    ]
    forms = report.closed_forms
    if forms is None:
        notes.append("Elasticities need a truncated_lognormal workload (closed-form moments).")
    else:
        for name, _ in INPUTS:
            rows.append(
                (
                    f"elasticity in {name}",
                    [f"$\\varepsilon_{{{ELASTICITY_LABELS[name]}}} = "
                     f"\\frac{{{ELASTICITY_LABELS[name]}}}{{\\Lambda}}"
                     f"\\frac{{\\partial\\Lambda}}{{\\partial {ELASTICITY_LABELS[name]}}}$",
                     forms.regime, fmt(forms.elasticities[name], "+.4f")],
                )
            )  # fmt: skip
        notes.append(
            f"Elasticities (sympy, {forms.regime} regime): ${forms.derivative_latex}$; "
            "+1% of an input changes Λ_max by ε %."
        )
    return View(
        title=f"Explain: {report.problem.scenario.name} ({e.mode} mode)",
        columns=["equation", "with the scenario's numbers", "value"],
        rows=rows,
        notes=notes,
    )


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
        "closed_forms": None
        if forms is None
        else {
            "regime": forms.regime,
            "balance_residual": number(forms.balance_residual),
            "elasticities": {k: number(v) for k, v in forms.elasticities.items()},
            "derivative_latex": forms.derivative_latex,
        },
    }
