"""One request, one answer through every door (issue 21): the CLI's `--format json`, the HTTP
API's body and a one-scenario sweep's row give the same document — the sweep's row is that
document flattened — for every command the three doors share, on the case study and on random
requests. Each door builds the command's typed request (use_cases/requests.py) and calls the
same use-case; this checks it from outside, through the doors themselves."""

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # starlette's TestClient on httpx (deprecated, still supported)
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.server.app import create_app
from prfaas_plan.sweep.flat import flatten
from prfaas_plan.sweep.results import read_results
from tests.cli.test_cli import run

CASE = default_scenario_file()
# what only the door knows: the scenario file the CLI read (the server names no path of its
# machine; a sweep names the scenario it generated)
WHERE = {"inputs.scenario_file", "inputs.scenario"}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def cli(command: str, flags: list[str]) -> dict[str, Any]:
    result = run(command, *flags, "--format", "json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def api(client: TestClient, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/api/v1/{endpoint}", json=body)
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def sweep_row(
    tmp: Path, command: str, parameters: dict[str, Any], fast_path: bool, refused: bool = False
) -> dict[str, Any]:
    """The one row of a sweep of `command` over the case study alone (one axis, one value: the
    case study's own link); with `refused`, a row that carries the request's error."""
    tmp.mkdir(parents=True, exist_ok=True)
    spec = {
        "name": "doors", "scenario": str(CASE), "command": command, "parameters": parameters,
        "axes": {"link.bandwidth_gbps": {"values": [100]}}, "fast_path": fast_path,
    }  # fmt: skip
    (tmp / "sweep.yaml").write_text(yaml.safe_dump(spec))
    result = run("sweep", tmp / "sweep.yaml", tmp / "results", "--workers", "1")
    assert result.returncode == 0, result.stderr
    rows = read_results(tmp / "results").to_pylist()
    assert len(rows) == 1
    row: dict[str, Any] = rows[0]
    assert (row.get("error_class") is not None) == refused, row.get("error_message")
    return row


def same_document(
    cli_doc: dict[str, Any], api_doc: dict[str, Any], row: dict[str, Any] | None
) -> None:
    flat_cli, flat_api = flatten(cli_doc), flatten(api_doc)
    for key in WHERE:
        flat_cli.pop(key, None), flat_api.pop(key, None)
    assert flat_api == flat_cli
    if row is not None:
        shown = {key: row.get(key) for key in flat_cli}
        assert shown == flat_cli, {k: (shown[k], v) for k, v in flat_cli.items() if shown[k] != v}


# (command, API endpoint, the request's fields, the same request as flags)
SHARED = [
    ("optimize", "plan", {}, []),
    ("optimize", "plan", {"mode": "exact", "threshold_tokens": 20000},
     ["--mode", "exact", "--threshold-tokens", "20000"]),
    ("optimize", "plan", {"link_offering": "owned", "utilization": 0.5, "cost_model": "on-demand"},
     ["--link-offering", "owned", "--utilization", "0.5", "--cost-model", "on-demand"]),
    ("optimize", "plan", {"target_rps": 4.0}, ["--target-rps", "4"]),
    ("optimize", "plan", {"ttft_target_s": 8.0, "ttft_load": 0.5, "ttft_percentile": "90"},
     ["--ttft-target-s", "8", "--ttft-load", "0.5", "--ttft-percentile", "90"]),
    ("evaluate", "evaluate", {"threshold_tokens": 19435.0, "pd_prefill_instances": 3},
     ["--threshold-tokens", "19435", "--pd-prefill-instances", "3"]),
    ("sensitivity", "sensitivity", {"bins": 200}, ["--bins", "200"]),
    ("simulate", "simulate", {"requests": 400, "load": 0.5, "seed": 3},
     ["--requests", "400", "--load", "0.5", "--seed", "3"]),
    ("procure", "procure", {"target_rps": 4.0, "max_instances_per_site": 8},
     ["--target-rps", "4", "--max-instances-per-site", "8"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "endpoint", "fields", "flags"), SHARED, ids=[f"{c[0]} {c[3]}" for c in SHARED]
)
def test_every_door_gives_the_same_document(tmp_path, client, command, endpoint, fields, flags):
    body = {**fields, "load": [fields["load"]]} if "load" in fields else fields
    same_document(cli(command, flags), api(client, endpoint, body),
                  sweep_row(tmp_path, command, fields, fast_path=True))  # fmt: skip


def test_a_sweep_off_its_fast_path_gives_the_same_document(tmp_path, client):
    """The per-scenario path and the batched path of an optimize sweep: one document."""
    fast = sweep_row(tmp_path / "fast", "optimize", {}, fast_path=True)
    slow = sweep_row(tmp_path / "slow", "optimize", {}, fast_path=False)
    document = flatten(cli("optimize", []))
    for key in WHERE:
        document.pop(key, None)
    assert {k: fast.get(k) for k in document} == {k: slow.get(k) for k in document} == document


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    mode=st.sampled_from(["paper", "exact"]),
    threshold=st.one_of(st.none(), st.integers(0, 131072)),
    utilization=st.one_of(st.none(), st.floats(0.05, 1.0)),
    offering=st.sampled_from([None, "owned", "metro-wave-100g", "aws-dx-100g"]),
)
def test_random_requests_are_answered_alike_by_the_cli_and_the_api(
    client, mode, threshold, utilization, offering
):
    fields: dict[str, Any] = {"mode": mode}
    flags = ["--mode", mode]
    for name, flag, value in (("threshold_tokens", "--threshold-tokens", threshold),
                              ("utilization", "--utilization", utilization),
                              ("link_offering", "--link-offering", offering)):  # fmt: skip
        if value is not None:
            fields[name] = value
            flags += [flag, str(value)]
    same_document(cli("optimize", flags), api(client, "plan", fields), None)


def test_the_api_answers_optimize_under_the_commands_name(client):
    """POST /api/v1/optimize is the command's name; /plan, its first name, gives the same."""
    body = {"mode": "exact", "bandwidth_gbps": 40}
    assert api(client, "optimize", body) == api(client, "plan", body)
