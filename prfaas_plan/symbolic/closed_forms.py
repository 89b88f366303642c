"""Closed forms of the model for a truncated log-normal workload, in sympy: the capacity terms of
equations (3)-(6) as expressions of the inputs, the balance condition (7), and the elasticities
ε_θ = (θ / Λ) ∂Λ_max/∂θ of the optimum with respect to each input θ, evaluated at a plan.
Units: SI (tokens, s, bytes, bytes/s, req/s); elasticities are dimensionless.

With F(t, θ) the PrfaaS term (compute N_prfaas / (p T_prfaas), or link B_out / (p S_kv), whichever
binds), G(t, θ) = N_p / ((1 − p) T_pd) and D = N_d BS_max / (T_decode L_out):
- balance (F = G at t*, decode slack): by the implicit function theorem on F(t*, θ) = G(t*, θ),
  ∂Λ/∂θ = (F_t G_θ − G_t F_θ) / (F_t − G_t);
- decode-bound: Λ = D, ∂Λ/∂θ = D_θ;
- one prefill term alone (t at an end of the range): its partial derivative at fixed t.
p, l_long and l_short are the truncated log-normal's partial moments, written with erf, so the
derivatives in μ and σ are exact.
"""

import math
from dataclasses import dataclass
from typing import Any

from prfaas_plan.analytic.capacity import Bound, Evaluation, ServingSystem
from prfaas_plan.analytic.distributions import TruncatedLogNormal
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.choices import Mode

# the inputs an elasticity is taken with respect to, and their symbol names
INPUTS = (
    ("prfaas_instances", "N_prfaas"),
    ("pd_prefill_instances", "N_p"),
    ("pd_decode_instances", "N_d"),
    ("link_bandwidth", "B_out"),
    ("mu_log", "mu"),
    ("sigma_log", "sigma"),
    ("output_tokens", "L_out"),
)


class Regime:
    BALANCE = "balance"  # PrfaaS and PD-P saturate together (eq. 7)
    DECODE = "decode"  # decode binds
    SINGLE = "single"  # one prefill term binds alone (t at an end of the range)


@dataclass(frozen=True)
class ClosedForms:
    """The model's closed forms evaluated at one plan."""

    regime: str  # Regime.*
    prfaas_term: Bound  # which PrfaaS term F is (compute or link)
    balance_residual: float  # (F − G) / Λ at the plan's t (balance regime; else nan)
    system_throughput_rps: float  # Λ from the symbolic terms (equals the model's)
    elasticities: dict[str, float]  # keyed by INPUTS' names
    derivative_latex: str  # the formula used for ∂Λ/∂θ, LaTeX


def _expressions(
    system: ServingSystem, workload: TruncatedLogNormal, mode: Mode
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(symbols by name, terms F_compute, F_link, G, D as sympy expressions)."""
    import sympy as sp

    s = {name: sp.Symbol(name, positive=True) for name in ["t", *(n for _, n in INPUTS)]}
    mu, sigma = s["mu"], s["sigma"]
    lo, hi = sp.Float(workload.min_tokens), sp.Float(workload.max_tokens)

    def phi(x: Any) -> Any:
        return (1 + sp.erf(x / sp.sqrt(2))) / 2

    z = phi((sp.log(hi) - mu) / sigma) - phi((sp.log(lo) - mu) / sigma)

    def moment(k: int, a: Any, b: Any) -> Any:
        scale = sp.exp(k * mu + k**2 * sigma**2 / 2) / z
        return scale * (
            phi((sp.log(b) - mu - k * sigma**2) / sigma)
            - phi((sp.log(a) - mu - k * sigma**2) / sigma)
        )

    orders = 1 + max(c.degree for c in (system.prfaas_prefill_latency, system.pd_prefill_latency))
    t = s["t"]
    long = [moment(k, t, hi) for k in range(orders)]
    short = [moment(k, lo, t) for k in range(orders)]

    def service(curve: FittedCurve, m: list[Any], paper: bool) -> Any:
        c = [sp.Float(x) for x in curve.coefficients]
        if paper:
            length = m[1] / m[0]
            return sum(ci * length**i for i, ci in enumerate(c))
        return sum(ci * m[i] for i, ci in enumerate(c)) / m[0]

    paper = mode is Mode.PAPER
    p = long[0]
    decode = sp.Float(system.decode.batch_size) / sp.Float(system.decode.step_latency_s)
    terms = {
        "F_compute": s["N_prfaas"] / (p * service(system.prfaas_prefill_latency, long, paper)),
        # S_kv is affine: both modes use S_kv(l_long)
        "F_link": s["B_out"] / (p * service(system.kv_cache_size, long, True)),
        "G": s["N_p"] / ((1 - p) * service(system.pd_prefill_latency, short, paper)),
        "D": s["N_d"] * decode / s["L_out"],
    }
    return s, terms


def closed_forms(
    system: ServingSystem, workload: TruncatedLogNormal, plan: Evaluation
) -> ClosedForms:
    """The regime of `plan`, its balance residual and the elasticities of Λ_max."""
    import sympy as sp

    s, terms = _expressions(system, workload, plan.mode)
    c = plan.configuration
    values = {
        s["t"]: c.threshold_tokens,
        s["N_prfaas"]: c.prfaas_instances,
        s["N_p"]: c.pd_prefill_instances,
        s["N_d"]: c.pd_decode_instances,
        s["B_out"]: system.link_bandwidth_bytes_per_s,
        s["mu"]: workload.mu_log,
        s["sigma"]: workload.sigma_log,
        s["L_out"]: system.output_tokens,
    }
    th = plan.throughput
    link_binds = th.prfaas_link_rps < th.prfaas_compute_rps
    prfaas_term = Bound.PRFAAS_LINK if link_binds else Bound.PRFAAS_COMPUTE
    f = terms["F_link"] if link_binds else terms["F_compute"]
    g, d, t = terms["G"], terms["D"], s["t"]
    bounds = set(plan.bounds)
    theta = [s[name] for _, name in INPUTS]
    if Bound.PD_DECODE in bounds:
        regime, lam = Regime.DECODE, d
        derivatives = [sp.diff(d, x) for x in theta]
        latex = r"\partial\Lambda/\partial\theta = \partial D/\partial\theta"
    elif prfaas_term in bounds and Bound.PD_PREFILL in bounds:
        regime, lam = Regime.BALANCE, f
        f_t, g_t = sp.diff(f, t), sp.diff(g, t)
        derivatives = [(f_t * sp.diff(g, x) - g_t * sp.diff(f, x)) / (f_t - g_t) for x in theta]
        latex = (
            r"\frac{\partial\Lambda}{\partial\theta} = \frac{F_t G_\theta - G_t F_\theta}"
            r"{F_t - G_t}\quad\text{on } F(t^*,\theta) = G(t^*,\theta)"
        )
    else:
        regime = Regime.SINGLE
        lam = f if prfaas_term in bounds else g
        derivatives = [sp.diff(lam, x) for x in theta]
        latex = r"\partial\Lambda/\partial\theta \text{ at fixed } t"
    # the other side's term may not exist away from the balance (p = 1 makes G 0 / 0)
    residual = f - g if regime == Regime.BALANCE else sp.nan
    evaluate = sp.lambdify(list(values), [lam, residual, *derivatives], modules="math")
    lam_value, gap, *slopes = (float(v) for v in evaluate(*values.values()))

    def per_lam(x: float) -> float:
        """x / Λ: undefined (nan) for a plan that serves nothing."""
        return math.nan if lam_value == 0 else x / lam_value

    elasticities = {
        name: per_lam(slope * float(values[s[symbol]]))
        for (name, symbol), slope in zip(INPUTS, slopes, strict=True)
    }
    return ClosedForms(
        regime=regime,
        prfaas_term=prfaas_term,
        balance_residual=per_lam(gap),
        system_throughput_rps=lam_value,
        elasticities=elasticities,
        derivative_latex=latex,
    )


def balance_threshold_tokens(
    system: ServingSystem, workload: TruncatedLogNormal, plan: Evaluation, compute: bool = True
) -> float:
    """t solving F = G (eq. 7) by sympy's nsolve from the plan's t, with F the compute term
    (or the link term when `compute` is False), the plan's split and instance counts."""
    import sympy as sp

    s, terms = _expressions(system, workload, plan.mode)
    c = plan.configuration
    f = terms["F_compute"] if compute else terms["F_link"]
    equation = (f - terms["G"]).subs(
        {
            s["N_prfaas"]: c.prfaas_instances,
            s["N_p"]: c.pd_prefill_instances,
            s["B_out"]: system.link_bandwidth_bytes_per_s,
            s["mu"]: workload.mu_log,
            s["sigma"]: workload.sigma_log,
        }
    )
    return float(sp.nsolve(equation, s["t"], c.threshold_tokens))
