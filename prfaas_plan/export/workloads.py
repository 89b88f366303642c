"""Kubernetes Deployments for the plan's three pools (apps/v1), shared by the llm-d and plain
Kubernetes targets: one Deployment per pool, replicas = the plan's instances, one vLLM server a
pod with tensor-parallel size = GPUs per instance and as many GPUs requested.
"""

from dataclasses import dataclass
from typing import Any

from prfaas_plan.export.manifest import (
    LABEL_PREFIX,
    ROLE_PD_DECODE,
    ROLE_PD_PREFILL,
    ROLE_PRFAAS,
    Document,
    Naming,
    metadata,
    provenance,
)
from prfaas_plan.export.plan_source import ExportPlan

GPU_RESOURCE = "nvidia.com/gpu"
SITE_PRFAAS = "prfaas"
SITE_PD = "pd"


@dataclass(frozen=True)
class Pool:
    role: str  # manifest.ROLE_*
    site: str  # SITE_PRFAAS | SITE_PD
    replicas: int
    gpus_per_instance: int
    gpu: str
    replicas_source: str  # which plan field the replica count is
    gpus_source: str


def pools(plan: ExportPlan) -> tuple[Pool, Pool, Pool]:
    """The plan's pools: PrfaaS prefill, PD prefill (PD-P), PD decode (PD-D)."""
    return (
        Pool(
            ROLE_PRFAAS, SITE_PRFAAS, plan.prfaas_instances, plan.prfaas_gpus_per_instance,
            plan.prfaas_gpu, "plan.prfaas_instances (N_prfaas)",
            "scenario prfaas_cluster.gpus_per_instance",
        ),
        Pool(
            ROLE_PD_PREFILL, SITE_PD, plan.pd_prefill_instances, plan.pd_gpus_per_instance,
            plan.pd_gpu, "plan.pd_prefill_instances (N_p, PD-P)",
            "scenario pd_cluster.gpus_per_instance",
        ),
        Pool(
            ROLE_PD_DECODE, SITE_PD, plan.pd_decode_instances, plan.pd_gpus_per_instance,
            plan.pd_gpu, "plan.pd_decode_instances (N_d, PD-D)",
            "scenario pd_cluster.gpus_per_instance",
        ),
    )  # fmt: skip


def vllm_args(model_id: str, gpus_per_instance: int, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        "--model", model_id, "--tensor-parallel-size", str(gpus_per_instance), "--port", "8000",
        *extra,
    ]  # fmt: skip


def deployment(
    plan: ExportPlan,
    naming: Naming,
    pool: Pool,
    *,
    image: str,
    model_id: str,
    pod_labels: dict[str, str],
    extra_args: tuple[str, ...] = (),
    extra_comments: tuple[str, ...] = (),
) -> Document:
    """One pool as an apps/v1 Deployment."""
    name = f"{naming.base}-{pool.role}"
    selector = {f"{LABEL_PREFIX}/deployment": name}
    labels = {f"{LABEL_PREFIX}/role": pool.role, f"{LABEL_PREFIX}/site": pool.site}
    gpus = str(pool.gpus_per_instance)
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, naming, plan, labels),
        "spec": {
            "replicas": pool.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": {
                        **selector, **labels, **pod_labels,
                        f"{LABEL_PREFIX}/gpu": pool.gpu,
                    },
                },
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": image,
                            "args": vllm_args(model_id, pool.gpus_per_instance, extra_args),
                            "ports": [{"containerPort": 8000, "name": "http"}],
                            "resources": {
                                "requests": {GPU_RESOURCE: gpus},
                                "limits": {GPU_RESOURCE: gpus},
                            },
                        }
                    ]
                },
            },
        },
    }  # fmt: skip
    comments = (
        *provenance(plan),
        "",
        f"replicas {pool.replicas}: {pool.replicas_source}.",
        f"{GPU_RESOURCE} {gpus} and --tensor-parallel-size {gpus}: {pool.gpus_source} "
        f"(one model replica on {gpus} x {pool.gpu}; schedule on {pool.gpu} nodes, e.g. with a "
        "nodeSelector of your cluster's GPU label).",
        *extra_comments,
    )
    return Document(body, comments)
