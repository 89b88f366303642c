"""`procure --pareto` (use_cases/procure_pareto.py): the frontiers against brute-force
enumeration of a small space, and the CLI's formats and refusals."""

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan import units
from prfaas_plan.solve.procure_space import capacity_rps
from prfaas_plan.use_cases.procure_pareto import candidate_bound, enumerate_plans, non_dominated
from tests.cli.test_cli import assert_clean_error, run
from tests.solve.test_procure import case_space, shrink  # noqa: F401  (fixture)


def brute_force_plans(space, p90_s, pd_p90_s):
    """(cost at Λ_max, Λ_max, P90) of every single-site (or no-site) plan, by itertools."""
    out = []
    for k in range(space.thresholds_tokens.size):
        p = space.offload_fraction[k]
        for j in range(len(space.sites)):
            for n in range(space.sites[j].max_instances + 1):
                counts = tuple(n if i == j else 0 for i in range(len(space.sites)))
                for n_p in range(space.max_pd_instances):
                    for n_d in range(1, space.max_pd_instances - n_p + 1):
                        cap = capacity_rps(space, k, counts, n_p, n_d)
                        if cap <= 0:
                            continue
                        s = space.sites[j]
                        cost = space.pd_usd_per_instance_hour * (n_p + n_d)
                        if n:
                            cost += s.usd_per_instance_hour * n + s.fixed_usd_per_hour
                            cost += (
                                units.per_s_to_per_hour(s.usd_per_offloaded_request[k]) * p * cap
                            )
                        out.append((cost, cap, p90_s[j, k] if n else pd_p90_s))
    return np.array(out)


def dominated_by(points, frontier, tol=1e-9):
    """Each point (cost, benefit to maximise) has a frontier point no dearer and no worse."""
    return all(
        np.any((frontier[:, 0] <= c + tol * abs(c)) & (frontier[:, 1] >= b - tol * abs(b)))
        for c, b in points
    )


@pytest.mark.parametrize("usd_per_request", [0.0, 0.02])
def test_frontiers_match_brute_force(case_space, usd_per_request):  # noqa: F811
    small = shrink(case_space, sites=(3, 0), thresholds=8, max_instances=3, max_pd=6,
                   usd_per_request=usd_per_request)  # fmt: skip
    k_count = small.thresholds_tokens.size
    rng = np.random.default_rng(1)
    p90 = rng.uniform(1, 5, size=(len(small.sites), k_count))
    target = 2.0
    plans, count = enumerate_plans(small, p90, 9.0, target)
    every = brute_force_plans(small, p90, 9.0)
    assert plans["k"].size < count <= candidate_bound(small)  # blocks keep their frontiers
    found = np.column_stack([plans["usd_per_hour"], plans["capacity_rps"], plans["p90_s"]])
    # cost against Λ_max: the frontier is non-dominated and dominates every enumerated plan
    cap = found[non_dominated(found[:, 0], -found[:, 1])][:, :2]
    assert np.all(np.diff(cap[:, 0]) > 0) and np.all(np.diff(cap[:, 1]) > 0)
    assert dominated_by(every[:, :2], cap)
    assert not any(  # no enumerated plan strictly beats a frontier plan
        np.any(
            (every[:, 0] <= c)
            & (every[:, 1] >= b)
            & ((every[:, 0] < c - 1e-9) | (every[:, 1] > b + 1e-9))
        )
        for c, b in cap
    )
    # cost against P90 among plans reaching a target
    reach = found[found[:, 1] >= target]
    ttft = reach[non_dominated(reach[:, 0], reach[:, 2])]
    assert np.all(np.diff(ttft[:, 2]) < 0)
    every_reach = every[every[:, 1] >= target]
    assert dominated_by(np.column_stack([every_reach[:, 0], -every_reach[:, 2]]),
                        np.column_stack([ttft[:, 0], -ttft[:, 2]]))  # fmt: skip


def test_non_dominated_drops_ties_and_beaten_points():
    cost = np.array([1.0, 1.0, 2.0, 3.0, 3.0])
    worse = np.array([5.0, 4.0, 4.0, 1.0, 1.0])
    assert non_dominated(cost, worse).tolist() == [1, 3]


@pytest.mark.slow
def test_pareto_cli_formats(tmp_path):
    args = ["procure", "--pareto", "--target-rps", "2", "--max-instances-per-site", "3"]
    doc = json.loads(run(*args, "--format", "json").stdout)
    frontier = doc["capacity_frontier"]
    assert [r["usd_per_hour"] for r in frontier] == sorted(r["usd_per_hour"] for r in frontier)
    assert all(r["capacity_rps"] >= 2 * (1 - 1e-9) for r in doc["ttft_frontier"])
    names = {m["name"] for m in doc["reference_deployments"]}
    assert names == {"homogeneous_pd", "naive_heterogeneous", "scenario"}
    figure = tmp_path / "pareto.png"
    result = run(*args, "--format", "csv", "--plot", str(figure))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == len(frontier) + len(doc["ttft_frontier"])
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pareto_cli_refusals():
    assert_clean_error(run("procure", "--pareto"), 3, "--target-rps")
    assert_clean_error(run("procure", "--pareto", "--budget-usd-per-hour", "100"), 3, "--pareto")
    assert_clean_error(run("procure", "--target-rps", "2", "--format", "csv"), 3, "--pareto")


def test_a_space_too_large_to_enumerate_is_refused_before_it_starts(tmp_path):
    """64 sites x 1,000 instances x 1,000 PD instances (each within its own bound) would weigh
    ~8e9 plans: refused at once, naming what to shrink; 6 sites x 1,000 instances runs, its
    memory holding only the frontiers (blocks reduced as they are enumerated)."""
    sites = "".join(
        f"    - {{name: s{i}, gpu: h200, link_offering: aws-dx-100g, max_instances: 1000}}\n"
        for i in range(64)
    )
    scenario = tmp_path / "big.yaml"
    scenario.write_text(Path("examples/case_study.yaml").read_text()
                        + "procurement:\n  max_pd_instances: 1000\n  sites:\n" + sites)  # fmt: skip
    assert_clean_error(run("procure", scenario, "--pareto", "--target-rps", "4"), 3,
                       "would weigh 8.45e+09 candidate plans", "--max-instances-per-site",
                       "procurement.max_pd_instances")  # fmt: skip
