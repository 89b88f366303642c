"""symbolic/closed_forms: the sympy elasticities of Λ_max against central finite differences of
the numeric model's optimum (the balance point found by brentq on the capacity terms, split
fixed), the balance condition (eq. 7) against the optimiser's threshold, and the regimes."""

import dataclasses
import math

import pytest
from scipy.optimize import brentq

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Configuration, evaluate, rates
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.scenario import open_problem
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.symbolic.branches import Regime
from prfaas_plan.symbolic.closed_forms import balance_threshold_tokens, closed_forms


def optimum_rps(system, workload, n_f, n_p, n_d, mode, t0):
    """Λ at the balance of the PrfaaS and PD-P terms for a fixed (possibly fractional) split."""

    def gap(t):
        limits = rates(system, workload, t, n_f, n_p, n_d, mode).limits_rps
        return float(min(limits[0], limits[1]) - limits[2])

    t = brentq(gap, 0.5 * t0, 2.0 * t0, xtol=1e-9, rtol=1e-14)
    return float(rates(system, workload, t, n_f, n_p, n_d, mode).limits_rps.min())


def perturbed(problem, config, name, factor):
    """(system, workload, n_f, n_p, n_d) with input `name` multiplied by `factor`."""
    system, w = problem.system, problem.workload
    n = [config.prfaas_instances, config.pd_prefill_instances, config.pd_decode_instances]
    if name == "link_bandwidth":
        system = dataclasses.replace(
            system, link_bandwidth_bytes_per_s=system.link_bandwidth_bytes_per_s * factor
        )
    elif name == "output_tokens":
        system = dataclasses.replace(system, output_tokens=system.output_tokens * factor)
    elif name in ("mu_log", "sigma_log"):
        w = dataclasses.replace(w, **{name: getattr(w, name) * factor})
    else:
        i = ["prfaas_instances", "pd_prefill_instances", "pd_decode_instances"].index(name)
        n[i] *= factor
    return system, w, *n


def plan_at(gbps, mode):
    problem = open_problem(bandwidth_gbps=gbps)
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    return problem, optimize_fixed_hardware(problem.system, problem.workload, space, mode)


@pytest.mark.parametrize(("gbps", "mode"), [(100, Mode.PAPER), (10, Mode.EXACT)])
@pytest.mark.slow
def test_elasticities_match_finite_differences(gbps, mode):
    problem, plan = plan_at(gbps, mode)
    forms = closed_forms(problem.system, problem.workload, plan)
    assert forms.regime == Regime.BALANCE
    assert forms.system_throughput_rps == pytest.approx(plan.system_throughput_rps, rel=1e-9)
    h = 1e-5
    t0 = plan.configuration.threshold_tokens
    for name, elasticity in forms.elasticities.items():
        up = optimum_rps(*perturbed(problem, plan.configuration, name, 1 + h), mode, t0)
        down = optimum_rps(*perturbed(problem, plan.configuration, name, 1 - h), mode, t0)
        numeric = (up - down) / (2 * h * plan.system_throughput_rps)
        assert elasticity == pytest.approx(numeric, rel=1e-4, abs=1e-7), name
    # Λ is homogeneous of degree 1 in the prefill capacities that bind
    e = forms.elasticities
    assert e["prfaas_instances"] + e["pd_prefill_instances"] + e["link_bandwidth"] == (
        pytest.approx(1.0, rel=1e-9)
    )


@pytest.mark.slow
def test_balance_condition_gives_the_optimisers_threshold():
    problem, plan = plan_at(100, Mode.PAPER)
    t = balance_threshold_tokens(problem.system, problem.workload, plan)
    assert t == pytest.approx(plan.configuration.threshold_tokens, rel=1e-8)


@pytest.mark.slow
def test_decode_bound_plan_depends_on_decode_and_on_the_lengths_through_the_context():
    """Decode binds (4/6/2): Λ = N_d BS_max / (T_decode(C) L_out), prefill has slack. BS_max and
    T_decode are read at the mean decode context C = E[L] + L_out / 2, and the case study's
    table is calibrated so that BS_max = 20 holds exactly at its C (the step's edge): a longer
    context drops a batch slot, so θ up in μ, σ or L_out jumps Λ down (one-sided −∞) while θ
    down follows T_decode's slope in C (bracket 16,384..32,768 tokens)."""
    problem = open_problem()
    plan = evaluate(problem.system, problem.workload, Configuration(4, 6, 2, 19_000.0))
    forms = closed_forms(problem.system, problem.workload, plan)
    assert forms.regime == Regime.DECODE
    e = forms.elasticities
    assert e["pd_decode_instances"] == pytest.approx(1.0)
    assert e["prfaas_instances"] == e["pd_prefill_instances"] == e["link_bandwidth"] == 0.0
    for name in ("mu_log", "sigma_log", "output_tokens"):
        assert not forms.differentiable(name) and math.isnan(e[name])
        assert forms.derivatives_up[name] == -math.inf
    # θ down, by hand: ε = −1[L_out] − (θ / T) ∂T/∂C ∂C/∂θ, with ∂C/∂L_out = 1/2 and
    # ∂C/∂μ = ∂E[L]/∂μ (a central difference of the workload's mean)
    decode, w = problem.system.decode, problem.workload
    slope = decode.context_sides[0].step_slope_s_per_token
    step = decode.step_latency_s
    out = problem.system.output_tokens
    assert forms.elasticities_down["output_tokens"] == pytest.approx(
        -1 - out / step * slope * 0.5, rel=1e-12
    )
    h = 1e-6
    mean_slope = (
        dataclasses.replace(w, mu_log=w.mu_log + h).mean_tokens
        - dataclasses.replace(w, mu_log=w.mu_log - h).mean_tokens
    ) / (2 * h)
    assert forms.elasticities_down["mu_log"] == pytest.approx(
        -w.mu_log / step * slope * mean_slope, rel=1e-7
    )
    assert any("BS_max steps right at the mean decode context" in n for n in forms.notes)


def test_single_term_at_the_end_of_the_range():
    """Everything offloaded (N_p = 0, t = min): Λ = N_prfaas / T_prfaas(E[L]), elasticity 1;
    the first PD-P instance is worth W' / (W T_pd(min)) (symbolic/closed_forms._corner), its
    elasticity 0 (a count of 0)."""
    problem = dataclasses.replace(open_problem(bandwidth_gbps=400), prfaas_instances=1)
    plan = evaluate(problem.system, problem.workload, Configuration(1, 0, 8, 128.0))
    assert isinstance(problem.workload, TruncatedLogNormal)
    forms = closed_forms(problem.system, problem.workload, plan)
    assert forms.regime == Regime.PRFAAS_ONLY and forms.offloaded == "all"
    assert forms.elasticities["prfaas_instances"] == pytest.approx(1.0)
    assert forms.elasticities["pd_prefill_instances"] == 0.0
    s = problem.system
    mean = problem.workload.mean_tokens
    t_f = s.prfaas_prefill_latency
    slope = t_f(mean + 0.5) - t_f(mean - 0.5)  # T is quadratic: the central difference is exact
    first = (t_f(mean) - slope * (mean - 128.0)) / (t_f(mean) * s.pd_prefill_latency(128.0))
    assert forms.derivatives_up["pd_prefill_instances"] == pytest.approx(float(first), rel=1e-9)
    assert math.isnan(forms.derivatives_down["pd_prefill_instances"])
    assert units.bytes_per_s_to_gbps(problem.system.link_bandwidth_bytes_per_s) == 400
