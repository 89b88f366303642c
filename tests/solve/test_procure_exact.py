"""`procure` at the continuous threshold (solve/procure_exact.py): the balance thresholds are
where PD prefill saturates, the work curves the argument needs are monotone where it says so,
the exact answer is never worse than the grid's, a budget buys the cheapest of the
highest-throughput deployments, and a TTFT target can be met by splitting over sites
(analytic/split_ttft.py). The comparison with an independent continuous-threshold brute force
is tests/solve/test_procure_oracle.py."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Configuration
from prfaas_plan.analytic.loaded_ttft import loaded_ttft
from prfaas_plan.analytic.split_ttft import SiteRoute, split_ttft
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import resolve_pricing
from prfaas_plan.inputs.scenario import open_problem
from prfaas_plan.solve.procure_budget import (
    _rate_at,
    exact_budget,
    fixed_usd_per_hour,
    rate_within_budget,
)
from prfaas_plan.solve.procure_exact import (
    ExactPoint,
    _local_work,
    balance_thresholds,
    exact_target,
    monotone_violation,
)
from prfaas_plan.solve.procure_milp import solve_procure
from prfaas_plan.solve.procure_space import capacity_rps
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.use_cases.procure_sites import procure_model
from tests.cli.test_cli import run


@pytest.fixture(scope="module")
def case():
    catalog = Catalog.open()
    problem = open_problem()
    pricing = resolve_pricing(catalog, problem.scenario, problem.source)
    return catalog, problem, pricing


AWS_SITES = ("h20.aws-dx-100g", "h20.aws-dx-10g", "h20.aws-internet-egress",
             "h200.aws-dx-100g", "h200.aws-dx-10g", "h200.aws-internet-egress")  # fmt: skip


def small_model(case, mode=Mode.PAPER, sites=(3,), h200_usd_per_instance_hour=8.0, max_instances=6,
                max_pd=10, usd_per_gb=None, fixed=None):  # fmt: skip
    """The case study's candidate sites by index into AWS_SITES (3: h200 over the 100G Direct
    Connect port), re-priced and shrunk."""
    catalog, problem, pricing = case
    _, model = procure_model(catalog, problem, pricing, mode=mode)
    names = [s.name for s in model.sites]
    prices, systems = [], []
    for j in (names.index(AWS_SITES[i]) for i in sites):
        s = model.sites[j]
        prices.append(dataclasses.replace(
            s, usd_per_instance_hour=h200_usd_per_instance_hour, max_instances=max_instances,
            usd_per_gb=s.usd_per_gb if usd_per_gb is None else usd_per_gb,
            fixed_usd_per_hour=s.fixed_usd_per_hour if fixed is None else fixed,
        ))  # fmt: skip
        systems.append(model.site_systems[j])
    return dataclasses.replace(
        model, sites=tuple(prices), site_systems=tuple(systems), max_pd_instances=max_pd
    )


def grid_point(model, **goal):
    grid = model.space(milp_threshold_grid(model.workload))
    point = solve_procure(grid, **goal)
    return None if point is None else ExactPoint(grid, point)


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("target_rps", [0.7, 2.0, 3.3, 6.0])
def test_balance_thresholds_saturate_pd_prefill(case, mode, target_rps):
    """t_n(X) is the largest t with X h(t) <= n: h fits at t_n and not a hair above."""
    model = small_model(case, mode, max_pd=12)
    t = balance_thresholds(model, target_rps)
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    inner = t[(t > 0) & np.isfinite(t)]
    work = target_rps * _local_work(model, inner)
    n = np.ceil(work * (1 - 1e-9))  # the PD-P count each threshold is the balance point of
    assert np.all(work <= n * (1 + 1e-12))
    above = target_rps * _local_work(model, inner * (1 + 1e-9))
    assert np.all(above > n)
    if np.isinf(t[-1]):  # the whole workload fits the largest count
        full = target_rps * _local_work(model, np.array([np.inf]))[0]
        assert full <= model.max_pd_instances


@pytest.mark.parametrize("mode", list(Mode))
def test_the_case_studys_work_curves_are_monotone(case, mode):
    assert monotone_violation(small_model(case, mode, sites=(0, 3))) == 0.0


def test_a_long_tail_in_paper_mode_is_reported(case):
    """p·T(E[L | L > t]) of a convex T can rise with t on a long tail: measured, and added to
    the report; exact mode (E[T(L); L > t]) never rises."""
    model = small_model(case, Mode.PAPER, sites=(0,))  # h20 as a PrfaaS site
    w = dataclasses.replace(model.workload, mu_log=12.0, sigma_log=1.5)
    assert monotone_violation(dataclasses.replace(model, workload=w)) > 0
    exact = dataclasses.replace(model, workload=w, mode=Mode.EXACT)
    assert monotone_violation(exact) == 0.0


prices = st.floats(2.0, 40.0)
targets = st.floats(0.3, 7.0)


@settings(max_examples=25, deadline=None)
@given(usd=prices, target=targets, gb=st.sampled_from([0.0, 0.02, 0.09]),
       fixed=st.sampled_from([0.0, 2.25, 22.5]), mode=st.sampled_from(list(Mode)))  # fmt: skip
@pytest.mark.slow
def test_the_exact_answer_is_never_dearer_than_the_grids(case, usd, target, gb, fixed, mode):
    model = small_model(case, mode, sites=(0, 3), h200_usd_per_instance_hour=usd, usd_per_gb=gb,
                        fixed=fixed, max_instances=8, max_pd=12)  # fmt: skip
    grid = grid_point(model, target_rps=target)
    exact = exact_target(model, target)
    if grid is not None:  # a reachable target is never called infeasible
        assert exact is not None
        assert exact.point.usd_per_hour <= grid.point.usd_per_hour * (1 + 1e-12)
    if exact is not None:  # and what it buys reaches the target at its threshold
        p = exact.point
        capacity = capacity_rps(exact.space, p.threshold_index, p.site_instances,
                                p.pd_prefill_instances, p.pd_decode_instances)  # fmt: skip
        assert capacity >= target * (1 - 1e-12)


@settings(max_examples=15, deadline=None)
@given(usd=prices, budget=st.floats(30.0, 400.0), gb=st.sampled_from([0.0, 0.02, 0.09]),
       mode=st.sampled_from(list(Mode)))  # fmt: skip
@pytest.mark.slow
def test_a_budget_buys_at_least_the_grids_rate_and_stays_within_it(case, usd, budget, gb, mode):
    model = small_model(case, mode, sites=(0, 3), h200_usd_per_instance_hour=usd, usd_per_gb=gb,
                        max_instances=8, max_pd=12)  # fmt: skip
    start = grid_point(model, budget_usd_per_hour=budget)
    found = exact_budget(model, budget, start)
    if start is None or start.point.served_rps <= 0:
        assert found is None
        return
    assert found is not None and found.proven
    assert found.point.served_rps >= start.point.served_rps * (1 - 1e-12)
    assert found.point.usd_per_hour <= budget * (1 + 1e-12)
    # nothing reaches a hair more within the budget
    above = exact_target(model, found.point.served_rps * (1 + 1e-8))
    assert above is None or above.point.usd_per_hour > budget


def test_an_unlimited_budget_buys_the_most_throughput_at_the_least_cost(case):
    """Budget 1e300 (issue 27): the highest Λ of the space, bought as cheaply as a target of
    that Λ would be; the grid's own budget answer can be dearer for the same Λ."""
    model = small_model(case, sites=(0, 3), h200_usd_per_instance_hour=10.0, max_pd=8)
    found = exact_budget(model, 1e300, grid_point(model, budget_usd_per_hour=1e300))
    assert found is not None
    cheapest = exact_target(model, found.point.served_rps)
    assert cheapest is not None
    assert found.point.usd_per_hour == pytest.approx(cheapest.point.usd_per_hour, rel=1e-12)
    assert exact_target(model, found.point.served_rps * (1 + 1e-8)) is None


def test_rate_within_budget_is_the_best_threshold_for_the_counts(case):
    """The rate a deployment's counts reach within a budget is served at the threshold
    returned (the capacity model's Λ there, and the volume it bills fits the budget) and no
    threshold of a fine grid gives more."""
    model = small_model(case, sites=(3,), h200_usd_per_instance_hour=6.0, usd_per_gb=0.05)
    point = exact_target(model, 3.0).point
    budget = point.usd_per_hour * 1.02
    lam, t = rate_within_budget(model, point, budget)
    space = model.space(np.array([t]))
    counts = (point.site_instances, point.pd_prefill_instances, point.pd_decode_instances)
    assert lam <= capacity_rps(space, 0, *counts) * (1 + 1e-12)
    offloaded = lam * space.offload_fraction[0]
    volume = units.per_s_to_per_hour(space.sites[0].usd_per_offloaded_request[0]) * offloaded
    assert fixed_usd_per_hour(model, point) + volume <= budget * (1 + 1e-12)
    fine = np.geomspace(model.workload.min_tokens, model.workload.max_tokens, 3000)
    g, u = _rate_at(model, point, budget, fine)
    assert np.max(np.minimum(g, u)) <= lam * (1 + 1e-12)
    assert lam > 0.99 * np.max(np.minimum(g, u))  # and the fine grid comes close to it


def test_split_ttft_of_one_site_is_loaded_ttft(case):
    _, problem, _ = case
    configuration = Configuration(4, 3, 5, 19_435.0)
    for load in (0.0, 1.0, 2.5, 3.1):
        one = loaded_ttft(problem.system, problem.workload, configuration, load,
                          link_latency_s=0.005)  # fmt: skip
        split = split_ttft(problem.system, problem.workload, 19_435.0, 3, 5,
                           [SiteRoute(problem.system, 0.005, 4, 1.0)], load)  # fmt: skip
        assert split.stable == one.stable
        assert split.mean_s == pytest.approx(one.mean_s, rel=1e-12)
        for q in (50, 90, 99):  # both inverted by bisection to 1e-10
            assert split.metric(q) == pytest.approx(one.metric(q), rel=1e-9)


def test_split_ttft_queues_at_each_site(case):
    """Two half sites queue more than one pooled site (no pooling across sites); a site that
    its share overloads makes the plan unstable, named."""
    _, problem, _ = case
    pooled = split_ttft(problem.system, problem.workload, 19_435.0, 3, 5,
                        [SiteRoute(problem.system, 0.005, 4, 1.0)], 2.5)  # fmt: skip
    halves = split_ttft(problem.system, problem.workload, 19_435.0, 3, 5,
                        [SiteRoute(problem.system, 0.005, 2, 0.5)] * 2, 2.5)  # fmt: skip
    assert halves.mean_s > pooled.mean_s and halves.p90_s > pooled.p90_s
    lopsided = split_ttft(problem.system, problem.workload, 19_435.0, 3, 5,
                          [SiteRoute(problem.system, 0.005, 1, 0.9),
                           SiteRoute(problem.system, 0.005, 3, 0.1)], 2.5)  # fmt: skip
    assert not lopsided.stable and lopsided.overloaded == ("site 0: prfaas_compute",)
    assert math.isinf(lopsided.p90_s)


def test_a_ttft_target_is_met_by_splitting_over_sites(tmp_path):
    """Two small H200 sites and a PD cluster too small to serve 4 req/s alone: every plan
    offloads to both sites. The capacity-only optimum meets a lax P90 target; a strict one is
    met by a multi-site plan with more capacity, dearer, its P90 from the split model."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(Path("examples/case_study.yaml").read_text() + (
        "procurement:\n  max_pd_instances: 12\n  sites:\n"
        "    - {name: east, gpu: h200, link_offering: aws-dx-100g, usd_per_gpu_hour: 0.5,"
        " max_instances: 4}\n"
        "    - {name: west, gpu: h200, link_offering: aws-dx-100g, usd_per_gpu_hour: 0.6,"
        " max_instances: 4}\n"
    ))  # fmt: skip
    docs = {}
    for target in ("8", "5"):
        result = run("procure", scenario, "--target-rps", "4", "--ttft-target-s", target,
                     "--ttft-load-rps", "3", "-f", "json")  # fmt: skip
        assert result.returncode == 0, result.stderr
        docs[target] = json.loads(result.stdout)
    lax, strict = docs["8"], docs["5"]
    assert len(lax["sites"]) == 2 and not lax["ttft"]["binds"]
    assert len(strict["sites"]) == 2 and strict["ttft"]["binds"]
    assert strict["ttft"]["search"]["multi_site_plans_tried"] >= 1
    assert strict["ttft"]["p90_s"] <= 5.0 < lax["ttft"]["p90_s"]
    assert strict["usd_per_hour_total"] > lax["usd_per_hour_total"]
    assert strict["served_rps"] == 4.0 and strict["capacity_rps"] > 4.0
