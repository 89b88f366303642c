"""Closed forms of the model for a truncated log-normal workload, in sympy: the capacity terms of
equations (3)-(6) as expressions of the inputs, the balance condition (7), and the elasticities
ε_θ = (θ / Λ) ∂Λ_max/∂θ of the optimum with respect to each input θ, evaluated at a plan (the
plan's split held: counts are relaxed to real numbers, t is re-optimised).
Units: SI (tokens, s, bytes, bytes/s, req/s); elasticities are dimensionless, derivatives are in
req/s per unit of the input (per instance, per byte/s, per unit of μ or σ, per output token).

Terms, with p = P(L > t): F_c = N_prfaas / (p T_prfaas) and F_l = B_out / (p S_kv) (PrfaaS compute
and link), G = N_p / ((1 − p) T_pd) (PD prefill), D = N_d BS_max / (T_decode(C) L_out) (decode),
T and S at l_long, l_short (paper mode) or their conditional means (exact mode). sympy gives every
term's partial derivatives in t and each input (`_compiled`, once per process and curve degrees);
p, l_long and l_short are the partial moments of the truncated log-normal, written with a normal
mass whose derivatives are the normal density, so the derivatives in μ and σ are exact.

Decode depends on the lengths too: BS_max and T_decode are read from the decode table at the mean
decode context C = E[L_in] + E[L_out²] / (2 E[L_out]) (full input lengths; profiles.py). With
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
  the idle side's instance count, where it is 0, by the first requests it would take (`_corner`);
- decode: D_θ, through C for μ, σ and L_out.
Where several branches bind together, Λ = min of them is not differentiable: θ increased moves Λ
by the least of their derivatives, θ decreased by the greatest, and both one-sided values are
reported. Where BS_max changes right at C (C on the edge of its plateau), Λ jumps: a one-sided
derivative is ±inf there.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

import numpy as np

from prfaas_plan.analytic.capacity import Bound, Configuration, Evaluation, ServingSystem
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.normal import normal_mass
from prfaas_plan.analytic.profiles import DecodeContextSide, FittedCurve
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
NAMES = tuple(name for name, _ in INPUTS)
# BS_max holding over less than this share of C on one side counts as a step right at C
PLATEAU_RTOL = 1e-9
# two one-sided derivatives closer than this (relative) are one derivative
SIDES_RTOL = 1e-9


class Regime(StrEnum):
    """Which branch of Λ_max binds (see the module docstring)."""

    BALANCE = "balance"  # PrfaaS (compute or link) and PD-P saturate together at t* (eq. 7)
    PRFAAS_ONLY = "prfaas_only"  # everything offloaded (p = 1): the PrfaaS term binds alone
    PD_PREFILL_ONLY = "pd_prefill_only"  # nothing offloaded (p = 0): PD-P binds alone
    SINGLE = "single"  # one prefill term binds alone at an interior t (its maximum in t)
    DECODE = "decode"  # decode binds, prefill has slack
    NOTHING_SERVED = "nothing_served"  # Λ_max = 0: no elasticity exists


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


# --- the symbolic terms -------------------------------------------------------------------------

VARIABLES = ("t", *(symbol for _, symbol in INPUTS))  # the Jacobian's columns


def _normal_mass_class() -> Any:
    """sympy Function NormalMass(a, b) = P(a < Z <= b), Z standard normal: differentiated as
    the density at its ends, evaluated by analytic.normal.normal_mass (exact in both tails)."""
    import sympy as sp

    class NormalMass(sp.Function):  # type: ignore[misc]
        nargs = 2

        def fdiff(self, argindex: int = 1) -> Any:
            x = self.args[argindex - 1]
            density = sp.exp(-(x**2) / 2) / sp.sqrt(2 * sp.pi)
            return density if argindex == 2 else -density

    return NormalMass


@dataclass(frozen=True)
class _Compiled:
    """Each term's (F_compute, F_link, G, D, C) value and gradient over VARIABLES, as numeric
    functions of the arguments in ARGUMENTS' order, then the curves' coefficients."""

    terms: dict[str, Callable[..., Any]]


ARGUMENTS = (
    *VARIABLES,
    "lo", "hi", "batch", "step0_s", "slope_s_per_token", "context0_tokens", "output_spread",
)  # fmt: skip


@lru_cache(maxsize=8)
def _compiled(mode: Mode, degrees: tuple[int, int, int]) -> _Compiled:
    """The terms and their gradients, lambdified once per mode and curve degrees (PrfaaS
    latency, PD latency, KV size), with the curves' coefficients as arguments after
    ARGUMENTS."""
    import sympy as sp

    NormalMass = _normal_mass_class()
    s = {name: sp.Symbol(name, real=True) for name in ARGUMENTS}
    coefficient_names = tuple(
        f"{curve}{i}" for curve, degree in zip(("a", "b", "k"), degrees, strict=True)
        for i in range(degree + 1)
    )  # fmt: skip
    c = {name: sp.Symbol(name, real=True) for name in coefficient_names}
    mu, sigma, t = s["mu"], s["sigma"], s["t"]

    def z(x: Any, k: int) -> Any:
        return (sp.log(x) - mu - k * sigma**2) / sigma

    normaliser = NormalMass(z(s["lo"], 0), z(s["hi"], 0))

    def moment(k: int, a: Any, b: Any) -> Any:
        """E[L^k ; a < L <= b] of the truncated log-normal."""
        return sp.exp(k * mu + k**2 * sigma**2 / 2) * NormalMass(z(a, k), z(b, k)) / normaliser

    orders = 1 + max(degrees)
    long = [moment(k, t, s["hi"]) for k in range(orders)]
    short = [moment(k, s["lo"], t) for k in range(orders)]

    def curve(name: str) -> list[Any]:
        degree = degrees[("a", "b", "k").index(name)]
        return [c[f"{name}{i}"] for i in range(degree + 1)]

    def work(coefficients: list[Any], m: list[Any]) -> Any:
        """p · T (the term's denominator): m0 · T(m1 / m0) (paper) or Σ c_i m_i (exact)."""
        if mode is Mode.PAPER:
            return m[0] * sum(ci * (m[1] / m[0]) ** i for i, ci in enumerate(coefficients))
        return sum(ci * m[i] for i, ci in enumerate(coefficients))

    context = moment(1, s["lo"], s["hi"]) + s["output_spread"] * s["L_out"] / 2
    step = s["step0_s"] + s["slope_s_per_token"] * (context - s["context0_tokens"])
    expressions = {
        "F_compute": s["N_prfaas"] / work(curve("a"), long),
        "F_link": s["B_out"] / work(curve("k"), long),
        "G": s["N_p"] / work(curve("b"), short),
        "D": s["N_d"] * s["batch"] / (step * s["L_out"]),
        "C": context,
    }
    arguments = [s[name] for name in ARGUMENTS] + [c[name] for name in coefficient_names]
    modules = [{"NormalMass": normal_mass}, "numpy"]
    terms = {
        name: sp.lambdify(
            arguments, [e, *(sp.diff(e, s[v]) for v in VARIABLES)], modules=modules, cse=True
        )
        for name, e in expressions.items()
    }
    return _Compiled(terms)


def _arguments(
    system: ServingSystem,
    workload: TruncatedLogNormal,
    t: float,
    values: dict[str, float],
    slope_s_per_token: float,
    output_spread: float,
) -> list[float]:
    """The compiled terms' arguments at threshold `t` and inputs `values` (keyed by NAMES),
    with T_decode's slope in C on the side C moves to (0: none)."""
    decode = system.decode
    curves = (system.prfaas_prefill_latency, system.pd_prefill_latency, system.kv_cache_size)
    return [
        t, *(values[n] for n in NAMES), workload.min_tokens, workload.max_tokens,
        float(decode.batch_size), decode.step_latency_s, slope_s_per_token,
        decode.context_tokens if decode.context_tokens is not None else 0.0, output_spread,
        *(x for curve in curves for x in curve.coefficients),
    ]  # fmt: skip


def _input_values(
    system: ServingSystem, workload: TruncatedLogNormal, c: Configuration
) -> dict[str, float]:
    """θ at a configuration, keyed by NAMES (SI)."""
    return {
        "prfaas_instances": float(c.prfaas_instances),
        "pd_prefill_instances": float(c.pd_prefill_instances),
        "pd_decode_instances": float(c.pd_decode_instances),
        "link_bandwidth": system.link_bandwidth_bytes_per_s,
        "mu_log": workload.mu_log,
        "sigma_log": workload.sigma_log,
        "output_tokens": system.output_tokens,
    }


def _compiled_for(system: ServingSystem, mode: Mode) -> _Compiled:
    curves = (system.prfaas_prefill_latency, system.pd_prefill_latency, system.kv_cache_size)
    return _compiled(mode, (curves[0].degree, curves[1].degree, curves[2].degree))


# --- evaluation at a plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Term:
    """A term's value and partial derivatives at the plan."""

    value: float
    t: float  # ∂/∂t
    by_input: dict[str, float]  # ∂/∂θ


def _evaluate(compiled: _Compiled, name: str, arguments: Sequence[float]) -> _Term:
    with np.errstate(all="ignore"):  # a side that serves nobody is inf or nan; never used then
        value, d_t, *d_inputs = (float(x) for x in compiled.terms[name](*arguments))
    return _Term(value, d_t, dict(zip(NAMES, d_inputs, strict=True)))


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


def _both(values: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    return dict(values), dict(values)


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
    compiled = _compiled_for(system, plan.mode)
    lo, hi = workload.min_tokens, workload.max_tokens
    t = min(max(c.threshold_tokens, lo), hi)  # t = inf (no PrfaaS): the same as t = max
    sides = system.decode.context_sides
    context0 = system.decode.context_tokens if sides is not None else None
    values = _input_values(system, workload, c)

    def arguments(slope_s_per_token: float) -> list[float]:
        return _arguments(system, workload, t, values, slope_s_per_token, output_spread)

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
        name: _evaluate(compiled, name, base)
        for name in ("F_compute", "F_link", "G")
        if (name != "G" or offload != "all") and (name == "G" or offload != "none")
    }
    branches: list[tuple[dict[str, float], dict[str, float]]] = []
    labels: list[str] = []
    latex: list[str] = []
    if binding:
        prefill = _prefill_branches(
            terms, binding, offload, plan, system, (lo, hi), values, notes, latex
        )
        branches += prefill[0]
        labels.append(prefill[1])
    if Bound.PD_DECODE in bounds:
        branches.append(_decode_branch(compiled, arguments, sides, context0, notes))
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
        + ([_evaluate(compiled, "D", base).value] if Bound.PD_DECODE in bounds else [])
    )
    per_input = _evaluate(compiled, "C", base).by_input if sides is not None else {}
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


def _prefill_branches(
    terms: dict[str, _Term],
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


def _balance(x: _Term, y: _Term) -> dict[str, float]:
    """∂Λ/∂θ on X(t*, θ) = Y(t*, θ): (X_t Y_θ − Y_t X_θ) / (X_t − Y_t)."""
    return {n: (x.t * y.by_input[n] - y.t * x.by_input[n]) / (x.t - y.t) for n in NAMES}


def _decode_branch(
    compiled: _Compiled,
    arguments: Callable[[float], list[float]],
    sides: tuple[DecodeContextSide | None, DecodeContextSide | None] | None,
    context0: float | None,
    notes: list[str],
) -> tuple[dict[str, float], dict[str, float]]:
    """D's one-sided derivatives: through C on the side C moves to (BS_max held on its
    plateau), ±inf where BS_max changes right at C, nan past the table's profiled contexts."""
    if sides is None or context0 is None:  # no context column: D does not depend on C
        return _both(_evaluate(compiled, "D", arguments(0.0)).by_input)
    context = _evaluate(compiled, "C", arguments(0.0)).by_input
    per_side = [
        None if side is None
        else _evaluate(compiled, "D", arguments(side.step_slope_s_per_token)).by_input
        for side in sides
    ]  # fmt: skip
    up: dict[str, float] = {}
    down: dict[str, float] = {}
    for name in NAMES:
        moves = context[name]
        if moves == 0:
            direct = _evaluate(compiled, "D", arguments(0.0)).by_input[name]
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


def balance_threshold_tokens(
    system: ServingSystem, workload: TruncatedLogNormal, plan: Evaluation, compute: bool = True
) -> float:
    """t solving F = G (eq. 7) by Newton's method on the closed forms from the plan's t, with F
    the compute term (or the link term when `compute` is False), the plan's split and instance
    counts."""
    compiled = _compiled_for(system, plan.mode)
    c = plan.configuration
    values = _input_values(system, workload, c)
    t = c.threshold_tokens
    for _ in range(50):
        arguments = _arguments(system, workload, t, values, 0.0, 1.0)
        f = _evaluate(compiled, "F_compute" if compute else "F_link", arguments)
        g = _evaluate(compiled, "G", arguments)
        step = (f.value - g.value) / (f.t - g.t)
        t -= step
        if abs(step) <= 1e-13 * t:
            break
    return t
