"""Prices and the cost of plans (analytic/cost.py, inputs/pricing.py, use_cases/cost.py): hand
computed figures, the equal-cost budget rule, overrides and bad input."""

import json
import math

import pytest

from prfaas_plan import units
from prfaas_plan.analytic.cost import affordable_instances, tco_usd_per_gpu_hour
from prfaas_plan.inputs.catalog import Catalog
from tests.cli.test_cli import assert_clean_error, run


def _plan(*args: str) -> dict:
    result = run("optimize", "-f", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_tco_by_hand():
    # 35,000 $ over 5 years of 8760 h, plus 0.7 kW x 1.5 x 0.1 $/kWh
    assert tco_usd_per_gpu_hour(35_000, 5, 700, 1.5, 0.1) == pytest.approx(35_000 / 43_800 + 0.105)


@pytest.mark.parametrize("budget, price, n", [(10.0, 2.5, 4), (9.99, 2.5, 3), (0.0, 1.0, 0)])
def test_affordable_instances_is_the_floor(budget, price, n):
    assert affordable_instances(budget, price) == n


def test_case_study_cost_by_hand():
    """The case study's $/hour from the shipped prices, each component recomputed here."""
    doc = _plan()
    catalog = Catalog.open()
    h200 = catalog.gpu("h200").prices.on_demand_usd_per_gpu_hour.value
    h20 = catalog.gpu("h20").prices.on_demand_usd_per_gpu_hour.value
    cost, plan = doc["plan"]["cost"], doc["plan"]
    u = cost["utilization"]
    assert u == 0.7 and doc["inputs"]["prices"]["utilization"] == u
    assert cost["usd_per_hour"]["prfaas_gpus"] == pytest.approx(32 * h200)
    assert cost["usd_per_hour"]["pd_gpus"] == pytest.approx(64 * h20)
    link = catalog.link_offering(cost["link_offering"])
    egress_gb_per_h = u * plan["kv_egress_bytes_per_s"] * 3600 / 1e9
    assert cost["usd_per_hour"]["link_volume"] == pytest.approx(egress_gb_per_h * link.usd_per_gb)
    assert cost["usd_per_hour"]["link_fixed"] == pytest.approx(link.monthly_usd / 730)
    total = sum(v for k, v in cost["usd_per_hour"].items() if k != "total")
    assert cost["usd_per_hour"]["total"] == pytest.approx(total)
    served = u * plan["throughput_rps"]["system"]
    assert cost["usd_per_million_output_tokens"] == pytest.approx(
        total / (served * 1024 * 3600) * 1e6
    )
    # the cheapest wide-enough offering at this egress was bought
    for other in doc["inputs"]["prices"]["link_offerings"]:
        assert other["fixed_usd_per_hour"] + egress_gb_per_h * other["usd_per_gb"] >= (
            cost["usd_per_hour"]["link_fixed"] + cost["usd_per_hour"]["link_volume"] - 1e-9
        )
    # no link is bought for homogeneous PD
    assert doc["baselines"]["homogeneous_pd"]["cost"]["usd_per_hour"]["link_fixed"] == 0


def test_equal_cost_baseline_spends_the_budget_and_no_more():
    doc = _plan("--gpu-price", "h200=2.4")
    e = doc["plan"]["cost"]["equal_cost_homogeneous_pd"]
    per_instance = 8 * 1.2
    assert e["pd_instances"] * per_instance <= e["budget_usd_per_hour"]
    assert (e["pd_instances"] + 1) * per_instance > e["budget_usd_per_hour"]
    assert e["budget_usd_per_hour"] == doc["plan"]["cost"]["usd_per_hour"]["total"]
    gain = doc["plan"]["throughput_rps"]["system"] / e["system_rps"]
    assert doc["plan"]["cost"]["speedup_vs_equal_cost_homogeneous"] == pytest.approx(gain)
    # a dearer H200 buys more H20 for the same plan: the gain can only fall
    dearer = _plan("--gpu-price", "h200=5")["plan"]["cost"]
    assert dearer["speedup_vs_equal_cost_homogeneous"] <= gain
    assert doc["plan"]["cost"]["usd_per_hour"]["prfaas_gpus"] == pytest.approx(32 * 2.4)


def test_equal_gpu_spend_is_the_papers_comparison_by_hand():
    """The paper's "about 15% more throughput at equal cost" (§4) prices an H200 at twice an H20:
    32 H200 + 64 H20 = 128 H20-GPU-equivalents of GPU spend = 16 homogeneous H20 instances.
    Recomputed here: 16 instances, the split that maximises min(N_p / T_H20(E[L]),
    N_d x BS_max / (T_decode x L_out)) (paper mode: the representative length E[L], no request
    offloaded), and the plan's Λ_max over it. External anchor: the paper rounds the gain to a
    whole 15%, so the model's gain must round to 15% too (|gain - 1.15| < 0.005)."""
    from prfaas_plan.inputs.scenario import open_problem

    doc = _plan("--gpu-price", "h200=2", "--gpu-price", "h20=1")
    cost = doc["plan"]["cost"]
    e = cost["equal_gpu_spend_homogeneous_pd"]
    gpu_usd_per_hour = 32 * 2.0 + 64 * 1.0  # the plan's GPUs; link and volume excluded
    assert e["budget_usd_per_hour"] == pytest.approx(gpu_usd_per_hour)
    assert e["pd_instances"] == 16 == gpu_usd_per_hour // (8 * 1.0)
    assert e["usd_per_hour_total"] == pytest.approx(16 * 8 * 1.0)  # its GPUs; it buys no link
    problem = open_problem()
    pd_prefill_rps = 1 / float(problem.system.pd_prefill_latency(problem.workload.mean_tokens))
    decode_rps = 20 / (0.025 * 1024)  # BS_max / (T_decode x L_out), prfaas-model.md §5
    split = {n_p: min(n_p * pd_prefill_rps, (16 - n_p) * decode_rps) for n_p in range(1, 16)}
    best = max(split, key=lambda n_p: split[n_p])
    assert (best, 16 - best) == (12, 4)
    assert e["pd_prefill_instances"] == best
    assert e["system_rps"] == pytest.approx(split[best], rel=1e-12)
    plan_rps = doc["plan"]["throughput_rps"]["system"]
    gain = cost["speedup_vs_equal_gpu_spend_homogeneous"]
    assert gain == pytest.approx(plan_rps / split[best], rel=1e-12)
    assert gain == pytest.approx(1.154974, abs=1e-6)  # 3.2492 / 2.8132 req/s
    assert abs(gain - 1.15) < 0.005  # the paper's ≈15%, to its whole percent
    # the all-in comparison spends the link too: a larger budget, another homogeneous size
    assert cost["equal_cost_homogeneous_pd"]["budget_usd_per_hour"] == pytest.approx(
        cost["usd_per_hour"]["total"]
    )
    assert cost["equal_cost_homogeneous_pd"]["budget_usd_per_hour"] > e["budget_usd_per_hour"]


def test_both_comparisons_are_in_every_view():
    """The table and Markdown notes show the GPU-spend and the all-in comparison, each with
    what it buys (instances, split, $/h) and Λ_max."""
    args = ("--gpu-price", "h200=2", "--gpu-price", "h20=1", "--link-offering", "aws-dx-100g")
    for fmt in ("markdown", "table"):
        text = " ".join(run("optimize", "-f", fmt, *args).stdout.split())
        assert (
            "Equal cost, GPU spend (the paper's comparison: the plan's GPUs only): 128 $/h buys "
            "16 h20 PD instances in homogeneous PD (PD-P/PD-D 12/4, 128 $/h), Λ_max 2.813 req/s; "
            "this plan gives 1.155× that." in text
        ), text
        assert (
            "Equal cost, all-in (GPUs + link fixed + volume at 70% of Λ_max): 229 $/h buys 28 h20"
            in text
        )
    evaluated = run("evaluate", "--threshold-tokens", "19435", "--pd-prefill-instances", "3",
                    "-f", "markdown", *args).stdout  # fmt: skip
    assert "Equal cost, GPU spend" in evaluated and "Equal cost, all-in" in evaluated


def test_tco_and_named_offering():
    doc = _plan(
        "--cost-model", "tco", "--link-offering", "aws-internet-egress", "--utilization", "1"
    )
    p = Catalog.open().gpu("h200").prices
    expected = tco_usd_per_gpu_hour(
        p.purchase_usd_per_gpu.value, p.depreciation_years.value, p.board_power_w.value,
        p.pue.value, p.electricity_usd_per_kwh.value,
    )  # fmt: skip
    assert doc["inputs"]["prices"]["prfaas_usd_per_gpu_hour"] == pytest.approx(expected)
    assert doc["plan"]["cost"]["link_offering"] == "aws-internet-egress"
    assert doc["plan"]["cost"]["usd_per_hour"]["link_fixed"] == 0
    assert doc["plan"]["cost"]["served_rps"] == doc["plan"]["throughput_rps"]["system"]


def test_evaluate_is_priced():
    result = run("evaluate", "--threshold-tokens", "19400", "--pd-prefill-instances", "3",
                 "-f", "json")  # fmt: skip
    cost = json.loads(result.stdout)["configuration"]["cost"]
    assert math.isfinite(cost["usd_per_million_output_tokens"])
    assert cost["equal_cost_homogeneous_pd"]["pd_instances"] >= 2
    assert cost["equal_gpu_spend_homogeneous_pd"]["pd_instances"] >= 2
    assert cost["speedup_vs_equal_gpu_spend_homogeneous"] > 0


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--gpu-price", "h200"], ["--gpu-price", "GPU=USD_PER_GPU_HOUR"]),
        (["--gpu-price", "h200=-1"], ["--gpu-price", "price of h200", "got -1"]),
        (["--gpu-price", "h100=2"], ["--gpu-price", "'h100'", "does not deploy"]),
        (["--gpu-price", "h200=1", "--gpu-price", "h200=2"], ["given twice"]),
        (["--link-offering", "nope"], ["--link-offering", "unknown link offering 'nope'",
                                       "aws-dx-100g"]),
        (["--link-offering", "aws-dx-10g"], ["--link-offering", "10 Gbps", "--bandwidth-gbps 10"]),
        (["--utilization", "0"], ["--utilization"]),
        (["--gpu-price", "h20=nan"], ["--gpu-price[h20]: input should be a finite number", "got nan"]),
        (["--link-offering", "../owned"], ["--link-offering", "unknown link offering",
                                           "or 'owned'"]),
        (["--link-offering", "owned", "--bandwidth-gbps", "400"],
         ["--link-offering 'owned' is the scenario's own 100 Gbps link", "400 Gbps",
          "--bandwidth-gbps at most 100"]),
    ],
)  # fmt: skip
def test_bad_pricing_input(args, fragments):
    assert_clean_error(run("optimize", *args), 3, *fragments)


def test_unpriced_catalog_gives_no_cost(tmp_path):
    from tests.inputs.test_hostile_files import data_copy

    data = data_copy(tmp_path)
    for gpu in ("h20", "h200"):
        path = data / "gpus" / f"{gpu}.yaml"
        text = path.read_text()
        path.write_text(text[: text.index("# Prices")])
    doc = _plan("--data-dir", str(data))
    assert "cost" not in doc["plan"] and "prices" not in doc["inputs"]
    # asked for a cost without prices: an error naming the flag to give
    assert_clean_error(run("optimize", "--data-dir", data, "--cost-model", "tco"), 3,
                       "no prices for GPU", "--gpu-price")  # fmt: skip
    priced = _plan("--data-dir", str(data), "--gpu-price", "h20=1", "--gpu-price", "h200=3")
    assert priced["plan"]["cost"]["usd_per_hour"]["pd_gpus"] == 64


def test_units_month_and_gb():
    assert units.per_month_to_per_hour(730.0) == 1.0
    assert units.bytes_to_gb(2e9) == 2.0


def test_the_link_is_priced_at_the_bandwidth_the_plan_assumes():
    """--bandwidth-gbps, not the file's link, decides which offering can carry the plan."""
    from tests.cli.test_cli import assert_clean_error, run

    wide = json.loads(run("optimize", "--bandwidth-gbps", "400", "-f", "json").stdout)
    assert "cost" not in wide["plan"]  # no shipped offering carries 400 Gbps: left unpriced
    assert_clean_error(
        run("optimize", "--bandwidth-gbps", "400", "--link-offering", "aws-dx-100g"),
        3, "--link-offering 'aws-dx-100g' carries 100 Gbps, less than the 400 Gbps",
    )  # fmt: skip
    narrow = json.loads(run("optimize", "--bandwidth-gbps", "10", "-f", "json").stdout)
    catalog = Catalog.open()
    offerings = [catalog.link_offering(n) for n in catalog.link_offering_names()]
    # a colocation cross-connect is bought only when named (it assumes one site)
    wide_enough = [o for o in offerings if o.bandwidth_gbps >= 10 and not o.colocated]
    assert {o.name for o in wide_enough} > {"aws-dx-10g"}  # the 10G port is a candidate now
    assert any(o.colocated for o in offerings)
    plan = narrow["plan"]
    egress_gb_per_h = 0.7 * plan["kv_egress_bytes_per_s"] * 3600 / 1e9
    cheapest = min(wide_enough, key=lambda o: o.monthly_usd / 730 + egress_gb_per_h * o.usd_per_gb)
    assert plan["cost"]["link_offering"] == cheapest.name


def test_an_offering_narrower_than_the_egress_is_never_bought():
    from prfaas_plan.analytic.cost import LinkPrice, deployment_cost
    from prfaas_plan.errors import ConfigError

    gbps = units.gbps_to_bytes_per_s
    narrow = LinkPrice("10g", gbps(10), 2.25, 0.02, 0.0)
    wide = LinkPrice("100g", gbps(100), 22.5, 0.02, 0.0)
    common = dict(prfaas_gpus=8, pd_gpus=8, prfaas_usd_per_gpu_hour=3.5, pd_usd_per_gpu_hour=1.2,
                  system_throughput_rps=1.0, output_tokens=1024, utilization=0.7)  # fmt: skip
    # 12.5 Gbps at Λ_max: the cheap 10G port cannot carry it, even priced at 70%
    cost = deployment_cost(links=(narrow, wide), kv_egress_bytes_per_s=gbps(12.5), **common)
    assert cost.link == wide
    assert (
        deployment_cost(links=(narrow, wide), kv_egress_bytes_per_s=gbps(5), **common).link
        == narrow
    )
    with pytest.raises(
        ConfigError, match=r"no link offering carries the plan's KV egress of 12\.5 Gbps"
    ):
        deployment_cost(links=(narrow,), kv_egress_bytes_per_s=gbps(12.5), **common)


def _flat_plan(*args: str) -> dict:
    return _plan("--gpu-price", "h200=2", "--gpu-price", "h20=1", *args)


def test_an_owned_link_costs_nothing_and_both_comparisons_agree():
    """`--link-offering owned`: the scenario's own 100 Gbps link at 0 $/month and 0 $/GB, so
    the all-in budget is the GPU spend and both comparisons give the paper's 1.155×."""
    doc = _flat_plan("--link-offering", "owned")
    cost = doc["plan"]["cost"]
    assert cost["link_offering"] == "owned"
    assert cost["usd_per_hour"]["link_fixed"] == 0 == cost["usd_per_hour"]["link_volume"]
    assert cost["usd_per_hour"]["total"] == pytest.approx(32 * 2 + 64 * 1)
    (owned,) = doc["inputs"]["prices"]["link_offerings"]
    assert owned == {"name": "owned", "fixed_usd_per_hour": 0.0, "usd_per_gb": 0.0,
                     "bandwidth_bytes_per_s": units.gbps_to_bytes_per_s(100), "rtt_s": 0.0}  # fmt: skip
    gpu, all_in = cost["equal_gpu_spend_homogeneous_pd"], cost["equal_cost_homogeneous_pd"]
    assert gpu == all_in and gpu["pd_instances"] == 16
    assert (
        cost["speedup_vs_equal_cost_homogeneous"] == cost["speedup_vs_equal_gpu_spend_homogeneous"]
    )
    # a plan over a narrower link than the one owned is priced on the owned link, at no cost
    narrow = _flat_plan("--link-offering", "owned", "--bandwidth-gbps", "10")
    assert narrow["plan"]["cost"]["usd_per_hour"]["total"] == pytest.approx(128)


def test_an_owned_link_from_the_scenario(tmp_path):
    from tests.cli.test_cli import scenario_with

    path = scenario_with(tmp_path, cost={"link_offering": "owned"})
    doc = _plan(str(path))
    assert doc["plan"]["cost"]["link_offering"] == "owned"
    assert doc["plan"]["cost"]["usd_per_hour"]["link_fixed"] == 0
    assert_clean_error(run("optimize", path, "--bandwidth-gbps", "200"), 3,
                       "'owned' is the scenario's own 100 Gbps link", "200 Gbps")  # fmt: skip


def test_the_owned_link_function_procure_can_call():
    """inputs/links.py link_offering_for: 'owned' is built at the bandwidth owned, any other
    name is read from data/links/, and a link narrower than it must carry is refused."""
    from prfaas_plan.errors import ConfigError
    from prfaas_plan.inputs.links import link_offering_for

    catalog = Catalog.open()
    owned = link_offering_for(catalog, "owned", owned_gbps=25.0)
    assert (owned.bandwidth_gbps, owned.monthly_usd, owned.usd_per_gb) == (25.0, 0.0, 0.0)
    assert owned.prices.basis == "estimate" and owned.rtt.basis == "unknown"
    port = link_offering_for(
        catalog, "aws-dx-100g", owned_gbps=25.0, carry_bytes_per_s=units.gbps_to_bytes_per_s(100.0)
    )
    assert port == catalog.link_offering("aws-dx-100g")
    with pytest.raises(ConfigError, match=r"'owned' is the scenario's own 25 Gbps link"):
        link_offering_for(
            catalog, "owned", owned_gbps=25.0, carry_bytes_per_s=units.gbps_to_bytes_per_s(40.0)
        )
    with pytest.raises(ConfigError, match=r"'aws-dx-10g' carries 10 Gbps, less than the 40"):
        link_offering_for(
            catalog,
            "aws-dx-10g",
            owned_gbps=25.0,
            carry_bytes_per_s=units.gbps_to_bytes_per_s(40.0),
        )
    with pytest.raises(ConfigError, match=r"where: unknown link offering 'x'; known: .*or 'owned'"):
        link_offering_for(catalog, "x", owned_gbps=25.0, where="where: ")


@pytest.mark.parametrize(
    ("offering", "fixed_usd_per_hour"),
    [  # monthly_usd / 730 h, from the figures each file states
        ("metro-wave-100g", 10_000 / 730),
        ("dark-fibre-16km-100g", 9_111 / 730),
        ("colo-cross-connect-100g", 300 / 730),
    ],
)
def test_flat_rate_links_pay_no_volume(offering, fixed_usd_per_hour):
    """A flat-rate offering costs its monthly fee whatever the KV carried: the all-in budget is
    the GPU spend plus that fee."""
    cost = _flat_plan("--link-offering", offering)["plan"]["cost"]
    assert cost["usd_per_hour"]["link_volume"] == 0
    assert cost["usd_per_hour"]["link_fixed"] == pytest.approx(fixed_usd_per_hour)
    assert cost["equal_cost_homogeneous_pd"]["budget_usd_per_hour"] == pytest.approx(
        128 + fixed_usd_per_hour
    )
    assert cost["equal_cost_homogeneous_pd"]["pd_instances"] == int((128 + fixed_usd_per_hour) // 8)


def test_a_file_may_not_take_the_owned_name(tmp_path):
    from tests.cli.test_cli import data_copy

    data = data_copy(tmp_path)
    text = (data / "links" / "aws-dx-100g.yaml").read_text()
    (data / "links" / "owned.yaml").write_text(text.replace("name: aws-dx-100g", "name: owned"))
    assert_clean_error(run("optimize", "--data-dir", data), 3, "owned.yaml",
                       "'owned' is reserved for a link already owned")  # fmt: skip


def test_a_cross_connect_is_bought_only_when_named():
    """The colocation cross-connect is the cheapest shipped link but assumes both clusters in
    one site: never the default, priced when asked for."""
    from tests.cli.test_cli import run

    default = json.loads(run("optimize", "-f", "json").stdout)["plan"]["cost"]
    assert default["link_offering"] != "colo-cross-connect-100g"
    named = json.loads(
        run("optimize", "--link-offering", "colo-cross-connect-100g", "-f", "json").stdout
    )["plan"]["cost"]
    assert named["link_offering"] == "colo-cross-connect-100g"
    assert named["usd_per_hour"]["link_fixed"] < default["usd_per_hour"]["link_fixed"]


def test_a_scenario_price_for_a_gpu_it_cannot_use_is_refused(tmp_path):
    """cost.gpu_prices_usd_per_gpu_hour naming a GPU the scenario neither deploys nor may buy
    (a typo: h100) is refused; a procurement site's GPU may be priced."""
    from pathlib import Path

    from tests.cli.test_cli import assert_clean_error, run

    base = Path("examples/case_study.yaml").read_text()
    typo = tmp_path / "typo.yaml"
    typo.write_text(base + "cost:\n  gpu_prices_usd_per_gpu_hour: {h100: 2.0}\n")
    assert_clean_error(run("optimize", typo), 3,
                       "cost.gpu_prices_usd_per_gpu_hour prices ['h100']", "may use h20, h200")  # fmt: skip
    ok = tmp_path / "ok.yaml"
    ok.write_text(base + "cost:\n  gpu_prices_usd_per_gpu_hour: {h200: 2.0}\n")
    assert run("optimize", ok).returncode == 0
