"""`prfaas-plan simulate` and `compare-policies`: the CLI around the simulator (the simulator
itself is validated in tests/sim/test_simulate.py). In-process through typer's CliRunner
(tests/test_cli.run); tests/cli/test_smoke.py checks what only a real process shows."""

import json

import pytest

from prfaas_plan.choices import RoutingPolicy
from prfaas_plan.cli.failures import parameter_flags
from prfaas_plan.errors import ConfigError
from prfaas_plan.use_cases.simulate_request import SPEC_FIELDS, SimulateRequest
from prfaas_plan.use_cases.simulation_spec import (
    ArrivalSpec,
    LoadSpec,
    PolicySpec,
    SimulationRequest,
    StressSpec,
    validate,
)
from tests.cli.test_cli import assert_clean_error, run


def ok(*args):
    result = run(*args)
    assert result.returncode == 0, result.stderr
    return result


def simulate_json(*args):
    return json.loads(ok("simulate", "--requests", "20000", *args, "-f", "json").stdout)


@pytest.mark.slow
def test_load_sweep_shows_ttft_growing_with_load():
    doc = simulate_json("--load", "0.5,0.8,0.95")
    runs = doc["runs"]
    assert [r["load_fraction"] for r in runs] == [0.5, 0.8, 0.95]
    p90 = [r["result"]["ttft"]["p90_s"] for r in runs]
    assert p90[0] < p90[1] < p90[2]
    assert p90[0] >= doc["unloaded_ttft"]["p90_s"] * 0.95  # queueing only adds
    for r in runs:
        res = r["result"]
        counts = res["counts"]
        assert sum(v for k, v in counts.items() if k != "total") == counts["total"]
        assert res["throughput_rps"] == pytest.approx(r["rate_rps"], rel=0.05)
    assert doc["configuration"]["prfaas_instances"] == 4
    assert doc["exact_capacity_rps"] < doc["paper_capacity_rps"]


def test_same_seed_same_result_and_seed_matters():
    a, b = simulate_json("--seed", "7"), simulate_json("--seed", "7")
    assert a["runs"] == b["runs"]
    assert simulate_json("--seed", "8")["runs"] != a["runs"]


def test_bursty_arrivals_and_bandwidth_dip_with_policies():
    bursty = simulate_json("--arrivals", "gamma", "--burst-cv", "4", "--load", "0.7")
    smooth = simulate_json("--load", "0.7")
    assert (
        bursty["runs"][0]["result"]["ttft"]["p90_s"] > smooth["runs"][0]["result"]["ttft"]["p90_s"]
    )
    # the link at 8% for 25 minutes of a ~2.5 h run: the dip shapes the tail, and the adaptive
    # threshold (raise t while the link is hot) cuts it; measured P99 61 s static vs 27 s adaptive
    dip = [
        "--load",
        "0.7",
        "--dip-start-s",
        "600",
        "--dip-duration-s",
        "1500",
        "--dip-fraction",
        "0.08",
    ]
    static = simulate_json(*dip)["runs"][0]["result"]
    adaptive = simulate_json(*dip, "--policy", "adaptive")["runs"][0]["result"]
    assert adaptive["threshold_changes"] > 0
    assert adaptive["threshold_max_tokens"] > static["threshold_max_tokens"]
    assert adaptive["ttft"]["p99_s"] < 0.7 * static["ttft"]["p99_s"]


def test_mooncake_trace_replay_and_prefix_policy(tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = []
    for i in range(400):  # 40 sessions of 10 turns that share a growing prefix
        session, turn = divmod(i, 10)
        blocks = [session * 1000 + b for b in range(4 * (turn + 1))]
        lines.append(json.dumps({"timestamp": i * 500, "input_length": 512 * len(blocks),
                                 "output_length": 200, "hash_ids": blocks}))  # fmt: skip
    trace.write_text("\n".join(lines) + "\n")
    doc = json.loads(ok("simulate", "--trace", trace, "-f", "json").stdout)
    assert doc["runs"][0]["load_fraction"] is None
    assert doc["runs"][0]["result"]["counts"]["total"] == 400
    static = doc["runs"][0]["result"]
    prefix = json.loads(ok("simulate", "--trace", trace, "--policy", "prefix", "-f", "json").stdout)
    reused = prefix["runs"][0]["result"]
    assert reused["counts"]["total"] == 400
    # each turn re-sends its session's earlier blocks: with the prefix cache only the new
    # tail is prefilled, so the prefill pools do far less work (measured: 0.29 vs 0.53 busy)
    busy = [
        r["prfaas_prefill"]["utilization"] + r["pd_prefill"]["utilization"]
        for r in (static, reused)
    ]
    assert busy[1] < 0.7 * busy[0]
    scaled = json.loads(ok("simulate", "--trace", trace, "--load", "0.5", "-f", "json").stdout)
    (run50,) = scaled["runs"]
    assert run50["load_fraction"] == 0.5  # of the plan's capacity on the trace's own lengths
    assert run50["result"]["offered_rate_rps"] == pytest.approx(
        0.5 * scaled["exact_capacity_rps"], rel=0.05
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--load", "0"], "--load"),
        (["--load", "a,b"], "--load"),
        (["--rate-rps", "-1"], "--rate-rps"),
        (["--policy", "prefix"], "--policy prefix needs --trace"),
        (["--dip-start-s", "10"], "--dip-duration-s"),
        (["--requests", "0"], "--requests"),
        (["--duration-s", "-1"], "error: --duration-s must be a finite number > 0, got -1"),
        (
            ["--arrivals", "gamma", "--burst-cv", "0"],
            "error: --burst-cv must be a finite number > 0, got 0",
        ),
        (
            ["--arrivals", "sinusoidal", "--period-s", "0"],
            "error: --period-s must be a finite number > 0, got 0",
        ),
        (["--arrivals", "sinusoidal", "--amplitude", "2"], "error: --amplitude must be in [0, 1]"),
        (
            ["--dip-start-s", "1", "--dip-duration-s", "1", "--dip-fraction", "2"],
            "error: --dip-fraction must be in [0, 1]",
        ),
        (["--dip-start-s", "-1", "--dip-duration-s", "1"], "error: --dip-start-s must be"),
        (["--link-latency-s", "-1"], "error: --link-latency-s must be >= 0, got -1"),
        (["--trace", "t.jsonl", "--requests", "9"], "drop --requests/--duration-s"),
        (["--arrivals", "trace"], "error: --arrivals trace and --trace FILE go together"),
        (["--load", "0.5", "--rate-rps", "1"], "error: give --load or --rate-rps, not both"),
        (["--requests", "9", "--duration-s", "5"], "exactly one of --requests and --duration-s"),
        (["--requests", "100000000000"], "per run (--requests/--duration-s)"),
        (["--trace", "/nonexistent.jsonl"], "/nonexistent.jsonl: cannot read the trace"),
    ],
)
def test_bad_simulate_flags_fail_cleanly(args, fragment):
    assert_clean_error(run("simulate", *args), 3, fragment)


def test_simulate_table_view():
    result = ok("simulate", "--requests", "5000", "--load", "0.5")
    assert "50% of Λ_max" in result.stdout and "unloaded TTFT" in result.stdout


def test_compare_policies_cli(tmp_path):
    doc = json.loads(ok("compare-policies", "--requests", "3000", "-f", "json").stdout)
    rows = {(r["scenario"], r["policy"]): r for r in doc["rows"]}
    assert {s for s, _ in rows} == {"burst", "bandwidth_dip", "output_drift"}
    assert {p for _, p in rows} == {"static", "adaptive", "rebalance", "dual", "prefix"}
    assert not rows[("burst", "prefix")]["ran"] and "prefix" in rows[("burst", "prefix")]["note"]
    assert rows[("burst", "static")]["threshold_changes"] == 0
    again = json.loads(ok("compare-policies", "--requests", "3000", "-f", "json").stdout)
    assert again["rows"] == doc["rows"]
    assert_clean_error(run("compare-policies", "--load", "-1"), 3, "error: --load must be a finite")
    assert_clean_error(
        run("compare-policies", "--requests", "10"), 3, "error: --requests must be >="
    )


def test_sustainable_rate_is_reported_against_both_modes():
    """The simulator's highest sustainable rate sits next to the exact-mode Λ_max (within 2%,
    the validation tolerance of tests/sim/test_simulate.py) and further from the paper mode."""
    doc = simulate_json("--sustainable", "--load", "0.5")
    z = doc["sustainable"]
    assert z["stable_rps"] <= z["rate_rps"] <= z["unstable_rps"]
    exact_gap = abs(doc["exact_capacity_rps"] / z["rate_rps"] - 1)
    paper_gap = abs(doc["paper_capacity_rps"] / z["rate_rps"] - 1)
    assert exact_gap < 0.02 and paper_gap > exact_gap


@pytest.mark.parametrize(
    "request_, parameter",
    [
        (SimulationRequest(arrivals=ArrivalSpec(requests=0)), "arrivals.requests"),
        (SimulationRequest(load=LoadSpec(fractions=(0.5,), rate_rps=1.0)), "load.fractions"),
        (SimulationRequest(stress=StressSpec(dip_start_s=5.0)), "stress.dip_duration_s"),
        (SimulationRequest(link_latency_s=-1.0), "link_latency_s"),
        (SimulationRequest(policy=PolicySpec(RoutingPolicy.PREFIX)), "policy.kind"),
    ],
)
def test_the_library_names_spec_fields_not_flags(request_, parameter):
    with pytest.raises(ConfigError) as caught:
        validate(request_)
    assert caught.value.parameter == parameter
    assert parameter in str(caught.value) and "--" not in str(caught.value)
    field = SPEC_FIELDS.get(parameter, parameter)  # simulate's request field (in_request_terms)
    assert field in SimulateRequest.model_fields and field in parameter_flags()
