"""`procure --ttft-target-s` (solve/procure_ttft.py, use_cases/procure.py): the route-separable
search against evaluating every single-site plan's whole TTFT (brute force) on small spaces,
the route split of the TTFT model against its whole CDF and mean, and the CLI."""

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.analytic.capacity import Configuration
from prfaas_plan.analytic.deployment_load import loads
from prfaas_plan.analytic.loaded_ttft import loaded_ttft
from prfaas_plan.analytic.ttft_distribution import route_part, ttft_cdf, ttft_mesh
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import resolve_pricing
from prfaas_plan.inputs.scenario import open_problem
from prfaas_plan.solve.procure_milp import solve_procure
from prfaas_plan.solve.procure_space import capacity_rps
from prfaas_plan.solve.procure_ttft import SiteQueues, TtftGoal, cheapest_with_ttft
from prfaas_plan.solve.procure_ttft_plans import brute_force_with_ttft
from prfaas_plan.use_cases.plan import TtftTarget
from prfaas_plan.use_cases.procure import procure
from prfaas_plan.use_cases.procure_sites import procure_candidates
from tests.cli.test_cli import assert_clean_error, run
from tests.solve.test_procure import aws_problem, shrink


@pytest.fixture(scope="module")
def case():
    catalog = Catalog.open()
    problem = aws_problem()
    pricing = resolve_pricing(catalog, problem.scenario, problem.source)
    sites, space, systems = procure_candidates(catalog, problem, pricing)
    queues = tuple(SiteQueues(sy, s.rtt_s) for s, sy in zip(sites, systems, strict=True))
    return catalog, problem, pricing, space, queues


def test_routes_add_up_to_the_whole_ttft(case):
    """The local and offloaded parts sum to P(TTFT <= x) and to −mean, plan by plan; an
    overloaded route is −inf (the third plan's PD-P pool)."""
    _, problem, _, _, queues = case
    system, rtt = queues[3].system, queues[3].rtt_s
    t = np.array([8_000.0, 19_400.0, 60_000.0])
    state = loads(system, problem.workload, t, 4, np.array([3, 4, 5]), 5, 2.5, rtt)
    mesh = ttft_mesh(system, problem.workload)
    assert list(state.stable) == [True, True, False]
    for x in (3.0, 8.0):
        whole = ttft_cdf(mesh, state, t, rtt, np.full((3, 1), x))[:, 0]
        parts = [route_part(system, mesh, state, t, rtt, x, offloaded=o) for o in (False, True)]
        np.testing.assert_allclose((parts[0] + parts[1])[:2], whole[:2], rtol=1e-12)
        assert parts[0][2] == -np.inf and np.isfinite(parts[1][2])
    parts = [route_part(system, None, state, t, rtt, 0.0, offloaded=o) for o in (False, True)]
    np.testing.assert_allclose(-(parts[0] + parts[1])[:2], state.mean_s[:2], rtol=1e-12)


GOALS = [
    (2.0, TtftGoal(90, 20.0, 2.0)),  # an H200 site is the cheapest way to meet it
    (2.0, TtftGoal(90, 12.0, 1.6)),
    (1.5, TtftGoal(50, 4.0, 1.5)),
    (2.0, TtftGoal("mean", 6.0, 1.8)),
    (1.0, TtftGoal(99, 30.0, 1.0)),
    (2.0, TtftGoal(90, 1.0, 2.0)),  # nothing meets it
]


@pytest.mark.parametrize("idx", [(3, 0), (3, 5, 1)])
@pytest.mark.parametrize(("target", "goal"), GOALS)
@pytest.mark.slow
def test_search_matches_brute_force(case, target, goal, idx):
    _, problem, _, space, queues = case
    small = shrink(
        space, sites=idx, thresholds=8, max_instances=3, max_pd=8 if len(idx) == 2 else 12
    )
    q = tuple(queues[i] for i in idx)
    search = cheapest_with_ttft(small, problem.system, q, problem.workload, target, goal)
    exact = brute_force_with_ttft(small, problem.system, q, problem.workload, target, goal)
    if exact is None:
        assert search.point is None
        # what the best plan reaches, short of the target
        if goal.metric == "mean":
            assert search.lowest_mean_s > goal.target_s
        else:
            assert search.best_met_fraction < float(goal.metric) / 100
        return
    point = search.point
    assert point is not None
    assert point.usd_per_hour == pytest.approx(exact.usd_per_hour, rel=1e-9)
    # the point is what it says: it reaches the rate and meets the target at the load
    k, n = point.threshold_index, point.site_instances
    assert capacity_rps(small, k, n, point.pd_prefill_instances, point.pd_decode_instances) >= (
        target * (1 - 1e-9)
    )
    j = [i for i, c in enumerate(n) if c]
    system, rtt = (q[j[0]].system, q[j[0]].rtt_s) if j else (problem.system, 0.0)
    state = loaded_ttft(
        system, problem.workload,
        Configuration(sum(n), point.pd_prefill_instances, point.pd_decode_instances,
                      float(small.thresholds_tokens[k])),
        goal.load_rps, link_latency_s=rtt,
    )  # fmt: skip
    assert state.stable and state.metric(goal.metric) <= goal.target_s * (1 + 1e-9)
    # never cheaper than the capacity-only optimum
    cheapest = solve_procure(small, target_rps=target)
    assert cheapest is not None and point.usd_per_hour >= cheapest.usd_per_hour * (1 - 1e-9)


def test_a_site_is_bought_for_latency(case):
    """On the shipped prices, 2 req/s alone is cheapest on H20s only; a P90 of 8 s at 2 req/s
    buys H200 prefill for the long requests: the TTFT target, not capacity, sets the cost."""
    catalog, problem, pricing, _, _ = case
    plain = procure(catalog, problem, pricing, target_rps=2.0)
    assert sum(plain.point.site_instances) == 0
    report = procure(catalog, problem, pricing, target_rps=2.0,
                     ttft=TtftTarget(8.0, 90, load_rps=2.0))  # fmt: skip
    assert report.ttft is not None and report.ttft.binds
    assert sum(report.point.site_instances) > 0
    assert report.point.usd_per_hour > plain.point.usd_per_hour
    assert report.ttft.loaded.p90_s <= 8.0
    assert report.ttft.capacity_only_usd_per_hour == pytest.approx(plain.point.usd_per_hour)


def test_the_cheapest_plan_is_kept_when_it_meets_the_target(case):
    catalog, problem, pricing, _, _ = case
    plain = procure(catalog, problem, pricing, target_rps=2.0)
    report = procure(catalog, problem, pricing, target_rps=2.0,
                     ttft=TtftTarget(200.0, 90, load_fraction=0.5))  # fmt: skip
    assert report.point == plain.point and report.bound == plain.bound
    assert report.ttft is not None and not report.ttft.binds
    assert report.ttft is not None and report.ttft.load_rps == pytest.approx(1.0)
    assert report.ttft.pairs_evaluated == 0


@pytest.mark.slow
def test_procure_ttft_cli():
    result = run("procure", "--target-rps", "2", "--ttft-target-s", "8", "-f", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    ttft = doc["ttft"]
    assert ttft["binds"] and doc["bound"] == "pd_decode"
    assert ttft["percentile"] == 90 and ttft["load_rps"] == 2.0 and ttft["stable"]
    assert ttft["p90_s"] <= 8.0 < doc["usd_per_hour_total"]
    assert ttft["capacity_only_usd_per_hour"] < doc["usd_per_hour_total"]
    table = run("procure", "--target-rps", "2", "--ttft-target-s", "8")
    assert "P90 TTFT at 2 req/s" in table.stdout and "raises the cost" in table.stdout


@pytest.mark.parametrize(
    ("args", "code", "fragments"),
    [
        pytest.param(["--target-rps", "4", "--ttft-target-s", "1"], 6,
         ["no deployment reaches --target-rps 4", "P(TTFT <= 1 s) reaches at most", "multi-site plans",
          "needs 90%"], marks=pytest.mark.slow),  # an infeasible target searches everything
        pytest.param(["--target-rps", "4", "--ttft-target-s", "5", "--ttft-load-rps", "100"], 6,
         ["every candidate is overloaded at 100 req/s"], marks=pytest.mark.slow),
        (["--pareto", "--target-rps", "4", "--ttft-load-rps", "nan"], 3, ["--ttft-load-rps"]),
        (["--budget-usd-per-hour", "200", "--ttft-target-s", "10"], 3,
         ["--ttft-target-s", "applies to --target-rps"]),
        (["--target-rps", "3", "--ttft-load", "0.5"], 3, ["--ttft-target-s"]),
        (["--target-rps", "3", "--ttft-target-s", "5", "--ttft-percentile", "95"], 3,
         ["--ttft-percentile", "95"]),
        (["--target-rps", "3", "--ttft-target-s", "-1"], 3, ["--ttft-target-s", "-1"]),
        (["--target-rps", "3", "--ttft-target-s", "5", "--ttft-load", "0.5",
          "--ttft-load-rps", "2"], 3, ["exactly one"]),
    ],
)  # fmt: skip
def test_procure_ttft_refusals(args, code, fragments):
    assert_clean_error(run("procure", *args), code, *fragments)


def _every_single_site_plan(space, problem, queues, target, load):
    """(cost at Λ_max, P90 at `load`) of every single-site plan reaching `target` (brute force)."""
    from prfaas_plan import units
    from prfaas_plan.solve.procure_space import ProcurePoint
    from prfaas_plan.solve.procure_ttft_plans import point_ttft, single_site_plans

    out = []
    for k, j, n, n_p, n_d in single_site_plans(space):
        cap = capacity_rps(space, k, n, n_p, n_d)
        if cap < target * (1 - 1e-9):
            continue
        usd = space.pd_usd_per_instance_hour * (n_p + n_d)
        if j >= 0:
            s, p = space.sites[j], space.offload_fraction[k]
            usd += (
                s.usd_per_instance_hour * n[j]
                + s.fixed_usd_per_hour
                + (units.per_s_to_per_hour(s.usd_per_offloaded_request[k]) * p * cap)
            )
        point = ProcurePoint(k, n, (0.0,) * len(n), n_p, n_d, target, usd)
        state = point_ttft(space, problem.system, queues, problem.workload, point, load)
        if state.stable:
            out.append((usd, state.p90_s))
    return out


@pytest.mark.slow
def test_loaded_frontier_against_every_plan(case):
    """The ε-constraint frontier at a load: its first plan is the cheapest stable one; each
    next plan is the cheapest whose P90 is below (1 − step) x the previous one's; and every
    plan of the space is matched by a frontier plan no dearer and within the step in P90."""
    from prfaas_plan.solve.procure_ttft_plans import ttft_frontier

    _, problem, _, space, queues = case
    idx = (3, 0)
    small = shrink(space, sites=idx, thresholds=10, max_instances=3, max_pd=8)
    q = tuple(queues[i] for i in idx)
    step = 0.05
    found = ttft_frontier(small, problem.system, q, problem.workload, 1.5, 1.2, step=step)
    every = _every_single_site_plan(small, problem, q, 1.5, 1.2)
    assert len(found) >= 3 and every
    assert found[0].point.usd_per_hour == pytest.approx(min(c for c, _ in every), rel=1e-9)
    for before, point in itertools.pairwise(found):
        assert point.point.usd_per_hour > before.point.usd_per_hour  # none dominates another
        limit = before.ttft_s * (1 - step)
        assert point.ttft_s <= limit * (1 + 1e-9)
        cheapest = min(c for c, t in every if t <= limit)
        assert point.point.usd_per_hour == pytest.approx(cheapest, rel=1e-9)
    for usd, p90 in every:
        assert any(f.point.usd_per_hour <= usd * (1 + 1e-9) and f.ttft_s * (1 - step) <= p90
                   * (1 + 1e-9) for f in found)  # fmt: skip


@pytest.mark.slow
def test_pareto_at_a_load_cli(tmp_path):
    scenario = tmp_path / "one_site.yaml"
    scenario.write_text(
        (Path(__file__).parents[2] / "examples" / "case_study.yaml").read_text()
        + "procurement:\n  max_pd_instances: 16\n  sites:\n"
        "    - {name: east, gpu: h200, link_offering: aws-dx-100g, max_instances: 6}\n"
    )
    args = ("procure", str(scenario), "--pareto", "--target-rps", "2", "-f", "json")
    result = run(*args, "--ttft-load-rps", "1.8")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["ttft_load_rps"] == 1.8
    frontier = doc["ttft_frontier"]
    assert len(frontier) >= 3
    costs = [r["usd_per_hour"] for r in frontier]
    p90s = [r["p90_ttft_s"] for r in frontier]
    assert costs == sorted(costs) and p90s == sorted(p90s, reverse=True)
    assert all(r["capacity_rps"] >= 2.0 * (1 - 1e-9) for r in frontier)
    unloaded = json.loads(run(*args).stdout)
    # queueing only adds: no plan's P90 at the load is below the best unloaded P90
    assert min(p90s) >= min(r["p90_ttft_s"] for r in unloaded["ttft_frontier"])
    assert_clean_error(
        run("procure", "--pareto", "--target-rps", "4", "--ttft-target-s", "5"),
        3,
        "--pareto takes --ttft-load-rps alone",
    )


@pytest.mark.parametrize("offered", [0.0, 0.01, 0.5, 1.0, 3.0, 10.0, 57.3, 200.0, 900.0, 5000.0])
def test_past_saturated_servers_no_request_waits(offered):
    """The searches stop a pool's count at saturated_servers: there Erlang C is below 1e-25, so
    a TTFT figure cannot move by more than that with more servers."""
    from prfaas_plan.analytic.queueing import mgc
    from prfaas_plan.solve.procure_ttft import saturated_servers

    servers = int(saturated_servers(np.array([offered]))[0])
    state = mgc(servers, np.array([offered]), 1.0, 1.0)
    assert float(state.wait_probability[0]) < 1e-25


def test_a_route_at_one_point_is_the_whole_cdf_at_that_point(case):
    """route_cdf's one-x path (a masked exponential and a matrix-vector product) equals its
    general path, for plans at one threshold and at several, both routes, loaded or not."""
    from prfaas_plan.analytic.ttft_distribution import route_cdf

    _, problem, _, _, queues = case
    system, rtt = queues[3].system, queues[3].rtt_s
    mesh = ttft_mesh(system, problem.workload)
    rng = np.random.default_rng(7)
    for lam in (0.0, 1.0, 2.8):
        t = rng.choice([4_000.0, 19_435.0, 70_000.0], size=6)
        for thresholds in (np.full(6, 19_435.0), t):
            state = loads(system, problem.workload, thresholds, rng.integers(1, 8, 6),
                          rng.integers(1, 8, 6), 6, lam, rtt)  # fmt: skip
            for offloaded in (False, True):
                for x in (0.3, 2.0, 7.5, 60.0):
                    one = route_cdf(mesh, state, thresholds, rtt, np.full((6, 1), x), offloaded)
                    two = route_cdf(mesh, state, thresholds, rtt,
                                    np.column_stack([np.full(6, x), np.full(6, 2 * x)]),
                                    offloaded)  # fmt: skip
                    finite = np.isfinite(two[:, 0])
                    np.testing.assert_allclose(one[finite, 0], two[finite, 0], rtol=1e-12,
                                               atol=1e-15)  # fmt: skip


@pytest.mark.slow
def test_a_site_beaten_on_every_count_is_not_searched():
    """On the shipped sites the 16 km dark fibre (cheaper port, no volume price, same width,
    shorter RTT) beats Direct Connect 100G and the metro wavelength for each GPU; the
    frontier and a TTFT search are the same with or without them."""
    from prfaas_plan.solve.procure_ttft import dominated_sites
    from prfaas_plan.use_cases.procure_pareto import procure_pareto
    from prfaas_plan.use_cases.procure_sites import procure_pricing

    catalog, problem = Catalog.open(), open_problem()
    pricing = procure_pricing(catalog, problem)
    sites, space, systems = procure_candidates(catalog, problem, pricing)
    queues = tuple(SiteQueues(sy, s.rtt_s) for s, sy in zip(sites, systems, strict=True))
    beaten = {sites[j].name for j in dominated_sites(space, queues)}
    assert beaten == {f"{gpu}.{link}" for gpu in ("h20", "h200")
                      for link in ("aws-dx-100g", "metro-wave-100g")}  # fmt: skip
    kept = tuple(j for j in range(len(sites)) if sites[j].name not in beaten)
    small = dataclasses.replace(space, sites=tuple(space.sites[j] for j in kept))
    goal = TtftGoal(90, 6.0, 3.0)
    every = cheapest_with_ttft(space, problem.system, queues, problem.workload, 3.0, goal)
    fewer = cheapest_with_ttft(small, problem.system, tuple(queues[j] for j in kept),
                               problem.workload, 3.0, goal)  # fmt: skip
    assert every.point is not None and fewer.point is not None
    assert every.point.usd_per_hour == fewer.point.usd_per_hour
    frontier = procure_pareto(catalog, problem, pricing, target_rps=4.0, ttft_load_rps=4.0)
    assert all(p.site is None or p.site not in beaten for p in frontier.ttft_frontier)
