"""`sensitivity`: the routing LP's duals against finite differences of its own optimum, its
bound never below the threshold optimum (hypothesis) and equal to it where theory says, and the
discrete marginal gains against re-optimised plans; the CLI in every format."""

import dataclasses
import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Bound
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.scenario import open_problem
from prfaas_plan.solve.relaxation import length_bins, solve_routing_lp
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.use_cases.sensitivity import Resource, routing_upper_bound, sensitivity_report
from tests.cli.test_cli import assert_clean_error, run, scenario_with

BINS = 200  # enough for the properties; the command's default is 2,000


def with_bandwidth(problem, gbps):
    system = dataclasses.replace(
        problem.system, link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(gbps)
    )
    return dataclasses.replace(problem, system=system)


@pytest.fixture(scope="module")
def case_study():
    return open_problem()


@pytest.mark.parametrize("gbps", [100.0, 10.0])
def test_duals_are_the_finite_differences_of_the_lp_optimum(case_study, gbps):
    """∂Λ*/∂rhs from the duals equals (Λ*(rhs + h) − Λ*(rhs)) / h (the LP is piecewise linear
    in its right-hand sides, so a small step stays on one piece)."""
    problem = with_bandwidth(case_study, gbps)
    bins = length_bins(problem.system, problem.workload, BINS)
    n_f, n_p, n_d = problem.prfaas_instances, 3, problem.pd_instances - 3
    base = solve_routing_lp(problem.system, bins, n_f, n_p, n_d)
    h = 1e-3
    steps = {
        Bound.PRFAAS_COMPUTE: lambda: solve_routing_lp(problem.system, bins, n_f + h, n_p, n_d),
        Bound.PD_PREFILL: lambda: solve_routing_lp(problem.system, bins, n_f, n_p + h, n_d),
        Bound.PD_DECODE: lambda: solve_routing_lp(problem.system, bins, n_f, n_p, n_d + h),
        Bound.PRFAAS_LINK: lambda: solve_routing_lp(
            with_bandwidth(problem, gbps + h).system, bins, n_f, n_p, n_d
        ),
    }
    binding = 0
    for bound, step in steps.items():
        difference = (step().system_throughput_rps - base.system_throughput_rps) / h
        assert difference == pytest.approx(base.shadow_prices[bound], rel=1e-3, abs=1e-6), bound
        binding += base.shadow_prices[bound] > 1e-6
    assert binding == 2  # PD-P and one PrfaaS row (compute at 100 Gbps, link at 10 Gbps)


@pytest.mark.parametrize("gbps", [100.0, 2.0])
def test_a_role_without_instances_is_priced_by_its_first_unit(case_study, gbps):
    """A split with no PD-P (no PrfaaS) instance has no such row in the LP, yet its price
    exists: the right derivative of Λ*, here (Λ*(h) − Λ*(0)) / h exactly, the LP being linear
    in h up to its first breakpoint. The first PD-P unit takes the shortest bins: short prompts
    (μ = 7) put mass there, so that breakpoint is far above h (compute binds at 100 Gbps, the
    link at 2). The first PrfaaS unit takes the longest bins, which the case study's prompts
    reach; the link is then idle (price 0)."""
    h = 1e-4
    short = TruncatedLogNormal(7.0, 1.0, 128.0, 131072.0)
    for workload, split, index, bound in (
        (short, (2, 0, 12), 1, Bound.PD_PREFILL),
        (case_study.workload, (0, 3, 5), 0, Bound.PRFAAS_COMPUTE),
    ):
        problem = dataclasses.replace(with_bandwidth(case_study, gbps), workload=workload)
        bins = length_bins(problem.system, problem.workload, 50)
        base = solve_routing_lp(problem.system, bins, *split)
        stepped = list(split)
        stepped[index] = h
        difference = (solve_routing_lp(problem.system, bins, *stepped).system_throughput_rps
                      - base.system_throughput_rps) / h  # fmt: skip
        assert base.shadow_prices[bound] > 0.1
        assert base.shadow_prices[bound] == pytest.approx(difference, rel=1e-6), (split, bound)
        if index == 0:
            assert base.shadow_prices[Bound.PRFAAS_LINK] == 0.0
    # decode binding with no PD-P (4/0/1 at 100 Gbps): the first PD-P instance buys nothing
    bins = length_bins(case_study.system, case_study.workload, 50)
    decode_bound = solve_routing_lp(case_study.system, bins, 4, 0, 1)
    assert decode_bound.shadow_prices[Bound.PD_DECODE] > 0
    assert decode_bound.shadow_prices[Bound.PD_PREFILL] == 0.0


def test_sensitivity_reports_the_pd_prefill_price_of_a_plan_without_pd_prefill(tmp_path):
    """The exact-mode plan of 16 PrfaaS and 8 PD instances offloads everything (16/0/8, decode
    binds): the PD-P price is reported (0: decode binds), not left empty."""
    path = scenario_with(tmp_path, **{"prfaas_cluster.instances": 16})
    ran = run("sensitivity", "--bins", "200", "-f", "json", path)
    assert ran.returncode == 0, ran.stderr
    shadow = json.loads(ran.stdout)["shadow_prices"]
    assert shadow["pd_prefill_instances"] == 0
    assert shadow["pd_prefill_rps_per_pd_prefill_instance"] == 0.0


@pytest.mark.parametrize("gbps", [100.0, 10.0, 5.0])
def test_threshold_routing_is_optimal_for_the_case_study(case_study, gbps):
    """Offloading bin b costs T_f,b of PrfaaS and S_b of link and saves T_p,b of PD-P; both
    T_f/T_p and S/T_p fall with length in the case study, so by the exchange argument the best
    fractional routing is a threshold and the bound equals the threshold optimum."""
    bound = routing_upper_bound(with_bandwidth(case_study, gbps), BINS)
    assert bound.best.is_threshold
    assert bound.bound_rps == pytest.approx(bound.threshold_plan.system_throughput_rps, rel=1e-7)


def test_decode_bound_split_equals_the_threshold_optimum(case_study):
    """With one decode instance, decode binds for any routing: both are N_d · r_d."""
    bound = routing_upper_bound(case_study, BINS).per_split[case_study.pd_instances - 1]
    assert bound.system_throughput_rps == pytest.approx(
        case_study.system.decode_rps_per_instance, rel=1e-9
    )
    assert bound.shadow_prices[Bound.PD_DECODE] == pytest.approx(
        case_study.system.decode_rps_per_instance, rel=1e-6
    )


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    gbps=st.floats(1.0, 400.0),
    prfaas=st.integers(1, 8),
    pd=st.integers(2, 10),
    mu_log=st.floats(8.0, 11.0),
    sigma_log=st.floats(0.3, 1.6),
)
def test_bound_is_never_below_the_threshold_optimum(
    case_study, gbps, prfaas, pd, mu_log, sigma_log
):
    workload = TruncatedLogNormal(mu_log, sigma_log, 128.0, 131072.0)
    problem = dataclasses.replace(
        with_bandwidth(case_study, gbps), workload=workload, prfaas_instances=prfaas,
        pd_instances=pd,
    )  # fmt: skip
    bound = routing_upper_bound(problem, BINS)
    threshold = bound.threshold_plan.system_throughput_rps
    assert bound.bound_rps >= threshold * (1 - 1e-7)
    # and no split's LP is below that split's best threshold at the plan's own split
    split = bound.per_split[bound.threshold_plan.configuration.pd_prefill_instances]
    assert split.system_throughput_rps >= threshold * (1 - 1e-7)


def test_marginal_gains_are_re_optimised_plans(case_study):
    report = sensitivity_report(case_study, Mode.PAPER, BINS)
    base = report.plan.system_throughput_rps

    def optimum(prfaas, pd, problem=case_study):
        space = SearchSpace(prfaas, pd)
        return optimize_fixed_hardware(
            problem.system, problem.workload, space
        ).system_throughput_rps

    assert report.gain_rps(Resource.PRFAAS_INSTANCE) == pytest.approx(optimum(5, 8) - base)
    assert report.gain_rps(Resource.PD_INSTANCE) == pytest.approx(optimum(4, 9) - base)
    # the case study is compute-bound on both prefill sides: the link and decode are slack
    assert set(report.plan.bounds) == {Bound.PRFAAS_COMPUTE, Bound.PD_PREFILL}
    assert report.gain_rps(Resource.LINK_BANDWIDTH) == pytest.approx(0.0, abs=1e-9)
    assert report.gain_rps(Resource.DECODE_SLO_SLACK) == pytest.approx(0.0, abs=1e-9)
    assert all(report.gain_rps(r) >= -1e-9 for r in Resource)


def test_a_tighter_link_makes_bandwidth_worth_something(case_study):
    report = sensitivity_report(with_bandwidth(case_study, 10.0), Mode.PAPER, BINS)
    assert Bound.PRFAAS_LINK in report.plan.bounds
    assert report.gain_rps(Resource.LINK_BANDWIDTH) > 0
    assert report.shadow.shadow_prices[Bound.PRFAAS_LINK] > 0


def test_cli_json_and_markdown():
    ran = run("sensitivity", "--format", "json", "--bins", BINS)
    assert ran.returncode == 0, ran.stderr
    document = json.loads(ran.stdout)
    assert set(document["marginal_gains"]) == {str(r) for r in Resource}
    bound = document["routing_bound"]
    assert bound["bound_rps"] >= bound["threshold_optimum_rps"] * (1 - 1e-7)
    assert len(bound["per_split"]) == 8
    ran = run("sensitivity", "--format", "markdown", "--bins", BINS, "--bandwidth-gbps", 10)
    assert ran.returncode == 0 and ran.stdout.startswith("## Sensitivity")
    assert "prfaas_link" in ran.stdout


def test_cli_refuses_a_bin_count_out_of_range():
    assert_clean_error(run("sensitivity", "--bins", 1), 3, "--bins must be", "got 1")


def test_curves_are_monotone_and_pass_through_the_plan(case_study):
    from prfaas_plan.use_cases.sensitivity import sensitivity_curves

    curves = {c.name: c for c in sensitivity_curves(case_study)}
    plan = optimize_fixed_hardware(
        case_study.system, case_study.workload, SearchSpace(4, 8)
    ).system_throughput_rps
    for name in ("bandwidth", "prfaas_cluster"):  # more of a resource never lowers Λ_max
        lam = [p.system_throughput_rps for p in curves[name].plans]
        assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(lam)), name
    bandwidth = curves["bandwidth"]
    assert bandwidth.plans[bandwidth.x.index(100.0)].system_throughput_rps == pytest.approx(plan)
    assert curves["prfaas_cluster"].plans[4].system_throughput_rps == pytest.approx(plan)
    # the bandwidth wall: below it the link binds and t* rises as the link shrinks
    walled = [p for g, p in zip(bandwidth.x, bandwidth.plans, strict=True) if 2 <= g <= 10]
    assert all(Bound.PRFAAS_LINK in p.bounds for p in walled)
    t = [p.configuration.threshold_tokens for p in walled]
    assert t == sorted(t, reverse=True)
    longer = [p.system_throughput_rps for p in curves["mean_input_length"].plans]
    assert longer == sorted(longer, reverse=True)  # longer prompts, fewer requests per second


@pytest.mark.slow
def test_cli_writes_curves_and_plot(tmp_path):
    csv_path, json_path, png = tmp_path / "c.csv", tmp_path / "c.json", tmp_path / "c.png"
    ran = run("sensitivity", "--bins", BINS, "--curves", csv_path, "--plot", png, "-f", "json")
    assert ran.returncode == 0, ran.stderr
    header, *rows = csv_path.read_text().splitlines()
    assert header.startswith("curve,x_name,x,system_throughput_rps")
    assert {r.split(",")[0] for r in rows} == {"bandwidth", "prfaas_cluster", "mean_input_length"}
    assert png.stat().st_size > 0
    ran = run("sensitivity", "--bins", BINS, "--curves", json_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(json_path.read_text())["bandwidth"]["x_name"] == "link_bandwidth_gbps"


def test_cli_refuses_bad_curve_files(tmp_path):
    assert_clean_error(run("sensitivity", "--curves", tmp_path / "c.txt"), 3, "--curves", ".csv")
    same = tmp_path / "same.png"
    assert_clean_error(run("sensitivity", "--plot", same, "--output", same), 3, "same file")


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    prfaas=st.integers(1, 8),
    pd=st.integers(2, 10),
    mu_log=st.floats(8.0, 11.0),
    sigma_log=st.floats(0.3, 1.6),
)
def test_bound_equals_the_threshold_optimum_when_the_link_never_binds(
    case_study, prfaas, pd, mu_log, sigma_log
):
    """Compute only: offloading bin b trades T_f,b of PrfaaS for T_p,b of PD-P, and the case
    study's T_f/T_p falls with length, so the exchange argument makes a threshold optimal for
    any workload: the LP (fractional routing) cannot beat it."""
    workload = TruncatedLogNormal(mu_log, sigma_log, 128.0, 131072.0)
    problem = dataclasses.replace(
        with_bandwidth(case_study, 1e6), workload=workload, prfaas_instances=prfaas,
        pd_instances=pd,
    )  # fmt: skip
    bound = routing_upper_bound(problem, BINS)
    assert bound.bound_rps == pytest.approx(bound.threshold_plan.system_throughput_rps, rel=1e-7)


def test_step_costs_are_the_gpus_plus_the_link_volume_they_move(case_study):
    """By hand: +1 PrfaaS instance costs its 8 GPU-hours plus the extra KV volume the
    re-optimised plan sends (at 70% of Λ_max, 0.02 $/GB on the 100G port); +1 PD instance its 8
    H20 GPU-hours plus (here: minus) the volume change; +10% link is 10% of the port-hour."""
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.pricing import resolve_pricing

    catalog = Catalog.open()
    pricing = resolve_pricing(
        catalog, case_study.scenario, case_study.source, link_offering="aws-dx-100g"
    )
    report = sensitivity_report(case_study, Mode.PAPER, 200, catalog, pricing)
    h200, h20 = pricing.prfaas.usd_per_gpu_hour, pricing.pd.usd_per_gpu_hour

    def volume_usd_per_hour(evaluation):  # GB/h at 70% of Λ_max x 0.02 $/GB
        return 0.7 * evaluation.kv_egress_bytes_per_s * 3600 / 1e9 * 0.02

    base = volume_usd_per_hour(report.plan)
    costs = report.step_cost_usd_per_hour
    for resource, gpus in ((Resource.PRFAAS_INSTANCE, 8 * h200), (Resource.PD_INSTANCE, 8 * h20)):
        moved = volume_usd_per_hour(report.marginal_gains[resource].plan) - base
        assert costs[resource] == pytest.approx(gpus + moved, rel=1e-9)
        assert report.rps_per_usd_per_hour(resource) == pytest.approx(
            report.gain_rps(resource) / costs[resource]
        )
    assert costs[Resource.LINK_BANDWIDTH] == pytest.approx(0.1 * 16425 / 730, rel=1e-3)
    assert Resource.DECODE_SLO_SLACK not in costs  # an SLO is not bought
    per = {r: report.rps_per_usd_per_hour(r) or 0.0 for r in costs}
    assert report.best_buy == max(per, key=per.__getitem__)


@pytest.mark.parametrize(
    ("gbps", "bought", "wider"),
    [(5.0, "aws-dx-10g", "aws-dx-10g"), (10.0, "aws-dx-10g", "aws-dx-100g")],
)
def test_the_link_step_is_priced_once(tmp_path, gbps, bought, wider):
    """By hand from data/links/: at 5 Gbps the plan buys the 10G port and the +10% link's egress
    (5.5 Gbps, link-bound) still fits it: 10% of that port's hour plus the extra volume. At
    10 Gbps the plan fills the 10G port and the wider link needs the 100G one: the step is
    the 100G port's hour instead of the 10G's plus the extra volume, with nothing on top (the
    10G port is replaced, not paid 10% more)."""
    import shutil

    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.pricing import resolve_pricing
    from prfaas_plan.inputs.resources import default_data_dir
    from prfaas_plan.use_cases.cost import price_deployment

    data = tmp_path / "data"  # the AWS offerings alone: the figures below are theirs
    shutil.copytree(default_data_dir(), data)
    for link in (data / "links").glob("*.yaml"):
        if not link.name.startswith("aws-"):
            link.unlink()
    catalog = Catalog.open(data)
    problem = open_problem(data_dir=data, bandwidth_gbps=gbps)
    pricing = resolve_pricing(
        catalog, problem.scenario, problem.source, link_bytes_per_s=units.gbps_to_bytes_per_s(gbps)
    )
    report = sensitivity_report(problem, Mode.PAPER, 200, catalog, pricing)
    plan, step = report.plan, report.marginal_gains[Resource.LINK_BANDWIDTH].plan
    c = plan.configuration
    gpus = (c.prfaas_instances * 8, (c.pd_prefill_instances + c.pd_decode_instances) * 8)
    assert price_deployment(problem, pricing, *gpus, plan).link.name == bought
    assert price_deployment(problem, pricing, *gpus, step).link.name == wider
    assert step.kv_egress_bytes_per_s == pytest.approx(1.1 * plan.kv_egress_bytes_per_s, rel=0.05)
    port_usd_per_hour = {"aws-dx-10g": 1642 / 730, "aws-dx-100g": 16425 / 730}
    extra_volume = 0.7 * (step.kv_egress_bytes_per_s - plan.kv_egress_bytes_per_s) * 3600 / 1e9
    if bought == wider:
        expected = 0.1 * port_usd_per_hour[bought] + 0.02 * extra_volume
    else:
        expected = port_usd_per_hour[wider] - port_usd_per_hour[bought] + 0.02 * extra_volume
    assert report.step_cost_usd_per_hour[Resource.LINK_BANDWIDTH] == pytest.approx(
        expected, rel=1e-9
    )


def test_sensitivity_prices_the_steps_from_the_command_line():
    result = run("sensitivity", "--bins", "200", "--gpu-price", "h200=2.4", "-f", "json")
    assert result.returncode == 0, result.stderr
    gains = json.loads(result.stdout)["marginal_gains"]
    assert "cost_usd_per_hour" in gains["prfaas_instance"]
    assert "cost_usd_per_hour" not in gains["decode_slo_slack_10pct"]
    assert_clean_error(run("sensitivity", "--gpu-price", "h200=-1"), 3, "--gpu-price", "h200")


def test_the_mean_length_curve_rereads_the_decode_point(case_study):
    """Shorter prompts leave a shorter decode context: the curve's plans decode faster there
    than the case study's (batch and step re-read from the table), not at its decode point."""
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.scenario import decode_point
    from prfaas_plan.use_cases.sensitivity import sensitivity_curves

    curve = {c.name: c for c in sensitivity_curves(case_study)}["mean_input_length"]
    shortest = curve.plans[0]
    base = case_study.system.decode_rps_per_instance
    s = case_study.scenario
    table = Catalog.open().decode_table(s.model, s.pd_cluster.gpu, s.pd_cluster.gpus_per_instance)
    import dataclasses
    import math

    w = dataclasses.replace(case_study.workload, mu_log=case_study.workload.mu_log + math.log(0.25))
    point = decode_point(table, s.slo.decode_tokens_per_s, w, case_study.output_lengths)
    expected = point.batch_size / (point.step_latency_s * case_study.system.output_tokens)
    assert expected > base
    assert shortest.throughput.pd_decode_rps == pytest.approx(
        expected * shortest.configuration.pd_decode_instances, rel=1e-12
    )
