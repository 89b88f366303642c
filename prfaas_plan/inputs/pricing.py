"""Prices for a scenario: each GPU-hour (on-demand or total cost of ownership) and the link
offerings, from the GPU files and data/links/, overridden by the scenario's `cost:` block and
then by the request (`gpu_prices_usd_per_gpu_hour`, `link_offering`, `cost_model`). A named offering
comes from inputs/links.py (`owned`: the scenario's own link, at no cost); without one, the
cheapest file of data/links/ wide enough is bought.
"""

from dataclasses import dataclass

from prfaas_plan import plausible, units
from prfaas_plan.analytic.cost import LinkPrice, tco_usd_per_gpu_hour
from prfaas_plan.choices import CostModel
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.catalog_files import GpuPrices, LinkOffering
from prfaas_plan.inputs.links import link_offering_for
from prfaas_plan.inputs.scenario_schema import DEFAULT_UTILIZATION, Scenario


@dataclass(frozen=True)
class GpuHourPrice:
    gpu: str
    usd_per_gpu_hour: float
    source: str  # where the price comes from: the GPU file's figure(s), the scenario or a flag


@dataclass(frozen=True)
class Pricing:
    cost_model: CostModel
    prfaas: GpuHourPrice
    pd: GpuHourPrice
    links: tuple[LinkPrice, ...]  # candidates: the cheapest at a plan's egress is bought
    utilization: float


def _link_price(offering: LinkOffering) -> LinkPrice:
    return LinkPrice(
        name=offering.name,
        bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(offering.bandwidth_gbps),
        fixed_usd_per_hour=units.per_month_to_per_hour(offering.monthly_usd),
        usd_per_gb=offering.usd_per_gb,
        rtt_s=units.ms_to_s(offering.rtt_ms),
    )


def _offered_links(catalog: Catalog) -> tuple[LinkPrice, ...]:
    """Every link offering of the catalog but cross-connects (one is bought only when named:
    it assumes one site), priced."""
    offerings = (catalog.link_offering(n) for n in catalog.link_offering_names())
    return tuple(_link_price(o) for o in offerings if not o.colocated)


def _check_price(gpu: str, value: float, where: str, parameter: str | None) -> float:
    if not 0 <= value <= plausible.MAX_USD_PER_GPU_HOUR:
        raise ConfigError(
            f"{where}price of {gpu} must be in [0, {plausible.MAX_USD_PER_GPU_HOUR:g}] USD per "
            f"GPU-hour, got {value:g}",
            parameter=parameter,
        )
    return value


def _from_file(gpu: str, prices: GpuPrices | None, model: CostModel, source: str) -> GpuHourPrice:
    how = "gpu_prices_usd_per_gpu_hour or the scenario's cost.gpu_prices_usd_per_gpu_hour"
    if prices is None:
        raise ConfigError(
            f"{source}: no prices for GPU {gpu!r}; give {how}",
            parameter="gpu_prices_usd_per_gpu_hour",
        )
    if model is CostModel.ON_DEMAND:
        figure = prices.on_demand_usd_per_gpu_hour
        if figure.value is None:
            raise ConfigError(
                f"{source}: prices.on_demand_usd_per_gpu_hour of {gpu!r} is unknown "
                f"({figure.note}); give {how}",
                parameter="gpu_prices_usd_per_gpu_hour",
            )
        return GpuHourPrice(gpu, figure.value, f"{source}: on-demand ({figure.basis})")
    names = ("purchase_usd_per_gpu", "depreciation_years", "board_power_w", "pue",
             "electricity_usd_per_kwh")  # fmt: skip
    values = [getattr(prices, n).value for n in names]
    missing = [n for n, v in zip(names, values, strict=True) if v is None]
    if missing:
        raise ConfigError(
            f"{source}: cost model tco needs prices.{', prices.'.join(missing)} of {gpu!r}, "
            f"which are unknown; use cost_model on-demand or give {how}",
            parameter="cost_model",
        )
    bases = sorted({getattr(prices, n).basis for n in names})
    return GpuHourPrice(
        gpu, tco_usd_per_gpu_hour(*values), f"{source}: tco ({', '.join(bases)} inputs)"
    )


def gpu_hour_price(
    catalog: Catalog,
    gpu: str,
    cost_model: CostModel,
    overrides: dict[str, float],
    scenario_prices: dict[str, float],
    where: str,
) -> GpuHourPrice:
    """A GPU's price per hour: the request's (`overrides`), else the scenario's, else the GPU
    file's."""
    if gpu in overrides:
        price = _check_price(
            gpu, overrides[gpu], "gpu_prices_usd_per_gpu_hour: ", "gpu_prices_usd_per_gpu_hour"
        )
        return GpuHourPrice(gpu, price, "given")
    if gpu in scenario_prices:
        return GpuHourPrice(gpu, scenario_prices[gpu], f"{where}cost.gpu_prices_usd_per_gpu_hour")
    spec = catalog.gpu(gpu, where=where)
    return _from_file(
        gpu, spec.prices, cost_model, catalog.shown(catalog.data_dir / "gpus" / f"{gpu}.yaml")
    )


def _check_priced_gpus(
    catalog: Catalog, scenario: Scenario, prices: dict[str, float], where: str
) -> None:
    """A scenario's cost.gpu_prices_usd_per_gpu_hour may price only GPUs it deploys or may buy:
    its clusters', its procurement sites', and (with procure's default sites) any GPU with a
    prefill profile for its model; a price for any other is a typo, refused with one line."""
    may_buy = {scenario.prfaas_cluster.gpu, scenario.pd_cluster.gpu}
    procurement = scenario.procurement
    if procurement is not None and procurement.sites is not None:
        may_buy |= {site.gpu for site in procurement.sites}
    else:
        may_buy |= set(
            catalog.prefill_gpus(scenario.model, scenario.prfaas_cluster.gpus_per_instance)
        )
    foreign = sorted(set(prices) - may_buy)
    if foreign:
        raise ConfigError(
            f"{where}cost.gpu_prices_usd_per_gpu_hour prices {plausible.quoted(foreign)}, "
            f"which the scenario neither deploys nor may buy; it may use "
            f"{', '.join(sorted(may_buy))}"
        )


def resolve_pricing(
    catalog: Catalog,
    scenario: Scenario,
    source: str,
    *,
    gpu_prices: dict[str, float] | None = None,
    link_offering: str | None = None,
    cost_model: CostModel | None = None,
    utilization: float | None = None,
    link_bytes_per_s: float | None = None,
) -> Pricing | None:
    """The scenario's prices, or None when the catalog has none and none are asked for (then
    results carry no cost). Anything asked for explicitly that cannot be priced is an error.
    `link_bytes_per_s`: the link the plan assumes when it is not the file's (a bandwidth_gbps
    override); the offering bought must carry it."""
    spec = scenario.cost
    asked = spec is not None or bool(gpu_prices) or link_offering is not None
    asked = asked or cost_model is not None or utilization is not None
    overrides = gpu_prices or {}
    known = {scenario.prfaas_cluster.gpu, scenario.pd_cluster.gpu}
    foreign = sorted(set(overrides) - known)
    if foreign:
        raise ConfigError(
            f"gpu_prices_usd_per_gpu_hour names {plausible.quoted(foreign)}, which the scenario does not "
            f"deploy; it deploys {', '.join(sorted(known))}",
            parameter="gpu_prices_usd_per_gpu_hour",
        )
    model = cost_model or (CostModel(spec.cost_model) if spec else CostModel.ON_DEMAND)
    share = (
        utilization
        if utilization is not None
        else (spec.utilization if spec else DEFAULT_UTILIZATION)
    )
    plausible.check_in_range("utilization", share, plausible.MIN_UTILIZATION, 1.0, "of Λ_max")
    where = f"{source}: "
    in_scenario = dict(spec.gpu_prices_usd_per_gpu_hour) if spec else {}
    _check_priced_gpus(catalog, scenario, in_scenario, where)
    try:
        prfaas, pd = (
            gpu_hour_price(catalog, c.gpu, model, overrides, in_scenario, where)
            for c in (scenario.prfaas_cluster, scenario.pd_cluster)
        )
    except ConfigError:
        if asked:
            raise
        return None
    name = link_offering or (spec.link_offering if spec else None)
    needed_bytes_per_s = (
        units.gbps_to_bytes_per_s(scenario.link.bandwidth_gbps)
        if link_bytes_per_s is None
        else link_bytes_per_s
    )
    if name is not None:
        offering = link_offering_for(
            catalog, name, owned_gbps=scenario.link.bandwidth_gbps, carry_bytes_per_s=needed_bytes_per_s,
            where="link_offering: " if link_offering else f"{where}cost.link_offering: ",
            parameter="link_offering" if link_offering else None,
        )  # fmt: skip
        links: tuple[LinkPrice, ...] = (_link_price(offering),)
    else:
        offered = catalog.memoised("offered links", lambda: _offered_links(catalog))
        kept = tuple(
            i for i, p in enumerate(offered) if p.bandwidth_bytes_per_s >= needed_bytes_per_s
        )
        # one tuple for each choice of offerings (a sweep's pricings share a few: their
        # documents' offerings are then written once)
        links = catalog.memoised(("offered links", kept), lambda: tuple(offered[i] for i in kept))
        if not links:
            if asked:
                raise ConfigError(
                    f"no link offering in {catalog.data_dir / 'links'}/ carries the plan's "
                    f"{units.bytes_per_s_to_gbps(needed_bytes_per_s):g} Gbps link; add one or give link_offering",
                    parameter="link_offering",
                )
            return None
    return Pricing(model, prfaas, pd, links, share)
