"""`prfaas-plan export` (issue 24): the case-study plan as llm-d / Dynamo / Kubernetes manifests,
every document checked against the upstream schema subset carried in tests/data/export_schemas
(each file names its repository, path and commit); the round trip (`export --read`) gives the
plan's replicas, GPUs, threshold and Λ_max for every target; hostile input refused with one
`error:` line, exit 3, nothing written."""

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.export import llmd
from prfaas_plan.export.manifest import label_value, sanitise_name
from prfaas_plan.export.stack_cost import round_robin_system_rps
from prfaas_plan.export.workloads import pools
from prfaas_plan.inputs.scenario import open_problem
from prfaas_plan.use_cases.plan import evaluate_configuration
from tests.cli.test_cli import assert_clean_error, run, scenario_with

SCHEMAS = Path(__file__).parents[1] / "data" / "export_schemas"
TARGETS = ("llm-d", "dynamo", "kubernetes")
# the paper's case study (reference §5): t = 19,435.27 tokens, PrfaaS / PD-P / PD-D = 4 / 3 / 5
CASE_THRESHOLD_TOKENS = 19435
CASE_COUNTS = {"prfaas-prefill": 4, "pd-prefill": 3, "pd-decode": 5}


# --- a minimal JSON-schema validator for the subset the schema files use -----------------------


def _resolve(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node = root
    for key in ref.removeprefix("#/").split("/"):
        node = node[key]
    return _resolve(node, root)


JSON_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


def violations(value, schema: dict, root: dict, where: str = "") -> list[str]:
    """Every way `value` breaks `schema` (type, required, properties, additionalProperties,
    items, enum, pattern, maxLength, minimum, maximum, $ref within `root`)."""
    schema = _resolve(schema, root)
    found: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, JSON_TYPES[kind]) and not (
            kind in ("integer", "number") and isinstance(value, bool)
        )
        if not ok:
            return [f"{where or '/'}: expected {kind}, found {type(value).__name__} {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) > schema.get("maxLength", math.inf):
            found.append(f"{where}: longer than {schema['maxLength']}")
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and not schema.get("minimum", -math.inf) <= value <= schema.get("maximum", math.inf):
        found.append(f"{where}: {value} out of range")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}: missing required {key}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                found += violations(item, properties[key], root, f"{where}/{key}")
            elif extra is False:
                found.append(f"{where}: unknown field {key}")
            elif isinstance(extra, dict):
                found += violations(item, extra, root, f"{where}/{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += violations(item, schema["items"], root, f"{where}/{i}")
    return found


def schema_file(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def check_document(doc: dict) -> list[str]:
    """`doc` against the upstream schema subset of its kind."""
    kind = doc.get("kind")
    if kind == "DynamoGraphDeployment":
        root = schema_file("dynamo_graph_deployment.json")["schema"]
        return violations(doc, root, root)
    if kind == "EndpointPickerConfig":
        spec = schema_file("endpoint_picker_config.json")
        found = violations(doc, spec["schema"], spec["schema"])
        for plugin in doc["plugins"]:
            parameters = spec["plugin_parameters"].get(plugin["type"])
            if parameters is not None:
                found += violations(plugin.get("parameters", {}), parameters, parameters)
        refs = {p.get("name", p["type"]) for p in doc["plugins"]}
        for profile in doc["schedulingProfiles"]:
            found += [
                f"unknown pluginRef {p['pluginRef']}"
                for p in profile["plugins"]
                if p["pluginRef"] not in refs
            ]
        return found
    core = schema_file("kubernetes_core.json")
    key = {"Deployment": "deployment", "ConfigMap": "configmap"}.get(kind)
    if key is None:
        return [f"no schema for kind {kind!r}"]
    return violations(doc, {**core[key], "definitions": core["definitions"]}, core)


def documents(directory: Path) -> list[dict]:
    docs = []
    for path in sorted(directory.rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def test_every_schema_file_states_its_source():
    for path in SCHEMAS.glob("*.json"):
        assert re.search(r"@ [0-9a-f]{40}", schema_file(path.name)["source"]), path


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ({"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
          "metadata": {"name": "x"},
          "spec": {"services": {"W": {"replicas": "4"}}}}, "expected integer"),
        ({"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
          "metadata": {"name": "x"}, "spec": {"services": {"W": {"replica": 4}}}},
         "unknown field replica"),
        ({"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig",
          "plugins": [{"type": "pd-profile-handler", "parameters": {"threshold": 19435.3}}],
          "schedulingProfiles": []}, "expected integer"),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Bad_Name"},
          "spec": {"selector": {}, "template": {}}}, "does not match"),
    ],
)  # fmt: skip
def test_the_validator_refuses_what_the_schemas_refuse(doc, fragment):
    """A guard on the guard: the validator is not vacuous."""
    assert any(fragment in v for v in check_document(doc)), check_document(doc)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    """The case study exported to every target (from the scenario)."""
    out = {}
    for target in TARGETS:
        directory = tmp_path_factory.mktemp("export") / target
        result = run("export", "--target", target, "-o", directory)
        assert result.returncode == 0, result.stderr
        out[target] = directory
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_every_document_is_valid_against_the_upstream_schema(exported, target):
    docs = documents(exported[target])
    assert docs
    for doc in docs:
        assert doc["apiVersion"] and doc["kind"]
        assert check_document(doc) == [], (doc["kind"], check_document(doc))


@pytest.mark.parametrize("target", TARGETS)
def test_labels_name_the_plan(exported, target):
    for doc in documents(exported[target]):
        if doc["kind"] == "EndpointPickerConfig":  # no metadata in its schema: its ConfigMap has
            continue
        labels = doc["metadata"]["labels"]
        assert labels["prfaas-plan.io/scenario"] == "paper-case-study"
        assert labels["prfaas-plan.io/threshold-tokens"] == str(CASE_THRESHOLD_TOKENS)
        assert labels["prfaas-plan.io/lambda-max-rps"] == "3.24922"
        assert labels["prfaas-plan.io/planner-version"]


def test_llm_d_carries_the_case_study_threshold_and_counts(exported):
    docs = documents(exported["llm-d"])
    (config,) = [d for d in docs if d["kind"] == "EndpointPickerConfig"]
    (handler,) = [p for p in config["plugins"] if p["type"] == "pd-profile-handler"]
    # llm-d compares prompt characters: 4 a token (its own estimate) x 19,436, the first whole
    # token count above t = 19,435.27
    assert handler["parameters"]["threshold"] == 4 * (CASE_THRESHOLD_TOKENS + 1)
    replicas = {
        d["metadata"]["labels"]["prfaas-plan.io/role"]: d["spec"]["replicas"]
        for d in docs
        if d["kind"] == "Deployment"
    }
    assert replicas == CASE_COUNTS
    for d in docs:
        if d["kind"] == "Deployment":
            (container,) = d["spec"]["template"]["spec"]["containers"]
            assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
            assert container["args"][container["args"].index("--tensor-parallel-size") + 1] == "8"
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert yaml.safe_load(configmap["data"]["epp-config.yaml"]) == config


def test_dynamo_carries_the_case_study_counts(exported):
    services = {}
    for doc in documents(exported["dynamo"]):
        for service in doc["spec"]["services"].values():
            role = service.get("labels", {}).get("prfaas-plan.io/role")
            if role:
                services[role] = (service["replicas"], service["resources"]["limits"]["gpu"])
    assert services == {role: (n, "8") for role, n in CASE_COUNTS.items()}


@pytest.mark.parametrize("target", TARGETS)
def test_round_trip_gives_the_plans_numbers(exported, target):
    result = run("export", "--read", exported[target], "-f", "json")
    assert result.returncode == 0, result.stderr
    back = json.loads(result.stdout)
    assert back["threshold_tokens"] == CASE_THRESHOLD_TOKENS
    assert {r: p["replicas"] for r, p in back["pools"].items()} == CASE_COUNTS
    assert {p["gpus_per_instance"] for p in back["pools"].values()} == {8}
    problem = open_problem()
    plan_rps = json.loads(run("optimize", "-f", "json").stdout)["plan"]["throughput_rps"]["system"]
    # whole tokens: the stack holds t = 19,435 for 19,435.27; that moves Λ_max by the mass of
    # lengths in (19,435, 19,435.27], a few 1e-6 of it
    assert back["system_rps"] == pytest.approx(plan_rps, rel=1e-5)
    at_rounded = evaluate_configuration(
        problem, threshold_tokens=CASE_THRESHOLD_TOKENS, pd_prefill_instances=3, prfaas_instances=4
    ).deployment.evaluation.system_throughput_rps
    assert back["system_rps"] == at_rounded


def test_a_reviewed_plan_json_exports_as_reviewed(tmp_path):
    plan = tmp_path / "plan.json"
    assert run("optimize", "-f", "json", "-o", plan).returncode == 0
    result = run("export", plan, "--target", "dynamo", "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    back = json.loads(run("export", "--read", tmp_path / "out", "-f", "json").stdout)
    assert {r: p["replicas"] for r, p in back["pools"].items()} == CASE_COUNTS


def test_the_note_names_what_dynamo_cannot_express_and_its_cost(exported):
    note = json.loads((exported["dynamo"] / "note.json").read_text())
    assert "no length threshold" in note["differences"][0]
    blind = note["modelled_cost"][0]
    # round-robin over 7 workers, the slowest (an 8 x H20 PD-P instance at the mean length
    # 27,486 tokens: 4.265 s in paper mode) binds: 7 / 4.265 s = 1.641 req/s
    problem = open_problem()
    mean_tokens = json.loads(run("optimize", "-f", "json").stdout)["inputs"]["mean_input_tokens"]
    t_h20_s = float(problem.system.pd_prefill_latency(mean_tokens))
    assert blind["system_rps"] == pytest.approx(7 / t_h20_s, rel=1e-9)
    assert blind["relative_change"] < -0.4
    assert (exported["dynamo"] / "NOTE.md").read_text().startswith("# prfaas-plan export: dynamo")


def test_round_robin_with_one_kind_of_worker_is_the_threshold_model_at_its_end():
    """No PD-P worker: every request goes to PrfaaS, as the threshold model at t = 0."""
    from prfaas_plan.export.plan_source import plan_from_scenario

    problem = open_problem()
    plan = plan_from_scenario(problem, Mode.PAPER)
    only_prfaas = type(plan)(**{**plan.__dict__, "pd_prefill_instances": 0})
    at_zero = evaluate_configuration(
        problem, threshold_tokens=0, pd_prefill_instances=0, prfaas_instances=4
    ).deployment.evaluation.system_throughput_rps
    assert round_robin_system_rps(problem, only_prfaas) == pytest.approx(at_zero, rel=1e-12)


def test_pools_follow_the_plan():
    from prfaas_plan.export.plan_source import plan_from_scenario

    plan = plan_from_scenario(open_problem(), Mode.PAPER)
    assert [p.replicas for p in pools(plan)] == [4, 3, 5]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("paper-case-study", "paper-case-study"),
        ("My Scenario!", "my-scenario"),
        ("a" * 80, "a" * 33 + "-"),
        ("!!!", "plan-"),
    ],
)
def test_names_are_sanitised_into_kubernetes_names(text, expected):
    name = sanitise_name(text)
    assert name.startswith(expected) and len(name) <= 40
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)
    assert re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", label_value(text))


def test_a_scenario_name_that_is_no_kubernetes_name_is_sanitised_and_said(tmp_path):
    scenario = scenario_with(tmp_path, name="Case Study (v2)")
    result = run("export", scenario, "--target", "kubernetes", "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    for doc in documents(tmp_path / "out"):
        assert check_document(doc) == []
        assert doc["metadata"]["name"].startswith("case-study-v2-")
    assert "not a Kubernetes name" in (tmp_path / "out" / "NOTE.md").read_text()


def test_llm_d_threshold_beyond_its_range_is_refused():
    with pytest.raises(ConfigError, match="beyond what llm-d's pd-profile-handler"):
        llmd.threshold_chars(6e8, 4)


def _plan(tmp_path, edit=None, text=None) -> Path:
    path = tmp_path / "plan.json"
    if text is not None:
        path.write_text(text)
        return path
    data = json.loads(run("optimize", "-f", "json").stdout)
    if edit is not None:
        edit(data)
    path.write_text(json.dumps(data))
    return path


def _set(dotted, value):
    def edit(data):
        *parents, leaf = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[leaf] = value

    return edit


HOSTILE = [
    # (what, arguments (tmp_path -> list), exit code, message fragment)
    ("not JSON", lambda p: [_plan(p, text="{"), "-t", "llm-d"], 3, "malformed JSON"),
    ("a list", lambda p: [_plan(p, text="[1, 2]"), "-t", "llm-d"], 3, "expected a JSON object"),
    ("not a plan", lambda p: [_plan(p, text='{"a": 1}'), "-t", "llm-d"], 3, "is missing"),
    ("NaN", lambda p: [_plan(p, text='{"a": NaN}'), "-t", "llm-d"], 3, "NaN"),
    ("a count as text", lambda p: [_plan(p, _set("plan.prfaas_instances", "4")), "-t", "dynamo"],
     3, "plan.prfaas_instances must be a whole number"),
    ("threshold 1e30", lambda p: [_plan(p, _set("plan.threshold_tokens", 1e30)), "-t", "llm-d"],
     3, "plan.threshold_tokens must be in"),
    ("threshold negative", lambda p: [_plan(p, _set("plan.threshold_tokens", -5)), "-t", "llm-d"],
     3, "plan.threshold_tokens must be in"),
    ("offloads nothing", lambda p: [_plan(p, _set("plan.threshold_tokens", None)), "-t", "llm-d"],
     3, "offloads nothing"),
    ("a scenario that offloads nothing",
     lambda p: [scenario_with(p, **{"prfaas_cluster.instances": 0}), "-t", "llm-d"], 3,
     "scenario.yaml: the plan offloads nothing to PrfaaS (threshold_tokens is inf, with 0"),
    ("counts not the scenario's",
     lambda p: [_plan(p, _set("plan.pd_decode_instances", 9)), "-t", "llm-d"], 3,
     "not of this scenario"),
    ("a stale plan", lambda p: [_plan(p, _set("plan.throughput_rps.system", 3.5)), "-t", "llm-d"],
     3, "changed since the plan was made"),
    ("another scenario", lambda p: [_plan(p, _set("inputs.scenario", "other")), "-t", "llm-d"],
     3, "pass the plan's scenario"),
    ("bad --name", lambda p: ["-t", "llm-d", "--name", "Bad_Name"], 3, "--name must be a Kubernetes"),
    ("long --name", lambda p: ["-t", "llm-d", "--name", "a" * 41], 3, "--name must be a Kubernetes"),
    ("bad --namespace", lambda p: ["-t", "llm-d", "--namespace", "Prod"], 3, "--namespace must"),
    ("unknown target", lambda p: ["-t", "vllm"], 3, "--target must be llm-d, dynamo or kubernetes"),
    ("no target", lambda p: [], 3, "export needs --target"),
    ("chars a token 0", lambda p: ["-t", "llm-d", "--prompt-chars-per-token", "0"], 3,
     "--prompt-chars-per-token must be in [1, 64]"),
    ("chars a token, dynamo", lambda p: ["-t", "dynamo", "--prompt-chars-per-token", "3"], 3,
     "--prompt-chars-per-token applies to llm-d only"),
    ("an image with a space", lambda p: ["-t", "kubernetes", "--image", "a b"], 3, "--image must"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "args", "code", "fragment"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_input_is_one_line_and_writes_nothing(tmp_path, what, args, code, fragment):
    arguments = args(tmp_path)
    before = set(tmp_path.iterdir())
    out = tmp_path / "out"
    result = run("export", *arguments, "-o", out)
    assert_clean_error(result, code, fragment)
    assert set(tmp_path.iterdir()) == before  # no output, no temporary directory


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: (p / "file.txt").write_text("keep") and p / "file.txt", "exists (a file)"),
        (lambda p: (p / "dir").mkdir() or p / "dir", "exists (a directory)"),
        (lambda p: Path("/dev/null"), "exists (a device, pipe or socket)"),
        (lambda p: p / "missing" / "out", "does not exist"),
        (lambda p: (p / "f").write_text("x") and p / "f" / "out", "is not a directory"),
    ],
    ids=["a file", "a directory", "a device", "no parent", "a file as parent"],
)
def test_output_onto_a_file_or_device_is_refused(tmp_path, make, fragment):
    target = make(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = run("export", "--target", "llm-d", "-o", target)
    assert_clean_error(result, 3, "--output", fragment)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    from prfaas_plan.export import manifest

    calls = []

    def failing(file):
        calls.append(file.path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return "x: 1\n"

    monkeypatch.setattr(manifest, "render", failing)
    result = run("export", "--target", "llm-d", "-o", tmp_path / "out")
    assert_clean_error(result, 9, "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_read_refuses_a_directory_that_is_not_an_export(tmp_path):
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert_clean_error(run("export", "--read", tmp_path), 3, "not a complete prfaas-plan export")


def test_readme_export_section_runs(tmp_path):
    """The export commands of docs/export.md, run in a scratch directory."""
    section = (Path(__file__).resolve().parents[2] / "docs" / "export.md").read_text()
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split() for line in block.splitlines() if line.strip()]
    assert lines and all(words[0] == "prfaas-plan" for words in lines)
    for words in lines:
        result = run(*words[1:], cwd=tmp_path)
        assert result.returncode == 0, (words, result.stderr)
    assert "77,744" in section and "1.64 req/s" in section
    assert llmd.threshold_chars(19435.27, 4) == 77744
