"""The note beside every export (NOTE.md and note.json): what the stack expresses of the plan,
what it cannot, and what the configuration it will actually run costs in the model."""

import json
from dataclasses import dataclass

from prfaas_plan.export.manifest import ExportFile, Naming
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.export.stack_cost import StackCost


@dataclass(frozen=True)
class Note:
    target: str
    stack: str  # the stack version and the schema the documents were written against
    expressed: tuple[str, ...]
    differences: tuple[str, ...]
    costs: tuple[StackCost, ...]


def _naming_lines(naming: Naming) -> list[str]:
    if naming.sanitised_from is None:
        return []
    return [
        f"The scenario name {naming.sanitised_from!r} is not a Kubernetes name: objects are named "
        f"{naming.base!r}-… (labels keep a sanitised copy of it); choose one with `name`."
    ]


def note_files(plan: ExportPlan, naming: Naming, note: Note) -> list[ExportFile]:
    """NOTE.md and note.json for `note`."""
    lines = [
        f"# prfaas-plan export: {note.target}",
        "",
        f"Plan: scenario `{plan.scenario_name}` ({plan.origin}), prfaas-plan "
        f"{plan.planner_version}, {plan.mode.value} mode: t = {plan.threshold_tokens:,.2f} "
        f"tokens, instances PrfaaS / PD-P / PD-D = {plan.prfaas_instances} / "
        f"{plan.pd_prefill_instances} / {plan.pd_decode_instances}, "
        f"Λ_max = {plan.system_rps:.4f} req/s.",
        "",
        f"Stack: {note.stack}.",
        "",
        "## Expressed",
        "",
        *(f"- {line}" for line in note.expressed),
        "",
        "## Not expressed (the closest faithful configuration is written instead)",
        "",
        *(f"- {line}" for line in note.differences),
        "",
        "## Modelled cost of what the stack runs",
        "",
        "| configuration the stack runs | Λ_max req/s | vs plan |",
        "| --- | --- | --- |",
        *(
            f"| {c.method.replace('|', '/')} | {c.stack_system_rps:.4f} | "
            f"{c.relative_change:+.2%} |"
            for c in note.costs
        ),
        "",
        *_naming_lines(naming),
    ]
    document = {
        "target": note.target,
        "stack": note.stack,
        "plan": {
            "scenario": plan.scenario_name,
            "origin": plan.origin,
            "planner_version": plan.planner_version,
            "mode": plan.mode.value,
            "threshold_tokens": plan.threshold_tokens,
            "prfaas_instances": plan.prfaas_instances,
            "pd_prefill_instances": plan.pd_prefill_instances,
            "pd_decode_instances": plan.pd_decode_instances,
            "prfaas_gpus_per_instance": plan.prfaas_gpus_per_instance,
            "pd_gpus_per_instance": plan.pd_gpus_per_instance,
            "system_rps": plan.system_rps,
        },
        "expressed": list(note.expressed),
        "differences": list(note.differences),
        "modelled_cost": [
            {
                "configuration": c.method,
                "stack_threshold_tokens": c.stack_threshold_tokens,
                "system_rps": c.stack_system_rps,
                "plan_system_rps": c.plan_system_rps,
                "relative_change": c.relative_change,
            }
            for c in note.costs
        ],
        "names": {"base": naming.base, "sanitised_from": naming.sanitised_from},
    }
    return [
        ExportFile("NOTE.md", text="\n".join(lines).rstrip("\n") + "\n"),
        ExportFile("note.json", text=json.dumps(document, indent=2, allow_nan=False) + "\n"),
    ]
