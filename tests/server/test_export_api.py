"""POST /api/v1/export (issue 24's endpoint) through an in-process client: the files are the
CLI's `export -o DIR` files byte for byte, as JSON {path: text} or as a zip archive (built in
memory, bounded, the same bytes each time); hostile bodies and parameters are a 4xx with one
line, never a 500, and nothing is read or written on the server's disk."""

import io
import json
import stat
import warnings
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # starlette's TestClient on httpx (deprecated, still supported)
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from prfaas_plan.export import manifest
from prfaas_plan.inputs.resources import default_scenario_file, resource_root
from prfaas_plan.inputs.scenario import load_scenario
from prfaas_plan.server.app import create_app
from tests.cli.test_cli import run, scenario_with

CASE = load_scenario(default_scenario_file()).model_dump(mode="json")
TARGETS = ("llm-d", "dynamo", "kubernetes")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def cli_files(tmp_path: Path, source: str, cwd: Path, *flags: str) -> dict[str, bytes]:
    """The files `prfaas-plan export SOURCE -o DIR FLAGS` writes, run from `cwd` (so that the
    plan's origin reads as the server names it: `examples/case_study.yaml`, `request`)."""
    out = tmp_path / "cli-out"
    result = run("export", source, "-o", out, *flags, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def api_files(client: TestClient, body: dict) -> dict[str, bytes]:
    response = client.post("/api/v1/export", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return {path: text.encode("utf-8") for path, text in response.json().items()}


def zip_files(response) -> tuple[str, dict[str, bytes]]:
    """The zip's one top folder and its files below it (checking each is a plain 0644 file)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.testzip() is None
        entries = archive.infolist()
        folders = {entry.filename.split("/", 1)[0] for entry in entries}
        assert len(folders) == 1, folders
        for entry in entries:
            assert stat.S_IMODE(entry.external_attr >> 16) == 0o644 and not entry.is_dir()
        files = {e.filename.split("/", 1)[1]: archive.read(e) for e in entries}
    return folders.pop(), files


# (API body, CLI flags) on the case study: the same plan and options through both doors
SAME_AS_CLI = [
    ({"target": "llm-d"}, ["-t", "llm-d"]),
    ({"target": "dynamo"}, ["-t", "dynamo"]),
    ({"target": "kubernetes"}, ["-t", "kubernetes"]),
    ({"target": "llm-d", "mode": "exact", "name": "prod-a", "namespace": "serving",
      "image": "registry.local/vllm:1", "model_id": "org/model-x", "prompt_chars_per_token": 3},
     ["-t", "llm-d", "--mode", "exact", "--name", "prod-a", "--namespace", "serving",
      "--image", "registry.local/vllm:1", "--model-id", "org/model-x",
      "--prompt-chars-per-token", "3"]),
]  # fmt: skip


@pytest.mark.parametrize(("body", "flags"), SAME_AS_CLI, ids=lambda x: json.dumps(x)[:50])
def test_the_endpoints_files_are_the_clis_byte_for_byte(client, tmp_path, body, flags):
    cli = cli_files(tmp_path, "examples/case_study.yaml", resource_root(), *flags)
    assert api_files(client, body) == cli
    response = client.post("/api/v1/export?format=zip", json=body)
    folder, zipped = zip_files(response)
    assert zipped == cli
    name = body.get("name", "paper-case-study")
    assert folder == f"{name}-{body['target']}"
    assert response.headers["content-disposition"] == f'attachment; filename="{folder}.zip"'


def test_a_scenario_in_the_body_exports_as_the_same_scenario_file(client, tmp_path):
    """The page's body: its scenario (here renamed to a name Kubernetes refuses, so the note
    says it was sanitised) and mode; the CLI reads the same scenario from a file named
    `request`, the name the server gives a body's scenario."""
    path = scenario_with(tmp_path, **{"link.bandwidth_gbps": 40, "name": "Case Study (40G)"})
    scenario = yaml.safe_load(path.read_text())
    path.rename(tmp_path / "request")
    cli = cli_files(tmp_path, "request", tmp_path, "-t", "llm-d", "--mode", "exact")
    body = {"scenario": scenario, "mode": "exact", "target": "llm-d"}
    assert api_files(client, body) == cli
    assert "'Case Study (40G)' is not a Kubernetes name" in cli["NOTE.md"].decode()
    folder, zipped = zip_files(client.post("/api/v1/export?format=zip", json=body))
    assert zipped == cli and folder == "case-study-40g-llm-d"


def test_bandwidth_gbps_overrides_the_link_as_in_every_body(client, tmp_path):
    path = scenario_with(tmp_path, **{"link.bandwidth_gbps": 25})
    path.rename(tmp_path / "request")
    cli = cli_files(tmp_path, "request", tmp_path, "-t", "dynamo")
    body = {"scenario": CASE, "bandwidth_gbps": 25, "target": "dynamo"}
    assert api_files(client, body) == cli


def test_the_zip_is_the_same_bytes_each_time_and_asked_for_by_accept(client):
    body = {"target": "kubernetes"}
    first = client.post("/api/v1/export?format=zip", json=body)
    again = client.post("/api/v1/export", json=body, headers={"accept": "application/zip"})
    assert first.content == again.content and len(first.content) < 16_384
    assert zip_files(again)[1] == api_files(client, body)
    # a query parameter wins over the header; a browser's Accept (no zip in it) gives JSON
    asked_json = client.post("/api/v1/export?format=json", json=body,
                             headers={"accept": "application/zip"})  # fmt: skip
    browser = client.post("/api/v1/export", json=body, headers={"accept": "*/*"})
    for response in (asked_json, browser):
        assert response.headers["content-type"] == "application/json"


def test_markdown_lists_the_files_and_what_the_stack_runs(client):
    response = client.post("/api/v1/export?format=markdown", json={"target": "dynamo"})
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/markdown"
    )
    text = response.text
    assert text.startswith("## prfaas-plan export · dynamo · paper-case-study")
    files = api_files(client, {"target": "dynamo"})
    for path, data in files.items():
        assert f"| {path} | " in text and f" | {len(data):,} |" in text
    # the note's figure: length-blind round-robin models at 1.64 req/s against the plan's 3.25
    assert "4 files for dynamo; the configuration it runs models at Λ_max 1.6411 req/s" in text


# (query, body, status, error type, fragment of the one-line message)
HOSTILE = [
    ("", {}, 422, "ConfigError", "request: target: field required"),
    ("", {"target": "helm"}, 422, "ConfigError",
     "request: target: input should be 'llm-d', 'dynamo' or 'kubernetes', got 'helm'"),
    ("", {"target": "LLM-D"}, 422, "ConfigError", "input should be 'llm-d', 'dynamo'"),
    ("", {"target": ["llm-d"]}, 422, "ConfigError", "request: target: input should be"),
    ("", {"target": "llm-d", "mode": "fast"}, 422, "ConfigError", "request: mode: input should be"),
    ("", {"target": "llm-d", "name": "Prod_A"}, 422, "ConfigError",
     "name must be a Kubernetes name (lower-case letters, digits and '-', starting and ending "
     "with a letter or digit, at most 40 characters), got 'Prod_A'"),
    ("", {"target": "llm-d", "name": "a" * 41}, 422, "ConfigError", "at most 40 characters"),
    ("", {"target": "dynamo", "name": "../../etc"}, 422, "ConfigError", "got '../../etc'"),
    ("", {"target": "llm-d", "name": "x" * 200_000}, 422, "ConfigError", "name must be a Kubernetes name"),
    ("", {"target": "llm-d", "namespace": "-serving"}, 422, "ConfigError",
     "namespace must be a Kubernetes name"),
    ("", {"target": "llm-d", "name": 7}, 422, "ConfigError", "request: name: input should be a valid string"),
    ("", {"target": "kubernetes", "image": "my image"}, 422, "ConfigError",
     "image must be printable text without spaces"),
    ("", {"target": "kubernetes", "model_id": "m" * 513}, 422, "ConfigError", "at most 512 characters"),
    ("", {"target": "llm-d", "prompt_chars_per_token": 0}, 422, "ConfigError",
     "prompt_chars_per_token must be in [1, 64], got 0"),
    ("", {"target": "llm-d", "prompt_chars_per_token": 4.0}, 422, "ConfigError",
     "prompt_chars_per_token: input should be a valid integer"),
    ("", {"target": "dynamo", "prompt_chars_per_token": 8}, 422, "ConfigError",
     "prompt_chars_per_token applies to llm-d only"),
    # no path in, none out: the server reads no file a request names and writes none
    ("", {"target": "llm-d", "output": "/tmp/deploy"}, 422, "ConfigError",
     "request: output: extra inputs are not permitted"),
    ("", {"target": "llm-d", "plan": "/tmp/plan.json"}, 422, "ConfigError",
     "request: plan: extra inputs are not permitted"),
    ("", {"target": "llm-d", "read": "/etc"}, 422, "ConfigError", "request: read: extra inputs"),
    ("", {"target": "llm-d", "scenario": {**CASE, "workload": {**CASE["workload"], "input_tokens": {
        "distribution": "observed", "file": "/etc/passwd"}}}}, 422, "ConfigError",
     "the server reads no file a request names"),
    ("", {"target": "llm-d", "scenario": {**CASE, "prfaas_cluster": {
        **CASE["prfaas_cluster"], "instances": 0}}}, 422, "ConfigError",
     "request: the plan offloads nothing to PrfaaS (threshold_tokens is inf, with 0 PrfaaS "
     "instances), so there is no routing to export"),
    ("", {"target": "llm-d", "scenario": {**CASE, "model": "gpt-9"}}, 422, "ConfigError", "unknown model"),
    ("?format=xml", {"target": "llm-d"}, 422, "ConfigError",
     "format must be json, markdown or zip, got 'xml'"),
    ("?format=zip&format=json", {"target": "llm-d"}, 422, "ConfigError",
     "format is given more than once"),
]  # fmt: skip


@pytest.mark.parametrize(("query", "body", "status", "kind", "fragment"), HOSTILE,
                         ids=lambda x: json.dumps(x)[:50])  # fmt: skip
def test_hostile_requests_are_a_4xx_with_one_line(client, query, body, status, kind, fragment):
    for ask in (query, query or "?format=zip"):  # the zip fails as the JSON does
        response = client.post(f"/api/v1/export{ask}", json=body)
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/json"
        error = response.json()["error"]
        assert error["type"] == kind and fragment in error["message"], error["message"]
        assert "\n" not in error["message"] and len(error["message"]) < 400
        assert "Traceback" not in response.text


def test_zip_is_offered_by_export_alone(client):
    response = client.post("/api/v1/plan?format=zip", json={})
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "format must be json or markdown, got 'zip'"
    plan = client.post("/api/v1/plan", json={}, headers={"accept": "application/zip"})
    assert plan.status_code == 200 and plan.headers["content-type"] == "application/json"


def test_malformed_bodies_are_refused_before_any_export(client):
    for raw, status, fragment in [
        (b"{", 400, "malformed JSON"),
        (b'{"target": "llm-d", "target": "dynamo"}', 400, "duplicate key 'target'"),
        (b'{"target": "llm-d", "prompt_chars_per_token": NaN}', 400, "NaN is not a JSON number"),
        (b" " * 300_000, 413, "over the limit of 262,144 bytes"),
    ]:
        response = client.post("/api/v1/export?format=zip", content=raw)
        assert response.status_code == status, response.text
        assert fragment in response.json()["error"]["message"]


def test_an_archive_over_its_bound_is_refused_before_it_is_built(client, monkeypatch):
    """The bound is checked on the files' size, known before anything is compressed (the
    case study's llm-d export holds ~13,600 characters)."""
    monkeypatch.setattr(manifest, "MAX_ARCHIVE_CHARS", 10_000)
    response = client.post("/api/v1/export?format=zip", json={"target": "llm-d"})
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "over the archive's limit of 10,000" in message and "\n" not in message
    assert client.post("/api/v1/export?format=zip", json={"target": "dynamo"}).status_code == 200


def test_openapi_lists_the_endpoint_its_body_formats_and_zip(client):
    post = client.get("/openapi.json").json()["paths"]["/api/v1/export"]["post"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert {"scenario", "bandwidth_gbps", "target", "mode", "name", "namespace", "image",
            "model_id", "prompt_chars_per_token"} == set(schema["properties"])  # fmt: skip
    assert schema["required"] == ["target"]
    [parameter] = post["parameters"]
    assert parameter["name"] == "format"
    assert parameter["schema"]["enum"] == ["json", "markdown", "zip"]
    assert set(post["responses"]["200"]["content"]) == {"application/json", "application/zip"}
    assert post["summary"].startswith("`export`: the plan as a stack's manifests")


export_values = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=False),
    st.text(max_size=12), st.sampled_from([*TARGETS, "paper", "exact", "a-b", ""]),
)  # fmt: skip
EXPORT_FIELDS = ["target", "mode", "name", "namespace", "image", "model_id",
                 "prompt_chars_per_token", "bandwidth_gbps"]  # fmt: skip


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.dictionaries(st.sampled_from(EXPORT_FIELDS), export_values, max_size=4))
def test_no_body_gives_a_500(client, body):
    response = client.post("/api/v1/export?format=zip", content=json.dumps(body).encode())
    assert response.status_code in (200, 400, 409, 422), response.text
    assert "Traceback" not in response.text
