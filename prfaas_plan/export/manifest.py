"""What every export target shares: Kubernetes names and labels, the plan's identity on every
document, YAML with provenance comments, and the all-or-nothing write of the output directory.

Names follow Kubernetes' rules (DNS-1123 labels for object names, the label-value syntax for
label values): a name derived from the scenario is sanitised (and the note says so); a name the
user gives is refused with one line when it is not valid, never changed behind their back.
"""

import contextlib
import hashlib
import io
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.export.plan_source import ExportPlan

LABEL_PREFIX = "prfaas-plan.io"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # RFC 1123 label, Kubernetes' names
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MAX_DNS_LABEL_CHARS = 63
# a base name leaves room for the longest suffix a target appends ("-prfaas-prefill", 15)
MAX_BASE_NAME_CHARS = 40
# an export's files hold ~15,000 characters (the case study's llm-d: 13,600); its inputs are
# bounded (names, image and model id at most 512 characters) far below this
MAX_ARCHIVE_CHARS = 4 * 1024 * 1024
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)  # zip's earliest: the same export is the same bytes

ROLE_PRFAAS = "prfaas-prefill"
ROLE_PD_PREFILL = "pd-prefill"
ROLE_PD_DECODE = "pd-decode"


@dataclass(frozen=True)
class Document:
    """One YAML document: the object, and comments saying where its numbers came from."""

    body: dict[str, Any]
    comments: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExportFile:
    path: str  # relative to the output directory, '/'-separated
    documents: tuple[Document, ...] = ()
    text: str | None = None  # a non-YAML file (the note)


@dataclass(frozen=True)
class Naming:
    base: str  # object name prefix, a DNS-1123 label of at most MAX_BASE_NAME_CHARS
    namespace: str | None
    sanitised_from: str | None = None  # the scenario name, when `base` had to be derived
    notes: list[str] = field(default_factory=list)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:6]


def sanitise_name(text: str) -> str:
    """`text` as a DNS-1123 label of at most MAX_BASE_NAME_CHARS: lower case, every run of other
    characters a '-', trimmed; a long or emptied name keeps a short digest of the original so
    that two scenarios do not collide."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not name:
        return f"plan-{_digest(text)}"
    if len(name) > MAX_BASE_NAME_CHARS:
        name = name[: MAX_BASE_NAME_CHARS - 7].rstrip("-") + "-" + _digest(text)
    return name


def check_dns_label(value: str, parameter: str, max_chars: int) -> str:
    """`value` if it is a DNS-1123 label of at most `max_chars`, else one line."""
    if len(value) > max_chars or not DNS_LABEL.match(value):
        raise ConfigError(
            f"{parameter} must be a Kubernetes name (lower-case letters, digits and '-', starting "
            f"and ending with a letter or digit, at most {max_chars} characters), got "
            f"{plausible.quoted(value)}",
            parameter=parameter,
        )
    return value


def naming(plan: ExportPlan, name: str | None, namespace: str | None) -> Naming:
    """Object names from `name` (checked) or the scenario's name (sanitised)."""
    if namespace is not None:
        check_dns_label(namespace, "namespace", MAX_DNS_LABEL_CHARS)
    if name is not None:
        return Naming(check_dns_label(name, "name", MAX_BASE_NAME_CHARS), namespace)
    base = sanitise_name(plan.scenario_name)
    if base == plan.scenario_name:
        return Naming(base, namespace)
    return Naming(base, namespace, sanitised_from=plan.scenario_name)


def label_value(text: str) -> str:
    """`text` as a Kubernetes label value (at most 63 characters of [A-Za-z0-9._-], alphanumeric
    at both ends); a value that is not one is sanitised, keeping a digest of the original."""
    if len(text) <= MAX_DNS_LABEL_CHARS and LABEL_VALUE.match(text):
        return text
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    if len(value) > MAX_DNS_LABEL_CHARS - 7 or value != text:
        value = value[: MAX_DNS_LABEL_CHARS - 7].rstrip("-_.")
        value = f"{value}-{_digest(text)}" if value else _digest(text)
    return value


def threshold_label(threshold_tokens: float) -> str:
    """The threshold as whole tokens: lengths are whole tokens, so `L > t` is `L > floor(t)`."""
    return str(int(threshold_tokens // 1))


def plan_labels(plan: ExportPlan) -> dict[str, str]:
    """Which plan produced a document: scenario, planner version, threshold, Λ_max."""
    return {
        f"{LABEL_PREFIX}/scenario": label_value(plan.scenario_name),
        f"{LABEL_PREFIX}/planner-version": label_value(plan.planner_version),
        f"{LABEL_PREFIX}/mode": plan.mode.value,
        f"{LABEL_PREFIX}/threshold-tokens": threshold_label(plan.threshold_tokens),
        f"{LABEL_PREFIX}/lambda-max-rps": f"{plan.system_rps:.6g}",
    }


def metadata(
    name: str, naming_: Naming, plan: ExportPlan, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if naming_.namespace is not None:
        meta["namespace"] = naming_.namespace
    meta["labels"] = {**plan_labels(plan), **(extra or {})}
    return meta


def provenance(plan: ExportPlan) -> tuple[str, ...]:
    """The header every document carries: which plan, from where."""
    return (
        f"Written by prfaas-plan export from the plan of scenario '{plan.scenario_name}'",
        f"({plan.origin}; planned by prfaas-plan {plan.planner_version}, {plan.mode.value} mode):",
        f"threshold t = {plan.threshold_tokens:,.2f} uncached prompt tokens, "
        f"Λ_max = {plan.system_rps:.4f} req/s, instances PrfaaS / PD-P / PD-D = "
        f"{plan.prfaas_instances} / {plan.pd_prefill_instances} / {plan.pd_decode_instances}.",
    )


def render(file: ExportFile) -> str:
    """A file's text: each document its comments then its YAML, documents separated by ---."""
    if file.text is not None:
        return file.text
    parts = []
    for doc in file.documents:
        header = "".join(f"# {line}\n" if line else "#\n" for line in doc.comments)
        parts.append(header + yaml.safe_dump(doc.body, sort_keys=False, allow_unicode=True))
    return "---\n".join(parts)


def file_texts(files: list[ExportFile]) -> dict[str, str]:
    """{path: text} of `files`, in their order: what write_directory writes, file by file."""
    return {file.path: render(file) for file in files}


def zip_archive(texts: dict[str, str], folder: str) -> bytes:
    """`texts` ({path: text}) as a zip archive built in memory, every file under one `folder`
    (as `-o folder` writes them), UTF-8, deflated, mode 0644, dated ZIP_DATE_TIME so that the
    same files give the same bytes. More than MAX_ARCHIVE_CHARS characters in all is refused
    before anything is encoded or compressed."""
    total = sum(len(text) for text in texts.values())
    if total > MAX_ARCHIVE_CHARS:
        raise ConfigError(
            f"the export's files hold {total:,} characters, over the archive's limit of "
            f"{MAX_ARCHIVE_CHARS:,}; shorten the names (name, image, model_id, the scenario's)"
        )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in texts.items():
            entry = zipfile.ZipInfo(f"{folder}/{path}", ZIP_DATE_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            archive.writestr(entry, text.encode("utf-8"))
    return buffer.getvalue()


def write_directory(target: Path, files: list[ExportFile], parameter: str = "output") -> None:
    """Write `files` into a new directory `target`, all or nothing: into a temporary directory
    beside it, renamed to `target` at the end (never over an existing path: a file, a device or a
    directory is refused with one line); on any failure nothing is left behind."""
    from prfaas_plan.inputs.files import rename_no_replace, shown, write_error

    if os.path.lexists(target):
        kind = (
            "a directory"
            if target.is_dir()
            else "a file"
            if target.is_file()
            else "a device, pipe or socket"
        )
        raise ConfigError(
            f"{parameter}: {shown(target)} exists ({kind}); give the name of a new directory",
            parameter=parameter,
        )
    parent = target.parent
    if not parent.is_dir():
        problem = "is not a directory" if parent.exists() else "does not exist"
        raise ConfigError(f"{parameter}: {shown(parent)} {problem}", parameter=parameter)
    try:
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}."))
    except OSError as exc:
        raise write_error(target, exc, parameter) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        for file in files:
            path = tmp / file.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(file), encoding="utf-8")
            path.chmod(0o666 & ~umask)
        for directory in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            directory.chmod(0o777 & ~umask)
        rename_no_replace(tmp, target)
    except FileExistsError:
        raise ConfigError(
            f"{parameter}: {shown(target)} appeared while writing; nothing was written there",
            parameter=parameter,
        ) from None
    except OSError as exc:
        raise write_error(target, exc, parameter) from None
    finally:
        with contextlib.suppress(OSError):
            if tmp.exists():
                shutil.rmtree(tmp)
