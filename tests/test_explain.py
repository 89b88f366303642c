"""`explain`: the substituted equations recompute the plan (Λ = min of the terms, the balance
holds at the optimum), the elasticities are present for a log-normal workload only, every format."""

import json

import pytest

from tests.test_cli import run


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
    assert forms["regime"] == "balance"
    assert abs(forms["balance_residual"]) < 1e-9
    e = forms["elasticities"]
    assert e["prfaas_instances"] + e["pd_prefill_instances"] == pytest.approx(1.0)


def test_explain_markdown_and_a_histogram_workload():
    ran = run("explain", "--format", "markdown", "--mode", "exact")
    assert ran.returncode == 0 and r"E[T_{prfaas}(L) \mid L>t]" in ran.stdout
    ran = run("explain", "examples/histogram_workload.yaml", "--format", "json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["closed_forms"] is None
