"""Render `procure` results: one column per bought component (sites in use, the PD cluster),
the cost split, the binding limit; JSON with units in every key."""

from prfaas_plan import __version__, units
from prfaas_plan.commands.procure import ProcureReport
from prfaas_plan.render.views import Document, View, fmt, number


def _volume_usd_per_hour(report: ProcureReport) -> list[float]:
    k = report.point.threshold_index
    return [
        units.per_s_to_per_hour(s.usd_per_offloaded_request[k]) * r
        for s, r in zip(report.space.sites, report.point.site_rps, strict=True)
    ]


def procure_to_json(report: ProcureReport) -> Document:
    p, space = report.point, report.space
    volume = _volume_usd_per_hour(report)
    output_tokens = report.problem.system.output_tokens
    tokens_per_hour = units.per_s_to_per_hour(p.served_rps * output_tokens)
    sites = [
        {
            "name": site.name, "gpu": site.gpu, "instances": n,
            "gpus": n * site.gpus_per_instance, "usd_per_gpu_hour": site.usd_per_gpu_hour,
            "price_source": site.price_source, "link_offering": site.link_offering,
            "link_bandwidth_gbps": site.link_bandwidth_gbps, "rtt_s": site.rtt_s,
            "offloaded_rps": r,
            "usd_per_hour": {"gpus": n * rates.usd_per_instance_hour,
                             "link_fixed": rates.fixed_usd_per_hour if n else 0.0,
                             "link_volume": v},
        }
        for site, rates, n, r, v in zip(report.sites, space.sites, p.site_instances, p.site_rps,
                                        volume, strict=True)
        if n > 0
    ]  # fmt: skip
    return {
        "prfaas_plan_version": __version__,
        "scenario": report.problem.scenario.name,
        "goal": {
            "target_rps": report.target_rps,
            "budget_usd_per_hour": report.budget_usd_per_hour,
        },
        "cost_model": str(report.pricing.cost_model),
        "threshold_tokens": number(report.threshold_tokens),
        "offload_fraction": float(space.offload_fraction[p.threshold_index]),
        "sites": sites,
        "candidate_sites": [s.name for s in report.sites],
        "pd_cluster": {
            "gpu": report.problem.scenario.pd_cluster.gpu,
            "pd_prefill_instances": p.pd_prefill_instances,
            "pd_decode_instances": p.pd_decode_instances,
            "usd_per_hour": space.pd_usd_per_instance_hour
            * (p.pd_prefill_instances + p.pd_decode_instances),
        },
        "served_rps": p.served_rps,
        "capacity_rps": report.capacity_rps,
        "bound": report.bound,
        "usd_per_hour_total": float(p.usd_per_hour),
        "usd_per_month_total": units.per_hour_to_per_month(float(p.usd_per_hour)),
        "usd_per_million_output_tokens": number(float(p.usd_per_hour) / tokens_per_hour * 1e6)
        if tokens_per_hour > 0
        else None,
        "notes": [NOTE],
    }


NOTE = (
    "Priced at the served rate (the target, or the highest rate within the budget): GPUs and "
    "link ports by the hour, link volume for the KV the served rate sends."
)


def procure_view(report: ProcureReport) -> View:
    p, space = report.point, report.space
    volume = _volume_usd_per_hour(report)
    used = [j for j, n in enumerate(p.site_instances) if n > 0]
    sites = [report.sites[j] for j in used]
    pd_usd = space.pd_usd_per_instance_hour * (p.pd_prefill_instances + p.pd_decode_instances)
    rows = [
        ("GPU", [s.gpu for s in sites] + [report.problem.scenario.pd_cluster.gpu]),
        ("instances", [str(p.site_instances[j]) for j in used]
         + [f"{p.pd_prefill_instances} PD-P + {p.pd_decode_instances} PD-D"]),
        ("offloaded req/s", [f"{p.site_rps[j]:.3f}" for j in used] + ["—"]),
        ("link (RTT ms)", [f"{s.link_offering} ({units.s_to_ms(s.rtt_s):g})" for s in sites] + ["—"]),
        ("$/h GPUs", [f"{p.site_instances[j] * space.sites[j].usd_per_instance_hour:,.1f}"
                      for j in used] + [f"{pd_usd:,.1f}"]),
        ("$/h link fixed + volume",
         [f"{space.sites[j].fixed_usd_per_hour:,.1f} + {volume[j]:,.1f}" for j in used] + ["—"]),
    ]  # fmt: skip
    goal = (
        f"Cheapest deployment reaching {report.target_rps:g} req/s"
        if report.target_rps is not None
        else f"Highest throughput within {report.budget_usd_per_hour:g} $/h"
    )
    total = float(p.usd_per_hour)
    tokens_per_hour = units.per_s_to_per_hour(p.served_rps * report.problem.system.output_tokens)
    routing = (
        f"threshold {fmt(report.threshold_tokens, ',.0f')} tokens (offloaded share "
        f"{space.offload_fraction[p.threshold_index]:.1%})"
        if used
        else "nothing offloaded (homogeneous PD is the cheapest)"
    )
    notes = [
        f"{goal}: {total:,.1f} $/h ({units.per_hour_to_per_month(total):,.0f} $/month, "
        f"{fmt(total / tokens_per_hour * 1e6 if tokens_per_hour > 0 else None, '.2f')} $ per "
        f"million output tokens) serving {p.served_rps:.3f} req/s; {routing}.",
        f"Capacity of this deployment: {report.capacity_rps:.3f} req/s, bound by {report.bound}.",
        f"Candidates: {len(report.sites)} sites ({', '.join(s.name for s in report.sites)}); "
        f"cost model {report.pricing.cost_model}.",
        NOTE,
    ]
    title = f"prfaas-plan procure · {report.problem.scenario.name}"
    columns = [s.name for s in sites] + ["PD cluster"]
    return View(title, columns, rows, notes)
