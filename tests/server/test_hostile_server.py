"""Hostile input to `prfaas-plan serve`, table-driven: one row per case (method, path, headers,
body, expected status, fragment of the answer), through the in-process client where it shows
the case, and through a real `serve` on 127.0.0.1 for what only the process shows (the limits
on a request's head, what an idle worker has imported). Every row's answer is also checked for
what no answer may hold: a traceback, a message of more than one line, a path of the server's
machine. Adding an endpoint: add its rows here."""

import asyncio
import json
import logging
import pickle
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():  # starlette's TestClient on httpx (deprecated, still supported)
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import prfaas_plan
from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs import strict_yaml
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.resources import default_scenario_file, resource_root
from prfaas_plan.inputs.scenario import load_scenario
from prfaas_plan.server import endpoints, jobs
from prfaas_plan.server.app import create_app, failure_response
from prfaas_plan.server.decoding import ApiError
from prfaas_plan.server.limits import Limits
from prfaas_plan.server.naming import Naming
from tests.browser import served
from tests.cli.test_cli import data_copy

CASE = load_scenario(default_scenario_file()).model_dump(mode="json")
PACKAGE = Path(prfaas_plan.__file__).resolve().parent
# what no answer may name: where the server, its package and its data live
SERVER_PATHS = {str(resource_root()), str(PACKAGE), str(PACKAGE.parent), sys.prefix}
LINKS = ["aws-dx-100g", "aws-dx-10g", "aws-internet-egress"]


def scenario(**changes):
    """The case study with top-level blocks changed (`prfaas_cluster={"gpus_per_instance": 4}`
    merges into the block; a non-dict value replaces the field)."""
    out = json.loads(json.dumps(CASE))
    for key, value in changes.items():
        merge = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = {**out[key], **value} if merge else value
    return out


def sites(count, instances=64):
    return [{"name": f"s{i}", "gpu": ["h20", "h200"][i % 2], "link_offering": LINKS[i % 3],
             "max_instances": instances} for i in range(count)]  # fmt: skip


def escaped(body, escape: str) -> bytes:
    """`body` as JSON with the string "@@" written as the JSON escape `escape` verbatim (a lone
    surrogate: json.dumps writes a str holding one, but the body must carry the escape)."""
    return json.dumps(body).replace('"@@"', f'"{escape}"').encode()


def headers(count, prefix="x-h"):
    return {f"{prefix}{i}": "v" for i in range(count)}


# (case, method, path, headers, body, status, fragment of the text)
ROWS = [
    # 1. files named as the client named them, or by their name in the repository: never a
    #    path of the server's machine (the bundled case study, the data directory, models.yaml)
    ("default scenario named", "POST", "/api/v1/plan", {}, {}, 200,
     '"scenario_file":"examples/case_study.yaml"'),
    ("default scenario named, evaluate", "POST", "/api/v1/evaluate", {},
     {"threshold_tokens": 19400, "pd_prefill_instances": 3}, 200,
     '"scenario_file":"examples/case_study.yaml"'),
    ("default scenario named, the page", "POST", "/api/v1/whatif", {}, {}, 200,
     '"scenario_file":"examples/case_study.yaml"'),
    ("a body's scenario is 'request'", "POST", "/api/v1/plan", {}, {"scenario": CASE}, 200,
     '"scenario_file":"request"'),
    ("profile tables relative to the data dir", "POST", "/api/v1/plan", {}, {}, 200,
     '"table":"data/profiles/internal-1t-hybrid/'),
    ("Markdown", "POST", "/api/v1/plan?format=markdown", {}, {}, 200,
     "## prfaas-plan · paper-case-study"),
    ("unknown GPU: its folder", "POST", "/api/v1/kv", {}, {"gpu": "h100"}, 422,
     "known: h20, h200 (data/gpus/)"),
    ("unknown model: the models file", "POST", "/api/v1/kv?format=markdown", {},
     {"models": ["gpt-9"]}, 422, "ring-2.5-1t (models.yaml)"),
    ("unknown link offering", "POST", "/api/v1/plan", {}, {"link_offering": "x"}, 422,
     "metro-wave-100g (data/links/)"),
    ("no profile at a parallelism", "POST", "/api/v1/plan", {},
     {"scenario": scenario(prfaas_cluster={"gpus_per_instance": 4})}, 422,
     "(expected data/profiles/internal-1t-hybrid/prefill/h200-x4/)"),
    ("no KV profile at a dtype", "POST", "/api/v1/simulate", {},
     {"scenario": scenario(kv_dtype="fp8"), "requests": 100}, 422,
     "(expected data/profiles/internal-1t-hybrid/kv/fp8/)"),
    ("a site's link offering", "POST", "/api/v1/procure/pareto", {},
     {"target_rps": 4, "scenario": scenario(procurement={"sites": [
         {"name": "a", "gpu": "h20", "link_offering": "x"}]})}, 422, "(data/links/)"),
    ("a file the request names is not read", "POST", "/api/v1/plan", {},
     {"scenario": scenario(workload={"input_tokens": {"distribution": "observed",
                                                      "file": "/etc/passwd"}})}, 422,
     "the server reads no file a request names"),
    ("a metrics snapshot the request names is not read", "POST", "/api/v1/plan", {},
     {"scenario": scenario(workload={"input_tokens": {"distribution": "metrics",
                                                      "file": "/etc/passwd"},
                                     "output_tokens": {"distribution": "from_metrics"}})}, 422,
     "the server reads no file a request names"),
    # 2. a key twice in one JSON object (json keeps the last value): refused, naming the key
    ("duplicate key", "POST", "/api/v1/plan", {}, b'{"target_rps": 4, "target_rps": 400}', 400,
     "duplicate key 'target_rps' in a JSON object"),
    ("duplicate key, nested", "POST", "/api/v1/plan", {},
     b'{"scenario": {"link": {"bandwidth_gbps": 100, "bandwidth_gbps": 1}}}', 400,
     "duplicate key 'bandwidth_gbps'"),
    ("duplicate key in a list's object", "POST", "/api/v1/procure", {},
     b'{"target_rps": 4, "scenario": {"procurement": {"sites": [{"name": "a", "name": "b"}]}}}',
     400, "duplicate key 'name'"),
    ("duplicate key spelt two ways", "POST", "/api/v1/kv", {},
     b'{"gpu": "h200", "\\u0067pu": "h20"}', 400, "duplicate key 'gpu'"),
    ("duplicate price", "POST", "/api/v1/procure", {},
     b'{"target_rps": 4, "gpu_prices_usd_per_gpu_hour": {"h200": 1, "h200": 9}}', 400,
     "duplicate key 'h200'"),
    ("duplicate key, the page's call", "POST", "/api/v1/whatif", {},
     b'{"bandwidth_gbps": 10, "bandwidth_gbps": 1}', 400, "duplicate key 'bandwidth_gbps'"),
    ("duplicate key, an uploaded scenario (YAML)", "POST", "/api/v1/scenario", {},
     b'{"name": "a", "name": "b"}', 422, "duplicate key"),
    ("format given twice", "POST", "/api/v1/plan?format=json&format=markdown", {}, {}, 422,
     "format is given more than once"),
    ("the same key in two objects is fine", "POST", "/api/v1/kv", {},
     b'{"models": ["kimi-k2"], "gpu": "h200"}', 200, '"gpu":"h200"'),
    # 3. a lone surrogate (\ud800, a JSON escape no UTF-8 text can hold) in any string
    ("lone surrogate scenario name, Markdown", "POST", "/api/v1/plan?format=markdown", {},
     escaped({"scenario": scenario(name="@@")}, "\\ud800"), 422, "request: scenario.name"),
    ("lone surrogate description", "POST", "/api/v1/explain?format=markdown", {},
     escaped({"scenario": scenario(description="@@")}, "\\udfff"), 422,
     "request: scenario.description"),
    ("lone surrogate GPU", "POST", "/api/v1/kv?format=markdown", {}, b'{"gpu": "\\ud800"}', 422,
     "unknown GPU '\\\\ud800'"),
    ("lone surrogate model", "POST", "/api/v1/egress?format=markdown", {},
     b'{"models": ["\\ud800"]}', 422, "unknown model '\\\\ud800'"),
    ("lone surrogate key", "POST", "/api/v1/plan", {}, b'{"\\ud800": 1}', 422,
     "input should be a valid string"),
    ("lone surrogate price key", "POST", "/api/v1/procure", {},
     b'{"target_rps": 4, "gpu_prices_usd_per_gpu_hour": {"\\ud800": 1}}', 422,
     "gpu_prices_usd_per_gpu_hour names ['\\\\ud800']"),
    ("lone surrogate site name", "POST", "/api/v1/procure", {},
     escaped({"target_rps": 4, "scenario": scenario(procurement={"sites": [
         {"name": "@@", "gpu": "h20", "link_offering": "aws-dx-10g"}]})}, "\\ud800"), 422,
     "request: scenario.procurement.sites.0.name: input should be a valid string"),
    ("lone surrogate in an upload", "POST", "/api/v1/scenario", {}, b'name: "\\ud800"\n', 422,
     # libyaml's scanner refuses the escape; the pure-Python one reads it, the schema refuses
     "upload: line 1: malformed YAML: found invalid Unicode" if strict_yaml._CParser else "upload: name"),
    ("surrogate pair is text", "POST", "/api/v1/plan?format=markdown", {},
     escaped({"scenario": scenario(name="@@")}, "\\ud83d\\ude00"), 200,
     "## prfaas-plan · \U0001f600"),
    ("percent-encoded surrogate format", "POST", "/api/v1/plan?format=%ED%A0%80", {}, {}, 422,
     "format must be json or markdown"),
    # 4. the request's head: at most Limits.max_head_bytes and max_headers lines (serve's
    #    protocol refuses it while reading; the front, here, under any ASGI server)
    ("20 KB header", "POST", "/api/v1/kv", {"x-big": "a" * 20_000}, {}, 431,
     "the request line and headers are over 16,384 bytes"),
    ("20 KB query", "POST", "/api/v1/kv?x=" + "a" * 20_000, {}, {}, 431, "over 16,384 bytes"),
    ("120 headers", "POST", "/api/v1/kv", headers(120), {}, 431,
     "more than 100 header lines"),
    ("a large head on a GET", "GET", "/", {"cookie": "a" * 20_000}, None, 431, "over 16,384"),
    ("80 headers of 100 bytes", "POST", "/api/v1/kv", {f"x-h{i}": "v" * 100 for i in range(80)},
     {}, 200, '"gpu":"h200"'),
    # 6. /simulate: the bound is on the requests of all its loads together
    ("8 loads x 2,500 requests: the bound", "POST", "/api/v1/simulate", {},
     {"requests": 2_500, "load": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}, 200, '"runs":['),
    ("8 loads x 2,501 requests", "POST", "/api/v1/simulate", {},
     {"requests": 2_501, "load": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}, 422,
     "requests x loads must be <= 20,000 on this server, got 2,501 x 8 = 20,008"),
    ("8 equal loads x 2,501", "POST", "/api/v1/simulate", {},
     {"requests": 2_501, "load": [0.5] * 8}, 422, "got 2,501 x 8 = 20,008"),
    ("one load of 20,001", "POST", "/api/v1/simulate", {}, {"requests": 20_001}, 422,
     "requests: input should be less than or equal to 20000"),
    ("9 loads", "POST", "/api/v1/simulate", {}, {"requests": 10, "load": [0.5] * 9}, 422,
     "load: list should have at most 8 items"),
    # 7. /procure and /procure/pareto: the server's candidate space (64 sites, 64 instances
    #    each and in the PD cluster) under the library's bounds
    ("65 instances a site", "POST", "/api/v1/procure/pareto", {},
     {"target_rps": 4, "scenario": scenario(procurement={"sites": sites(2, 65)})}, 422,
     "scenario.procurement.sites[s0].max_instances must be <= 64 on this server"),
    ("65 sites", "POST", "/api/v1/procure/pareto", {},
     {"target_rps": 4, "scenario": scenario(procurement={"sites": sites(65, 1)})}, 422,
     "procurement.sites: list should have at most 64 items"),
    ("65 PD instances", "POST", "/api/v1/procure", {},
     {"target_rps": 4, "scenario": scenario(procurement={"max_pd_instances": 65})}, 422,
     "max_pd_instances must be <= 64 on this server"),
    ("max_instances_per_site over the server's", "POST", "/api/v1/procure/pareto", {},
     {"target_rps": 4, "max_instances_per_site": 65}, 422,
     "max_instances_per_site: input should be less than or equal to 64"),
    ("a per-site bound replaces the sites' own", "POST", "/api/v1/procure/pareto", {},
     {"target_rps": 4, "max_instances_per_site": 2,
      "scenario": scenario(procurement={"sites": sites(3, 1000)})}, 200, '"candidates":'),
    # 8. a subnormal sigma_log overflowed inside the model (a field-less 422, a RuntimeWarning
    #    in the server's log): refused by its bound, naming the field
    ("sigma_log 5e-324", "POST", "/api/v1/plan", {},
     {"scenario": scenario(workload={"input_tokens": {**CASE["workload"]["input_tokens"],
                                                      "sigma_log": 5e-324}})}, 422,
     "input_tokens.truncated_lognormal.sigma_log: must be in [0.001, 10] (a narrower"),
]  # fmt: skip


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), raise_server_exceptions=False)


def send(client, method, path, head, body):
    if isinstance(body, dict | list):
        body = json.dumps(body).encode()
    return client.request(method, path, headers=head, content=body)


def assert_names_no_server_path(text, *more):
    for path in (*SERVER_PATHS, *more):
        assert path not in text, f"{path} in {text[:300]}"
        assert json.dumps(path)[1:-1] not in text


def assert_clean(response, *more_paths):
    """What every answer keeps: no traceback, no server path, and an error in one line."""
    text = response.text
    assert "Traceback" not in text
    assert_names_no_server_path(text, *more_paths)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["message"] and "\n" not in error["message"]
        assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize(("case", "method", "path", "head", "body", "status", "fragment"), ROWS,
                         ids=[row[0] for row in ROWS])  # fmt: skip
def test_hostile_request(client, case, method, path, head, body, status, fragment):
    response = send(client, method, path, head, body)
    assert response.status_code == status, response.text[:500]
    assert fragment in response.text, response.text[:500]
    assert_clean(response)


def test_the_server_is_up_after_every_row(client):
    for _, method, path, head, body, _, _ in ROWS:
        send(client, method, path, head, body)
    assert client.post("/api/v1/kv", json={}).status_code == 200


ENDPOINT_BODIES = {
    "plan": {}, "evaluate": {"threshold_tokens": 19400, "pd_prefill_instances": 3}, "kv": {},
    "egress": {}, "simulate": {"requests": 200}, "sensitivity": {"bins": 100}, "explain": {},
    "procure": {"target_rps": 4, "max_instances_per_site": 4},
    "procure/pareto": {"target_rps": 4, "max_instances_per_site": 4},
    "optimize": {}, "export": {"target": "llm-d"},
}  # fmt: skip


@pytest.mark.slow  # ~3 s: every endpoint, explain and sensitivity included
def test_every_endpoint_names_files_of_an_own_data_dir_as_data(tmp_path, monkeypatch):
    """`serve --data-dir` (here a relative one: the library's messages name a directory as
    given) answers with `data/...` for its files, JSON and Markdown, answers and errors."""
    data = data_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    client = TestClient(create_app(data_dir=data.relative_to(tmp_path)))
    assert set(ENDPOINT_BODIES) == set(endpoints.ENDPOINTS)  # a new endpoint: add its body
    for name, body in ENDPOINT_BODIES.items():
        for query in ("", "?format=markdown"):
            response = client.post(f"/api/v1/{name}{query}", json=body)
            assert response.status_code == 200, response.text
            assert_clean(response, str(tmp_path), "catalog/data")
    answer = client.post("/api/v1/plan", json={}).json()["inputs"]
    assert answer["prices"]["prfaas_price_source"].startswith("data/gpus/h200.yaml")
    assert answer["decode"]["table"].startswith("data/profiles/")
    for body, fragment in [({"gpu": "h100"}, "(data/gpus/)"), ({"models": ["x"]}, "(models.yaml)")]:
        response = client.post("/api/v1/kv", json=body)
        assert response.status_code == 422 and fragment in response.text
        assert_clean(response, str(tmp_path), "catalog/data")


def test_a_broken_data_file_is_named_relative_to_the_data_dir(tmp_path):
    data = data_copy(tmp_path)
    (data / "gpus/h20.yaml").write_text("name: h20\nprices: [\n")
    response = TestClient(create_app(data_dir=data)).post("/api/v1/plan", json={})
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith("data/gpus/h20.yaml: line 3")
    assert_clean(response, str(tmp_path))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{root}/data/gpus/h20.yaml: bad", "data/gpus/h20.yaml: bad"),
        ("known: h20 ({root}/data/gpus/)", "known: h20 (data/gpus/)"),
        ("({root}/models.yaml)", "(models.yaml)"),
        ("{root}/examples/case_study.yaml", "examples/case_study.yaml"),
        ("{root}", "."),
        ("{root}/data", "data"),
        ("{root}/database/x", "database/x"),  # under the resource root, not the data dir
        ("{root}2/data/x", "{root}2/data/x"),  # another directory that starts alike
        ("x{root}/data/x", "x{root}/data/x"),  # not a path's start
        ("no path at all", "no path at all"),
    ],
)
def test_naming_rewrites_whole_paths_only(text, expected):
    root = "/srv/pp"
    naming = Naming(((f"{root}/data", "data"), (f"{root}/models.yaml", "models.yaml"), (root, "")))
    assert naming.text(text.format(root=root)) == expected.format(root=root)
    document = json.dumps({"m": text.format(root=root)})
    assert json.loads(naming.json(document))["m"] == expected.format(root=root)


def test_naming_finds_a_path_json_escapes():
    root = '/srv/é "q"'
    naming = Naming(((f"{root}/data", "data"),))
    text = json.dumps({"table": f"{root}/data/profiles/x.csv"})  # ensure_ascii: \u00e9, \"
    assert json.loads(naming.json(text)) == {"table": "data/profiles/x.csv"}


@pytest.fixture
def probe(monkeypatch):
    """An endpoint whose Markdown view raises (as explain's did for a plan with no PD-prefill
    instance): a bug in a format view."""

    class Body(Strict):
        pass

    registry = dict(endpoints.ENDPOINTS)
    monkeypatch.setattr(endpoints, "ENDPOINTS", registry)
    monkeypatch.setattr("prfaas_plan.server.app.ENDPOINTS", registry)

    @endpoints.endpoint("probe", Body)
    def _probe(body, catalog):
        """A probe."""
        return endpoints.Answer(lambda: 1 / 0, lambda: {"ok": True})  # type: ignore[arg-type]

    return registry


def test_a_bug_in_a_format_view_is_a_logged_500_line(probe, caplog):
    client = TestClient(create_app(), raise_server_exceptions=False)
    assert client.post("/api/v1/probe", json={}).json() == {"ok": True}
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        response = client.post("/api/v1/probe?format=markdown", json={})
    assert response.status_code == 500
    assert response.json() == {"error": {
        "type": "InternalError", "message": "internal error (ZeroDivisionError); please report it"}}  # fmt: skip
    assert_clean(response)
    [record] = [r for r in caplog.records if r.name == "uvicorn.error"]
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


def test_a_bug_in_a_worker_process_crosses_as_its_class_and_traceback(probe, caplog, monkeypatch):
    """A worker sends a bug back as WorkerBugError (its traceback as text: a pickled exception
    has none); the server logs that traceback and answers the same 500 line. A client's errors
    cross as they are."""
    monkeypatch.setattr(jobs, "_catalog", CachedCatalog.open())  # as start_worker sets it
    kind, error = jobs.outcome(("probe", b"{}", "markdown", 32))
    assert kind == "error" and isinstance(error, jobs.WorkerBugError)
    assert error.kind == "ZeroDivisionError" and "1 / 0" in error.details
    assert pickle.loads(pickle.dumps(error)).details == error.details
    assert failure_response(error).body == (
        b'{"error":{"type":"InternalError","message":"internal error (ZeroDivisionError); '
        b'please report it"}}'
    )
    assert isinstance(jobs.outcome(("kv", b"{", "json", 32))[1], ApiError)
    assert isinstance(jobs.outcome(("kv", b'{"x": 1}', "json", 32))[1], ConfigError)

    crossed = jobs.WorkerBugError("ZeroDivisionError", "Traceback (...)\n  1 / 0\n")

    async def broken(*_):
        raise crossed

    app = create_app()
    app.state.runner.run = broken
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        response = TestClient(app).post("/api/v1/plan", json={})
    assert response.status_code == 500 and "Traceback" not in response.text
    [record] = [r for r in caplog.records if r.name == "uvicorn.error"]
    assert "failed in a worker process" in record.getMessage() and "1 / 0" in record.getMessage()


def test_the_librarys_pareto_bound_applies_on_the_server(monkeypatch, client):
    """procure --pareto refuses a space over plausible.MAX_PARETO_CANDIDATES before computing; the
    server's own bounds (64 sites x 64 instances, ~3.5e7 candidates) stay under it, so it is
    shown here with the bound lowered."""
    monkeypatch.setattr(plausible, "MAX_PARETO_CANDIDATES", 1_000_000)
    body = {"target_rps": 4, "scenario": scenario(procurement={"sites": sites(8, 64)})}
    response = client.post("/api/v1/procure/pareto", json=body)
    assert response.status_code == 422
    assert "the Pareto frontiers would weigh" in response.json()["error"]["message"]
    assert_clean(response)


HEAVY = ["scipy", "cvxpy", "sympy", "highspy", "matplotlib", "pyarrow", "dask", "fastapi",
         "uvicorn", "typer", "rich", "asyncio"]  # fmt: skip


@pytest.mark.slow
def test_a_worker_imports_only_what_its_requests_need():
    """What a worker process runs (server/jobs.py), in a fresh interpreter: started and
    answering /plan, it has imported no solver, symbolic, plotting or web library (each
    endpoint imports its own inside it; README: the idle footprint)."""
    code = (
        "import sys\n"
        "from prfaas_plan.server.jobs import job, start_worker\n"
        "start_worker(None)\n"
        "assert job('plan', b'{}', 'json', 32).startswith('{')\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


# a real `serve`: what only the process shows


def raw_request(url, head: bytes, body: bytes = b"", pieces: int = 0) -> bytes:
    """Send `head` + `body` (in `pieces` bytes at a time, if given) on a new connection and read
    until the server closes it (or 10 s)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        data = head + body
        try:
            for i in range(0, len(data), pieces or len(data) or 1):
                s.sendall(data[i : i + (pieces or len(data))])
        except OSError:  # the server closed while we sent: its answer is already here
            pass
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer


def kv_request(extra: bytes = b"", target: bytes = b"/api/v1/kv", close=True) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return (
        b"POST " + target + b" HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n" + connection + extra
        + b"\r\n{}"
    )  # fmt: skip


def lines(count, size=1):
    return b"".join(b"X-%d: %s\r\n" % (i, b"v" * size) for i in range(count))


# (case, bytes sent, sent in pieces of, expected status line, fragment)
HEADS = [
    ("200 KB header", kv_request(b"X-Big: " + b"a" * 200_000 + b"\r\n"), 0, b" 431 ",
     b"over 16,384 bytes"),
    ("10,000 headers", kv_request(lines(10_000)), 0, b" 431 ", b"more than 100 header lines"),
    ("101 header lines", kv_request(lines(98)), 0, b" 431 ", b"more than 100 header lines"),
    ("100 header lines", kv_request(lines(97)), 0, b" 200 ", b'"gpu":"h200"'),
    ("a head of 16,000 bytes", kv_request(b"X-Big: " + b"a" * 15_900 + b"\r\n"), 0, b" 200 ",
     b'"gpu":"h200"'),
    ("17 KiB header", kv_request(b"X-Big: " + b"a" * 17_408 + b"\r\n"), 0, b" 431 ",
     b"over 16,384 bytes"),
    ("20 KB URL", kv_request(target=b"/api/v1/kv?q=" + b"a" * 20_000), 0, b" 431 ",
     b"over 16,384 bytes"),
    ("an endless header line, 4 KiB at a time", b"GET / HTTP/1.1\r\nX: " + b"a" * 10_000_000,
     4096, b" 431 ", b"over 16,384 bytes"),
    ("an endless header line in one go", b"GET / HTTP/1.1\r\nX: " + b"a" * 10_000_000, 0,
     b" 431 ", b"over 16,384 bytes"),
]  # fmt: skip


def process_tree(url) -> tuple[int, list[int]]:
    """The pid of the `serve` listening at `url` and of its worker processes (from /proc)."""
    port = url.rsplit(":", 1)[1]
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            parents[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), command)
    [server] = [p for p, (_, c) in parents.items() if b"serve" in c and port.encode() in c]
    workers = [
        p for p, (pp, c) in parents.items() if pp == server and b"spawn_main" in b" ".join(c)
    ]
    return server, workers


def mapped_libraries(pid) -> set[str]:
    """The site-packages a process has loaded a shared library from (its memory map)."""
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        if "site-packages/" in line:
            found.add(line.split("site-packages/", 1)[1].split("/", 1)[0])
    return found


@pytest.mark.slow
def test_a_real_server_bounds_request_heads_and_keeps_its_workers_lean():
    """`serve` on 127.0.0.1: heads over the limits answered 431 (one JSON line) before the rest
    is read, the limits themselves accepted, a refused request after a good one on the same
    connection answered in turn, the server up after all; an idle worker process has loaded
    no solver library until a request needs one."""
    with served("--workers", "1") as url:
        server, [worker] = process_tree(url)
        idle = mapped_libraries(worker)
        assert not idle & {"scipy", "cvxpy", "_cvxcore", "highspy", "matplotlib", "pyarrow"}
        assert "numpy" in idle  # the check sees what is loaded
        for case, data, pieces, status, fragment in HEADS:
            answer = raw_request(url, data, pieces=pieces)
            assert answer.startswith(b"HTTP/1.1" + status), (case, answer[:200])
            assert fragment in answer, (case, answer[-300:])
            if status == b" 431 ":
                head, body = answer.split(b"\r\n\r\n", 1)
                assert b"connection: close" in head
                assert json.loads(body)["error"]["type"] == "HeadersTooLarge"
        # pipelined: a good request, then one over the limit: the good one is answered first
        answer = raw_request(url, kv_request(close=False) + kv_request(lines(200)))
        assert answer.index(b" 200 OK") < answer.index(b" 431 ")
        with urllib.request.urlopen(url + "/api/v1/catalog", timeout=10) as response:
            assert response.status == 200
        request = urllib.request.Request(url + "/api/v1/sensitivity", data=b'{"bins": 50}')
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200
        assert {"scipy", "highspy"} <= mapped_libraries(worker)  # loaded when needed
        assert process_tree(url) == (server, [worker])  # nothing died on the way


def test_the_readme_states_the_head_limits():
    readme = (PACKAGE.parent / "docs" / "serve.md").read_text()
    limits = Limits()
    assert f"{limits.max_head_bytes // 1024} KiB" in readme
    assert f"{limits.max_headers} header lines" in readme


def _request(chunks, stall=False):
    """A starlette Request whose body arrives as `chunks`, then (with `stall`) never ends."""
    from starlette.requests import Request

    messages = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]

    async def receive():
        if messages:
            return messages.pop(0)
        if stall:
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/api/v1/kv", "headers": [],
             "query_string": b""}  # fmt: skip
    return Request(scope, receive)


def test_a_stalled_body_is_dropped_and_bodies_held_at_once_are_bounded():
    """A body that stops arriving is answered 408 after body_timeout_s (8,000 stalled
    connections held 2 GB in the HTTP process before); bodies received at once hold at most
    max_buffered_body_bytes, beyond which 503; what a body held is released either way."""
    from prfaas_plan.server.app import BodyBudget, read_body

    limits = Limits(body_timeout_s=0.2, max_buffered_body_bytes=100)
    budget = BodyBudget(limits.max_buffered_body_bytes)
    with pytest.raises(ApiError) as stalled:
        asyncio.run(read_body(_request([b"{" * 40], stall=True), limits, budget))
    assert stalled.value.status == 408 and "within 0.2 s" in str(stalled.value)
    assert budget.held == 0
    budget.held = 90  # other bodies being received
    with pytest.raises(ApiError) as busy:
        asyncio.run(read_body(_request([b"{}" * 10]), limits, budget))
    assert busy.value.status == 503 and budget.held == 90
    budget.held = 0
    assert asyncio.run(read_body(_request([b"{", b"}"]), limits, budget)) == b"{}"
    assert budget.held == 0


def test_ten_thousand_unknown_price_keys_are_not_echoed(client):
    """A refusal quotes a few of what it refuses, never a 10,000-key body back."""
    prices = {f"gpu{i}": 1.0 for i in range(10_000)}
    response = client.post("/api/v1/plan", json={"gpu_prices_usd_per_gpu_hour": prices})
    assert response.status_code == 422
    assert (
        len(response.text) < 1_000 and "gpu_prices_usd_per_gpu_hour names ['gpu0'" in response.text
    )


# a client that hangs up: its request is not computed if it has not started, and the live
# requests behind it neither wait for it nor are told they were too large (attack run 3, 2)


@pytest.fixture
def blocking_probe(monkeypatch):
    """An endpoint /probe that counts its calls and, asked to, blocks until released."""
    calls = {"count": 0, "release": threading.Event()}

    class Body(Strict):
        wait: bool = False

    registry = dict(endpoints.ENDPOINTS)
    monkeypatch.setattr(endpoints, "ENDPOINTS", registry)
    monkeypatch.setattr("prfaas_plan.server.app.ENDPOINTS", registry)

    @endpoints.endpoint("probe", Body)
    def probe(body, catalog):
        """Counts and blocks."""
        calls["count"] += 1
        if body.wait:
            calls["release"].wait(10)
        return endpoints.ENDPOINTS["kv"].handler(endpoints.bodies.KvBody(), catalog)

    return calls


async def asgi_post(app, path: str, body: dict, hang_up: asyncio.Event | None = None):
    """POST `body` to the ASGI `app` as a server would hand it over: the body, then the
    client's hang-up once `hang_up` is set (never, if None: the answer is read). Returns the
    status and the answer's bytes."""
    data = json.dumps(body).encode()
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "headers": [(b"content-length", str(len(data)).encode())]}  # fmt: skip
    answered, sent = asyncio.Event(), []

    async def receive():
        if not sent:
            sent.append(True)
            return {"type": "http.request", "body": data, "more_body": False}
        await (hang_up or answered).wait()
        return {"type": "http.disconnect"}

    messages = []

    async def send(message):
        messages.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    await app(scope, receive, send)
    return messages[0]["status"], b"".join(m.get("body", b"") for m in messages[1:])


def test_requests_whose_client_hung_up_are_not_computed(blocking_probe):
    """One thread computing (a live request, blocked), five requests queued behind it whose
    clients hang up: none of them is computed, they leave the queue at once, and a live
    request after them is computed as soon as the first is done."""
    app = create_app(Limits(max_concurrent=1, max_queued=10, timeout_s=10))

    async def scenario():
        first = asyncio.ensure_future(asgi_post(app, "/api/v1/probe", {"wait": True}))
        while blocking_probe["count"] == 0:  # the first is computing
            await asyncio.sleep(0.01)
        hang_up = asyncio.Event()
        abandoned = [asyncio.ensure_future(asgi_post(app, "/api/v1/probe", {}, hang_up))
                     for _ in range(5)]  # fmt: skip
        await asyncio.sleep(0.1)  # queued
        hang_up.set()
        await asyncio.wait_for(asyncio.gather(*abandoned), 5)  # out of the queue at once
        assert app.state.runner.busy == 1  # their slots are free
        live = asyncio.ensure_future(asgi_post(app, "/api/v1/probe", {}))
        blocking_probe["release"].set()
        return await first, await asyncio.wait_for(live, 5)

    (status, _), (live_status, live_text) = asyncio.run(scenario())
    assert (status, live_status) == (200, 200) and b'"gpu":"h200"' in live_text
    assert blocking_probe["count"] == 2  # the first and the live one; no abandoned one


def test_a_client_gone_before_its_job_starts_leaves_the_worker_to_the_next(blocking_probe):
    """The hang-up is already there when the body has been read (it came with it): the job is
    never handed to a thread, though one is free."""
    app = create_app(Limits(max_concurrent=1, max_queued=10, timeout_s=10))
    gone = asyncio.Event()
    gone.set()
    assert asyncio.run(asgi_post(app, "/api/v1/probe", {}, gone))[0] == 400  # nobody reads it
    assert blocking_probe["count"] == 0 and app.state.runner.busy == 0


def test_a_timeout_says_whether_the_request_waited_or_computed(blocking_probe):
    """The first request computes past the timeout: 504, it computed too long. The second
    waited the timeout in the queue behind it without starting: 503, it waited (it was told
    it was too large before, and its wait counted against its own computation)."""
    app = create_app(Limits(max_concurrent=1, max_queued=1, timeout_s=0.3))

    async def scenario():
        first = asyncio.ensure_future(asgi_post(app, "/api/v1/probe", {"wait": True}))
        while blocking_probe["count"] == 0:
            await asyncio.sleep(0.01)
        second = await asgi_post(app, "/api/v1/probe", {})
        return await first, second

    try:
        (status, text), (second_status, second_text) = asyncio.run(scenario())
    finally:
        blocking_probe["release"].set()
    assert status == 504
    assert json.loads(text)["error"]["message"].startswith(
        "the request computed for over 0.3 s and it runs on, holding its slot until done"
    )
    assert second_status == 503
    assert json.loads(second_text)["error"] == {
        "type": "Busy",
        "message": "the request waited 0.3 s in the queue behind other requests without "
        "starting; retry shortly",
    }
    assert blocking_probe["count"] == 1  # the second never computed


def _post_and_hang_up(url: str, path: str, body: bytes) -> None:
    host, port = url.removeprefix("http://").split(":")
    head = f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head + body)


@pytest.mark.slow
def test_a_real_server_computes_no_request_whose_client_hung_up():
    """Run 3's case on one worker: ten /procure/pareto requests over 64 sites of 64 instances
    (~7 s each here, unloaded) sent whole and hung up at once, then a light /kv. Each was
    queued and computed before, one after another, so the /kv waited past the 30 s timeout
    (504, blaming its size); now at most the one computing is finished and the /kv answered."""
    heavy = json.dumps(
        {"target_rps": 2,
         "scenario": scenario(procurement={"sites": sites(64, 64), "max_pd_instances": 64})}
    ).encode()  # fmt: skip
    with served("--workers", "1") as url:
        for _ in range(10):
            _post_and_hang_up(url, "/api/v1/procure/pareto", heavy)
        time.sleep(0.5)  # the server has seen them go
        request = urllib.request.Request(url + "/api/v1/kv", data=b'{"lengths_tokens": [8192]}')
        with urllib.request.urlopen(request, timeout=90) as response:
            assert response.status == 200
