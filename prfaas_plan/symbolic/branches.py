"""The branches of Λ_max = min(prefill, decode) at a plan and their one-sided derivatives in each
input (symbolic/closed_forms.py combines them): the prefill branch in its regime (the balance
(7) of the two prefill terms, a single binding term, or everything or nothing offloaded, with
the corner slopes of an idle side), and the decode branch with the slope of the side the mean
decode context moves to. Units: req/s per unit of the input (SI).
"""

import math
from collections.abc import Callable
from enum import StrEnum

import numpy as np

from prfaas_plan.analytic.capacity import Evaluation, ServingSystem
from prfaas_plan.analytic.decode_point import DecodeContextSide
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.choices import Mode
from prfaas_plan.symbolic.terms import (
    NAMES,
    Compiled,
    Term,
    evaluate,
)

# BS_max holding over less than this share of C on one side counts as a step right at C
PLATEAU_RTOL = 1e-9


class Regime(StrEnum):
    """Which branch of Λ_max binds (see the module docstring)."""

    BALANCE = "balance"  # PrfaaS (compute or link) and PD-P saturate together at t* (eq. 7)
    PRFAAS_ONLY = "prfaas_only"  # everything offloaded (p = 1): the PrfaaS term binds alone
    PD_PREFILL_ONLY = "pd_prefill_only"  # nothing offloaded (p = 0): PD-P binds alone
    SINGLE = "single"  # one prefill term binds alone at an interior t (its maximum in t)
    DECODE = "decode"  # decode binds, prefill has slack
    NOTHING_SERVED = "nothing_served"  # Λ_max = 0: no elasticity exists


def _derivative(curve: FittedCurve, tokens: float) -> float:
    """The curve's slope at `tokens`."""
    slope = np.polynomial.polynomial.polyder(np.asarray(curve.coefficients, float))
    return float(np.polynomial.polynomial.polyval(tokens, slope))


def _end_rate(curve: FittedCurve, mean_tokens: float, end_tokens: float, mode: Mode) -> float:
    """d(s · X)/ds for the side that serves a share s of the requests, X their mean cost (time,
    bytes; mean length `mean_tokens`), as s shrinks by requests of length `end_tokens` (the
    shortest length for the PrfaaS side, s = p; the longest for the PD side, s = 1 − p):
    X(end) in exact mode (E[X; served] loses X(t) per unit of s) and X(l) − X'(l) (l − end) in
    paper mode (s · X(l), the representative length l moving as s does)."""
    if mode is Mode.EXACT:
        return float(curve(end_tokens))
    return float(curve(mean_tokens)) - _derivative(curve, mean_tokens) * (mean_tokens - end_tokens)


def _corner(served_work: float, served_rate: float, idle_service_s: float) -> float:
    """∂Λ/∂N at N = 0 for the idle side's instance count N (everything, or nothing, offloaded):
    its first instances take a share q of the requests at the end of the range, N = Λ q
    T_idle(end); the serving side, Λ = K / W with W = s X its work per request (K its
    instances or bandwidth), gains dΛ/dq = Λ W'/W with W' = d(s X)/ds (`_end_rate`). Hence
    ∂Λ/∂N = W' / (W T_idle(end)) (req/s per instance), or 0 where that is negative (t then
    stays at the end: the idle side stays idle). This is the limit as N → 0: where the end of
    the range is far in the length distribution's tail, the first requests are rare and Λ
    follows this slope only for very small N."""
    return max(0.0, served_rate / (served_work * idle_service_s))


def _both(values: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    return dict(values), dict(values)


def prefill_branches(
    terms: dict[str, Term],
    binding: list[str],
    offload: str,
    plan: Evaluation,
    system: ServingSystem,
    length_range: tuple[float, float],
    values: dict[str, float],
    notes: list[str],
    latex: list[str],
) -> tuple[list[tuple[dict[str, float], dict[str, float]]], str]:
    """The prefill side's branches (see the module docstring) and its regime."""
    live = [n for n in binding if n in terms]
    if offload == "some":
        rising = [n for n in live if terms[n].t > 0]
        falling = [n for n in live if terms[n].t < 0]
        pairs = [(x, y) for x in rising for y in falling]
        if len(live) >= 2 and pairs:
            latex.append(
                r"\frac{\partial\Lambda}{\partial\theta} = \frac{F_t G_\theta - G_t F_\theta}"
                r"{F_t - G_t}\quad\text{on } F(t^*,\theta) = G(t^*,\theta)"
            )
            branches = [_both(_balance(terms[x], terms[y])) for x, y in pairs]
            return branches, Regime.BALANCE
        latex.append(r"\partial\Lambda/\partial\theta \text{ at fixed } t\ (\text{envelope})")
        return [_both(terms[n].by_input) for n in live], Regime.SINGLE
    latex.append(
        r"\partial\Lambda/\partial\theta \text{ at fixed } t \text{ (an end of its range)}"
    )
    branches = []
    mode, (lo, hi) = plan.mode, length_range
    for n in live:
        up = dict(terms[n].by_input)
        down = dict(terms[n].by_input)
        if offload == "all":
            idle, count = "pd_prefill_instances", values["pd_prefill_instances"]
            if n == "F_compute":
                work, curve = plan.prfaas_service_time_s, system.prfaas_prefill_latency
            else:
                curve = system.kv_cache_size
                work = float(curve(plan.long_mean_tokens))
            rate = _end_rate(curve, plan.long_mean_tokens, lo, mode)
            idle_s = float(system.pd_prefill_latency(lo))
        else:
            idle, count = "prfaas_instances", values["prfaas_instances"]
            work, curve = plan.pd_prefill_service_time_s, system.pd_prefill_latency
            rate = _end_rate(curve, plan.short_mean_tokens, hi, mode)  # −dW_G/dp
            idle_s = float(system.prfaas_prefill_latency(hi))
        if count == 0:
            up[idle] = _corner(work, rate, idle_s)
            down[idle] = math.nan  # a count of 0 cannot decrease
            side = "PD-P" if offload == "all" else "PrfaaS"
            notes.append(
                f"No {side} instance: ∂Λ/∂{idle} is the first instance's worth (it takes the "
                f"{'shortest' if offload == 'all' else 'longest'} requests); its elasticity "
                "is 0 (the count is 0)."
            )
        else:
            up[idle] = down[idle] = 0.0  # the idle side serves nobody and stays idle
        branches.append((up, down))
    return branches, Regime.PRFAAS_ONLY if offload == "all" else Regime.PD_PREFILL_ONLY


def _balance(x: Term, y: Term) -> dict[str, float]:
    """∂Λ/∂θ on X(t*, θ) = Y(t*, θ): (X_t Y_θ − Y_t X_θ) / (X_t − Y_t)."""
    return {n: (x.t * y.by_input[n] - y.t * x.by_input[n]) / (x.t - y.t) for n in NAMES}


def decode_branch(
    compiled: Compiled,
    arguments: Callable[[float], list[float]],
    sides: tuple[DecodeContextSide | None, DecodeContextSide | None] | None,
    context0: float | None,
    notes: list[str],
) -> tuple[dict[str, float], dict[str, float]]:
    """D's one-sided derivatives: through C on the side C moves to (BS_max held on its
    plateau), ±inf where BS_max changes right at C, nan past the table's profiled contexts."""
    if sides is None or context0 is None:  # no context column: D does not depend on C
        return _both(evaluate(compiled, "D", arguments(0.0)).by_input)
    context = evaluate(compiled, "C", arguments(0.0)).by_input
    per_side = [
        None if side is None
        else evaluate(compiled, "D", arguments(side.step_slope_s_per_token)).by_input
        for side in sides
    ]  # fmt: skip
    up: dict[str, float] = {}
    down: dict[str, float] = {}
    for name in NAMES:
        moves = context[name]
        if moves == 0:
            direct = evaluate(compiled, "D", arguments(0.0)).by_input[name]
            up[name] = down[name] = direct
            continue
        # θ up moves C toward the side of moves' sign; θ down toward the other
        for result, toward in ((up, 1 if moves > 0 else 0), (down, 0 if moves > 0 else 1)):
            side, derivative = sides[toward], per_side[toward]
            if side is None or derivative is None:
                result[name] = math.nan
                notes.append(
                    f"{name} {'up' if result is up else 'down'}: the mean decode context would "
                    "leave the decode table's profiled contexts (not extrapolated)."
                )
                continue
            if side.batch_change and abs(side.plateau_end_tokens - context0) <= (
                PLATEAU_RTOL * context0
            ):
                # Λ jumps as BS_max changes: up (a larger batch) or down; seen from θ down the
                # difference quotient (Λ(θ) − Λ(θ − h)) / h has the opposite sign
                sign = side.batch_change if result is up else -side.batch_change
                result[name] = sign * math.inf
                continue
            result[name] = derivative[name]
    for i, side in enumerate(sides):
        if (
            side is not None
            and side.batch_change
            and abs(side.plateau_end_tokens - context0) <= PLATEAU_RTOL * context0
        ):
            direction = "higher" if i == 1 else "lower"
            change = "one more" if side.batch_change > 0 else "one fewer"
            notes.append(
                f"BS_max steps right at the mean decode context ({context0:,.1f} tokens): a "
                f"{direction} context gives {change} batch slot, and Λ_max jumps; the inputs "
                "that move the context (μ, σ, L_out) have one-sided elasticities there."
            )
    return up, down
