"""The pricing options shared by `optimize`, `evaluate` and `sensitivity` (--gpu-price,
--link-offering, --cost-model, --utilization; `procure` takes the first and the third) and the
parser of --gpu-price's GPU=USD syntax (the request takes a mapping)."""

from typing import Annotated

import typer

from prfaas_plan.choices import CostModel
from prfaas_plan.errors import ConfigError
from prfaas_plan.plausible import quoted
from prfaas_plan.use_cases.field_docs import SHARED

GpuPriceOpt = Annotated[
    list[str] | None,
    typer.Option("--gpu-price", help=SHARED["gpu_prices_usd_per_gpu_hour"]),
]
LinkOfferingOpt = Annotated[
    str | None, typer.Option("--link-offering", help=SHARED["link_offering"])
]
CostModelOpt = Annotated[CostModel | None, typer.Option("--cost-model", help=SHARED["cost_model"])]
UtilizationOpt = Annotated[float | None, typer.Option("--utilization", help=SHARED["utilization"])]


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
