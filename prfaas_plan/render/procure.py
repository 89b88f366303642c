"""Render `procure` results: one column per bought component (sites in use, the PD cluster),
the cost split, the binding limit; JSON with units in every key; `--pareto`'s frontiers as a
view, JSON, CSV and a figure."""

import csv
from pathlib import Path

import numpy as np

from prfaas_plan import __version__, units
from prfaas_plan.inputs.files import write_atomically
from prfaas_plan.render.views import Document, View, fmt, number
from prfaas_plan.use_cases.procure import ProcureReport, ProcureTtft
from prfaas_plan.use_cases.procure_pareto import LOADED_FRONTIER_STEP, ParetoPlan, ParetoReport


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
        "ttft": _ttft_json(report.ttft),
        "threshold_search": {
            "exact": report.monotone_violation == 0 and report.proven,
            "monotone_violation": report.monotone_violation,
            "proven": report.proven,
        },
        "notes": [NOTE, *_exactness_notes(report)],
    }


def _exactness_notes(report: ProcureReport) -> list[str]:
    """Where the threshold search could not prove its answer exact (solve/procure_exact.py)."""
    notes = []
    if report.monotone_violation > 0:
        notes.append(
            f"The model's per-request work curves are not monotone in the threshold here (by "
            f"up to {report.monotone_violation:.2g} relative, representative lengths on a long "
            "tail): the threshold was also searched on the grid, and the cost is optimal to "
            "about that fraction."
        )
    if not report.proven:
        notes.append(
            "The budget search stopped after its step limit: the rate is within the budget but "
            "not proven the highest."
        )
    return notes


def _ttft_json(ttft: ProcureTtft | None) -> Document | None:
    if ttft is None:
        return None
    loaded = ttft.loaded
    return {
        "percentile": ttft.target.percentile,
        "target_s": ttft.target.target_s,
        "load_rps": ttft.load_rps,
        "stable": loaded.stable,
        "mean_s": number(loaded.mean_s),
        "p50_s": number(loaded.p50_s),
        "p90_s": number(loaded.p90_s),
        "p99_s": number(loaded.p99_s),
        "binds": ttft.binds,
        "capacity_only_sites": ttft.capacity_only_sites,
        "capacity_only_usd_per_hour": float(ttft.capacity_only_usd_per_hour),
        "search": {
            "pairs_evaluated": ttft.pairs_evaluated,
            "pairs": ttft.pairs,
            "multi_site_plans_tried": ttft.headroom_plans,
        },
    }


def _ttft_notes(report: ProcureReport) -> list[str]:
    ttft = report.ttft
    if ttft is None:
        return [
            f"Capacity of this deployment: {report.capacity_rps:.3f} req/s, bound by {report.bound}."
        ]
    name = "mean" if ttft.target.percentile == "mean" else f"P{ttft.target.percentile}"
    figure = ttft.loaded.metric(ttft.target.percentile)
    cost = (
        f"the TTFT target raises the cost from {ttft.capacity_only_usd_per_hour:,.1f} $/h (the "
        f"cheapest deployment reaching {report.target_rps:g} req/s alone) to "
        f"{float(report.point.usd_per_hour):,.1f} $/h"
        if ttft.binds
        else "the cheapest deployment reaching the rate already meets it"
    )
    return [
        f"Capacity of this deployment: {report.capacity_rps:.3f} req/s, bound by {report.bound}.",
        f"{name} TTFT at {ttft.load_rps:g} req/s (Poisson): {figure:.3f} s, target "
        f"{ttft.target.target_s:g} s (P50/P90/P99 {ttft.loaded.p50_s:.3f} / "
        f"{ttft.loaded.p90_s:.3f} / {ttft.loaded.p99_s:.3f} s); {cost}. Searched: every "
        f"single-site plan ({ttft.pairs_evaluated} of {ttft.pairs} (threshold, site) pairs "
        "evaluated, the rest bounded out) and multi-site plans with more capacity than the "
        f"target ({ttft.headroom_plans} tried); a plan splitting its offloaded requests over "
        "several sites queues at each site's own pool and link.",
    ]


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
        *_ttft_notes(report),
        (
            f"Candidates: {len(report.sites)} sites ({', '.join(s.name for s in report.sites)}); "
            if report.sites
            else "Candidates: no PrfaaS site (procurement.sites: []); "
        )
        + f"cost model {report.pricing.cost_model}.",
        NOTE,
        *_exactness_notes(report),
    ]
    title = f"prfaas-plan procure · {report.problem.scenario.name}"
    columns = [s.name for s in sites] + ["PD cluster"]
    return View(title, columns, rows, notes)


# ---- procure --pareto -------------------------------------------------------------------

PARETO_COLUMNS = (
    "frontier", "usd_per_hour", "capacity_rps", "p90_ttft_s", "site", "site_instances",
    "pd_prefill_instances", "pd_decode_instances", "threshold_tokens",
)  # fmt: skip
PARETO_NOTE = (
    "Candidates: every threshold x one PrfaaS site (or none) x its instances x PD split; cost "
    "at Λ_max (GPUs, link port if bought, link volume at Λ_max); P90 TTFT unloaded (unless at a "
    "load below), the site's RTT added to offloaded requests. Reference deployments (the baselines and the scenario's own deployment) are priced the same way, their P90 without an RTT."
)


def _pareto_rows(report: ParetoReport) -> list[dict[str, object]]:
    return [
        {"frontier": name, "usd_per_hour": p.usd_per_hour, "capacity_rps": p.capacity_rps,
         "p90_ttft_s": p.p90_ttft_s, "site": p.site, "site_instances": p.site_instances,
         "pd_prefill_instances": p.pd_prefill_instances,
         "pd_decode_instances": p.pd_decode_instances, "threshold_tokens": p.threshold_tokens}
        for name, plans in (("capacity", report.capacity_frontier), ("ttft", report.ttft_frontier))
        for p in plans
    ]  # fmt: skip


def pareto_to_json(report: ParetoReport) -> Document:
    return {
        "prfaas_plan_version": __version__,
        "scenario": report.problem.scenario.name,
        "cost_model": str(report.pricing.cost_model),
        "target_rps": report.target_rps,
        "ttft_load_rps": report.ttft_load_rps,
        "candidates": report.candidates,
        "capacity_frontier": [r for r in _pareto_rows(report) if r["frontier"] == "capacity"],
        "ttft_frontier": [r for r in _pareto_rows(report) if r["frontier"] == "ttft"],
        "reference_deployments": [
            {
                "name": m.name,
                "usd_per_hour": number(m.usd_per_hour),
                "capacity_rps": m.capacity_rps,
                "p90_ttft_s": number(m.p90_ttft_s),
            }
            for m in report.markers
        ],
        "notes": [PARETO_NOTE],
    }


def pareto_to_csv(report: ParetoReport) -> str:
    """Both frontiers, one plan a row (column `frontier`: capacity or ttft)."""
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=PARETO_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(_pareto_rows(report))
    return out.getvalue()


def _plan_label(p: ParetoPlan) -> str:
    pd = f"PD {p.pd_prefill_instances}+{p.pd_decode_instances}"
    if p.site is None:
        return pd
    return (
        f"{p.site_instances} x {p.site} @ {units.tokens_to_ktokens(p.threshold_tokens):.1f}K, {pd}"
    )


def pareto_view(report: ParetoReport, max_rows: int = 12) -> View:
    """The TTFT frontier in full (it is short) and the capacity frontier thinned to `max_rows`."""
    cap = report.capacity_frontier
    shown = [cap[int(i)] for i in np.unique(np.linspace(0, len(cap) - 1, max_rows).astype(int))]
    rows = [
        (f"Λ {p.capacity_rps:.2f}", [f"{p.usd_per_hour:,.1f}", f"{p.p90_ttft_s:.2f}", _plan_label(p)])
        for p in shown
    ] + [
        (f"P90 {p.p90_ttft_s:.2f} s", [f"{p.usd_per_hour:,.1f}", f"{p.capacity_rps:.2f}", _plan_label(p)])
        for p in report.ttft_frontier
    ]  # fmt: skip
    refs = "; ".join(
        f"{m.name} {fmt(m.usd_per_hour, ',.1f')} $/h, Λ_max {m.capacity_rps:.3f} req/s, "
        f"P90 {m.p90_ttft_s:.2f} s"
        for m in report.markers
    )
    notes = [
        f"{len(cap)} plans on the cost-Λ_max frontier ({len(shown)} shown: Λ_max req/s, $/h, "
        f"P90 s), {len(report.ttft_frontier)} on the cost-P90 frontier among plans reaching "
        f"{report.target_rps:g} req/s ($/h, Λ_max, plan); {report.candidates:,} candidates.",
        f"Reference deployments: {refs}.",
        PARETO_NOTE,
    ]
    if report.ttft_load_rps is not None and not report.ttft_frontier:
        notes.append(
            f"No plan reaching {report.target_rps:g} req/s is stable at {report.ttft_load_rps:g} "
            "req/s in the candidate space: lower the load or allow more instances."
        )
    if report.ttft_load_rps is not None:
        notes.append(
            f"The cost-P90 frontier and the reference deployments' P90 are at "
            f"{report.ttft_load_rps:g} req/s (Poisson arrivals; M/G/c prefill pools and a "
            f"processor-sharing link), each plan the cheapest whose P90 is at least "
            f"{LOADED_FRONTIER_STEP:.0%} below "
            f"the previous one's, its link volume at its Λ_max; the cost-Λ_max frontier's P90 "
            "stays unloaded."
        )
    title = f"prfaas-plan procure, Pareto frontiers · {report.problem.scenario.name}"
    # the middle column holds the P90 on Λ rows and Λ_max on P90 rows: one cell, no "|"
    return View(title, ["$/h", "P90 s / Λ_max", "plan"], rows, notes)


def _p90_label(report: ParetoReport) -> str:
    if report.ttft_load_rps is None:
        return "unloaded P90 TTFT"
    return f"P90 TTFT at {report.ttft_load_rps:g} req/s"


def plot_pareto(report: ParetoReport, plot_path: Path) -> None:
    """Left: cost against Λ_max; right: cost against P90 TTFT, unloaded or at the report's load
    (plans reaching the
    target); the reference deployments marked on both."""
    from prfaas_plan.render.plot import _check_suffix, _pyplot

    _check_suffix(plot_path)
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    cap = report.capacity_frontier
    left.step([p.capacity_rps for p in cap], [p.usd_per_hour for p in cap], where="pre",
              color="black", label="non-dominated plans")  # fmt: skip
    left.plot([p.capacity_rps for p in cap], [p.usd_per_hour for p in cap], "k.", markersize=3)
    ttft = report.ttft_frontier
    right.step([p.p90_ttft_s for p in ttft], [p.usd_per_hour for p in ttft], where="post",
               color="black", label=f"non-dominated, Λ_max ≥ {report.target_rps:g} req/s")  # fmt: skip
    right.plot([p.p90_ttft_s for p in ttft], [p.usd_per_hour for p in ttft], "k.")
    for m, marker in zip(report.markers, ("s", "^", "*"), strict=True):
        left.plot([m.capacity_rps], [m.usd_per_hour], marker, markersize=10, label=m.name)
        shown = "" if np.isfinite(m.p90_ttft_s) else ", overloaded: not drawn"
        right.plot([m.p90_ttft_s], [m.usd_per_hour], marker, markersize=10,
                   label=f"{m.name} (Λ_max {m.capacity_rps:.2f}{shown})")  # fmt: skip
    left.set(xlabel="Λ_max (req/s)", ylabel="cost ($/h)", title="cost against throughput")
    right.set(xlabel=f"{_p90_label(report)} (s)", ylabel="cost ($/h)",
              title="cost against latency")  # fmt: skip
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    fig.suptitle(
        f"procure, Pareto frontiers · {report.problem.scenario.name} ({report.pricing.cost_model})"
    )
    fig.tight_layout()
    write_atomically(plot_path, lambda tmp: fig.savefig(tmp, dpi=120), "plot")
    plt.close(fig)
