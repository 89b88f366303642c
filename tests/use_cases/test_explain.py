"""`explain`: the substituted equations recompute the plan (Λ = min of the terms, the balance
holds at the optimum), the elasticities are present for a log-normal workload only, every format;
every plan the optimiser can make is explained without a traceback, through the CLI and the HTTP
API, in every format (everything or nothing offloaded, one PD instance, a plan that serves
nothing, one observed length). The elasticities' values are checked against finite differences
in tests/symbolic/test_explain_regimes.py."""

import json
import math
import warnings

import pytest
import yaml

from tests.cli.test_cli import run, scenario_with

with warnings.catch_warnings():  # starlette's TestClient on httpx (deprecated, still supported)
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


@pytest.mark.slow
def test_explain_json_recomputes_the_plan():
    ran = run("explain", "--format", "json")
    assert ran.returncode == 0, ran.stderr
    d = json.loads(ran.stdout)
    th, p = d["throughput_rps"], d["offload_fraction"]
    assert th["prfaas_compute"] == pytest.approx(d["prfaas_instances"] / d["prfaas_service_time_s"])
    assert th["pd_prefill"] == pytest.approx(
        d["pd_prefill_instances"] / d["pd_prefill_service_time_s"]
    )
    prfaas = min(th["prfaas_compute"], th["prfaas_link"])
    assert th["system"] == pytest.approx(
        min(prfaas / p, th["pd_prefill"] / (1 - p), th["pd_decode"])
    )
    assert prfaas / p == pytest.approx(th["pd_prefill"] / (1 - p), rel=1e-9)  # eq. 7 at t*
    forms = d["closed_forms"]
    assert forms["regime"] == "balance" and forms["offloaded"] == "some"
    assert abs(forms["balance_residual"]) < 1e-9
    e = forms["elasticities"]
    assert e["prfaas_instances"] + e["pd_prefill_instances"] == pytest.approx(1.0)
    assert forms["elasticities_up"] == forms["elasticities_down"] == e  # differentiable
    # the case study's decode table has a context column: C = E[L] + L_out / 2
    context = d["decode_context"]
    assert context["batch_size"] == 20 and context["context_tokens"] == pytest.approx(27997.68)
    assert forms["decode_context_tokens_per_unit"]["output_tokens"] == pytest.approx(0.5)


@pytest.mark.slow
def test_explain_markdown_and_a_histogram_workload():
    ran = run("explain", "--format", "markdown", "--mode", "exact")
    assert ran.returncode == 0 and r"E[T_{prfaas}(L) \mid L>t]" in ran.stdout
    assert "(5c) decode context" in ran.stdout and "L_out means scaling every output length" in (
        ran.stdout
    )
    ran = run("explain", "examples/histogram_workload.yaml", "--format", "json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["closed_forms"] is None


# (what the plan is, scenario changes, explain's regime, what is offloaded)
EDGE_PLANS = [
    ("everything offloaded, decode binds (16/0/8)",
     {"prfaas_cluster.instances": 16}, "decode", "all"),
    ("one PD instance: it decodes, PrfaaS prefills all", {"pd_cluster.instances": 1},
     "decode", "all"),
    ("one PD and one PrfaaS instance: PrfaaS compute binds alone",
     {"pd_cluster.instances": 1, "prfaas_cluster.instances": 1}, "prfaas_only", "all"),
    ("nothing offloaded (no PrfaaS instance)", {"prfaas_cluster.instances": 0},
     "pd_prefill_only", "none"),
    ("serves nothing (one PD instance decodes, none prefills)",
     {"pd_cluster.instances": 1, "prfaas_cluster.instances": 0}, "nothing_served", "none"),
]  # fmt: skip


def _finite_min(*values):
    return min(v for v in values if v is not None and math.isfinite(v))


@pytest.mark.parametrize(("what", "changes", "regime", "offloaded"), EDGE_PLANS,
                         ids=[e[0] for e in EDGE_PLANS])  # fmt: skip
def test_every_edge_plan_is_explained_in_every_format(tmp_path, what, changes, regime, offloaded):
    path = scenario_with(tmp_path, **changes)
    ran = run("explain", path, "--format", "json")
    assert ran.returncode == 0, ran.stderr
    d = json.loads(ran.stdout)
    forms = d["closed_forms"]
    assert (forms["regime"], forms["offloaded"]) == (regime, offloaded), what
    th, p = d["throughput_rps"], d["offload_fraction"]
    prfaas = None if p == 0 else min(th["prfaas_compute"], th["prfaas_link"]) / p
    pd_prefill = None if p == 1 else th["pd_prefill"] / (1 - p)
    assert th["system"] == pytest.approx(_finite_min(prfaas, pd_prefill, th["pd_decode"]))
    e = forms["elasticities"]
    if regime == "nothing_served":
        assert set(e.values()) == {None}
    elif regime == "decode":  # the case study's C sits on BS_max's step: one-sided in lengths
        lengths = ("mu_log", "sigma_log", "output_tokens")
        assert {e[k] for k in lengths} == {forms["elasticities_up"][k] for k in lengths} == {None}
        assert None not in (forms["elasticities_down"][k] for k in lengths)
        assert None not in (v for k, v in e.items() if k not in lengths)
    else:  # a count of 0 has elasticity 0; everything else here is differentiable
        assert None not in e.values()
    for fmt in ("table", "markdown"):
        ran = run("explain", path, "--format", fmt)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
        assert "(6) system" in ran.stdout


def test_one_observed_length_is_explained(tmp_path):
    """Every request of one length: p is 0 or 1 at every threshold, the optimiser offloads
    them all; no closed forms (not a log-normal)."""
    (tmp_path / "one.csv").write_text("input_tokens\n5000\n")
    scenario = yaml.safe_load(scenario_with(tmp_path).read_text())
    scenario["workload"]["input_tokens"] = {"distribution": "observed", "file": "one.csv"}
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(scenario))
    for fmt in ("table", "markdown", "json"):
        ran = run("explain", path, "--format", fmt)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
    d = json.loads(ran.stdout)
    assert d["offload_fraction"] in (0.0, 1.0) and d["closed_forms"] is None


@pytest.fixture(scope="module")
def client():
    from prfaas_plan.server.app import create_app

    return TestClient(create_app())


@pytest.mark.parametrize("fmt", ["json", "markdown"])
@pytest.mark.parametrize(("what", "changes", "regime", "offloaded"), EDGE_PLANS,
                         ids=[e[0] for e in EDGE_PLANS])  # fmt: skip
def test_the_api_explains_every_edge_plan(client, tmp_path, fmt, what, changes, regime, offloaded):
    scenario = yaml.safe_load(scenario_with(tmp_path, **changes).read_text())
    response = client.post(f"/api/v1/explain?format={fmt}", json={"scenario": scenario})
    assert response.status_code == 200, response.text
    if fmt == "json":
        assert response.json()["closed_forms"]["regime"] == regime
    else:
        assert "(6) system" in response.text and "Traceback" not in response.text
