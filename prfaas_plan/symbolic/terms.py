"""The model's terms for a truncated log-normal workload in sympy (F_compute, F_link, G, D, C:
the prefill, link, decode and context limits), differentiated once and lambdified per mode and
curve degrees, then evaluated at a plan with their gradient over the threshold and INPUTS (SI).
sympy is imported only when a term is first compiled.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.normal import normal_mass
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
class Compiled:
    """Each term's (F_compute, F_link, G, D, C) value and gradient over VARIABLES, as numeric
    functions of the arguments in ARGUMENTS' order, then the curves' coefficients."""

    terms: dict[str, Callable[..., Any]]


ARGUMENTS = (
    *VARIABLES,
    "lo", "hi", "batch", "step0_s", "slope_s_per_token", "context0_tokens", "output_spread",
)  # fmt: skip


@lru_cache(maxsize=8)
def _compiled(mode: Mode, degrees: tuple[int, int, int]) -> Compiled:
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
    return Compiled(terms)


def plan_arguments(
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


def plan_input_values(
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


def compiled_for(system: ServingSystem, mode: Mode) -> Compiled:
    curves = (system.prfaas_prefill_latency, system.pd_prefill_latency, system.kv_cache_size)
    return _compiled(mode, (curves[0].degree, curves[1].degree, curves[2].degree))


# --- evaluation at a plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """A term's value and partial derivatives at the plan."""

    value: float
    t: float  # ∂/∂t
    by_input: dict[str, float]  # ∂/∂θ


def evaluate(compiled: Compiled, name: str, arguments: Sequence[float]) -> Term:
    with np.errstate(all="ignore"):  # a side that serves nobody is inf or nan; never used then
        value, d_t, *d_inputs = (float(x) for x in compiled.terms[name](*arguments))
    return Term(value, d_t, dict(zip(NAMES, d_inputs, strict=True)))
