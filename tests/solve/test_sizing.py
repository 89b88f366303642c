from dataclasses import replace

import numpy as np
import pytest

from prfaas_plan import units
from prfaas_plan.analytic.capacity import rates
from prfaas_plan.choices import Mode, Solver
from prfaas_plan.errors import ConfigError, InfeasibleError
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.solve.sizing import size_prfaas_cluster
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware

RTOL = 1e-9


def brute_lambda(system, workload, n_prfaas, n_pd, mode):
    return optimize_fixed_hardware(
        system, workload, SearchSpace(n_prfaas, n_pd), mode
    ).system_throughput_rps


def brute_min_instances(system, workload, n_pd, target, mode, upper=60):
    for n in range(upper + 1):
        if brute_lambda(system, workload, n, n_pd, mode) >= target * (1 - RTOL):
            return n
    return None


def with_link(problem, gbps):
    return replace(problem.system, link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(gbps))


CASES = [
    # (pd instances, link Gbps, target req/s, mode)
    (8, 100, 3.0, Mode.PAPER),
    (8, 100, 3.24, Mode.PAPER),
    (8, 100, 4.5, Mode.EXACT),
    (4, 100, 2.0, Mode.PAPER),
    (3, 100, 0.5, Mode.EXACT),
    (6, 10, 2.0, Mode.PAPER),  # a narrow link: the link term shapes the threshold
    (6, 10, 3.0, Mode.PAPER),  # ... and makes this target unreachable
    (2, 100, 1.0, Mode.PAPER),
]


@pytest.mark.parametrize("n_pd, gbps, target, mode", CASES)
def test_milp_matches_brute_force_for_target(case_problem, n_pd, gbps, target, mode):
    system, workload = with_link(case_problem, gbps), case_problem.workload
    want = brute_min_instances(system, workload, n_pd, target, mode)
    if want is None:
        with pytest.raises(InfeasibleError, match="no plan reaches"):
            size_prfaas_cluster(system, workload, n_pd, target_rps=target, mode=mode)
        return
    got = size_prfaas_cluster(system, workload, n_pd, target_rps=target, mode=mode)
    assert got.evaluation.configuration.prfaas_instances == want
    assert got.evaluation.system_throughput_rps >= target * (1 - RTOL)
    assert got.evaluation.system_throughput_rps == pytest.approx(
        brute_lambda(system, workload, want, n_pd, mode), rel=1e-9
    )


@pytest.mark.parametrize("n_pd, cap, gbps", [(8, 4, 100), (8, 2, 100), (5, 6, 20), (3, 0, 100)])
def test_milp_matches_brute_force_under_cap(case_problem, n_pd, cap, gbps):
    system, workload = with_link(case_problem, gbps), case_problem.workload
    lambdas = [brute_lambda(system, workload, n, n_pd, Mode.PAPER) for n in range(cap + 1)]
    best = max(lambdas)
    fewest = next(n for n, lam in enumerate(lambdas) if lam >= best * (1 - RTOL))
    got = size_prfaas_cluster(system, workload, n_pd, max_prfaas_instances=cap)
    assert got.evaluation.system_throughput_rps == pytest.approx(best, rel=1e-9)
    assert got.evaluation.configuration.prfaas_instances == fewest


def grid_lambdas(system, workload, n_pd, mode, n_max):
    """Brute force on the MILP's own threshold grid, independent of the MILP and of the
    optimiser: best Λ over every split and every grid threshold, for 0..n_max instances."""
    t = milp_threshold_grid(workload)[None, :]
    n_p = np.arange(n_pd)[:, None]
    return np.array([
        rates(system, workload, t, n, n_p, n_pd - n_p, mode).system_rps.max() for n in range(n_max + 1)
    ])  # fmt: skip


MILP_RTOL = 1e-6  # HiGHS/CBC feasibility tolerances are ~1e-7 to 1e-9


@pytest.mark.parametrize(
    "n_pd, gbps, target, mode", [c for c in CASES if c[2] != 3.0 or c[1] != 10]
)
@pytest.mark.slow
def test_milp_choice_matches_grid_brute_force_for_target(case_problem, n_pd, gbps, target, mode):
    system, workload = with_link(case_problem, gbps), case_problem.workload
    lambdas = grid_lambdas(system, workload, n_pd, mode, 40)
    want = int(np.argmax(lambdas >= target * (1 - MILP_RTOL)))
    assert lambdas[want] >= target * (1 - MILP_RTOL)
    got = size_prfaas_cluster(system, workload, n_pd, target_rps=target, mode=mode)
    assert got.milp_prfaas_instances == want
    assert got.milp.system_throughput_rps >= target * (1 - MILP_RTOL)


@pytest.mark.parametrize("n_pd, cap, gbps", [(8, 4, 100), (8, 2, 100), (5, 6, 20), (3, 0, 100)])
@pytest.mark.slow
def test_milp_choice_matches_grid_brute_force_under_cap(case_problem, n_pd, cap, gbps):
    system, workload = with_link(case_problem, gbps), case_problem.workload
    lambdas = grid_lambdas(system, workload, n_pd, Mode.PAPER, cap)
    got = size_prfaas_cluster(system, workload, n_pd, max_prfaas_instances=cap)
    assert got.milp.system_throughput_rps == pytest.approx(lambdas.max(), rel=MILP_RTOL)
    assert got.milp_prfaas_instances == int(np.argmax(lambdas >= lambdas.max() * (1 - MILP_RTOL)))


@pytest.mark.parametrize("kwargs", [dict(target_rps=3.0), dict(max_prfaas_instances=3)])
@pytest.mark.slow
def test_cbc_agrees_with_highs(case_problem, kwargs):
    s, w = case_problem.system, case_problem.workload
    highs = size_prfaas_cluster(s, w, 6, solver=Solver.HIGHS, **kwargs)
    cbc = size_prfaas_cluster(s, w, 6, solver=Solver.CBC, **kwargs)
    assert cbc.milp_prfaas_instances == highs.milp_prfaas_instances
    assert cbc.evaluation.configuration == highs.evaluation.configuration


def test_unreachable_target_names_the_binding_constraint(case_problem):
    # 8 PD instances decode at most 8 x 0.78 = 6.25 req/s whatever PrfaaS does
    with pytest.raises(InfeasibleError, match=r"no plan reaches 7 req/s.*bound by pd_decode") as e:
        size_prfaas_cluster(case_problem.system, case_problem.workload, 8, target_rps=7.0)
    assert str(e.value).endswith("relax target_rps") and e.value.parameter == "target_rps"


def test_target_beyond_cap_is_infeasible(case_problem):
    with pytest.raises(InfeasibleError, match=r"at most 2 PrfaaS instances.*bound by"):
        size_prfaas_cluster(
            case_problem.system, case_problem.workload, 8, target_rps=3.2, max_prfaas_instances=2
        )


def test_sizing_needs_a_goal(case_problem):
    """Messages name the library's parameters (the CLI maps them to its flags)."""
    s, w = case_problem.system, case_problem.workload
    with pytest.raises(ConfigError, match="target_rps or max_prfaas_instances") as e:
        size_prfaas_cluster(s, w, 8)
    assert e.value.parameter == "target_rps" and "--" not in str(e.value)
    with pytest.raises(ConfigError, match="target_rps must be a finite number > 0, got inf") as e:
        size_prfaas_cluster(s, w, 8, target_rps=float("inf"))
    assert e.value.parameter == "target_rps"
    with pytest.raises(ConfigError, match="max_prfaas_instances must allow >= 0 instances") as e:
        size_prfaas_cluster(s, w, 8, max_prfaas_instances=-1)
    assert e.value.parameter == "max_prfaas_instances"
