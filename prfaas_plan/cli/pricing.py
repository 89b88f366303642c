"""The pricing options shared by `optimize` and `evaluate` (--gpu-price, --link-offering,
--cost-model, --utilization) and how they become an inputs/pricing.py `Pricing`."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from prfaas_plan import units
from prfaas_plan.choices import CostModel

if TYPE_CHECKING:
    from prfaas_plan.inputs.pricing import Pricing
    from prfaas_plan.inputs.scenario import Problem

GpuPriceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--gpu-price",
        help="Price a GPU type: GPU=USD_PER_GPU_HOUR (repeatable), over the GPU file and scenario.",
    ),
]
LinkOfferingOpt = Annotated[
    str | None,
    typer.Option(
        "--link-offering",
        help="Link offering of data/links/ to price the link with [cheapest wide enough].",
    ),
]
CostModelOpt = Annotated[
    CostModel | None,
    typer.Option("--cost-model", help="How GPU-hours are priced: on-demand or tco [on-demand]."),
]
UtilizationOpt = Annotated[
    float | None,
    typer.Option(
        "--utilization", help="Share of Λ_max the deployment is priced at ($/token) [0.7]."
    ),
]


def load_pricing(
    problem: "Problem",
    data_dir: Path | None,
    gpu_price: list[str] | None,
    link_offering: str | None,
    cost_model: CostModel | None,
    utilization: float | None,
) -> "Pricing | None":
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.pricing import parse_gpu_prices, resolve_pricing

    return resolve_pricing(
        Catalog.open(data_dir), problem.scenario, problem.source,
        gpu_prices=parse_gpu_prices(gpu_price or []), link_offering=link_offering,
        cost_model=cost_model, utilization=utilization,
        link_gbps=units.bytes_per_s_to_gbps(problem.system.link_bandwidth_bytes_per_s),
    )  # fmt: skip
