"""NVIDIA Dynamo: one DynamoGraphDeployment a site, the prefill and decode workers of the plan.

Written against the DynamoGraphDeployment CRD (nvidia.com/v1alpha1) of ai-dynamo/dynamo at
commit 020073063688f0288505ac584654b1802822cdb0 (deploy/cloud/operator/config/crd/bases/
nvidia.com_dynamographdeployments.yaml; services as in api/v1alpha1/
dynamocomponentdeployment_types.go) and its vLLM workers (`python3 -m dynamo.vllm`, a prefill
worker with --is-prefill-worker, as components/backends/vllm/deploy/disagg.yaml). At that
version a decode worker sends every request to a prefill worker of its Dynamo namespace in turn
(`prefill_worker_client.round_robin`): there is no length threshold (the conditional
disaggregation of the earlier SDK examples, --max-local-prefill-length, is not in this backend).
"""

from dataclasses import dataclass
from typing import Any

from prfaas_plan.export.manifest import (
    LABEL_PREFIX,
    Document,
    ExportFile,
    Naming,
    metadata,
    provenance,
)
from prfaas_plan.export.note import Note
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.export.stack_cost import round_robin_cost, threshold_cost
from prfaas_plan.export.workloads import SITE_PD, SITE_PRFAAS, Pool, pools
from prfaas_plan.inputs.scenario import Problem

STACK = (
    "NVIDIA Dynamo DynamoGraphDeployment nvidia.com/v1alpha1 (ai-dynamo/dynamo "
    "deploy/cloud/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml @ "
    "020073063688f0288505ac584654b1802822cdb0), vLLM backend workers"
)
DEFAULT_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.3.2"
SERVICE_NAMES = {
    "prfaas-prefill": "PrfaasPrefillWorker",
    "pd-prefill": "VllmPrefillWorker",
    "pd-decode": "VllmDecodeWorker",
}


@dataclass(frozen=True)
class DynamoOptions:
    image: str
    model_id: str


def _worker(plan: ExportPlan, pool: Pool, namespace: str, options: DynamoOptions) -> dict[str, Any]:
    gpus = str(pool.gpus_per_instance)
    prefill = " --is-prefill-worker" if pool.role != "pd-decode" else ""
    command = (
        f"python3 -m dynamo.vllm --model {options.model_id} --tensor-parallel-size {gpus}{prefill}"
    )
    return {
        "dynamoNamespace": namespace,
        "componentType": "worker",
        "labels": {f"{LABEL_PREFIX}/role": pool.role, f"{LABEL_PREFIX}/site": pool.site},
        "replicas": pool.replicas,
        "resources": {"requests": {"gpu": gpus}, "limits": {"gpu": gpus}},
        "extraPodSpec": {
            "mainContainer": {"name": "main", "image": options.image, "args": [command]}
        },
    }


def _comments(plan: ExportPlan, site_pools: tuple[Pool, ...]) -> tuple[str, ...]:
    lines = [*provenance(plan), ""]
    for pool in site_pools:
        lines.append(
            f"{SERVICE_NAMES[pool.role]}: replicas {pool.replicas} = {pool.replicas_source}; "
            f"gpu {pool.gpus_per_instance} and --tensor-parallel-size {pool.gpus_per_instance} "
            f"= {pool.gpus_source} ({pool.gpu})."
        )
    lines.append(
        "Dynamo has no length threshold: the plan's t is in the labels only (see NOTE.md)."
    )
    return tuple(lines)


def build(
    problem: Problem, plan: ExportPlan, naming: Naming, options: DynamoOptions
) -> tuple[list[ExportFile], Note]:
    prfaas, pd_prefill, pd_decode = pools(plan)
    namespace = naming.base  # one Dynamo namespace: the decode workers see every prefill worker
    pd_graph = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": metadata(f"{naming.base}-{SITE_PD}", naming, plan),
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "dynamoNamespace": namespace,
                    "componentType": "main",
                    "replicas": 1,
                    "extraPodSpec": {
                        "mainContainer": {
                            "name": "main",
                            "image": options.image,
                            "args": ["python3 -m dynamo.frontend --http-port 8000"],
                        }
                    },
                },
                SERVICE_NAMES[pd_decode.role]: _worker(plan, pd_decode, namespace, options),
                SERVICE_NAMES[pd_prefill.role]: _worker(plan, pd_prefill, namespace, options),
            },
        },
    }
    prfaas_graph = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": metadata(f"{naming.base}-{SITE_PRFAAS}", naming, plan),
        "spec": {
            "backendFramework": "vllm",
            "services": {SERVICE_NAMES[prfaas.role]: _worker(plan, prfaas, namespace, options)},
        },
    }
    files = [
        ExportFile(
            f"sites/{SITE_PD}/dynamo-graph.yaml",
            (Document(pd_graph, _comments(plan, (pd_decode, pd_prefill))),),
        ),
        ExportFile(
            f"sites/{SITE_PRFAAS}/dynamo-graph.yaml",
            (Document(prfaas_graph, _comments(plan, (prfaas,))),),
        ),
    ]
    blind = round_robin_cost(problem, plan)
    note = Note(
        target="dynamo",
        stack=STACK,
        expressed=(
            f"the workers and their replicas: {SERVICE_NAMES[prfaas.role]} {prfaas.replicas} "
            f"(PrfaaS site), {SERVICE_NAMES[pd_prefill.role]} {pd_prefill.replicas} and "
            f"{SERVICE_NAMES[pd_decode.role]} {pd_decode.replicas} (PD site), GPUs per worker "
            "as resources gpu and tensor-parallel size;",
            f"one Dynamo namespace ({namespace}) for both sites, so that the decode workers "
            "reach the PrfaaS prefill workers (it needs the sites' etcd/NATS shared).",
        ),
        differences=(
            "Dynamo has no length threshold at this version: every request is prefilled on a "
            "prefill worker taken in turn (round-robin), long or short, so the "
            f"{prfaas.replicas + pd_prefill.replicas} prefill workers of both sites share all "
            "lengths alike. The plan's threshold is carried in labels only. Modelled below: the "
            "length-blind split (each worker sees the whole length distribution, the slowest "
            "worker binds); and, for comparison, the plan's own configuration (what a router "
            "with a threshold would give).",
            "One PrfaaS cluster: a plan over several PrfaaS sites (procure) is not exportable "
            "by this command.",
        ),
        costs=(blind, threshold_cost(problem, plan, plan.threshold_tokens)),
    )
    return files, note
