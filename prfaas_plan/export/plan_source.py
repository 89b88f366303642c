"""The plan an export writes: computed from a scenario (the `optimize` use-case), or read from a
reviewed `optimize -f json` document and checked against its scenario, so that a plan is exported
as reviewed and a stale one (its scenario changed since) is refused rather than written.

Units: tokens, requests/s; instances and GPUs are counts.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prfaas_plan import __version__, plausible
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import read_text
from prfaas_plan.inputs.scenario import Problem

# a re-evaluated plan agrees with its JSON to the printed digits of a float (JSON keeps 17)
PLAN_AGREEMENT_RTOL = 1e-9


@dataclass(frozen=True)
class ExportPlan:
    """The numbers an export carries, with where they came from."""

    scenario_name: str
    origin: str  # "scenario <file>" or "plan JSON <file>"
    planner_version: str  # prfaas-plan version that made the plan
    mode: Mode
    threshold_tokens: float  # requests with uncached input > threshold go to PrfaaS
    system_rps: float  # Λ_max of the plan
    prfaas_instances: int
    pd_prefill_instances: int
    pd_decode_instances: int
    prfaas_gpus_per_instance: int
    pd_gpus_per_instance: int
    prfaas_gpu: str
    pd_gpu: str
    model: str


def plan_from_scenario(problem: Problem, mode: Mode) -> ExportPlan:
    """The `optimize` plan of `problem` in `mode`."""
    from prfaas_plan.use_cases.plan import plan

    report = plan(problem, mode=mode)
    evaluation = report.plan.evaluation
    c = evaluation.configuration
    if not math.isfinite(c.threshold_tokens):  # t = inf: no PrfaaS instance, or none worth it
        raise ConfigError(
            f"{problem.source}: the plan offloads nothing to PrfaaS (threshold_tokens is inf, "
            f"with {c.prfaas_instances} PrfaaS instances), so there is no routing to export; "
            "give prfaas_cluster.instances > 0 or export a plan that uses the PrfaaS cluster"
        )
    return _export_plan(
        problem, f"scenario {problem.source}", __version__, mode, c.threshold_tokens,
        evaluation.system_throughput_rps, c.prfaas_instances, c.pd_prefill_instances,
        c.pd_decode_instances,
    )  # fmt: skip


def _export_plan(
    problem: Problem,
    origin: str,
    version: str,
    mode: Mode,
    threshold_tokens: float,
    system_rps: float,
    prfaas: int,
    pd_prefill: int,
    pd_decode: int,
) -> ExportPlan:
    s = problem.scenario
    return ExportPlan(
        scenario_name=s.name, origin=origin, planner_version=version, mode=mode,
        threshold_tokens=threshold_tokens, system_rps=system_rps, prfaas_instances=prfaas,
        pd_prefill_instances=pd_prefill, pd_decode_instances=pd_decode,
        prfaas_gpus_per_instance=s.prfaas_cluster.gpus_per_instance,
        pd_gpus_per_instance=s.pd_cluster.gpus_per_instance, prfaas_gpu=s.prfaas_cluster.gpu,
        pd_gpu=s.pd_cluster.gpu, model=s.model,
    )  # fmt: skip


def looks_like_plan_json(path: Path) -> bool:
    """A plan document is told from a scenario by its name: `.json` (a scenario is YAML)."""
    return path.suffix.lower() == ".json"


def read_plan_json(path: Path) -> dict[str, Any]:
    """The plan document at `path` (bounded read, finite numbers, each key once), or one line."""

    text = read_text(path, "plan JSON")

    def refuse_constant(name: str) -> None:
        raise ConfigError(f"{path}: malformed JSON: {name} is not a JSON number")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        data = dict(pairs)
        if len(data) < len(pairs):
            raise ConfigError(f"{path}: malformed JSON: a key appears twice in one object")
        return data

    try:
        data = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}); "
            "expected the output of `prfaas-plan optimize -f json`"
        ) from None
    except (ValueError, RecursionError):
        raise ConfigError(f"{path}: malformed JSON: a number or nesting beyond limits") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a JSON object (the output of `prfaas-plan optimize -f json`), "
            f"found {type(data).__name__}"
        )
    return data


def _field(data: dict[str, Any], dotted: str, kind: type, where: Path) -> Any:
    """`data[a][b]...` for `dotted` 'a.b', of JSON type `kind` (int, float, str), or one line."""
    value: Any = data
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise ConfigError(
                f"{where}: {dotted} is missing; not a plan document (expected the output of "
                "`prfaas-plan optimize -f json`)"
            )
        value = value[key]
    ok = (
        isinstance(value, str)
        if kind is str
        else isinstance(value, int | float) and not isinstance(value, bool)
    )
    if kind is int:
        ok = ok and float(value).is_integer()
    if not ok:
        expected = {str: "text", int: "a whole number", float: "a number"}[kind]
        raise ConfigError(
            f"{where}: {dotted} must be {expected}, found {plausible.quoted(json.dumps(value))}"
        )
    return int(value) if kind is int else value


def plan_from_json(data: dict[str, Any], where: Path, problem: Problem) -> ExportPlan:
    """The plan in an `optimize -f json` document, checked against `problem` (its scenario): the
    same scenario name and clusters, and the same Λ_max when its configuration is re-evaluated
    (a scenario edited since the plan was reviewed would be exported with stale numbers)."""
    from prfaas_plan.use_cases.plan import evaluate_configuration

    version = _field(data, "prfaas_plan_version", str, where)
    mode_text = _field(data, "mode", str, where)
    if mode_text not in {m.value for m in Mode}:
        raise ConfigError(
            f"{where}: mode must be paper or exact, found {plausible.quoted(mode_text)}"
        )
    name = _field(data, "inputs.scenario", str, where)
    counts = {
        key: _field(data, f"plan.{key}", int, where)
        for key in ("prfaas_instances", "pd_prefill_instances", "pd_decode_instances")
    }
    threshold = data.get("plan", {}).get("threshold_tokens")
    if threshold is None:
        raise ConfigError(
            f"{where}: plan.threshold_tokens is null: the plan offloads nothing to PrfaaS, so "
            "there is no routing to export; export a plan that uses the PrfaaS cluster"
        )
    threshold = _field(data, "plan.threshold_tokens", float, where)
    system_rps = _field(data, "plan.throughput_rps.system", float, where)
    for key, value in counts.items():
        if not 0 <= value <= plausible.MAX_INSTANCES:
            raise ConfigError(
                f"{where}: plan.{key} must be in [0, {plausible.MAX_INSTANCES:,}], found {value}"
            )
    if name != problem.scenario.name:
        raise ConfigError(
            f"{where}: the plan is of scenario {plausible.quoted(name)} but the scenario given is "
            f"{plausible.quoted(problem.scenario.name)} ({problem.source}); pass the plan's scenario"
        )
    pd_total = counts["pd_prefill_instances"] + counts["pd_decode_instances"]
    if pd_total != problem.pd_instances or counts["pd_decode_instances"] < 1:
        raise ConfigError(
            f"{where}: plan.pd_prefill_instances + plan.pd_decode_instances = {pd_total} "
            f"(decode {counts['pd_decode_instances']}), but the scenario's pd_cluster.instances "
            f"is {problem.pd_instances} with at least one decoding; the plan is not of this scenario"
        )
    if not (math.isfinite(threshold) and 0 <= threshold <= plausible.MAX_TOKENS):
        raise ConfigError(
            f"{where}: plan.threshold_tokens must be in [0, {plausible.MAX_TOKENS:,.0f}] tokens, "
            f"found {threshold:g}"
        )
    mode = Mode(mode_text)
    report = evaluate_configuration(
        problem, threshold_tokens=threshold, pd_prefill_instances=counts["pd_prefill_instances"],
        prfaas_instances=counts["prfaas_instances"], mode=mode,
    )  # fmt: skip
    again = report.deployment.evaluation.system_throughput_rps
    if not math.isclose(again, system_rps, rel_tol=PLAN_AGREEMENT_RTOL):
        raise ConfigError(
            f"{where}: plan.throughput_rps.system is {system_rps:.6g} req/s but the scenario "
            f"({problem.source}) gives {again:.6g} req/s for the plan's configuration: the "
            "scenario or data changed since the plan was made; re-run optimize and review again"
        )
    return _export_plan(
        problem, f"plan JSON {where}", version, mode, threshold, system_rps,
        counts["prfaas_instances"], counts["pd_prefill_instances"], counts["pd_decode_instances"],
    )  # fmt: skip


def plan_scenario_file(data: dict[str, Any], where: Path) -> Path:
    """The scenario file a plan document names (inputs.scenario_file)."""
    return Path(_field(data, "inputs.scenario_file", str, where))
