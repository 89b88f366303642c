"""The batched path of an `optimize` sweep: the scenarios of a chunk that share a system and
differ only in instance counts, link bandwidth, the parameters of a truncated log-normal input
length, the output lengths (a number, or a truncated log-normal's parameters), the decode SLO
and GPU prices are planned together by the use-case's batched form (use_cases/calls.py
optimize_many: one search for all of them), and each row is `optimize`'s JSON document
flattened, exactly as the per-scenario path writes it. Scenarios whose other workload fields
differ (a histogram's weights, an observed trace, prefix-cache hit rates) each form their own
group.
"""

from typing import Any

from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.inputs.scenario_schema import LogNormalLengths, Scenario

# the fields a group's scenarios may differ in: everything else decides the system and the
# kind of workload (and a log-normal's parameters batch only where the base scenario's input
# lengths are one: a path such as workload.input_tokens.mu_log exists nowhere else)
BATCHED_FIELDS = (
    "prfaas_cluster.instances",
    "pd_cluster.instances",
    "link.bandwidth_gbps",
    "workload.input_tokens.mu_log",
    "workload.input_tokens.sigma_log",
    "workload.input_tokens.min_tokens",
    "workload.input_tokens.max_tokens",
    # the output lengths move the decode point alone (a decode capacity per row)
    "workload.output_tokens",
    "workload.output_tokens.mu_log",
    "workload.output_tokens.sigma_log",
    "workload.output_tokens.min_tokens",
    "workload.output_tokens.max_tokens",
    # ... and so does the decode SLO
    "slo.decode_tokens_per_s",
)
# ... and any field under this one: a GPU's price in the scenario's cost block
BATCHED_PREFIXES = ("cost.gpu_prices_usd_per_gpu_hour.",)

Columns = dict[str, list[Any]]

# scenarios planned by one search. The optimiser's arrays hold scenarios x PD splits x 65 grid
# thresholds values: a whole chunk of 5,000 scenarios of up to 20 instances is 6.5 million per
# array (52 MB), above the 32 MB up to which glibc reuses freed heap, so each of the hundreds of
# arrays was a fresh mmap, page-faulted and zeroed, and streamed from main memory. 1,000 keep
# them near 10 MB (heap reused, within the shared cache) and cost little Python per array; the
# optimiser itself searches at most solve/threshold.py MAX_SPLIT_ROWS (scenario, split) rows a
# pass, so larger PD clusters hold no larger arrays.
BLOCK = 1000


def batched(axis: str) -> bool:
    """May the scenarios of one group differ on `axis`?"""
    return axis in BATCHED_FIELDS or axis.startswith(BATCHED_PREFIXES)


def group_key(point: dict[str, Any], parameters: dict[str, Any]) -> tuple[Any, ...]:
    """Scenarios of one sweep (one base scenario) share system and workload when their axis
    values outside BATCHED_FIELDS and their parameters agree."""
    fixed = tuple(sorted((k, v) for k, v in point.items() if not batched(k)))
    return fixed, tuple(sorted((k, _hashable(v)) for k, v in parameters.items()))


def _hashable(value: Any) -> Any:
    """A parameter as a key: a mapping as its sorted items, a list as a tuple."""
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    return tuple(value) if isinstance(value, list) else value


def optimize_block(
    problems: list[Problem], parameters: dict[str, Any], catalog: Catalog
) -> Columns:
    """`optimize`'s flattened document for each problem of one block of a group, as columns:
    written from the reports column by column (render/fields.py, a shape at a time where some
    are priced and some not), or, where that cannot be (NotColumnarError: a leaf that is an
    object, not in optimize's document), from each one's document flattened."""
    from prfaas_plan.render.fields import NotColumnarError
    from prfaas_plan.render.plan import plan_columns, plan_to_json
    from prfaas_plan.sweep.flat import columns_of, flatten
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest, build

    request = build(PlanRequest, **parameters)
    reports = calls.optimize_many(problems, request, catalog)
    try:
        return plan_columns(reports)
    except NotColumnarError:
        return columns_of([flatten(plan_to_json(r)) for r in reports])


def refused_prices(
    problems: list[Problem], parameters: dict[str, Any], catalog: Catalog
) -> list[int]:
    """The problems whose own prices are refused (`calls.prices`: with prices asked for, a link
    no offering carries, or an offering that does not carry it). One refuses its block's batch
    whole (`optimize_many` prices them all), and a study whose links go beyond the offerings
    has such scenarios everywhere: halving a refused block (sweep/rows.py) came down to one
    scenario at a time for all of them. The sweep plans these alone (their error rows) and
    the others as a block."""
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest, build

    request = build(PlanRequest, **parameters)
    refused = []
    for i, problem in enumerate(problems):
        try:
            calls.prices(problem, request, catalog)
        except Exception:  # its own plan says why, in its error row
            refused.append(i)
    return refused


def prepare_workloads(scenarios: list[Scenario]) -> None:
    """The normalisers, means and split constants of the scenarios' truncated log-normal
    input lengths in one numpy pass (analytic/log_normal_rows.py `prepare`), before their
    problems are built: the same numbers each would compute alone, kept on the interned
    distributions that building the problems then finds."""
    from prfaas_plan.analytic.log_normal import truncated_log_normal
    from prfaas_plan.analytic.log_normal_rows import prepare

    lengths = [s.workload.input_tokens for s in scenarios]
    prepare([
        truncated_log_normal(x.mu_log, x.sigma_log, x.min_tokens, x.max_tokens)
        for x in lengths if isinstance(x, LogNormalLengths)
    ])  # fmt: skip
