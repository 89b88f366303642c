"""Plain Kubernetes, for a stack that has neither llm-d nor Dynamo: one apps/v1 Deployment a pool
(kubernetes/api apps/v1/types.go @ d6dbde39dfe405c153d298c2121971233b88fdce) and a ConfigMap with
the routing rule for a router of your own (Kubernetes itself does not route by prompt length).
"""

from dataclasses import dataclass

from prfaas_plan.export.manifest import (
    ROLE_PD_PREFILL,
    ROLE_PRFAAS,
    Document,
    ExportFile,
    Naming,
    metadata,
    provenance,
    threshold_label,
)
from prfaas_plan.export.note import Note
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.export.stack_cost import threshold_cost
from prfaas_plan.export.workloads import SITE_PD, deployment, pools
from prfaas_plan.inputs.scenario import Problem

STACK = (
    "Kubernetes apps/v1 Deployment and v1 ConfigMap (kubernetes/api apps/v1/types.go @ "
    "d6dbde39dfe405c153d298c2121971233b88fdce)"
)
DEFAULT_IMAGE = "vllm/vllm-openai:v0.10.0"


@dataclass(frozen=True)
class KubernetesOptions:
    image: str
    model_id: str


def build(
    problem: Problem, plan: ExportPlan, naming: Naming, options: KubernetesOptions
) -> tuple[list[ExportFile], Note]:
    held = float(threshold_label(plan.threshold_tokens))
    routing = Document(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(f"{naming.base}-routing", naming, plan),
            "data": {
                "threshold_tokens": threshold_label(plan.threshold_tokens),
                "rule": (
                    f"a request whose uncached prompt has more than threshold_tokens tokens is "
                    f"prefilled by {naming.base}-{ROLE_PRFAAS}, the others by "
                    f"{naming.base}-{ROLE_PD_PREFILL}; every request is decoded by "
                    f"{naming.base}-pd-decode"
                ),
            },
        },
        (
            *provenance(plan),
            "",
            f"threshold_tokens {threshold_label(plan.threshold_tokens)}: the plan's t = "
            f"{plan.threshold_tokens:,.2f} in whole tokens (L > t is L > floor(t)).",
        ),
    )
    files = [ExportFile(f"sites/{SITE_PD}/routing-configmap.yaml", (routing,))]
    for pool in pools(plan):
        doc = deployment(
            plan, naming, pool, image=options.image, model_id=options.model_id, pod_labels={}
        )
        files.append(ExportFile(f"sites/{pool.site}/{pool.role}.yaml", (doc,)))
    note = Note(
        target="kubernetes",
        stack=STACK,
        expressed=(
            "the three pools as Deployments with the plan's replicas, tensor-parallel size and "
            "GPU requests = GPUs per instance;",
            "the threshold and the routing rule as data (ConfigMap) for a router of your own.",
        ),
        differences=(
            "Kubernetes routes nothing by prompt length and moves no KV cache: the routing rule "
            "and the KV transfer between pools are for the router and the engine you provide.",
            f"Lengths are whole tokens: the rule holds t = {held:,.0f} for the plan's "
            f"{plan.threshold_tokens:,.2f}.",
        ),
        costs=(threshold_cost(problem, plan, held),),
    )
    return files, note
