"""`procure`'s candidate sites: each PrfaaS site (GPU type x price x link offering), the default
set (every GPU with a prefill profile for the model x every link offering between datacentres), the
model that evaluates their rates at any threshold, and the prices procure buys at. No printing."""

import dataclasses
from dataclasses import dataclass

from prfaas_plan import plausible, units
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.choices import CostModel, Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.catalog_files import LinkOffering
from prfaas_plan.inputs.links import link_offering_for
from prfaas_plan.inputs.pricing import Pricing, gpu_hour_price, resolve_pricing
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.inputs.scenario_schema import SiteSpec
from prfaas_plan.solve.procure_exact import ProcureModel, SitePrices
from prfaas_plan.solve.procure_space import ProcureSpace
from prfaas_plan.solve.search import milp_threshold_grid


@dataclass(frozen=True)
class Site:
    name: str
    gpu: str
    gpus_per_instance: int
    usd_per_gpu_hour: float
    price_source: str
    link_offering: str
    link_bandwidth_gbps: float
    rtt_s: float


def default_sites(catalog: Catalog, problem: Problem) -> list[SiteSpec]:
    """Every GPU with a prefill profile for the model x every link offering between datacentres
    (a colocation cross-connect only when a site names it: it assumes one site)."""
    s = problem.scenario
    gpus = catalog.prefill_gpus(s.model, s.prfaas_cluster.gpus_per_instance)
    links = [n for n in catalog.link_offering_names() if not catalog.link_offering(n).colocated]
    return [
        SiteSpec(name=f"{gpu}.{link}", gpu=gpu, link_offering=link)
        for gpu in gpus
        for link in links
    ]


def _site(problem: Problem, pricing: Pricing, catalog: Catalog, spec: SiteSpec,
          offerings: dict[str, LinkOffering], overrides: dict[str, float]) -> Site:  # fmt: skip
    where = f"{problem.source}: procurement.sites[{spec.name}]: "
    offering = offerings[spec.link_offering]
    if spec.usd_per_gpu_hour is not None:
        price, source = spec.usd_per_gpu_hour, f"{where}usd_per_gpu_hour"
    else:
        cost = problem.scenario.cost
        in_scenario = dict(cost.gpu_prices_usd_per_gpu_hour) if cost else {}
        found = gpu_hour_price(catalog, spec.gpu, pricing.cost_model, overrides, in_scenario, where)
        price, source = found.usd_per_gpu_hour, found.source
    rtt_ms = offering.rtt_ms if spec.rtt_ms is None else spec.rtt_ms
    return Site(
        spec.name, spec.gpu, problem.scenario.prfaas_cluster.gpus_per_instance, price, source,
        offering.name, offering.bandwidth_gbps, units.ms_to_s(rtt_ms),
    )  # fmt: skip


def procure_space(
    catalog: Catalog,
    problem: Problem,
    pricing: Pricing,
    gpu_prices: dict[str, float] | None = None,
    max_instances_per_site: int | None = None,
    mode: Mode = Mode.PAPER,
) -> tuple[tuple[Site, ...], ProcureSpace]:
    """The candidate sites and their rates on the MILP's threshold grid."""
    sites, space, _ = procure_candidates(
        catalog, problem, pricing, gpu_prices, max_instances_per_site, mode
    )
    return sites, space


def procure_candidates(
    catalog: Catalog,
    problem: Problem,
    pricing: Pricing,
    gpu_prices: dict[str, float] | None = None,
    max_instances_per_site: int | None = None,
    mode: Mode = Mode.PAPER,
) -> tuple[tuple[Site, ...], ProcureSpace, tuple[ServingSystem, ...]]:
    """`procure_space`, and each site's serving system (its prefill curve and link)."""
    sites, model = procure_model(
        catalog, problem, pricing, gpu_prices, max_instances_per_site, mode
    )
    return sites, model.space(milp_threshold_grid(problem.workload)), model.site_systems


def procure_model(
    catalog: Catalog,
    problem: Problem,
    pricing: Pricing,
    gpu_prices: dict[str, float] | None = None,
    max_instances_per_site: int | None = None,
    mode: Mode = Mode.PAPER,
) -> tuple[tuple[Site, ...], ProcureModel]:
    """The candidate sites and the model that evaluates their rates at any threshold."""
    spec = problem.scenario.procurement
    given = spec.sites if spec is not None else None
    specs = list(given) if given is not None else default_sites(catalog, problem)
    if max_instances_per_site is not None:
        plausible.check_in_range(
            "max_instances_per_site", max_instances_per_site, 0,
            plausible.MAX_PROCURE_INSTANCES_PER_SITE, "instances",
        )  # fmt: skip
        specs = [s.model_copy(update={"max_instances": max_instances_per_site}) for s in specs]
    if not specs and given is None:  # `sites: []` asks for the PD cluster alone
        raise ConfigError(
            f"procure has no candidate PrfaaS site: no GPU has a prefill profile for "
            f"{problem.scenario.model} at {problem.scenario.prfaas_cluster.gpus_per_instance} GPUs "
            "per instance; list procurement.sites, or give `sites: []` to buy the PD cluster alone",
            parameter="procurement.sites",
        )
    if len(specs) > plausible.MAX_PROCURE_SITES:
        raise ConfigError(
            f"procure takes at most {plausible.MAX_PROCURE_SITES} candidate sites, got {len(specs)}",
            parameter="procurement.sites",
        )
    offerings: dict[str, LinkOffering] = {}  # each read once, an unknown one named where used
    for s in specs:
        if s.link_offering not in offerings:
            where = f"{problem.source}: procurement.sites[{s.name}]: "
            offerings[s.link_offering] = link_offering_for(
                catalog, s.link_offering, owned_gbps=problem.scenario.link.bandwidth_gbps,
                where=where, parameter="procurement.sites",
            )  # fmt: skip
    sites = tuple(_site(problem, pricing, catalog, s, offerings, gpu_prices or {}) for s in specs)
    system, workload = problem.system, problem.workload
    systems = []
    prices = []
    reach = workload.max_tokens
    gpi = problem.scenario.prfaas_cluster.gpus_per_instance
    curves: dict[str, FittedCurve] = {}  # one table read and fit per GPU type
    for site, s in zip(sites, specs, strict=True):
        if site.gpu not in curves:
            curves[site.gpu] = catalog.prefill_latency(
                problem.scenario.model, site.gpu, gpi, reach,
                where=f"{problem.source}: procurement.sites[{site.name}]: ",
            )  # fmt: skip
        bandwidth = units.gbps_to_bytes_per_s(site.link_bandwidth_gbps)
        systems.append(dataclasses.replace(
            system, prfaas_prefill_latency=curves[site.gpu], link_bandwidth_bytes_per_s=bandwidth
        ))  # fmt: skip
        offering = offerings[site.link_offering]
        prices.append(SitePrices(
            name=site.name,
            usd_per_instance_hour=site.usd_per_gpu_hour * gpi,
            fixed_usd_per_hour=units.per_month_to_per_hour(offering.monthly_usd),
            usd_per_gb=offering.usd_per_gb,
            max_instances=s.max_instances,
        ))  # fmt: skip
    model = ProcureModel(
        pd_system=system,
        site_systems=tuple(systems),
        sites=tuple(prices),
        workload=workload,
        mode=mode,
        pd_usd_per_instance_hour=pricing.pd.usd_per_gpu_hour
        * problem.scenario.pd_cluster.gpus_per_instance,
        max_pd_instances=spec.max_pd_instances if spec else 32,
    )
    return sites, model


def procure_pricing(
    catalog: Catalog,
    problem: Problem,
    *,
    gpu_prices: dict[str, float] | None = None,
    cost_model: CostModel | None = None,
) -> Pricing:
    """The GPU prices procure buys at (overrides, the scenario's `cost:` block, the GPU files).
    Every offering is a candidate, whatever the scenario's own link: each site brings its own.
    ConfigError naming gpu_prices_usd_per_gpu_hour when a GPU has no price."""
    pricing = resolve_pricing(
        catalog, problem.scenario, problem.source, gpu_prices=gpu_prices, cost_model=cost_model,
        link_bytes_per_s=0.0,
    )  # fmt: skip
    if pricing is None:
        raise ConfigError(
            "procure needs prices: give gpu_prices_usd_per_gpu_hour for each GPU",
            parameter="gpu_prices_usd_per_gpu_hour",
        )
    return pricing
