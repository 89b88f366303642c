"""Render costs (use_cases/cost.py): JSON blocks with the unit in every key (`usd_per_hour`,
`usd_per_million_output_tokens`, ...), table rows and notes for the plan and evaluate views."""

from prfaas_plan import units
from prfaas_plan.analytic.cost import DeploymentCost
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.render.views import Document, fmt, number
from prfaas_plan.use_cases.cost import EqualCost, PlanCost
from prfaas_plan.use_cases.plan import Deployment


def deployment_cost_json(c: DeploymentCost) -> Document:
    return {
        "usd_per_hour": {
            "prfaas_gpus": c.prfaas_gpus_usd_per_hour,
            "pd_gpus": c.pd_gpus_usd_per_hour,
            "link_fixed": c.link_fixed_usd_per_hour,
            "link_volume": c.link_volume_usd_per_hour,
            "total": c.total_usd_per_hour,
        },
        "usd_per_month_total": units.per_hour_to_per_month(c.total_usd_per_hour),
        "link_offering": c.link.name if c.link else None,
        "utilization": c.utilization,
        "served_rps": c.served_rps,
        "billed_egress_bytes_per_s": c.egress_bytes_per_s,
        "usd_per_million_output_tokens": number(c.usd_per_million_output_tokens),
        "usd_per_thousand_requests": number(c.usd_per_thousand_requests),
    }


def _equal_cost_json(e: EqualCost) -> Document:
    return {
        "budget_usd_per_hour": e.budget_usd_per_hour,
        "pd_instances": e.pd_instances,
        "system_rps": e.system_throughput_rps,
        "usd_per_hour_total": e.cost.total_usd_per_hour if e.cost else None,
        "pd_prefill_instances": e.evaluation.configuration.pd_prefill_instances
        if e.evaluation
        else None,
    }


def plan_cost_json(cost: PlanCost, system_throughput_rps: float) -> Document:
    """The deployment's cost and both equal-cost comparisons: `equal_cost_homogeneous_pd` (the
    all-in $/hour; its keys unchanged since it was the only one) and
    `equal_gpu_spend_homogeneous_pd` (the GPU $/hour only, the paper's comparison)."""
    return {
        **deployment_cost_json(cost.deployment),
        "equal_cost_homogeneous_pd": _equal_cost_json(cost.equal_cost),
        "speedup_vs_equal_cost_homogeneous": number(cost.gain_vs_equal_cost(system_throughput_rps)),
        "equal_gpu_spend_homogeneous_pd": _equal_cost_json(cost.equal_gpu_spend),
        "speedup_vs_equal_gpu_spend_homogeneous": number(
            cost.gain_vs_equal_gpu_spend(system_throughput_rps)
        ),
    }


def prices_json(p: Pricing) -> Document:
    """The prices used and where each comes from (goes under `inputs`, beside the tables)."""
    return {
        "cost_model": str(p.cost_model),
        "utilization": p.utilization,
        "prfaas_usd_per_gpu_hour": p.prfaas.usd_per_gpu_hour,
        "prfaas_price_source": p.prfaas.source,
        "pd_usd_per_gpu_hour": p.pd.usd_per_gpu_hour,
        "pd_price_source": p.pd.source,
        "link_offerings": [
            {"name": x.name, "fixed_usd_per_hour": x.fixed_usd_per_hour, "usd_per_gb": x.usd_per_gb,
             "bandwidth_bytes_per_s": x.bandwidth_bytes_per_s, "rtt_s": x.rtt_s}
            for x in p.links
        ],
    }  # fmt: skip


def cost_rows(deployments: list[Deployment]) -> list[tuple[str, list[str]]]:
    """Rows for each priced deployment (none when unpriced)."""
    costs = [d.cost for d in deployments]
    if any(c is None for c in costs):
        return []
    priced = [c for c in costs if c is not None]
    return [
        ("$/h GPUs PrfaaS + PD",
         [f"{c.prfaas_gpus_usd_per_hour:,.0f} + {c.pd_gpus_usd_per_hour:,.0f}" for c in priced]),
        ("$/h link fixed + volume",
         [f"{c.link_fixed_usd_per_hour:,.1f} + {c.link_volume_usd_per_hour:,.1f}" for c in priced]),
        ("$/h total", [f"{c.total_usd_per_hour:,.0f}" for c in priced]),
        ("$ / M output tokens", [fmt(c.usd_per_million_output_tokens, ".2f") for c in priced]),
        ("$ / 1K requests", [fmt(c.usd_per_thousand_requests, ".2f") for c in priced]),
    ]  # fmt: skip


def _equal_cost_text(e: EqualCost, gpu: str, gain: float) -> str:
    """'<budget> $/h buys <n> <gpu> PD instances in homogeneous PD (...), Λ_max ...; this plan
    gives <gain>× that.'"""
    bought = ""
    if e.evaluation is not None and e.cost is not None:
        c = e.evaluation.configuration
        bought = (
            f" (PD-P/PD-D {c.pd_prefill_instances}/{c.pd_decode_instances}, "
            f"{e.cost.total_usd_per_hour:,.0f} $/h)"
        )
    return (
        f"{e.budget_usd_per_hour:,.0f} $/h buys {e.pd_instances} {gpu} PD instances in "
        f"homogeneous PD{bought}, Λ_max {e.system_throughput_rps:.3f} req/s; this plan gives "
        f"{fmt(gain, '.3f')}× that."
    )


def cost_notes(cost: PlanCost | None, system_throughput_rps: float) -> list[str]:
    if cost is None:
        return []
    p, c = cost.pricing, cost.deployment
    link = (
        f"link {c.link.name} ({c.link.fixed_usd_per_hour:.2f} $/h fixed + {c.link.usd_per_gb:g} $/GB, "
        f"{units.per_hour_to_per_month(c.link_volume_usd_per_hour):,.0f} $/month of volume at "
        f"{units.bytes_per_s_to_gbps(c.egress_bytes_per_s):.2f} Gbps)"
        if c.link
        else "no link"
    )
    rps = system_throughput_rps
    return [
        f"Cost ({p.cost_model}, at {c.utilization:.0%} of Λ_max): {p.prfaas.gpu} "
        f"{p.prfaas.usd_per_gpu_hour:.2f} $/GPU-h ({p.prfaas.source}), {p.pd.gpu} "
        f"{p.pd.usd_per_gpu_hour:.2f} $/GPU-h ({p.pd.source}); {link}.",
        "Equal cost, GPU spend (the paper's comparison: the plan's GPUs only): "
        + _equal_cost_text(cost.equal_gpu_spend, p.pd.gpu, cost.gain_vs_equal_gpu_spend(rps)),
        f"Equal cost, all-in (GPUs + link fixed + volume at {c.utilization:.0%} of Λ_max): "
        + _equal_cost_text(cost.equal_cost, p.pd.gpu, cost.gain_vs_equal_cost(rps)),
    ]
