"""A sweep block's rows: the `optimize` reports of a Latin-hypercube block
(benchmarks/bench_sweep_lhs.py's study) made into columns by drawing and flattening each one's
JSON document (`plan_to_json`, `flatten`, then `columns_of`) and straight from the document's
fields (`plan_columns`, render/fields.py); µs a report, best of 5, and whether the two agree.

    PYTHONPATH=. python benchmarks/bench_flat.py [DOCUMENTS]
"""

import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep_lhs import sweep_file


def reports(count: int) -> list[Any]:
    """The plan reports of the study's first `count` scenarios, planned as one block."""
    from prfaas_plan.inputs.scenario import problem_like
    from prfaas_plan.sweep import fast
    from prfaas_plan.sweep.commands import parameter_names
    from prfaas_plan.sweep.rows import _catalog, _problem
    from prfaas_plan.sweep.run import chunks
    from prfaas_plan.sweep.spec import load_sweep, scenario_of
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest, build

    with tempfile.TemporaryDirectory() as tmp:
        sweep = load_sweep(sweep_file(Path(tmp), count), parameter_names)
        chunk = next(chunks(sweep))[:count]
        scenarios = [scenario_of(sweep, point, i) for i, point in chunk]
        catalog = _catalog(None)
        first = _problem(sweep, scenarios[0], None)
        problems = [first] + [problem_like(first, s, catalog) for s in scenarios[1:]]
        fast.prepare_workloads(scenarios)
        parameters = sweep.parameters(chunk[0][1])
        return calls.optimize_many(problems, build(PlanRequest, **parameters), catalog)


def main() -> None:
    from prfaas_plan.render.plan import plan_columns, plan_to_json
    from prfaas_plan.sweep.flat import columns_of, flatten

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    block = reports(count)

    def flattened() -> dict[str, list[Any]]:
        return columns_of([flatten(plan_to_json(r)) for r in block])

    a, b = plan_columns(block), flattened()
    same = repr(list(a.items())) == repr(list(b.items()))
    for name, run in (
        ("plan_to_json, flatten, then columns_of", flattened),
        ("plan_columns", lambda: plan_columns(block)),
    ):
        best = min(timeit.repeat(run, number=3, repeat=5)) / 3
        print(f"{name}: {best * 1e6 / len(block):.1f} µs a report")
    print(f"{len(block)} reports, {len(a)} columns; the same columns: {same}")


if __name__ == "__main__":
    main()
