"""llm-d: the endpoint picker's EndpointPickerConfig carrying the threshold, and the pools.

Written against llm-d-inference-scheduler's `pd-profile-handler` (docs/architecture.md at
commit 0120663b8b17a16f0f82bee53956e0baa76ff7b6; the config type is gateway-api-inference-
extension apix/config/v1alpha1 EndpointPickerConfig at 8f3432f911a9ccc9a90d0816aa0e4cad62d7a04d).
The handler runs the decode profile, then the prefill profile only when the uncached part of
the prompt is at least `threshold` long; its code measures the prompt in characters
(`len(prompt)`, llm-d's estimate being 4 characters a token), so the threshold is written in
characters: chars_per_token × (⌊t⌋ + 1), which sends exactly the prompts of more than ⌊t⌋
tokens (at that many characters a token) to the prefill pool, as `L > t` does for whole tokens.
"""

from dataclasses import dataclass
from typing import Any

import yaml

from prfaas_plan.errors import ConfigError
from prfaas_plan.export.manifest import (
    LABEL_PREFIX,
    ROLE_PRFAAS,
    Document,
    ExportFile,
    Naming,
    metadata,
    provenance,
)
from prfaas_plan.export.note import Note
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.export.stack_cost import threshold_cost
from prfaas_plan.export.workloads import SITE_PD, Pool, deployment, pools
from prfaas_plan.inputs.scenario import Problem

STACK = (
    "llm-d-inference-scheduler pd-profile-handler (threshold, hashBlockSize; docs/architecture.md "
    "@ 0120663b8b17a16f0f82bee53956e0baa76ff7b6), EndpointPickerConfig of "
    "gateway-api-inference-extension apix/config/v1alpha1 @ 8f3432f911a9ccc9a90d0816aa0e4cad62d7a04d"
)
EPP_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
ROLE_LABEL = "llm-d.ai/role"  # what llm-d's prefill-filter / decode-filter read
# the handler's threshold is a Go int read from JSON; kept within a 32-bit int to be safe
MAX_THRESHOLD_CHARS = 2**31 - 1
DEFAULT_CHARS_PER_TOKEN = 4  # llm-d's own estimate (averageCharactersPerToken)
HASH_BLOCK_CHARS = 64  # prefix-cache-scorer's block, which the handler must share
DEFAULT_IMAGE = "ghcr.io/llm-d/llm-d:v0.2.0"
CHARS_PER_TOKEN_ANNOTATION = f"{LABEL_PREFIX}/prompt-chars-per-token"


@dataclass(frozen=True)
class LlmdOptions:
    image: str
    model_id: str
    chars_per_token: int = DEFAULT_CHARS_PER_TOKEN


def threshold_chars(threshold_tokens: float, chars_per_token: int) -> int:
    """The handler's threshold: prompts of at least this many uncached characters are prefilled
    by the prefill pool, i.e. those of more than ⌊t⌋ tokens at `chars_per_token`."""
    chars = chars_per_token * (int(threshold_tokens // 1) + 1)
    if chars > MAX_THRESHOLD_CHARS:
        raise ConfigError(
            f"threshold_tokens {threshold_tokens:,.0f} is {chars:,} prompt characters at "
            f"{chars_per_token} a token, beyond what llm-d's pd-profile-handler threshold holds "
            f"(at most {MAX_THRESHOLD_CHARS:,}); the plan cannot be exported to llm-d",
            parameter="threshold_tokens",
        )
    return chars


def stack_threshold_tokens(chars: int, chars_per_token: int) -> float:
    """The threshold t (L > t offloaded) an llm-d threshold of `chars` holds: ⌈chars / cpt⌉ − 1."""
    return float(-(-chars // chars_per_token) - 1)


def epp_config(chars: int) -> dict[str, Any]:
    """The EndpointPickerConfig: decode profile on every decode-capable PD pod, prefill profile
    on the PrfaaS pool only, the handler choosing prefill by the uncached prompt length."""
    return {
        "apiVersion": EPP_API_VERSION,
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "prefill-header-handler"},
            {"type": "prefix-cache-scorer", "parameters": {"hashBlockSize": HASH_BLOCK_CHARS}},
            {"type": "queue-scorer"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {
                "name": "prfaas-pool",
                "type": "by-label-selector",
                "parameters": {"matchLabels": {f"{LABEL_PREFIX}/role": ROLE_PRFAAS}},
            },
            {"type": "max-score-picker"},
            {
                "type": "pd-profile-handler",
                "parameters": {"threshold": chars, "hashBlockSize": HASH_BLOCK_CHARS},
            },
        ],
        "schedulingProfiles": [
            {
                "name": "prefill",
                "plugins": [
                    {"pluginRef": "prefill-filter"},
                    {"pluginRef": "prfaas-pool"},
                    {"pluginRef": "queue-scorer", "weight": 1},
                    {"pluginRef": "prefix-cache-scorer", "weight": 2},
                    {"pluginRef": "max-score-picker"},
                ],
            },
            {
                "name": "decode",
                "plugins": [
                    {"pluginRef": "decode-filter"},
                    {"pluginRef": "queue-scorer", "weight": 1},
                    {"pluginRef": "prefix-cache-scorer", "weight": 2},
                    {"pluginRef": "max-score-picker"},
                ],
            },
        ],
    }


def build(
    problem: Problem, plan: ExportPlan, naming: Naming, options: LlmdOptions
) -> tuple[list[ExportFile], Note]:
    cpt = options.chars_per_token
    chars = threshold_chars(plan.threshold_tokens, cpt)
    held = stack_threshold_tokens(chars, cpt)
    threshold_comments = (
        f"pd-profile-handler threshold {chars:,}: the plan's t = {plan.threshold_tokens:,.2f} "
        f"tokens as prompt characters, {cpt} x (floor(t) + 1) = {cpt} x {int(held) + 1:,}:",
        "llm-d prefills on the prefill profile's pod when the uncached prompt has at least this "
        f"many characters, i.e. more than {int(held):,} tokens at {cpt} characters a token.",
    )
    config = epp_config(chars)
    epp = Document(config, (*provenance(plan), "", *threshold_comments))
    configmap = Document(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                **metadata(f"{naming.base}-epp-config", naming, plan),
                "annotations": {CHARS_PER_TOKEN_ANNOTATION: str(cpt)},
            },
            "data": {"epp-config.yaml": yaml.safe_dump(config, sort_keys=False)},
        },
        (
            *provenance(plan),
            "",
            "The EndpointPickerConfig of epp-config.yaml, to mount into the endpoint picker "
            "(--configFile); it has no metadata of its own, so the plan's labels are here.",
            *threshold_comments,
        ),
    )
    prfaas, pd_prefill, pd_decode = pools(plan)
    kv = ("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')

    def pool_file(pool: Pool, role: str, comments: tuple[str, ...] = ()) -> ExportFile:
        doc = deployment(
            plan, naming, pool, image=options.image, model_id=options.model_id,
            pod_labels={ROLE_LABEL: role}, extra_args=kv, extra_comments=comments,
        )  # fmt: skip
        return ExportFile(f"sites/{pool.site}/{pool.role}.yaml", (doc,))

    files = [
        ExportFile(f"sites/{SITE_PD}/epp-config.yaml", (epp,)),
        ExportFile(f"sites/{SITE_PD}/epp-configmap.yaml", (configmap,)),
        pool_file(prfaas, "prefill"),
        pool_file(
            pd_prefill,
            "both",
            (
                "llm-d.ai/role both: llm-d has one prefill pool (the PrfaaS pods); the short "
                "prompts are prefilled on the decode profile's pod, so the PD-P pods serve as "
                "decode pods that prefill locally (see NOTE.md).",
            ),
        ),
        pool_file(pd_decode, "decode"),
    ]
    note = Note(
        target="llm-d",
        stack=STACK,
        expressed=(
            f"the threshold, as pd-profile-handler threshold {chars:,} prompt characters "
            f"(= {cpt} characters a token x {int(held) + 1:,} tokens; long prompts to the "
            "prefill profile);",
            f"the pools and their replicas: PrfaaS prefill {prfaas.replicas} "
            f"(llm-d.ai/role prefill), PD-P {pd_prefill.replicas}, PD-D {pd_decode.replicas}; "
            "tensor-parallel size and GPU requests = GPUs per instance;",
            "the prefill profile filters to the PrfaaS pool (prefill-filter + by-label-selector).",
        ),
        differences=(
            "llm-d has one prefill pool: a prompt below the threshold is prefilled by the decode "
            "pod the decode profile chose, not by a separate local prefill pool. The PD-P pods "
            "are therefore labelled llm-d.ai/role both (decode-capable): the "
            f"{pd_prefill.replicas + pd_decode.replicas} PD pods share short prefills and "
            "decodes; the model can only evaluate the plan's fixed split "
            "(an upper bound: the interference of prefills with the decode SLO is not modelled).",
            "llm-d measures the prompt in characters, not tokens: the threshold holds at "
            f"{cpt} characters a token (prompt_chars_per_token); a tokenizer averaging c "
            f"characters a token moves the effective threshold to {chars:,} / c tokens.",
            "Lengths are whole tokens: the stack holds t = "
            f"{held:,.0f} (L > {held:,.0f}) for the plan's {plan.threshold_tokens:,.2f}.",
            "One PrfaaS cluster: a plan over several PrfaaS sites (procure) is not exportable "
            "by this command; the handler has one prefill profile.",
        ),
        costs=(threshold_cost(problem, plan, held),),
    )
    return files, note
