"""The export use-case: a plan and a target -> the files of the output directory (documents and
the note). No file is read or written here (the CLI reads the plan, manifest.write_directory
writes the result)."""

from dataclasses import dataclass
from enum import StrEnum

from prfaas_plan.errors import ConfigError
from prfaas_plan.export import dynamo, kubernetes, llmd
from prfaas_plan.export.manifest import ExportFile, naming
from prfaas_plan.export.note import Note, note_files
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.inputs.scenario import Problem

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


@dataclass(frozen=True)
class ExportRequest:
    target: Target
    name: str | None = None  # object name prefix; None: the scenario's name, sanitised
    namespace: str | None = None
    image: str | None = None  # None: the target's default
    model_id: str | None = None  # None: the scenario's model name
    prompt_chars_per_token: int = llmd.DEFAULT_CHARS_PER_TOKEN  # llm-d only


@dataclass(frozen=True)
class ExportResult:
    files: list[ExportFile]
    note: Note


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
    return ExportResult([*files, *note_files(plan, names, note)], note)
