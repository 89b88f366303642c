"""Sizing under a cap alone, against brute force on random small systems (issue 8, item 5).

The answer must be the FEWEST PrfaaS instances whose exact Λ_max reaches the best Λ_max under
the cap (within sizing.RTOL), and a larger cap must not change it once that Λ_max is reached.
The systems are drawn so that many are decode-bound (few decode slots, long outputs): there Λ_max
is flat in the PrfaaS count beyond one or two instances, which the old single-objective MILP
(a tie-break weight below HiGHS's absolute gap) answered with every allowed instance.
Brute force: the exact optimiser `optimize_fixed_hardware` for every count 0..cap (it takes every
split and the exact threshold); and, for the MILP's own choice, every split × grid threshold.
"""

import numpy as np
import pytest

from prfaas_plan import plausible
from prfaas_plan.analytic.capacity import Bound, ServingSystem, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.choices import Mode, Solver
from prfaas_plan.errors import ConfigError, InfeasibleError
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.solve.sizing import MILP_RTOL, RTOL, _fewest, size_prfaas_cluster
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from tests.cli.test_cli import run
from tests.conftest import toy_system

CASES = 30
CBC_CASES = 3  # CBC runs as a subprocess (~0.3 s a case): a few cases cross-check it


def random_case(seed: int) -> tuple[ServingSystem, LengthDistribution, int, int, Mode]:
    """A small random system: (system, workload, PD instances 1-4, cap 2-12, mode)."""
    r = np.random.default_rng(seed)
    system = toy_system(
        prfaas=(r.uniform(0.1, 1.0), r.uniform(3e-6, 3e-5)),
        pd=(r.uniform(0.2, 2.0), r.uniform(1e-5, 1e-4)),
        kv=(r.uniform(1e7, 1e8), r.uniform(5e3, 5e4)),
        batch=int(r.integers(2, 12)),
        step_s=r.uniform(0.02, 0.06),
        output_tokens=int(r.integers(300, 1500)),
        bandwidth_gbps=r.uniform(5, 200),
    )
    workload = TruncatedLogNormal(r.uniform(8, 10.5), r.uniform(0.5, 1.5), 100.0, 128000.0)
    n_pd, cap = int(r.integers(1, 5)), int(r.integers(2, 13))
    mode = Mode.PAPER if r.random() < 0.5 else Mode.EXACT
    return system, workload, n_pd, cap, mode


def exact_lambdas(system, workload, n_pd, mode, n_max):
    return [
        optimize_fixed_hardware(system, workload, SearchSpace(n, n_pd), mode)
        for n in range(n_max + 1)
    ]


def fewest_reaching_best(lambdas, rtol):
    best = max(lambdas)
    return next(n for n, lam in enumerate(lambdas) if lam >= best * (1 - rtol)), best


def grid_lambdas(system, workload, n_pd, mode, n_max):
    """Best Λ over every split × every MILP grid threshold, for 0..n_max instances."""
    t = milp_threshold_grid(workload)[None, :]
    n_p = np.arange(n_pd)[:, None]
    return [
        float(np.nan_to_num(rates(system, workload, t, n, n_p, n_pd - n_p, mode).system_rps).max())
        for n in range(n_max + 1)
    ]


@pytest.fixture(scope="module")
def corpus():
    """Per seed: the case, exact brute force up to 3 x cap + 5, and the sizing at cap."""
    rows = []
    for seed in range(CASES):
        system, workload, n_pd, cap, mode = random_case(seed)
        brute = exact_lambdas(system, workload, n_pd, mode, 3 * cap + 5)
        got = size_prfaas_cluster(system, workload, n_pd, max_prfaas_instances=cap, mode=mode)
        rows.append((seed, system, workload, n_pd, cap, mode, brute, got))
    return rows


@pytest.mark.slow
def test_corpus_exercises_decode_bound_plateaus(corpus):
    """At least a third of the cases sit on a decode-bound plateau that the cap goes past."""
    plateaus = 0
    for _, _, _, _, cap, _, brute, got in corpus:
        lambdas = [e.system_throughput_rps for e in brute[: cap + 1]]
        fewest, _ = fewest_reaching_best(lambdas, RTOL)
        plateaus += Bound.PD_DECODE in got.evaluation.bounds and fewest < cap
    assert plateaus >= CASES // 3


@pytest.mark.slow
def test_fewest_instances_reaching_best_lambda_under_cap(corpus):
    agree = 0
    for seed, _, _, _, cap, _, brute, got in corpus:
        fewest, best = fewest_reaching_best(
            [e.system_throughput_rps for e in brute[: cap + 1]], RTOL
        )
        assert got.evaluation.configuration.prfaas_instances == fewest, f"seed {seed}"
        assert got.evaluation.system_throughput_rps == pytest.approx(best, rel=RTOL), seed
        agree += 1
    assert agree == CASES


@pytest.mark.slow
def test_a_larger_cap_keeps_the_answer_once_best_lambda_is_reached(corpus):
    for seed, system, workload, n_pd, cap, mode, brute, got in corpus:
        lambdas = [e.system_throughput_rps for e in brute]
        big_cap = len(lambdas) - 1
        fewest, best = fewest_reaching_best(lambdas, RTOL)
        larger = size_prfaas_cluster(
            system, workload, n_pd, max_prfaas_instances=big_cap, mode=mode
        )
        assert larger.evaluation.configuration.prfaas_instances == fewest, f"seed {seed}"
        if max(lambdas[: cap + 1]) >= best * (1 - RTOL):  # the smaller cap reached it already
            assert got.evaluation.configuration == larger.evaluation.configuration, seed


@pytest.mark.slow
def test_milp_choice_is_fewest_on_its_own_grid(corpus):
    """The lexicographic MILP alone (before the exact refinement) is right on its grid."""
    for seed, system, workload, n_pd, cap, mode, _, got in corpus:
        fewest, best = fewest_reaching_best(
            grid_lambdas(system, workload, n_pd, mode, cap), MILP_RTOL
        )
        assert got.milp_prfaas_instances == fewest, f"seed {seed}"
        assert got.milp.system_throughput_rps == pytest.approx(best, rel=MILP_RTOL), seed


@pytest.mark.slow
def test_cbc_agrees_with_highs_on_plateaus(corpus):
    on_plateau = [row for row in corpus if Bound.PD_DECODE in row[-1].evaluation.bounds]
    for seed, system, workload, n_pd, cap, mode, _, highs in on_plateau[:CBC_CASES]:
        cbc = size_prfaas_cluster(
            system, workload, n_pd, max_prfaas_instances=cap, mode=mode, solver=Solver.CBC
        )
        assert cbc.evaluation.configuration == highs.evaluation.configuration, f"seed {seed}"
        assert cbc.milp_prfaas_instances == highs.milp_prfaas_instances, f"seed {seed}"


def test_one_pd_instance_plans_are_feasible_in_exact_mode():
    """1 PD instance must decode, so all prefill goes to PrfaaS (t = 0). The MILP used 1 − p
    for the local share, 1.1e-16 in exact mode, and demanded a PD prefill instance: infeasible,
    then a TypeError. Seed 11 of the corpus generator is such a case."""
    system, workload, n_pd, cap, mode = random_case(11)
    assert (n_pd, mode) == (1, Mode.EXACT)
    got = size_prfaas_cluster(system, workload, n_pd, max_prfaas_instances=cap, mode=mode)
    brute = exact_lambdas(system, workload, n_pd, mode, cap)
    fewest, best = fewest_reaching_best([e.system_throughput_rps for e in brute], RTOL)
    assert (got.evaluation.configuration.prfaas_instances, fewest) == (1, 1)
    assert got.evaluation.system_throughput_rps == pytest.approx(best, rel=RTOL)


def test_no_prfaas_and_one_pd_instance_serves_nothing():
    system, workload, _, _, mode = random_case(11)
    with pytest.raises(InfeasibleError, match="no plan serves any request with at most 0") as e:
        size_prfaas_cluster(system, workload, 1, max_prfaas_instances=0, mode=mode)
    assert e.value.parameter == "max_prfaas_instances" and "--" not in str(e.value)


@pytest.mark.parametrize(
    "kwargs, parameter, fragment",
    [
        (dict(max_prfaas_instances=10**12), "max_prfaas_instances", "at most 100000 PrfaaS"),
        (dict(max_prfaas_instances=plausible.MAX_INSTANCES + 1), "max_prfaas_instances", "100000"),
        (dict(target_rps=1e12), "target_rps", "target_rps must be in [1e-06, 1e+06] req/s"),
        (dict(target_rps=1e-300), "target_rps", "got 1e-300"),
        (dict(target_rps=4.0, max_prfaas_instances=10**9), "max_prfaas_instances", "100000"),
    ],
)
def test_sizing_refuses_implausible_goals_before_building(
    case_problem, kwargs, parameter, fragment
):
    s, w = case_problem.system, case_problem.workload
    with pytest.raises(ConfigError) as e:
        size_prfaas_cluster(s, w, 8, **kwargs)
    assert e.value.parameter == parameter and fragment in str(e.value)
    assert "--" not in str(e.value)


@pytest.mark.parametrize("cap", [16, 64, plausible.MAX_INSTANCES])
def test_case_study_cap_beyond_the_decode_plateau(case_problem, cap):
    """The case study: 8 PD instances decode 6.25 req/s at most, reached with 11 PrfaaS
    instances (brute force). The old MILP answered 64 instances for a cap of 64 (HiGHS; CBC
    said 11) and 100,000 for the largest cap; the cap at the bound costs O(log cap) exact
    evaluations."""
    s, w = case_problem.system, case_problem.workload
    fewest, best = fewest_reaching_best(
        [e.system_throughput_rps for e in exact_lambdas(s, w, 8, Mode.PAPER, 16)], RTOL
    )
    assert (fewest, best) == (11, pytest.approx(8 * s.decode_rps_per_instance))
    got = size_prfaas_cluster(s, w, 8, max_prfaas_instances=cap)
    assert got.evaluation.configuration.prfaas_instances == fewest
    assert got.evaluation.system_throughput_rps == pytest.approx(best, rel=RTOL)


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["--max-prfaas-gpus", 10**12], 3, "error: --max-prfaas-gpus must be in [0, 1e+06] GPUs"),
        (["--max-prfaas-gpus", 900_000], 3,
         "error: --max-prfaas-gpus must be at most 100000 PrfaaS instances"),
        (["--target-rps", "1e12"], 3, "error: --target-rps must be in [1e-06, 1e+06] req/s"),
        (["--max-prfaas-gpus", 512], 0, "Sizing (maximise Λ_max under 64 PrfaaS instances): 11"),
    ],
)  # fmt: skip
def test_cli_sizing_goals(args, code, fragment):
    ran = run("optimize", *args)
    assert ran.returncode == code
    assert fragment in " ".join((ran.stdout + ran.stderr).split())


def test_unreachable_target_beyond_the_instance_bound(case_problem):
    """A target whose PrfaaS bound would exceed MAX_INSTANCES is sized within the bound; above
    the decode ceiling it is refused as before, naming the binding constraint (more PrfaaS
    instances would not help, so 'any PrfaaS cluster size' stays true)."""
    s, w = case_problem.system, case_problem.workload
    with pytest.raises(InfeasibleError, match=r"with any PrfaaS cluster size.*bound by pd_decode"):
        size_prfaas_cluster(s, w, 8, target_rps=1e5)


def test_a_milp_too_large_is_refused_before_it_is_built(case_problem, monkeypatch):
    monkeypatch.setattr(plausible, "MAX_SIZING_MILP_BINARIES", 100)  # the case study's grid: 131
    with pytest.raises(ConfigError, match=r"131 binaries \(265 variables, 920 constraints"):
        size_prfaas_cluster(case_problem.system, case_problem.workload, 8, target_rps=4.0)


def test_a_target_needing_more_than_the_instance_bound_says_so():
    """PrfaaS takes ~10^5 s a request, so 10 req/s would need ~10^6 instances: the sizing looks
    no further than MAX_INSTANCES and says that this bound, not the cluster, is the limit."""
    system = toy_system(prfaas=(1e5, 0.0), pd=(1e5, 0.0), batch=10_000, bandwidth_gbps=1e6)
    workload = TruncatedLogNormal(9.0, 1.0, 100.0, 128000.0)
    with pytest.raises(InfeasibleError, match=r"at most 100000 PrfaaS instances \(the plaus") as e:
        size_prfaas_cluster(system, workload, 2, target_rps=10.0)
    assert "bound by prfaas_compute" in str(e.value) and e.value.parameter == "target_rps"


@pytest.mark.parametrize("upper", range(0, 40, 3))
def test_fewest_search_finds_the_threshold_of_a_monotone_predicate(upper):
    """The gallop-and-bisect search: the right count from any start, in O(log) calls."""
    for answer in range(upper + 1):
        for start in range(upper + 1):
            calls = []

            def reaches(n, answer=answer, calls=calls):
                calls.append(n)
                return n >= answer

            assert _fewest(reaches, start, upper) == answer
            assert len(calls) <= 4 * max(upper, 1).bit_length() + 2
