"""An exported directory read back: the replicas, GPUs and threshold its documents deploy, and
Λ_max of that configuration by the `evaluate` use-case, so that an export can be checked to
carry the plan's numbers (and a hand-edited one evaluated). The numbers are read from the
stack's own fields (replicas, GPU requests, the llm-d handler's threshold), not from the note.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.export.manifest import (
    LABEL_PREFIX,
    ROLE_PD_DECODE,
    ROLE_PD_PREFILL,
    ROLE_PRFAAS,
    label_value,
)
from prfaas_plan.inputs.reading import read_text
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.inputs.strict_yaml import parse_yaml_text

MAX_FILES = 64


@dataclass(frozen=True)
class PoolRead:
    replicas: int
    gpus_per_instance: int
    tensor_parallel_size: int
    where: str


@dataclass(frozen=True)
class ReadBack:
    directory: Path
    target: str
    scenario_label: str
    threshold_tokens: float  # the threshold the documents hold (L > t offloaded)
    pools: dict[str, PoolRead]  # role -> what is deployed
    system_rps: float  # Λ_max of that configuration (evaluate)


def _documents(directory: Path) -> list[tuple[str, dict[str, Any]]]:

    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory (expected an exported directory)")
    paths = sorted(p for p in directory.rglob("*.yaml") if p.is_file())
    if not paths or len(paths) > MAX_FILES:
        raise ConfigError(
            f"{directory}: expected 1 to {MAX_FILES} YAML files of an export, found {len(paths)}"
        )
    documents = []
    for path in paths:
        parts = re.split(r"(?m)^---[ \t]*\n", read_text(path, "exported manifest"))
        for part in parts:
            data = parse_yaml_text(part, str(path))
            if isinstance(data, dict):
                documents.append((str(path.relative_to(directory)), data))
    return documents


def _int(value: Any, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise ConfigError(f"{where}: {what} must be a whole number, found {value!r}")
    return int(value)


def _tensor_parallel(args: list[Any], where: str) -> int:
    words = " ".join(str(a) for a in args).split()
    if "--tensor-parallel-size" not in words or words[-1] == "--tensor-parallel-size":
        raise ConfigError(f"{where}: no --tensor-parallel-size in the container's arguments")
    return _int(words[words.index("--tensor-parallel-size") + 1], where, "--tensor-parallel-size")


def _labels(doc: dict[str, Any]) -> dict[str, Any]:
    labels = doc.get("metadata", {}).get("labels", {})
    return labels if isinstance(labels, dict) else {}


def _read_document(
    where: str,
    doc: dict[str, Any],
    kind: Any,
    labels: dict[str, Any],
    pools: dict[str, PoolRead],
    state: tuple[float | None, int | None, int | None, str],
) -> tuple[float | None, int | None, int | None, str]:
    """One document's pools (into `pools`) and the (threshold, handler characters, characters a
    token, target) read so far."""
    threshold, handler_chars, chars_per_token, target = state
    if kind == "Deployment":
        role = labels.get(f"{LABEL_PREFIX}/role")
        container = doc["spec"]["template"]["spec"]["containers"][0]
        gpus = _int(container["resources"]["limits"]["nvidia.com/gpu"], where, "GPU limit")
        pools[str(role)] = PoolRead(
            _int(doc["spec"]["replicas"], where, "replicas"), gpus,
            _tensor_parallel(container.get("args", []), where), where,
        )  # fmt: skip
    elif kind == "DynamoGraphDeployment":
        target = "dynamo"
        threshold = float(_int(labels[f"{LABEL_PREFIX}/threshold-tokens"], where, "label"))
        for service in doc["spec"]["services"].values():
            role = service.get("labels", {}).get(f"{LABEL_PREFIX}/role")
            if role is None:
                continue
            pools[str(role)] = PoolRead(
                _int(service["replicas"], where, "replicas"),
                _int(service["resources"]["limits"]["gpu"], where, "gpu"),
                _tensor_parallel(service["extraPodSpec"]["mainContainer"]["args"], where),
                where,
            )
    elif kind == "EndpointPickerConfig":
        target = "llm-d"
        for plugin in doc.get("plugins", []):
            if plugin.get("type") == "pd-profile-handler":
                handler_chars = _int(plugin["parameters"]["threshold"], where, "threshold")
    elif kind == "ConfigMap":
        annotations = doc.get("metadata", {}).get("annotations", {}) or {}
        cpt = annotations.get(f"{LABEL_PREFIX}/prompt-chars-per-token")
        if cpt is not None:
            chars_per_token = _int(cpt, where, "prompt-chars-per-token")
        if "threshold_tokens" in doc.get("data", {}):
            threshold = float(_int(doc["data"]["threshold_tokens"], where, "threshold_tokens"))
    return threshold, handler_chars, chars_per_token, target


def read_export(directory: Path, problem: Problem) -> ReadBack:
    """What `directory` deploys, evaluated on `problem` (the plan's scenario)."""
    from prfaas_plan.use_cases.plan import evaluate_configuration

    pools: dict[str, PoolRead] = {}
    threshold: float | None = None
    target = "kubernetes"
    scenario = None
    chars_per_token = None
    handler_chars = None
    mode = Mode.PAPER
    for where, doc in _documents(directory):
        kind = doc.get("kind")
        labels = _labels(doc)
        scenario = labels.get(f"{LABEL_PREFIX}/scenario", scenario)
        if labels.get(f"{LABEL_PREFIX}/mode") in {m.value for m in Mode}:
            mode = Mode(labels[f"{LABEL_PREFIX}/mode"])
        try:
            threshold, handler_chars, chars_per_token, target = _read_document(
                where, doc, kind, labels, pools, (threshold, handler_chars, chars_per_token, target)
            )
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ConfigError(
                f"{directory}/{where}: a {kind} without the field {exc} an export writes"
            ) from None
    if target == "llm-d":
        if handler_chars is None or chars_per_token is None:
            raise ConfigError(f"{directory}: an llm-d export without its handler threshold")
        from prfaas_plan.export.llmd import stack_threshold_tokens

        threshold = stack_threshold_tokens(handler_chars, chars_per_token)
    missing = {ROLE_PRFAAS, ROLE_PD_PREFILL, ROLE_PD_DECODE} - pools.keys()
    if missing or threshold is None or scenario is None:
        raise ConfigError(
            f"{directory}: not a complete prfaas-plan export (missing: "
            f"{', '.join(sorted(missing)) or 'the threshold or the scenario label'})"
        )
    if scenario != label_value(problem.scenario.name):
        raise ConfigError(
            f"{directory}: exported from scenario {scenario!r}, but the scenario given is "
            f"{problem.scenario.name!r}; pass the scenario the plan was made for"
        )
    s = problem.scenario
    for role, expected in (
        (ROLE_PRFAAS, s.prfaas_cluster.gpus_per_instance),
        (ROLE_PD_PREFILL, s.pd_cluster.gpus_per_instance),
        (ROLE_PD_DECODE, s.pd_cluster.gpus_per_instance),
    ):
        got = pools[role]
        if got.gpus_per_instance != expected or got.tensor_parallel_size != expected:
            raise ConfigError(
                f"{directory}/{got.where}: {role} has {got.gpus_per_instance} GPUs and "
                f"tensor-parallel size {got.tensor_parallel_size}, but the scenario's profiles "
                f"are of {expected}-GPU instances"
            )
    report = evaluate_configuration(
        problem, threshold_tokens=threshold,
        pd_prefill_instances=pools[ROLE_PD_PREFILL].replicas,
        prfaas_instances=pools[ROLE_PRFAAS].replicas, mode=mode,
    )  # fmt: skip
    if pools[ROLE_PD_PREFILL].replicas + pools[ROLE_PD_DECODE].replicas != problem.pd_instances:
        raise ConfigError(
            f"{directory}: PD-P + PD-D replicas are {pools[ROLE_PD_PREFILL].replicas} + "
            f"{pools[ROLE_PD_DECODE].replicas}, but the scenario's pd_cluster.instances is "
            f"{problem.pd_instances}"
        )
    return ReadBack(
        directory, target, str(scenario), threshold, pools,
        report.deployment.evaluation.system_throughput_rps,
    )  # fmt: skip
