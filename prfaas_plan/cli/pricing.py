"""The pricing options shared by `optimize`, `evaluate` and `sensitivity` (--gpu-price,
--link-offering, --cost-model, --utilization; `procure` takes the first and the third) and the
parser of --gpu-price's GPU=USD syntax (the request takes a mapping)."""

from typing import TYPE_CHECKING, Annotated

import typer

from prfaas_plan.choices import CostModel
from prfaas_plan.errors import ConfigError
from prfaas_plan.plausible import quoted

if TYPE_CHECKING:
    pass

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
        help="Link offering of data/links/ to price the link with (default: cheapest wide enough).",
    ),
]
CostModelOpt = Annotated[
    CostModel | None,
    typer.Option(
        "--cost-model", help="How GPU-hours are priced: on-demand or tco (default: on-demand)."
    ),
]
UtilizationOpt = Annotated[
    float | None,
    typer.Option(
        "--utilization", help="Share of Λ_max the deployment is priced at ($/token) (default: 0.7)."
    ),
]


def gpu_prices(values: list[str] | None) -> dict[str, float] | None:
    """`--gpu-price GPU=USD_PER_GPU_HOUR` (repeatable) -> {gpu: price}, each GPU at most once;
    None when not given (the request's default: the scenario's and the catalog's prices)."""
    if not values:
        return None
    prices: dict[str, float] = {}
    for text in values:
        name, sep, price = text.partition("=")
        try:
            value = float(price) if sep and name.strip() else None
        except ValueError:
            value = None
        if value is None:
            raise ConfigError(
                f"--gpu-price must be GPU=USD_PER_GPU_HOUR (e.g. h200=3.5), got {quoted(text)}"
            )
        if name.strip() in prices:
            raise ConfigError(f"--gpu-price: {name.strip()!r} is given twice")
        prices[name.strip()] = value
    return prices
