"""Closed forms of the model for a truncated log-normal workload, in sympy: the capacity terms of
equations (3)-(6) as expressions of the inputs, the balance condition (7), and the elasticities
ε_θ = (θ / Λ) ∂Λ_max/∂θ of the optimum with respect to each input θ, evaluated at a plan (the
plan's split held: counts are relaxed to real numbers, t is re-optimised).
Units: SI (tokens, s, bytes, bytes/s, req/s); elasticities are dimensionless, derivatives are in
req/s per unit of the input (per instance, per byte/s, per unit of μ or σ, per output token).

Terms, with p = P(L > t): F_c = N_prfaas / (p T_prfaas) and F_l = B_out / (p S_kv) (PrfaaS compute
and link), G = N_p / ((1 − p) T_pd) (PD prefill), D = N_d BS_max / (T_decode(C) L_out) (decode),
T and S at l_long, l_short (paper mode) or their conditional means (exact mode). sympy gives every
term's partial derivatives in t and each input (symbolic/terms.py, once per process and curve degrees);
p, l_long and l_short are the partial moments of the truncated log-normal, written with a normal
mass whose derivatives are the normal density, so the derivatives in μ and σ are exact.

Decode depends on the lengths too: BS_max and T_decode are read from the decode table at the mean
decode context C = E[L_in] + E[L_out²] / (2 E[L_out]) (full input lengths; decode_point.py). With
BS_max held (it is a whole batch: on a plateau), T_decode is linear in C between the two profiled
contexts around it, T_decode(C) = T_0 + s (C − C_0), with the slope s of the side C moves to
(`DecodePoint.context_sides`). A decode table without a context column has no such dependence.
Scaling the output lengths by a factor scales E[L_out] and E[L_out²]/E[L_out] alike: the L_out
elasticity is that scaling's (for a constant output, L_out itself).

Λ_max is the least of the terms that bind at the plan, each a smooth function ("branch") of θ:
- balance: an increasing term X and a decreasing term Y of t meet at t* (PrfaaS and PD-P, eq. 7);
  by the implicit function theorem ∂Λ/∂θ = (X_t Y_θ − Y_t X_θ) / (X_t − Y_t);
- one prefill term binding alone at an interior t (its maximum in t): ∂Λ/∂θ = X_θ (envelope);
- t at an end of its range (everything or nothing offloaded): the serving term's X_θ at fixed t;
  the idle side's instance count, where it is 0, by the first requests it would take (symbolic/branches.py);
- decode: D_θ, through C for μ, σ and L_out.
Where several branches bind together, Λ = min of them is not differentiable: θ increased moves Λ
by the least of their derivatives, θ decreased by the greatest, and both one-sided values are
reported. Where BS_max changes right at C (C on the edge of its plateau), Λ jumps: a one-sided
derivative is ±inf there.
"""

import math
from dataclasses import dataclass, field

from prfaas_plan.analytic.capacity import Bound, Evaluation, ServingSystem
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.symbolic.branches import Regime, decode_branch, prefill_branches
from prfaas_plan.symbolic.terms import (
    NAMES,
    compiled_for,
    evaluate,
    plan_arguments,
    plan_input_values,
)

# two one-sided derivatives closer than this (relative) are one derivative
SIDES_RTOL = 1e-9


@dataclass(frozen=True)
class ClosedForms:
    """The model's closed forms evaluated at one plan."""

    # Regime values; several joined by " = " where they bind together (Λ not differentiable)
    regime: str
    offloaded: str  # "all" (t at the bottom, p = 1), "none" (t at the top, p = 0) or "some"
    prfaas_term: Bound  # which PrfaaS term F is (compute or link)
    balance_residual: float  # (F − G) / Λ at the plan's t (balance regime; else nan)
    system_throughput_rps: float  # Λ from the symbolic terms (equals the model's)
    input_values: dict[str, float]  # θ at the plan, keyed by INPUTS' names (SI)
    # ∂Λ/∂θ for θ increased and decreased (one-sided; equal where Λ is differentiable in θ):
    # req/s per unit of θ; ±inf where Λ jumps, nan where the model is not defined on that side
    derivatives_up: dict[str, float]
    derivatives_down: dict[str, float]
    derivative_latex: str  # the formula used for ∂Λ/∂θ, LaTeX
    notes: tuple[str, ...] = ()  # why a derivative is one-sided, where a corner was used
    # ∂C/∂θ, tokens per unit of θ (empty for a decode table without a context column)
    decode_context_per_input: dict[str, float] = field(default_factory=dict)

    def differentiable(self, name: str) -> bool:
        """Λ_max has one derivative in input `name` (both sides agree and are finite)."""
        up, down = self.derivatives_up[name], self.derivatives_down[name]
        if not (math.isfinite(up) and math.isfinite(down)):
            return False
        return abs(up - down) <= SIDES_RTOL * max(abs(up), abs(down), 1e-300)

    def _elasticity(self, name: str, derivative: float) -> float:
        """θ / Λ · derivative: undefined (nan) for a plan that serves nothing; 0 for an input
        that is 0 (an instance count of 0), whatever the derivative."""
        lam, theta = self.system_throughput_rps, self.input_values[name]
        if not lam > 0:
            return math.nan
        if theta == 0 and not math.isnan(derivative):
            return 0.0
        return theta / lam * derivative

    @property
    def elasticities_up(self) -> dict[str, float]:
        """ε for θ increased (one-sided)."""
        return {n: self._elasticity(n, self.derivatives_up[n]) for n in NAMES}

    @property
    def elasticities_down(self) -> dict[str, float]:
        """ε for θ decreased (one-sided)."""
        return {n: self._elasticity(n, self.derivatives_down[n]) for n in NAMES}

    @property
    def elasticities(self) -> dict[str, float]:
        """ε where Λ_max is differentiable in θ (both sides agree), else nan (see
        elasticities_up / elasticities_down); 0 for an instance count of 0, which can only
        grow (its derivative from above is derivatives_up)."""
        up = self.elasticities_up
        return {n: up[n] if self.differentiable(n) or self.at_zero(n) else math.nan for n in NAMES}

    def at_zero(self, name: str) -> bool:
        """Input `name` is an instance count of 0 in a plan that serves something."""
        return self.input_values[name] == 0 and self.system_throughput_rps > 0


def _combine(
    branches: list[tuple[dict[str, float], dict[str, float]]],
) -> tuple[dict[str, float], dict[str, float]]:
    """Λ = min of the branches: θ up moves it by the least up-derivative, θ down by the
    greatest down-derivative (nan if any branch's is nan)."""
    up, down = {}, {}
    for name in NAMES:
        ups = [b[0][name] for b in branches]
        downs = [b[1][name] for b in branches]
        up[name] = math.nan if any(math.isnan(x) for x in ups) else min(ups)
        down[name] = math.nan if any(math.isnan(x) for x in downs) else max(downs)
    return up, down


def closed_forms(
    system: ServingSystem,
    workload: TruncatedLogNormal,
    plan: Evaluation,
    output_spread: float = 1.0,
) -> ClosedForms:
    """The regime of `plan`, its balance residual and the one-sided derivatives of Λ_max in each
    input. `output_spread` = E[L_out²] / E[L_out]² (1 for a constant output), for the decode
    context C = E[L_in] + output_spread · L_out / 2."""
    c = plan.configuration
    compiled = compiled_for(system, plan.mode)
    lo, hi = workload.min_tokens, workload.max_tokens
    t = min(max(c.threshold_tokens, lo), hi)  # t = inf (no PrfaaS): the same as t = max
    sides = system.decode.context_sides
    context0 = system.decode.context_tokens if sides is not None else None
    values = plan_input_values(system, workload, c)

    def arguments(slope_s_per_token: float) -> list[float]:
        return plan_arguments(system, workload, t, values, slope_s_per_token, output_spread)

    base = arguments(0.0)
    th = plan.throughput
    link_binds = th.prfaas_link_rps < th.prfaas_compute_rps
    prfaas_term = Bound.PRFAAS_LINK if link_binds else Bound.PRFAAS_COMPUTE
    lam = plan.system_throughput_rps
    notes: list[str] = []
    offload = "all" if c.threshold_tokens <= lo else "none" if c.threshold_tokens >= hi else "some"
    if not lam > 0:
        nothing = dict.fromkeys(NAMES, math.nan)
        return ClosedForms(
            regime=Regime.NOTHING_SERVED, offloaded=offload, prfaas_term=prfaas_term,
            balance_residual=math.nan,
            system_throughput_rps=lam, input_values=values, derivatives_up=nothing,
            derivatives_down=dict(nothing), derivative_latex="",
            notes=("Λ_max = 0: the plan serves nothing, so no elasticity exists.",),
        )  # fmt: skip
    bounds = set(plan.bounds)
    named = {
        Bound.PRFAAS_COMPUTE: "F_compute", Bound.PRFAAS_LINK: "F_link", Bound.PD_PREFILL: "G",
    }  # fmt: skip
    binding = [named[b] for b in (Bound.PRFAAS_COMPUTE, Bound.PRFAAS_LINK, Bound.PD_PREFILL)
               if b in bounds]  # fmt: skip
    terms = {
        name: evaluate(compiled, name, base)
        for name in ("F_compute", "F_link", "G")
        if (name != "G" or offload != "all") and (name == "G" or offload != "none")
    }
    branches: list[tuple[dict[str, float], dict[str, float]]] = []
    labels: list[str] = []
    latex: list[str] = []
    if binding:
        prefill = prefill_branches(
            terms, binding, offload, plan, system, (lo, hi), values, notes, latex
        )
        branches += prefill[0]
        labels.append(prefill[1])
    if Bound.PD_DECODE in bounds:
        branches.append(decode_branch(compiled, arguments, sides, context0, notes))
        labels.append(Regime.DECODE)
        latex.append(r"\partial D/\partial\theta\ (C = E[L_{in}] + E[L_{out}^2]/(2E[L_{out}]))")
    up, down = _combine(branches)
    if len(branches) > 1:
        together = " and ".join(str(b) for b in plan.bounds)
        notes.insert(0, f"{together} bind together: Λ_max is the least of {len(branches)} "
                        "branches, not differentiable where they move apart; θ up and θ down "
                        "are given separately.")  # fmt: skip
    residual = math.nan
    if labels and labels[0] == Regime.BALANCE:
        f = terms[named[prfaas_term]].value if named[prfaas_term] in terms else math.nan
        residual = (f - terms["G"].value) / lam
    symbolic = min(
        [terms[n].value for n in binding if n in terms]
        + ([evaluate(compiled, "D", base).value] if Bound.PD_DECODE in bounds else [])
    )
    per_input = evaluate(compiled, "C", base).by_input if sides is not None else {}
    return ClosedForms(
        regime=" = ".join(labels),
        offloaded=offload,
        prfaas_term=prfaas_term,
        balance_residual=residual,
        system_throughput_rps=symbolic,
        input_values=values,
        derivatives_up=up,
        derivatives_down=down,
        derivative_latex=r";\ ".join(latex),
        notes=tuple(notes),
        decode_context_per_input=per_input,
    )


def balance_threshold_tokens(
    system: ServingSystem, workload: TruncatedLogNormal, plan: Evaluation, compute: bool = True
) -> float:
    """t solving F = G (eq. 7) by Newton's method on the closed forms from the plan's t, with F
    the compute term (or the link term when `compute` is False), the plan's split and instance
    counts."""
    compiled = compiled_for(system, plan.mode)
    c = plan.configuration
    values = plan_input_values(system, workload, c)
    t = c.threshold_tokens
    for _ in range(50):
        arguments = plan_arguments(system, workload, t, values, 0.0, 1.0)
        f = evaluate(compiled, "F_compute" if compute else "F_link", arguments)
        g = evaluate(compiled, "G", arguments)
        step = (f.value - g.value) / (f.t - g.t)
        t -= step
        if abs(step) <= 1e-13 * t:
            break
    return t
