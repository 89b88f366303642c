"""What a deployment costs per hour and per token: GPUs (on-demand or total cost of ownership),
the link's fixed port/circuit price and its volume price at the KV egress actually carried.

Units: USD per hour for every cost, bytes/s for egress, req/s for rates. A deployment is priced
running at `utilization` x its Λ_max: GPUs and the link's port are paid by the hour whatever
the load, the link's volume only for the KV that crosses it (Λ p E[S_kv | L > t] scales with
the served rate), and tokens are counted at the served rate.
"""

import math
from dataclasses import dataclass

from prfaas_plan import units
from prfaas_plan.errors import ConfigError


def tco_usd_per_gpu_hour(
    purchase_usd: float,
    depreciation_years: float,
    board_power_w: float,
    pue: float,
    electricity_usd_per_kwh: float,
) -> float:
    """purchase / (years x 8760 h) + board power (kW) x PUE x USD/kWh; the GPU is assumed to
    draw its board power all hours (an upper bound: idle GPUs draw less)."""
    capital = purchase_usd / (depreciation_years * units.HOURS_PER_YEAR)
    energy = units.w_to_kw(board_power_w) * pue * electricity_usd_per_kwh
    return capital + energy


@dataclass(frozen=True)
class LinkPrice:
    """One link offering's prices (inputs/catalog.py LinkOffering)."""

    name: str
    bandwidth_bytes_per_s: float
    fixed_usd_per_hour: float
    usd_per_gb: float
    rtt_s: float

    def volume_usd_per_hour(self, egress_bytes_per_s: float) -> float:
        return units.per_s_to_per_hour(units.bytes_to_gb(egress_bytes_per_s)) * self.usd_per_gb

    def usd_per_hour(self, egress_bytes_per_s: float) -> float:
        return self.fixed_usd_per_hour + self.volume_usd_per_hour(egress_bytes_per_s)


@dataclass(frozen=True)
class DeploymentCost:
    """$/hour of one deployment by component, at `utilization` x its Λ_max."""

    prfaas_gpus_usd_per_hour: float
    pd_gpus_usd_per_hour: float
    link: LinkPrice | None  # None: no PrfaaS cluster, no cross-datacenter link bought
    link_fixed_usd_per_hour: float
    link_volume_usd_per_hour: float
    utilization: float
    served_rps: float  # utilization x Λ_max
    egress_bytes_per_s: float  # KV crossing the link at the served rate
    output_tokens: float  # mean per request

    @property
    def gpus_usd_per_hour(self) -> float:
        """What the GPUs cost, PrfaaS + PD (the paper's equal-cost basis: GPU spend)."""
        return self.prfaas_gpus_usd_per_hour + self.pd_gpus_usd_per_hour

    @property
    def total_usd_per_hour(self) -> float:
        return self.gpus_usd_per_hour + self.link_fixed_usd_per_hour + self.link_volume_usd_per_hour

    @property
    def usd_per_million_output_tokens(self) -> float:
        """total $/h / (served req/s x output tokens x 3600 s/h) x 10^6 (inf when idle)."""
        tokens_per_hour = units.per_s_to_per_hour(self.served_rps * self.output_tokens)
        return self.total_usd_per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else math.inf

    @property
    def usd_per_thousand_requests(self) -> float:
        requests_per_hour = units.per_s_to_per_hour(self.served_rps)
        return (
            self.total_usd_per_hour / requests_per_hour * 1e3 if requests_per_hour > 0 else math.inf
        )


def deployment_cost(
    *,
    prfaas_gpus: int,
    pd_gpus: int,
    prfaas_usd_per_gpu_hour: float,
    pd_usd_per_gpu_hour: float,
    links: tuple[LinkPrice, ...],
    system_throughput_rps: float,
    kv_egress_bytes_per_s: float,
    output_tokens: float,
    utilization: float,
) -> DeploymentCost:
    """The cost at `utilization` x Λ_max (`system_throughput_rps`; `kv_egress_bytes_per_s` is
    the egress at Λ_max). With PrfaaS GPUs the cheapest of `links` at the carried egress is
    bought among those that carry the egress at Λ_max (ConfigError if none does); without, no
    link."""
    egress = utilization * kv_egress_bytes_per_s
    link = None
    if prfaas_gpus > 0:
        # an offering must carry the plan's egress at Λ_max, whatever share it is priced at
        wide = [x for x in links if x.bandwidth_bytes_per_s >= kv_egress_bytes_per_s * (1 - 1e-9)]
        if not wide:
            raise ConfigError(
                f"no link offering carries the plan's KV egress of "
                f"{units.bytes_per_s_to_gbps(kv_egress_bytes_per_s):.4g} Gbps at Λ_max "
                f"(widest: {units.bytes_per_s_to_gbps(max(x.bandwidth_bytes_per_s for x in links)):g} Gbps)",
                parameter="link_offering",
            )
        link = min(wide, key=lambda x: x.usd_per_hour(egress))
    return DeploymentCost(
        prfaas_gpus_usd_per_hour=prfaas_gpus * prfaas_usd_per_gpu_hour,
        pd_gpus_usd_per_hour=pd_gpus * pd_usd_per_gpu_hour,
        link=link,
        link_fixed_usd_per_hour=link.fixed_usd_per_hour if link else 0.0,
        link_volume_usd_per_hour=link.volume_usd_per_hour(egress) if link else 0.0,
        utilization=utilization,
        served_rps=utilization * system_throughput_rps,
        egress_bytes_per_s=egress if link else 0.0,
        output_tokens=output_tokens,
    )


def affordable_instances(budget_usd_per_hour: float, usd_per_instance_hour: float) -> int:
    """floor(budget / price of one instance-hour): whole instances a budget pays for."""
    if not usd_per_instance_hour > 0:
        raise ValueError("an instance must cost something to bound a budget")
    # a budget that is an exact multiple must not lose an instance to rounding
    return math.floor(budget_usd_per_hour / usd_per_instance_hour * (1 + 1e-12))
