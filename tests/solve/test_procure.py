"""`procure` (solve/procure_milp.py, use_cases/procure.py): the MILP against brute-force
enumeration of the same small spaces, in target and budget modes, and the CLI's failures."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan import units
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import resolve_pricing
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.inputs.scenario_schema import ProcurementSpec, SiteSpec
from prfaas_plan.solve.procure_bounds import single_site_budget, single_site_target
from prfaas_plan.solve.procure_milp import solve_procure, solve_procure_monolithic
from prfaas_plan.solve.procure_space import ProcureSpace, brute_force, capacity_rps, site_caps
from prfaas_plan.use_cases.procure_sites import procure_space
from tests.cli.test_cli import assert_clean_error, run

AWS_LINKS = ("aws-dx-100g", "aws-dx-10g", "aws-internet-egress")


def aws_problem():
    """The case study with the candidate sites these tests index (`sites=(3, 0)`: h200 and h20 on
    aws-dx-100g, ...): each GPU x the three AWS offerings, whatever else data/links/ holds."""
    path = default_scenario_file()
    sites = [SiteSpec(name=f"{g}.{x}", gpu=g, link_offering=x) for g in ("h20", "h200")
             for x in AWS_LINKS]  # fmt: skip
    scenario = load_scenario(path)
    scenario = scenario.model_copy(update={"procurement": ProcurementSpec(sites=sites)})
    return build_problem(scenario, path, Catalog.open())


@pytest.fixture(scope="module")
def case_space() -> ProcureSpace:
    catalog = Catalog.open()
    problem = aws_problem()
    pricing = resolve_pricing(catalog, problem.scenario, problem.source)
    return procure_space(catalog, problem, pricing)[1]


def shrink(space, sites=(3, 0), thresholds=12, max_instances=3, max_pd=6, usd_per_request=None):
    """A small sub-space: every n-th threshold, a few sites, few instances; optionally a volume
    price of `usd_per_request` for the largest offloaded request (others in proportion to their
    KV bytes)."""
    keep = np.unique(np.linspace(0, space.thresholds_tokens.size - 1, thresholds).astype(int))
    chosen = []
    for j in sites:
        s = space.sites[j]
        w = s.usd_per_offloaded_request[keep]
        if usd_per_request is not None:
            base = s.usd_per_offloaded_request[keep]
            w = np.where(base > 0, base / base.max(), 0) * usd_per_request
        chosen.append(dataclasses.replace(
            s, compute_rps_per_instance=s.compute_rps_per_instance[keep],
            link_rps=s.link_rps[keep], usd_per_offloaded_request=w, max_instances=max_instances,
        ))  # fmt: skip
    return dataclasses.replace(
        space, thresholds_tokens=space.thresholds_tokens[keep],
        offload_fraction=space.offload_fraction[keep], local_fraction=space.local_fraction[keep],
        pd_prefill_rps_per_instance=space.pd_prefill_rps_per_instance[keep],
        max_pd_instances=max_pd, sites=tuple(chosen),
    )  # fmt: skip


def brute_force_budget(space: ProcureSpace, budget: float) -> float:
    """The highest Λ within `budget` by enumeration: for each count, the greedy (cheapest
    volume first) offloaded rate the remaining budget pays for."""
    import itertools

    best = 0.0
    ranges = [range(s.max_instances + 1) for s in space.sites]
    for k in range(space.thresholds_tokens.size):
        p = space.offload_fraction[k]
        for n in itertools.product(*ranges):
            fixed = sum(s.fixed_usd_per_hour + s.usd_per_instance_hour * c
                        for s, c in zip(space.sites, n, strict=True) if c > 0)  # fmt: skip
            caps = site_caps(space, k, n)
            for n_p in range(space.max_pd_instances):
                for n_d in range(1, space.max_pd_instances - n_p + 1):
                    left = budget - fixed - space.pd_usd_per_instance_hour * (n_p + n_d)
                    if left < 0:
                        break
                    lam = capacity_rps(space, k, n, n_p, n_d)
                    if p > 0:
                        afford = 0.0
                        for j in np.argsort([units.per_s_to_per_hour(s.usd_per_offloaded_request[k])
                                             for s in space.sites], kind="stable"):  # fmt: skip
                            price = units.per_s_to_per_hour(
                                space.sites[j].usd_per_offloaded_request[k]
                            )
                            take = caps[j] if price * caps[j] <= left else left / price
                            afford += take
                            left -= take * price
                        lam = min(lam, afford / p)
                    best = max(best, lam)
    return best


@pytest.mark.parametrize("sites", [(3, 0), (3, 5), (3, 4, 0)])
@pytest.mark.parametrize("usd_per_request", [0.0, 0.02])
@pytest.mark.parametrize("target", [1.0, 2.5, 4.0])
@pytest.mark.slow
def test_milp_matches_brute_force_target(case_space, sites, usd_per_request, target):
    small = shrink(case_space, sites=sites, max_instances=2 if len(sites) == 3 else 3,
                   usd_per_request=usd_per_request)  # fmt: skip
    exact = brute_force(small, target)
    milp = solve_procure(small, target_rps=target)
    whole = solve_procure_monolithic(small, target_rps=target)  # one MILP, no decomposition
    if exact is None:
        assert milp is None and whole is None
        return
    assert milp is not None and whole is not None
    assert milp.usd_per_hour == pytest.approx(exact.usd_per_hour, rel=1e-6)
    assert whole.usd_per_hour == pytest.approx(exact.usd_per_hour, rel=1e-6)
    # the MILP's counts really reach the target
    k, n = milp.threshold_index, milp.site_instances
    assert capacity_rps(small, k, n, milp.pd_prefill_instances, milp.pd_decode_instances) >= (
        target * (1 - 1e-6)
    )


def test_cheap_prfaas_is_bought(case_space):
    """With free link volume and a cheap H200, the cheapest plan offloads (several sites may
    share it); with dear volume, homogeneous PD wins: the MILP sees the link's price."""
    sites = tuple(
        dataclasses.replace(s, usd_per_instance_hour=8.0) if s.name.startswith("h200") else s
        for s in case_space.sites
    )
    cheap = shrink(dataclasses.replace(case_space, sites=sites), sites=(3, 5), usd_per_request=0.0)
    point = solve_procure(cheap, target_rps=2.5)
    assert point is not None and sum(point.site_instances) > 0
    assert point.usd_per_hour == pytest.approx(brute_force(cheap, 2.5).usd_per_hour, rel=1e-6)
    dear = shrink(dataclasses.replace(case_space, sites=sites), sites=(3, 5), usd_per_request=5.0)
    assert sum(solve_procure(dear, target_rps=0.9).site_instances) == 0  # 6 PD instances do


@settings(max_examples=8, deadline=None)
@given(budget=st.floats(10, 120), usd_per_request=st.sampled_from([0.0, 0.05]))
@pytest.mark.slow
def test_milp_matches_brute_force_budget(case_space, budget, usd_per_request):
    small = shrink(case_space, sites=(3, 0), thresholds=8, max_instances=2, max_pd=5,
                   usd_per_request=usd_per_request)  # fmt: skip
    point = solve_procure(small, budget_usd_per_hour=budget)
    if budget < small.pd_usd_per_instance_hour:
        assert point is None
        return
    assert point is not None and point.usd_per_hour <= budget * (1 + 1e-9)
    assert point.served_rps == pytest.approx(brute_force_budget(small, budget), rel=1e-6, abs=1e-9)
    whole = solve_procure_monolithic(small, budget_usd_per_hour=budget)
    assert whole.served_rps == pytest.approx(point.served_rps, rel=1e-6, abs=1e-9)


def test_procure_cli_target_and_budget():
    result = run("procure", "--target-rps", "2", "--max-instances-per-site", "4", "-f", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["served_rps"] == pytest.approx(2.0) and doc["capacity_rps"] >= 2 * (1 - 1e-9)
    parts = sum(s["usd_per_hour"]["gpus"] + s["usd_per_hour"]["link_fixed"]
                + s["usd_per_hour"]["link_volume"] for s in doc["sites"])  # fmt: skip
    assert parts + doc["pd_cluster"]["usd_per_hour"] == pytest.approx(doc["usd_per_hour_total"])
    budget = run("procure", "--budget-usd-per-hour", str(doc["usd_per_hour_total"]),
                 "--max-instances-per-site", "4", "-f", "json")  # fmt: skip
    assert json.loads(budget.stdout)["served_rps"] >= 2 * (1 - 1e-6)


@pytest.mark.parametrize(
    "args, code, fragments",
    [
        (["--target-rps", "400", "--max-instances-per-site", "2"], 6,
         ["--target-rps 400", "the best is", "bound by"]),
        (["--budget-usd-per-hour", "1"], 6, ["--budget-usd-per-hour 1", "cheapest"]),
        ([], 3, ["exactly one of --target-rps and --budget-usd-per-hour"]),
        (["--target-rps", "1", "--budget-usd-per-hour", "9"], 3, ["exactly one"]),
        (["--budget-usd-per-hour", "-5"], 3, ["--budget-usd-per-hour", "got -5"]),
        (["--budget-usd-per-hour", "1e300"], 3,
         ["--budget-usd-per-hour must be in [0.01, 1e+08] $/h", "got 1e+300"]),
    ],
)  # fmt: skip
def test_procure_cli_failures(args, code, fragments):
    assert_clean_error(run("procure", *args), code, *fragments)


def test_procure_has_no_link_offering_flag():
    """Each site names its own offering: a global one would be silently ignored."""
    result = run("procure", "--target-rps", "1", "--link-offering", "aws-dx-100g")
    assert result.returncode == 2 and "No such option: --link-offering" in result.stderr


def test_scenario_sites(tmp_path):
    text = Path("examples/case_study.yaml").read_text()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text + (
        "procurement:\n  max_pd_instances: 8\n  sites:\n"
        "    - {name: east, gpu: h200, link_offering: aws-dx-100g, usd_per_gpu_hour: 1.0,"
        " max_instances: 4}\n"
    ))  # fmt: skip
    doc = json.loads(run("procure", scenario, "--target-rps", "1", "-f", "json").stdout)
    assert doc["candidate_sites"] == ["east"]
    assert doc["pd_cluster"]["pd_prefill_instances"] + doc["pd_cluster"]["pd_decode_instances"] <= 8
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        text + "procurement:\n  sites:\n    - {name: x, gpu: h100, link_offering: aws-dx-100g}\n"
    )
    assert_clean_error(run("procure", bad, "--target-rps", "1"), 3,
                       "bad.yaml: procurement.sites[x]: unknown GPU 'h100'")  # fmt: skip
    bad.write_text(
        text + "procurement:\n  sites:\n    - {name: y, gpu: h200, link_offering: nope}\n"
    )
    assert_clean_error(run("procure", bad, "--target-rps", "1"), 3,
                       "procurement.sites[y]", "unknown link offering 'nope'")  # fmt: skip
    assert math.isfinite(doc["usd_per_hour_total"])


def test_a_site_that_can_carry_nothing_changes_nothing(tmp_path):
    """A site allowed no instance, on a link with no fixed price, once made every offloading
    threshold's lower bound NaN (0/0), which read as infeasible: 3 req/s, which needs both
    H200 sites, exited 6. With or without the idle site, the same plan."""
    text = Path("examples/case_study.yaml").read_text() + (
        "procurement:\n  max_pd_instances: 12\n  sites:\n"
        "    - {name: east, gpu: h200, link_offering: aws-dx-100g, max_instances: 1}\n"
        "    - {name: west, gpu: h200, link_offering: aws-dx-10g, max_instances: 1}\n"
    )
    docs = []
    for idle in (
        "",
        "    - {name: idle, gpu: h20, link_offering: aws-internet-egress, max_instances: 0}\n",
    ):
        scenario = tmp_path / f"s{len(docs)}.yaml"
        scenario.write_text(text + idle)
        result = run("procure", scenario, "--target-rps", "3", "-f", "json")
        assert result.returncode == 0, result.stderr
        docs.append(json.loads(result.stdout))
    assert [s["name"] for s in docs[1]["sites"]] == ["east", "west"]
    assert docs[1]["usd_per_hour_total"] == pytest.approx(docs[0]["usd_per_hour_total"], rel=1e-9)


@pytest.mark.parametrize("suffix", [".mps", ".lp"])
@pytest.mark.slow
def test_exported_model_has_the_same_optimum(tmp_path, suffix):
    """--export-model writes the whole MILP; HiGHS reading the file finds procure's optimum."""
    import highspy

    text = Path("examples/case_study.yaml").read_text()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text + (
        "procurement:\n  max_pd_instances: 10\n  sites:\n"
        "    - {name: east, gpu: h200, link_offering: aws-dx-100g, usd_per_gpu_hour: 0.5,"
        " max_instances: 3}\n"
        "    - {name: west, gpu: h20, link_offering: aws-internet-egress, max_instances: 3}\n"
    ))  # fmt: skip
    model = tmp_path / f"procure{suffix}"
    result = run("procure", scenario, "--target-rps", "1.5", "--export-model", model, "-f", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 1e-9)
    assert h.readModel(str(model)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(
        doc["usd_per_hour_total"], rel=1e-6
    )


def test_export_model_suffix_is_checked(tmp_path):
    assert_clean_error(run("procure", "--target-rps", "1", "--export-model", tmp_path / "m.txt"),
                       3, "--export-model must end in .mps or .lp")  # fmt: skip


def test_a_budget_that_buys_no_serving_deployment_is_infeasible():
    """One PD instance decodes but cannot prefill: a budget below two is refused (exit 6),
    never answered with a deployment serving 0 req/s."""
    from tests.cli.test_cli import assert_clean_error, run

    assert_clean_error(
        run("procure", "--budget-usd-per-hour", "10"), 6,
        "one PD-P + one PD-D instance", "19.20 $/h",
    )  # fmt: skip
    ok = json.loads(run("procure", "--budget-usd-per-hour", "19.2", "-f", "json").stdout)
    assert json.dumps(ok).count("served") > 0


def test_procure_buys_links_whatever_the_scenarios_own_link(tmp_path):
    """Each site brings its own offering: a 1,000 Gbps scenario link (wider than any offering)
    procures as the 100 Gbps one does."""
    from tests.cli.test_cli import run

    case = (Path(__file__).resolve().parents[2] / "examples" / "case_study.yaml").read_text()
    wide = tmp_path / "wide.yaml"
    wide.write_text(case.replace("bandwidth_gbps: 100", "bandwidth_gbps: 1000"))
    a = run("procure", "--target-rps", "4", "-f", "json")
    b = run("procure", wide, "--target-rps", "4", "-f", "json")
    assert a.returncode == b.returncode == 0, b.stderr

    def strip(d):
        return {k: v for k, v in json.loads(d).items() if k not in {"inputs", "scenario_file"}}

    assert strip(a.stdout) == strip(b.stdout)


def _repriced(space: ProcureSpace, instance_usd: list[float], fixed_usd: list[float]):
    sites = tuple(
        dataclasses.replace(s, usd_per_instance_hour=p, fixed_usd_per_hour=f)
        for s, p, f in zip(space.sites, instance_usd, fixed_usd, strict=True)
    )
    return dataclasses.replace(space, sites=sites)


prices = st.lists(st.floats(1.0, 80.0), min_size=2, max_size=2)
fixed = st.lists(st.sampled_from([0.0, 5.0, 60.0]), min_size=2, max_size=2)


@settings(max_examples=12, deadline=None)
@given(instance_usd=prices, fixed_usd=fixed, target=st.floats(0.5, 4.0),
       usd_per_request=st.sampled_from([0.0, 0.01, 0.1]))  # fmt: skip
def test_pruned_search_matches_brute_force_at_any_price_target(
    case_space, instance_usd, fixed_usd, target, usd_per_request
):
    """The single-site incumbent and the per-threshold lower bounds prune thresholds without
    the MILP: at any prices the answer is still brute force's, and never dearer than the best
    single-site point."""
    small = _repriced(shrink(case_space, sites=(3, 5), usd_per_request=usd_per_request),
                      instance_usd, fixed_usd)  # fmt: skip
    exact = brute_force(small, target)
    point = solve_procure(small, target_rps=target)
    single = single_site_target(small, target)
    if exact is None:
        assert point is None and single is None
        return
    assert point is not None and point.usd_per_hour == pytest.approx(exact.usd_per_hour, rel=1e-6)
    if single is None:  # only several sites together reach the target
        assert sum(c > 0 for c in point.site_instances) > 1
        return
    assert single.usd_per_hour >= point.usd_per_hour * (1 - 1e-9)
    k, n = single.threshold_index, single.site_instances
    assert sum(c > 0 for c in n) <= 1
    assert capacity_rps(small, k, n, single.pd_prefill_instances, single.pd_decode_instances) >= (
        target * (1 - 1e-9)
    )


@settings(max_examples=10, deadline=None)
@given(instance_usd=prices, fixed_usd=fixed, budget=st.floats(15.0, 150.0),
       usd_per_request=st.sampled_from([0.0, 0.05]))  # fmt: skip
@pytest.mark.slow
def test_pruned_search_matches_brute_force_at_any_price_budget(
    case_space, instance_usd, fixed_usd, budget, usd_per_request
):
    small = _repriced(shrink(case_space, sites=(3, 5), thresholds=8, max_instances=2, max_pd=5,
                             usd_per_request=usd_per_request), instance_usd, fixed_usd)  # fmt: skip
    point = solve_procure(small, budget_usd_per_hour=budget)
    best = brute_force_budget(small, budget)
    single = single_site_budget(small, budget)
    if point is None:
        assert best == 0.0 and single is None
        return
    assert point.usd_per_hour <= budget * (1 + 1e-9)
    assert point.served_rps == pytest.approx(best, rel=1e-6, abs=1e-9)
    if single is not None:  # a feasible point: within the budget, serving what it says
        assert single.usd_per_hour <= budget * (1 + 1e-9)
        assert single.served_rps <= point.served_rps * (1 + 1e-9)
        k, n = single.threshold_index, single.site_instances
        assert capacity_rps(small, k, n, single.pd_prefill_instances,
                            single.pd_decode_instances) >= single.served_rps * (1 - 1e-9)  # fmt: skip


def test_solver_writes_to_descriptor_1_never_reach_stdout():
    """HiGHS inside scipy may print a debug line straight to file descriptor 1 during a MILP
    (seen on budget-mode procure spaces); solves run with descriptor 1 on /dev/null."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from prfaas_plan.solve.quiet import solver_output_silenced\n"
        "print('before', flush=True)\n"
        "with solver_output_silenced():\n"
        "    os.write(1, b'HighsMipSolverData::transformNewIntegerFeasibleSolution\\n')\n"
        "print('after')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "before\nafter\n" and out.stderr == ""


def test_no_site_at_all_buys_the_pd_cluster_alone(tmp_path):
    """`procurement.sites: []` means no PrfaaS site (not the default sites): every answer is
    homogeneous PD, in target, budget and --pareto modes."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(Path("examples/case_study.yaml").read_text()
                        + "procurement:\n  sites: []\n")  # fmt: skip
    for goal in (["--target-rps", "3"], ["--budget-usd-per-hour", "300"]):
        doc = json.loads(run("procure", scenario, *goal, "-f", "json").stdout)
        assert doc["candidate_sites"] == [] and doc["sites"] == []
        assert doc["threshold_tokens"] is None and doc["offload_fraction"] == 0.0
    pareto = json.loads(run("procure", scenario, "--pareto", "--target-rps", "3", "-f", "json")
                        .stdout)  # fmt: skip
    plans = pareto["capacity_frontier"] + pareto["ttft_frontier"]
    assert plans and all(p["site"] is None for p in plans)


def test_site_names_are_unique(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(Path("examples/case_study.yaml").read_text() + (
        "procurement:\n  sites:\n"
        "    - {name: a, gpu: h200, link_offering: aws-dx-100g}\n"
        "    - {name: a, gpu: h20, link_offering: aws-dx-10g}\n"
    ))  # fmt: skip
    assert_clean_error(run("procure", scenario, "--target-rps", "3"), 3,
                       "procurement: value error, site names must be unique, 'a' repeats")  # fmt: skip
