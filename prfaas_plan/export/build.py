"""The export use-case: a plan and a target -> the files of the output directory (documents and
the note). No file is read or written here (the CLI reads the plan, manifest.write_directory
writes the result)."""

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.export import dynamo, kubernetes, llmd
from prfaas_plan.export.manifest import ExportFile, naming
from prfaas_plan.export.note import Note, note_files
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.use_cases.field_docs import describe
from prfaas_plan.use_cases.requests import ModeChoice

MAX_CHARS_PER_TOKEN = 64  # a plausibility bound on --prompt-chars-per-token


class Target(StrEnum):
    LLM_D = "llm-d"
    DYNAMO = "dynamo"
    KUBERNETES = "kubernetes"


DEFAULT_IMAGES = {
    Target.LLM_D: llmd.DEFAULT_IMAGE,
    Target.DYNAMO: dynamo.DEFAULT_IMAGE,
    Target.KUBERNETES: kubernetes.DEFAULT_IMAGE,
}


TargetChoice = Annotated[Target, Field(strict=False)]  # given by its value, "llm-d"


class ExportRequest(Strict):
    """`export`: the stack and how its objects are named (the CLI's flags, the HTTP body's
    fields; server/bodies.py adds the scenario). The plan is the scenario's, planned in `mode`,
    or (the CLI) a reviewed `optimize -f json` document, which keeps its own mode."""

    target: TargetChoice = Field(description=describe("ExportRequest", "target"))
    mode: ModeChoice = Field(Mode.PAPER, description=describe("ExportRequest", "mode"))
    name: str | None = Field(None, description=describe("ExportRequest", "name"))
    namespace: str | None = Field(None, description=describe("ExportRequest", "namespace"))
    image: str | None = Field(None, description=describe("ExportRequest", "image"))
    model_id: str | None = Field(None, description=describe("ExportRequest", "model_id"))
    prompt_chars_per_token: int = Field(
        llmd.DEFAULT_CHARS_PER_TOKEN,
        description=describe("ExportRequest", "prompt_chars_per_token"),
    )


@dataclass(frozen=True)
class ExportResult:
    target: Target
    name: str  # the object name prefix the documents use (a DNS-1123 label)
    files: list[ExportFile]
    note: Note

    def summary(self) -> str:
        """What was written and what it costs: `N files for T; ... Λ_max X req/s (±p% vs ...)`."""
        cost = self.note.costs[0]
        return (
            f"{len(self.files)} files for {self.target.value}; the configuration it runs models "
            f"at Λ_max {cost.stack_system_rps:.4f} req/s ({cost.relative_change:+.2%} vs the "
            "plan; see NOTE.md)"
        )


def _check_text(value: str, parameter: str) -> str:
    if not value or len(value) > 512 or not value.isprintable() or any(c.isspace() for c in value):
        raise ConfigError(
            f"{parameter} must be printable text without spaces, at most 512 characters",
            parameter=parameter,
        )
    return value


def build_export(problem: Problem, plan: ExportPlan, request: ExportRequest) -> ExportResult:
    """The files that deploy `plan` on `request.target`, and its note."""
    names = naming(plan, request.name, request.namespace)
    image = _check_text(request.image or DEFAULT_IMAGES[request.target], "image")
    model_id = _check_text(request.model_id or plan.model, "model_id")
    cpt = request.prompt_chars_per_token
    if request.target is not Target.LLM_D and cpt != llmd.DEFAULT_CHARS_PER_TOKEN:
        raise ConfigError(
            "prompt_chars_per_token applies to llm-d only (it counts prompt characters)",
            parameter="prompt_chars_per_token",
        )
    if not 1 <= cpt <= MAX_CHARS_PER_TOKEN:
        raise ConfigError(
            f"prompt_chars_per_token must be in [1, {MAX_CHARS_PER_TOKEN}], got {cpt}",
            parameter="prompt_chars_per_token",
        )
    if request.target is Target.LLM_D:
        files, note = llmd.build(problem, plan, names, llmd.LlmdOptions(image, model_id, cpt))
    elif request.target is Target.DYNAMO:
        files, note = dynamo.build(problem, plan, names, dynamo.DynamoOptions(image, model_id))
    else:
        files, note = kubernetes.build(
            problem, plan, names, kubernetes.KubernetesOptions(image, model_id)
        )
    return ExportResult(request.target, names.base, [*files, *note_files(plan, names, note)], note)
