"""Render costs (use_cases/cost.py): the fields of their JSON blocks (render/fields.py), with
the unit in every key (`usd_per_hour`, `usd_per_million_output_tokens`, ...), and table rows
and notes for the plan and evaluate views."""

from collections.abc import Callable, Sequence
from operator import attrgetter

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Evaluation
from prfaas_plan.analytic.cost import DeploymentCost, LinkPrice
from prfaas_plan.render.fields import Fields, Leaf, at
from prfaas_plan.render.views import Document, fmt, number
from prfaas_plan.use_cases.cost import EqualCost, PlanCost
from prfaas_plan.use_cases.plan import Deployment


def _offering_name(link: LinkPrice | None) -> str | None:
    return link.name if link else None


DEPLOYMENT_COST: Fields = {  # of a DeploymentCost
    "usd_per_hour": {
        "prfaas_gpus": Leaf("prfaas_gpus_usd_per_hour"),
        "pd_gpus": Leaf("pd_gpus_usd_per_hour"),
        "link_fixed": Leaf("link_fixed_usd_per_hour"),
        "link_volume": Leaf("link_volume_usd_per_hour"),
        "total": Leaf("total_usd_per_hour"),
    },
    "usd_per_month_total": Leaf("total_usd_per_hour", units.per_hour_to_per_month),
    "link_offering": Leaf("link", _offering_name),
    "utilization": Leaf("utilization"),
    "served_rps": Leaf("served_rps"),
    "billed_egress_bytes_per_s": Leaf("egress_bytes_per_s"),
    "usd_per_million_output_tokens": Leaf("usd_per_million_output_tokens", number),
    "usd_per_thousand_requests": Leaf("usd_per_thousand_requests", number),
}


def _total_or_none(cost: DeploymentCost | None) -> float | None:
    return cost.total_usd_per_hour if cost else None


def _prefill_instances_or_none(evaluation: Evaluation | None) -> int | None:
    return evaluation.configuration.pd_prefill_instances if evaluation else None


EQUAL_COST: Fields = {  # of an EqualCost
    "budget_usd_per_hour": Leaf("budget_usd_per_hour"),
    "pd_instances": Leaf("pd_instances"),
    "system_rps": Leaf("system_throughput_rps"),
    "usd_per_hour_total": Leaf("cost", _total_or_none),
    "pd_prefill_instances": Leaf("evaluation", _prefill_instances_or_none),
}


def _gain(cost: str, rps: str, which: Callable[[PlanCost, float], float]) -> Leaf:
    """number(which(<the PlanCost at `cost`>, <the throughput at `rps`>)), of the report."""
    cost_of, rps_of = attrgetter(cost), attrgetter(rps)
    return Leaf("", lambda report: number(which(cost_of(report), rps_of(report))))


def plan_cost_fields(cost: str, rps: str) -> Fields:
    """The cost of a report's deployment (its PlanCost at path `cost`, its Λ_max at `rps`)
    and both equal-cost comparisons: `equal_cost_homogeneous_pd` (the all-in $/hour; its
    keys unchanged since it was the only one) and `equal_gpu_spend_homogeneous_pd` (the GPU
    $/hour only, the paper's comparison)."""
    return {
        **at(f"{cost}.deployment", DEPLOYMENT_COST),
        "equal_cost_homogeneous_pd": at(f"{cost}.equal_cost", EQUAL_COST),
        "speedup_vs_equal_cost_homogeneous": _gain(cost, rps, PlanCost.gain_vs_equal_cost),
        "equal_gpu_spend_homogeneous_pd": at(f"{cost}.equal_gpu_spend", EQUAL_COST),
        "speedup_vs_equal_gpu_spend_homogeneous": _gain(
            cost, rps, PlanCost.gain_vs_equal_gpu_spend
        ),
    }


def _offerings_json(links: Sequence[LinkPrice]) -> list[Document]:
    return [
        {"name": x.name, "fixed_usd_per_hour": x.fixed_usd_per_hour, "usd_per_gb": x.usd_per_gb,
         "bandwidth_bytes_per_s": x.bandwidth_bytes_per_s, "rtt_s": x.rtt_s}
        for x in links
    ]  # fmt: skip


PRICES: Fields = {  # of a Pricing: the prices used and where each comes from (under `inputs`)
    "cost_model": Leaf("cost_model", str),
    "utilization": Leaf("utilization"),
    "prfaas_usd_per_gpu_hour": Leaf("prfaas.usd_per_gpu_hour"),
    "prfaas_price_source": Leaf("prfaas.source"),
    "pd_usd_per_gpu_hour": Leaf("pd.usd_per_gpu_hour"),
    "pd_price_source": Leaf("pd.source"),
    "link_offerings": Leaf("links", _offerings_json),
}


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
