"""The HTTP API (server/) through an in-process client: every endpoint gives the CLI's JSON for
the same question, every error class its status and the library's one-line message, and no
hostile body a 500 or a traceback."""

import json
import os
import re
import signal
import threading
import time
import urllib.request
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # starlette's TestClient on httpx (deprecated, still supported)
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import prfaas_plan
from prfaas_plan.errors import (
    ConfigError,
    InfeasibleError,
    PrfaasPlanError,
    ProfileError,
    RangeError,
    ResourceLimitError,
    SolverError,
)
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import load_scenario
from prfaas_plan.server import endpoints
from prfaas_plan.server.app import STATIC, create_app
from prfaas_plan.server.limits import Limits
from tests.browser import served
from tests.cli.test_cli import assert_clean_error, data_copy, run, scenario_with

CASE = load_scenario(default_scenario_file()).model_dump(mode="json")


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def post(client, name, body=None, **kwargs):
    return client.post(f"/api/v1/{name}", json=body if body is not None else {}, **kwargs)


def cli_json(*args):
    result = run(*args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# (endpoint, body, the CLI command asking the same)
SAME_AS_CLI = [
    ("plan", {}, ["optimize"]),
    ("plan", {"mode": "exact", "bandwidth_gbps": 5}, ["optimize", "--mode", "exact", "--bandwidth-gbps", "5"]),
    ("plan", {"threshold_tokens": 30000}, ["optimize", "--threshold-tokens", "30000"]),
    ("plan", {"target_rps": 4}, ["optimize", "--target-rps", "4"]),
    ("plan", {"ttft_target_s": 6, "ttft_load": 0.8}, ["optimize", "--ttft-target-s", "6", "--ttft-load", "0.8"]),
    ("evaluate", {"threshold_tokens": 19400, "pd_prefill_instances": 3},
     ["evaluate", "--threshold-tokens", "19400", "--pd-prefill-instances", "3"]),
    ("kv", {}, ["kv"]),
    ("kv", {"models": ["internal-1t-hybrid"], "lengths_tokens": [4096, 65536]},
     ["kv", "internal-1t-hybrid", "--lengths", "4096,65536"]),
    ("egress", {"prfaas_gpus": 64, "link_gbps": 25}, ["egress", "--prfaas-gpus", "64", "--link-gbps", "25"]),
    ("simulate", {"requests": 400, "load": [0.5, 0.8], "seed": 3},
     ["simulate", "--requests", "400", "--load", "0.5,0.8", "--seed", "3"]),
    ("plan", {"gpu_prices_usd_per_gpu_hour": {"h200": 2.4}, "cost_model": "tco"},
     ["optimize", "--gpu-price", "h200=2.4", "--cost-model", "tco"]),
    ("plan", {"gpu_prices_usd_per_gpu_hour": {"h200": 2, "h20": 1}, "link_offering": "owned"},
     ["optimize", "--gpu-price", "h200=2", "--gpu-price", "h20=1", "--link-offering", "owned"]),
    ("evaluate", {"threshold_tokens": 19435, "pd_prefill_instances": 3,
                  "link_offering": "metro-wave-100g"},
     ["evaluate", "--threshold-tokens", "19435", "--pd-prefill-instances", "3",
      "--link-offering", "metro-wave-100g"]),
    ("sensitivity", {"bins": 200, "bandwidth_gbps": 10},
     ["sensitivity", "--bins", "200", "--bandwidth-gbps", "10"]),
    ("explain", {"mode": "exact"}, ["explain", "--mode", "exact"]),
    ("procure", {"target_rps": 4}, ["procure", "--target-rps", "4"]),
    pytest.param(
        "procure", {"budget_usd_per_hour": 500, "gpu_prices_usd_per_gpu_hour": {"h200": 2.4},
                    "max_instances_per_site": 8},
        ["procure", "--budget-usd-per-hour", "500", "--gpu-price", "h200=2.4",
         "--max-instances-per-site", "8"], marks=pytest.mark.slow),  # ~10 s of ascending solves
    pytest.param("procure/pareto", {"target_rps": 4}, ["procure", "--pareto", "--target-rps", "4"],
                 marks=pytest.mark.slow),  # ~1.3 M candidates; the row below is a small space
    ("procure", {"target_rps": 2, "ttft_target_s": 8}, ["procure", "--target-rps", "2", "--ttft-target-s", "8"]),
    ("procure", {"target_rps": 2, "ttft_target_s": 10, "ttft_percentile": "mean", "ttft_load": 0.8},
     ["procure", "--target-rps", "2", "--ttft-target-s", "10", "--ttft-percentile", "mean",
      "--ttft-load", "0.8"]),
    ("procure/pareto", {"target_rps": 2, "ttft_load_rps": 1.5, "max_instances_per_site": 2},
     ["procure", "--pareto", "--target-rps", "2", "--ttft-load-rps", "1.5",
      "--max-instances-per-site", "2"]),
    ("procure/pareto", {"target_rps": 3, "cost_model": "tco", "max_instances_per_site": 6,
                        "gpu_prices_usd_per_gpu_hour": {"h20": 1.1}, "mode": "exact"},
     ["procure", "--pareto", "--target-rps", "3", "--cost-model", "tco",
      "--max-instances-per-site", "6", "--gpu-price", "h20=1.1", "--mode", "exact"]),
]  # fmt: skip


@pytest.mark.slow  # ~7 s of CPU; the default suite keeps test_doors_random's requests per command
@pytest.mark.parametrize(("name", "body", "args"), SAME_AS_CLI, ids=lambda x: json.dumps(x)[:40])
def test_every_endpoint_answers_as_the_cli(client, name, body, args):
    response = post(client, name, body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    api, cli = response.json(), cli_json(*args)
    if "scenario_file" in cli.get("inputs", {}):  # the server names no path of its machine
        assert api["inputs"].pop("scenario_file") == "examples/case_study.yaml"
        assert cli["inputs"].pop("scenario_file") == str(default_scenario_file())
    assert api == cli


@pytest.mark.parametrize(
    ("name", "body", "args"),
    [
        ("plan", {}, ["optimize"]),
        ("evaluate", {"threshold_tokens": 19435, "pd_prefill_instances": 3},
         ["evaluate", "--threshold-tokens", "19435", "--pd-prefill-instances", "3"]),
    ],
)  # fmt: skip
def test_both_equal_cost_comparisons_are_answered(client, name, body, args):
    """The API answers the GPU-spend comparison beside the all-in one, as the CLI does."""
    prices = {"gpu_prices_usd_per_gpu_hour": {"h200": 2, "h20": 1}}
    document = post(client, name, {**body, **prices}).json()
    cost = document["plan" if name == "plan" else "configuration"]["cost"]
    for basis in ("equal_cost", "equal_gpu_spend"):
        block = cost[f"{basis}_homogeneous_pd"]
        assert set(block) == {"budget_usd_per_hour", "pd_instances", "system_rps",
                              "usd_per_hour_total", "pd_prefill_instances"}  # fmt: skip
        assert cost[f"speedup_vs_{basis}_homogeneous"] > 0
    assert cost["equal_gpu_spend_homogeneous_pd"]["pd_instances"] == 16
    cli = cli_json(*args, "--gpu-price", "h200=2", "--gpu-price", "h20=1")
    assert document["inputs"].pop("scenario_file") == "examples/case_study.yaml"
    assert cli["inputs"].pop("scenario_file") == str(default_scenario_file())
    assert document == cli


@pytest.mark.slow
def test_the_pareto_endpoint_is_the_clis_json_and_markdown_byte_for_byte(client):
    """The JSON is the CLI's document written compact (no indentation: for programs), the
    Markdown the CLI's byte for byte."""
    args = ("procure", "--pareto", "--target-rps", "4", "--max-instances-per-site", "4")
    body = {"target_rps": 4, "max_instances_per_site": 4}
    response = post(client, "procure/pareto", body)
    assert response.status_code == 200
    cli = run(*args, "--format", "json").stdout
    assert response.text == json.dumps(json.loads(cli), separators=(",", ":")) + "\n"
    assert "\n" not in response.text.rstrip("\n")
    markdown = client.post("/api/v1/procure/pareto?format=markdown", json=body)
    assert markdown.text == run(*args, "--format", "markdown").stdout


def test_a_scenario_in_the_body_plans_as_the_same_scenario_file(client, tmp_path):
    path = scenario_with(tmp_path, **{"link.bandwidth_gbps": 25, "pd_cluster.instances": 10})
    body = {"scenario": yaml.safe_load(path.read_text())}
    api, cli = post(client, "plan", body).json(), cli_json("optimize", path)
    assert api["inputs"].pop("scenario_file") == "request"
    assert cli["inputs"].pop("scenario_file") == str(path)
    assert api == cli


def test_markdown_is_the_clis_markdown(client):
    response = client.post("/api/v1/plan?format=markdown", json={"bandwidth_gbps": 40})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/markdown")
    assert response.text == run("optimize", "--bandwidth-gbps", "40", "--format", "markdown").stdout


def test_the_pages_call_is_plan_with_its_table_and_balance_curve(client):
    answer = post(client, "whatif", {"bandwidth_gbps": 10}).json()
    assert answer["plan"] == post(client, "plan", {"bandwidth_gbps": 10}).json()
    view = answer["view"]
    assert answer["markdown"].startswith(f"## {view['title']}")
    for label, cells in view["rows"]:
        assert f"| {label} | " + " | ".join(cells) + " |" in answer["markdown"]
    b = answer["balance"]
    plan = answer["plan"]["plan"]
    assert b["split"] == [plan["pd_prefill_instances"], plan["pd_decode_instances"]]
    terms = zip(
        b["prfaas_rps"], b["pd_prefill_rps"], b["pd_decode_rps"], b["system_rps"], strict=True
    )
    for *limits, system in terms:  # null: no limit (inf: nothing routed to that pool)
        assert system == pytest.approx(min(x for x in limits if x is not None), rel=1e-12)
    # the plan is the optimum of this split over t: no point of the curve beats it
    assert max(b["system_rps"]) <= plan["throughput_rps"]["system"] * (1 + 1e-9)
    assert b["plan_system_rps"] == plan["throughput_rps"]["system"]


# (endpoint, body, status, error type, fragment of the message)
ERRORS = [
    ("plan", {"threshold_tokens": -1}, 422, "ConfigError", "threshold_tokens must be >= 0"),
    ("plan", {"target_rps": 7}, 409, "InfeasibleError", "no plan reaches 7 req/s"),
    ("plan", {"out_of_range": "error"}, 422, "RangeError", "profiled range"),
    ("plan", {"mode": 3}, 422, "ConfigError", "request: mode: input should be 'paper' or 'exact'"),
    ("plan", {"threshold_tokens": "100"}, 422, "ConfigError", "threshold_tokens: input should be a valid number"),
    ("plan", {"bandwidth": 25}, 422, "ConfigError", "bandwidth: extra inputs are not permitted"),
    ("plan", {"max_prfaas_gpus": 10**30}, 422, "ConfigError", "max_prfaas_gpus must be in"),
    ("plan", {"bandwidth_gbps": 1e308}, 422, "ConfigError", "bandwidth_gbps must be in"),
    ("plan", {"solver": "cbc"}, 422, "ConfigError", "solver has no effect without sizing"),
    ("plan", [1, 2], 422, "ConfigError", "expected a mapping of fields, found list"),
    ("plan", {"scenario": {**CASE, "link": {"bandwidth_gbps": -1}}}, 422, "ConfigError",
     "request: scenario.link.bandwidth_gbps: input should be greater than 0"),
    ("plan", {"scenario": {**CASE, "model": "gpt-9"}}, 422, "ConfigError", "unknown model"),
    ("plan", {"scenario": {**CASE, "pd_cluster": {**CASE["pd_cluster"], "instances": 0}}}, 422,
     "ConfigError", "pd_cluster.instances must be >= 1"),
    ("plan", {"scenario": {**CASE, "workload": {**CASE["workload"], "input_tokens": {
        "distribution": "observed", "file": "/etc/passwd"}}}}, 422, "ConfigError",
     "the server reads no file a request names"),
    ("evaluate", {"threshold_tokens": 1000, "pd_prefill_instances": 8}, 422, "ConfigError",
     "pd_prefill_instances must be in [0, 7]"),
    ("evaluate", {}, 422, "ConfigError", "threshold_tokens: field required"),
    ("plan", {"link_offering": "owned", "bandwidth_gbps": 400}, 422, "ConfigError",
     "link_offering 'owned' is the scenario's own 100 Gbps link (link.bandwidth_gbps), less than "
     "the 400 Gbps link the plan assumes (bandwidth_gbps)"),
    ("plan", {"link_offering": "fibre"}, 422, "ConfigError",
     "unknown link offering 'fibre'; known: aws-dx-100g"),
    ("sensitivity", {"bins": 100_000}, 422, "ConfigError", "bins: input should be less than or equal to 5000"),
    ("procure", {"target_rps": 400}, 409, "InfeasibleError", "no deployment in the candidate space reaches"),
    ("procure", {"max_instances_per_site": 65, "target_rps": 4}, 422, "ConfigError",
     "max_instances_per_site: input should be less than or equal to 64"),
    ("procure", {"target_rps": 4, "export_model": "/tmp/m.lp"}, 422, "ConfigError",
     "export_model: extra inputs are not permitted"),
    ("procure", {"target_rps": 4, "scenario": {**CASE, "procurement": {"max_pd_instances": 65}}},
     422, "ConfigError", "scenario.procurement.max_pd_instances must be <= 64 on this server"),
    ("procure", {"budget_usd_per_hour": 200, "ttft_target_s": 8}, 422, "ConfigError",
     "applies to target_rps"),
    pytest.param("procure", {"target_rps": 4, "ttft_target_s": 1}, 409, "InfeasibleError",
                 "P(TTFT <= 1 s) reaches at most", marks=pytest.mark.slow),  # searches everything
    ("procure/pareto", {"target_rps": 4, "ttft_target_s": 5}, 422, "ConfigError",
     "ttft_target_s: extra inputs are not permitted"),
    ("procure/pareto", {}, 422, "ConfigError", "request: target_rps: field required"),
    ("procure/pareto", {"target_rps": 0}, 422, "ConfigError", "target_rps must be in"),
    ("procure/pareto", {"target_rps": 4, "budget_usd_per_hour": 300}, 422, "ConfigError",
     "budget_usd_per_hour: extra inputs are not permitted"),
    ("procure/pareto", {"target_rps": 4, "max_instances_per_site": 65}, 422, "ConfigError",
     "max_instances_per_site: input should be less than or equal to 64"),
    ("procure/pareto", {"target_rps": 4, "scenario": {**CASE, "procurement": {"max_pd_instances": 65}}},
     422, "ConfigError", "scenario.procurement.max_pd_instances must be <= 64 on this server"),
    ("procure/pareto", {"target_rps": 4, "gpu_prices_usd_per_gpu_hour": {"b200": 3}}, 422,
     "ConfigError", "b200"),
    ("kv", {"lengths_tokens": []}, 422, "ConfigError", "lengths_tokens: list should have at least 1 item"),
    ("kv", {"gpu": "../../etc"}, 422, "ConfigError", "unknown GPU"),
    ("egress", {"link_gbps": 0}, 422, "ConfigError", "link_gbps must be a finite number > 0"),
    ("simulate", {"requests": 10**9}, 422, "ConfigError", "requests: input should be less than or equal to 20000"),
    ("simulate", {"requests": 10_000, "load": [0.5, 0.8, 0.9]}, 422, "ConfigError",
     "requests x loads must be <= 20,000 on this server"),
    ("simulate", {"burst_cv": 2}, 422, "ConfigError",
     "`burst_cv` has no effect here: only gamma arrivals have a burst CV (`arrivals` is poisson)"),
    ("simulate", {"load": [-0.5]}, 422, "ConfigError",
     "`load` must be fractions > 0 of the exact-mode Λ_max, got -0.5"),
    ("simulate", {"trace": "/etc/passwd"}, 422, "ConfigError", "trace: input should be None, got '/etc/passwd'"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "body", "status", "kind", "fragment"), ERRORS,
                         ids=lambda x: json.dumps(x)[:50])  # fmt: skip
def test_every_error_is_a_4xx_with_one_line(client, name, body, status, kind, fragment):
    response = post(client, name, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == kind
    assert fragment in error["message"]
    assert "\n" not in error["message"] and "Traceback" not in response.text


def test_a_simulate_error_names_the_bodys_field(client):
    """The simulator's spec paths (`arrivals.burst_cv`) are told as the body's fields, message
    and `parameter` alike, which the CLI shows as its flags."""
    error = post(client, "simulate", {"arrivals": "gamma", "burst_cv": -1}).json()["error"]
    assert error["parameter"] == "burst_cv"
    cli = run("simulate", "--arrivals", "gamma", "--burst-cv", "-1")
    assert_clean_error(cli, 3)
    assert cli.stderr == "error: " + error["message"].replace("`burst_cv`", "--burst-cv") + "\n"


def test_the_message_is_the_clis_with_parameters_for_flags(client, tmp_path):
    """The CLI rewrites the library's parameter names into its flags, and names the scenario
    file where the API says `request: scenario.`; nothing else differs."""
    api = post(client, "plan", {"target_rps": 7}).json()["error"]["message"]
    cli = run("optimize", "--target-rps", "7")
    assert_clean_error(cli, 6)
    assert cli.stderr == "error: " + api.replace("target_rps", "--target-rps") + "\n"
    path = scenario_with(tmp_path, **{"slo.decode_tokens_per_s": 0})
    api = post(client, "plan", {"scenario": yaml.safe_load(path.read_text())}).json()
    cli = run("optimize", path)
    assert_clean_error(cli, 3)
    assert (
        cli.stderr
        == f"error: {path}: " + api["error"]["message"].removeprefix("request: scenario.") + "\n"
    )


def test_a_broken_profile_table_is_a_profile_error(tmp_path):
    data = data_copy(tmp_path)
    table = data / "profiles/internal-1t-hybrid/prefill/h200-x8/prefill_latency.csv"
    table.write_text(
        "input_tokens,prefill_latency_s\n1000,0.44\n8000,0.30\n32000,1.84\n128000,7.40\n"
    )
    response = post(TestClient(create_app(data_dir=data)), "plan")
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "ProfileError"


MALFORMED = [
    (b"{", 400, "malformed JSON"),
    (b"\xff\xfe{}", 400, "not UTF-8"),
    (b'{"target_rps": NaN}', 400, "NaN is not a JSON number"),
    (b'{"target_rps": Infinity}', 400, "Infinity is not a JSON number"),
    (b'{"target_rps": 1e999}', 422, "input should be a finite number"),
    (b'{"max_prfaas_gpus": ' + b"9" * 5000 + b"}", 400, "malformed JSON"),
    (b"[" * 50_000 + b"]" * 50_000, 400, "malformed JSON"),
    (b'{"scenario": ' + b'{"a": ' * 40 + b"1" + b"}" * 41, 400, "nested deeper than 32"),
    (b" " * 300_000, 413, "over the limit of 262,144 bytes"),
]


@pytest.mark.parametrize(("raw", "status", "fragment"), MALFORMED, ids=lambda x: repr(x)[:30])
def test_hostile_bodies_are_refused_in_one_line(client, raw, status, fragment):
    response = client.post(
        "/api/v1/plan", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == status, response.text
    assert fragment in response.json()["error"]["message"]


def test_a_body_without_a_declared_length_is_bounded_too(client):
    chunks = (b" " * 65_536 for _ in range(8))  # streamed: no content-length header
    response = client.post("/api/v1/plan", content=chunks)
    assert response.status_code == 413


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = ["scenario", "mode", "threshold_tokens", "bandwidth_gbps", "target_rps", "max_prfaas_gpus",
          "ttft_target_s", "ttft_percentile", "ttft_load", "out_of_range"]  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=3))
def test_no_body_gives_a_500(client, body):
    response = client.post("/api/v1/plan", content=json.dumps(body).encode())
    assert response.status_code in (200, 400, 409, 422), response.text
    assert "Traceback" not in response.text


@pytest.fixture
def extra_endpoint(monkeypatch):
    """An endpoint added as /procure would be: one registered function (here raising or
    blocking on demand), so the status of every error class and the bounds can be shown."""
    calls = {"raise": None, "release": threading.Event()}

    class Body(Strict):
        wait: bool = False

    registry = dict(endpoints.ENDPOINTS)
    monkeypatch.setattr(endpoints, "ENDPOINTS", registry)
    monkeypatch.setattr("prfaas_plan.server.app.ENDPOINTS", registry)

    @endpoints.endpoint("probe", Body)
    def probe(body, catalog):
        """A probe."""
        if body.wait:
            calls["release"].wait(10)
        if calls["raise"] is not None:
            raise calls["raise"]
        return endpoints.ENDPOINTS["kv"].handler(endpoints.bodies.KvBody(), catalog)

    return calls


@pytest.mark.parametrize(("error", "status"), [
    (ConfigError("c"), 422), (ProfileError("p"), 422), (RangeError("r"), 422),
    (InfeasibleError("i"), 409), (SolverError("s"), 503), (ResourceLimitError("m"), 503),
    (MemoryError(), 503), (PrfaasPlanError("base"), 422),
])  # fmt: skip
def test_each_error_class_has_its_status(extra_endpoint, error, status):
    extra_endpoint["raise"] = error
    response = post(TestClient(create_app()), "probe")
    assert response.status_code == status
    assert response.json()["error"]["message"]


def test_a_bug_is_a_500_with_one_line_and_no_traceback(extra_endpoint, caplog):
    """The client gets one line; the server's log gets the traceback (a library error, which
    is the client's to fix, is not logged)."""
    extra_endpoint["raise"] = ZeroDivisionError("x")
    response = post(TestClient(create_app(), raise_server_exceptions=False), "probe")
    assert response.status_code == 500
    assert (
        response.json()["error"]["message"]
        == "internal error (ZeroDivisionError); please report it"
    )
    [record] = [r for r in caplog.records if r.name == "uvicorn.error"]
    assert "POST /api/v1/probe failed" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError
    caplog.clear()
    extra_endpoint["raise"] = ConfigError("c")
    assert post(TestClient(create_app()), "probe").status_code == 422
    assert not [r for r in caplog.records if r.name == "uvicorn.error"]


def test_a_new_endpoint_is_served_and_documented(extra_endpoint):
    client = TestClient(create_app())
    assert post(client, "probe").json() == cli_json("kv")
    schema = client.get("/openapi.json").json()["paths"]["/api/v1/probe"]["post"]
    assert schema["summary"] == "A probe."


def test_requests_beyond_the_concurrency_limit_are_refused_and_slow_ones_time_out(extra_endpoint):
    client = TestClient(create_app(Limits(max_concurrent=1, max_queued=0, timeout_s=0.2)))
    # the first request times out (504) but keeps its slot while its work runs on
    assert post(client, "probe", {"wait": True}).status_code == 504
    busy = post(client, "probe")
    assert (
        busy.status_code == 503
        and "1 requests are running and 0 waiting" in busy.json()["error"]["message"]
    )
    extra_endpoint["release"].set()
    for _ in range(100):  # the slot frees when the work ends
        if (response := post(client, "probe")).status_code != 503:
            break
        threading.Event().wait(0.02)
    assert response.status_code == 200


def test_a_scenario_yaml_is_read_with_the_strict_loader(client):
    text = default_scenario_file().read_text()
    assert client.post("/api/v1/scenario", content=text).json() == CASE
    assert client.get("/api/v1/scenario/default").json() == CASE
    for yaml_text, fragment in [
        ("name: a\nname: b\n", "duplicate key"),
        ("a: &x 1\nb: *x\n", "aliases (*name) are not allowed"),
        (text.replace("bandwidth_gbps: 100", "bandwidth_gbps: '100'"), "link.bandwidth_gbps"),
        ("- 1\n", "expected a mapping of fields"),
    ]:
        response = client.post("/api/v1/scenario", content=yaml_text)
        assert response.status_code == 422, response.text
        assert fragment in response.json()["error"]["message"] and "upload" in response.text


def test_openapi_documents_every_endpoint_with_its_body(client):
    paths = client.get("/openapi.json").json()["paths"]
    for name in ("plan", "evaluate", "kv", "egress", "simulate", "procure/pareto", "whatif"):
        body = paths[f"/api/v1/{name}"]["post"]["requestBody"]["content"]["application/json"]
        assert "properties" in body["schema"]
    assert client.get("/docs").status_code == 200
    assert client.get("/nowhere").json()["error"]["message"] == "Not Found"
    assert client.get("/api/v1/plan").status_code == 405
    assert [p["name"] for p in paths["/api/v1/plan"]["post"]["parameters"]] == ["format"]
    assert "post" in paths["/api/v1/scenario"]


def test_the_front_answers_as_fastapis_own_routes():
    """Computing POSTs bypass FastAPI's layers (app.Front); the routes FastAPI keeps for the
    OpenAPI description answer the same: status, type and bytes, errors included."""
    app = create_app()
    front, api = TestClient(app), TestClient(app.api)
    requests = [
        ("plan", b'{"bandwidth_gbps": 25}'), ("plan?format=markdown", b"{}"),
        ("plan?format=xml", b"{}"), ("plan", b"{"), ("plan", b'{"bandwidth_gbps": -1}'),
        ("plan", b'{"target_rps": 1000}'), ("plan", b" " * 300_000), ("whatif", b"{}"),
        ("whatif?format=markdown", b"{}"), ("scenario", b"name: x"), ("kv", b"{}"),
    ]  # fmt: skip
    statuses = set()
    for path, raw in requests:
        answers = [
            c.post(f"/api/v1/{path}", content=raw, headers={"content-type": "application/json"})
            for c in (front, api)
        ]
        assert len({(a.status_code, a.headers["content-type"], a.text) for a in answers}) == 1
        statuses.add(answers[0].status_code)
    assert statuses == {200, 400, 409, 413, 422}


def test_the_page_and_its_files_ship_in_the_package_and_load_nothing_from_elsewhere(client):
    assert STATIC.parent == Path(prfaas_plan.__file__).parent / "server"
    page = client.get("/")
    assert page.status_code == 200 and '<label for="bandwidth">' in page.text
    for name in ("app.js", "style.css"):
        assert f"/static/{name}" in page.text
        assert client.get(f"/static/{name}").status_code == 200
    for path in STATIC.iterdir():
        text = path.read_text()
        assert (
            "http://" not in text.replace("http://www.w3.org/2000/svg", "")
            and "https://" not in text
        )
    assert client.get("/api/v1/catalog").json()["models"]


def test_serve_refuses_a_bad_port_before_starting():
    assert_clean_error(run("serve", "--port", "70000"), 3, "--port must be in [0, 65535]")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--workers", "5"], "--workers must be in [1, --max-concurrent=4]"),
        (["--workers", "0"], "got 0"),
        (["--workers", "3", "--max-concurrent", "2"], "--max-concurrent=2"),
    ],
)
def test_serve_refuses_more_workers_than_requests_computing_at_once(args, fragment):
    assert_clean_error(run("serve", *args), 3, fragment)


@contextmanager
def worker_processes(processes, limits, data_dir=None):
    """The application as `serve` runs it (worker processes, started), through a client whose
    one event loop stays up (requests may overlap, from threads); stopped at the end."""
    app = create_app(limits, data_dir, processes=processes)
    app.state.runner.start()
    with TestClient(app) as client:  # its lifespan stops the workers
        yield client, app.state.runner


LINKS = ["aws-dx-100g", "aws-dx-10g", "aws-internet-egress"]
SIXTY_FOUR_SITES = {**CASE, "procurement": {"max_pd_instances": 64, "sites": [
    {"name": f"s{i}", "gpu": ["h20", "h200"][i % 2], "link_offering": LINKS[i % 3],
     "max_instances": 64} for i in range(64)]}}  # fmt: skip
SLOW = {"bins": 5000}  # /sensitivity at its largest LP: ~1-2 s on this machine


@pytest.mark.slow
def test_worker_processes_answer_as_threads_on_their_own_catalog(client, tmp_path):
    """`serve`'s worker processes (spawned, each reading the data dir it is given) give the
    in-process application's bytes, JSON and Markdown, the page's what-if, an uploaded
    scenario, and the same errors (the body is decoded and checked in the worker)."""
    data = data_copy(tmp_path)
    h200 = data / "gpus/h200.yaml"
    h200.write_text(h200.read_text().replace("value: 3.50", "value: 3.25", 1))
    with worker_processes(1, Limits(max_concurrent=1, max_queued=3), data) as (worker, _):
        direct = TestClient(create_app(data_dir=data))
        for name, body, query in [
            ("plan", {"bandwidth_gbps": 25}, ""),
            ("plan", {"bandwidth_gbps": 25}, "?format=markdown"),
            ("whatif", {"bandwidth_gbps": 10}, ""),
            ("plan", {"bandwidth_gbps": -1}, ""),  # a library error crosses the boundary
            ("plan", {"bandwidth": 1}, ""),  # a schema error
        ]:
            answers = [post(c, name + query, body) for c in (worker, direct)]
            assert [a.status_code for a in answers] == [answers[1].status_code] * 2
            assert answers[0].text == answers[1].text
        for raw in (b"{", b'{"bandwidth_gbps": NaN}', b"\xff"):  # malformed: 400 there too
            answers = [c.post("/api/v1/plan", content=raw) for c in (worker, direct)]
            assert [a.status_code for a in answers] == [400, 400]
            assert answers[0].text == answers[1].text
        upload = (Path(__file__).resolve().parents[2] / "examples/case_study.yaml").read_bytes()
        answers = [c.post("/api/v1/scenario", content=upload) for c in (worker, direct)]
        assert answers[0].status_code == 200 and answers[0].text == answers[1].text
        answer = post(worker, "plan").json()  # the data dir reached the worker, unnamed
        assert answer["inputs"]["prices"]["prfaas_usd_per_gpu_hour"] == 3.25
        assert answer["inputs"]["prices"]["prfaas_price_source"].startswith("data/gpus/h200.yaml")
        assert str(tmp_path) not in json.dumps(answer)


@pytest.mark.slow
def test_a_worker_that_dies_costs_only_its_own_request_and_is_replaced():
    """Two requests computing on two workers; one worker killed (as the kernel kills one out
    of memory): its request is answered 503 in one line, the other's is not touched, and the
    next requests compute on a new worker. A worker ignores Ctrl-C (a terminal sends it to the
    whole process group; the server stops the workers itself)."""
    with worker_processes(2, Limits(max_concurrent=2, max_queued=3)) as (client, runner):
        first = runner.worker_pids()
        os.kill(first[0], signal.SIGINT)
        assert post(client, "plan").status_code == 200  # SIGINT ignored
        with ThreadPoolExecutor(2) as pool:
            answers = [pool.submit(post, client, "sensitivity", SLOW) for _ in range(2)]
            time.sleep(0.5)  # both computing
            os.kill(first[0], signal.SIGKILL)
            statuses = sorted(a.result().status_code for a in answers)
        assert statuses == [200, 503]
        lost = next(a.result() for a in answers if a.result().status_code == 503)
        assert lost.json()["error"]["type"] == "WorkerLost"
        assert "has been replaced" in lost.json()["error"]["message"]
        assert runner.worker_pids()[1] == first[1] and runner.worker_pids()[0] != first[0]
        assert [post(client, "plan").status_code for _ in range(3)] == [200] * 3


@pytest.mark.slow
def test_a_request_past_the_timeout_is_stopped_and_frees_its_worker():
    """On worker processes a 504 stops the computation (its worker is replaced), so the slot
    is free at once for the next request, which a queue of abandoned work would not allow."""
    # the loaded cost-P90 frontier over 64 sites of 64 instances takes ~25 s (the case study's
    # own sites now take ~1 s); the timeout leaves room for a new worker's start
    limits = Limits(max_concurrent=1, max_queued=0, timeout_s=3.0)
    with worker_processes(1, limits) as (client, runner):
        before = runner.worker_pids()
        body = {"target_rps": 4, "ttft_load_rps": 4, "scenario": SIXTY_FOUR_SITES}
        slow = post(client, "procure/pareto", body)
        assert slow.status_code == 504 and "it was stopped" in slow.json()["error"]["message"]
        assert runner.worker_pids() != before  # the computing worker was replaced
        assert post(client, "kv").status_code == 200  # not 503: the slot is free


@pytest.mark.slow
def test_serve_with_two_workers_answers_as_the_in_process_app(client):
    body = json.dumps({"bandwidth_gbps": 25, "mode": "exact"}).encode()
    with served("--workers", "2") as url:
        answers = []
        for _ in range(4):  # connections spread over both processes
            request = urllib.request.Request(url + "/api/v1/plan", data=body, method="POST")
            with urllib.request.urlopen(request, timeout=30) as response:
                answers.append(response.read().decode())
    assert set(answers) == {post(client, "plan", json.loads(body)).text}


README_CURLS = re.findall(
    r"^curl -s -X POST '?localhost:8000(/api/v1/[^\s']+)'? (?:-d '(.*?)'|--data-binary @(\S+))",
    (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text(),
    re.M,
)


@pytest.mark.parametrize(("path", "body", "upload"), README_CURLS)
def test_the_readmes_curl_lines_answer(client, path, body, upload):
    root = Path(__file__).resolve().parents[2]
    content = (root / upload).read_bytes() if upload else body.encode()
    response = client.post(path, content=content)
    assert response.status_code == 200, response.text


def test_the_readme_shows_every_curl_kind():
    kinds = [
        "plan",
        "evaluate",
        "kv",
        "egress",
        "simulate",
        "procure",
        "procure/pareto",
        "export",
        "scenario",
    ]
    assert {path.split("?")[0] for path, _, _ in README_CURLS} == {f"/api/v1/{k}" for k in kinds}


@pytest.mark.parametrize(
    ("path", "prfaas", "pd", "extra"),
    [
        ("plan?format=markdown", 0, 8, {"threshold_tokens": 1000}),  # serves nothing: Λ = 0
        ("whatif", 0, 8, {"threshold_tokens": 1000}),
        ("explain", 0, 1, {}),  # one PD instance decodes, none prefills: Λ = 0
        ("explain", 1, 1, {}),
    ],
)
def test_a_plan_that_serves_nothing_is_answered_not_a_500(client, path, prfaas, pd, extra):
    """A deployment whose Λ_max is 0 (found by a review's fuzzing: a 500 from a division by
    zero in the table's ratios and in explain's elasticities)."""
    scenario = json.loads(json.dumps(CASE))
    scenario["prfaas_cluster"]["instances"], scenario["pd_cluster"]["instances"] = prfaas, pd
    response = post(client, path, {"scenario": scenario, **extra})
    assert response.status_code == 200, response.text
    if path == "explain" and prfaas == 0:  # elasticities relative to Λ = 0 do not exist
        assert response.json()["throughput_rps"]["system"] == 0
        assert set(response.json()["closed_forms"]["elasticities"].values()) == {None}


def test_a_worker_that_cannot_start_stops_serve_with_one_line(tmp_path, capfd):
    """A worker process reads its own catalog as it starts; if it fails (its data directory
    gone since the server read it), serve stops with a ConfigError, not a hang or a
    traceback, and the worker says why in one line."""
    data = data_copy(tmp_path)
    app = create_app(Limits(max_concurrent=1), data, processes=1)
    # gone at once (a rename), not file by file: a worker spawned quickly found the directory
    # still there, half deleted by rmtree, and started (a fresh clone's CI, under load)
    data.rename(tmp_path / "moved-away")
    try:
        with pytest.raises(ConfigError, match="a worker process ended as it started"):
            app.state.runner.start()
    finally:
        app.state.runner.shutdown()
    err = capfd.readouterr().err
    assert "prfaas-plan serve: worker process: data directory" in err
    assert "Traceback" not in err
