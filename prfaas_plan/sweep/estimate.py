"""A sweep's time, estimated before it runs: its scenarios x the seconds a scenario of its
command takes, over its workers. `simulate` is costed by its simulated requests (use_cases/
simulate.py's SECONDS_PER_SIMULATED_REQUEST, the figure its own time bound uses); the other
commands by the seconds a scenario took in the example sweeps (examples/sweeps/, --workers 1,
start-up included, on this project's 2-core machine under load, 2026-12-04): optimize 91
scenarios in 0.85 s, procure 8 in 0.91 s, sensitivity 6 in 2.8 s. A procurement space or a
sensitivity LP larger than the examples' takes longer: an estimate, not a bound (a study is
a resumable batch job: nothing is refused for its length)."""

from typing import Any

from prfaas_plan.errors import PrfaasPlanError
from prfaas_plan.sweep.spec import Sweep

# seconds a scenario (see the module docstring); evaluate is optimize's search without it
SECONDS_PER_SCENARIO = {"optimize": 0.01, "evaluate": 0.01, "procure": 0.12, "sensitivity": 0.5}
# an optimize scenario on the batched path (sweep/fast.py): 4,000 scenarios of
# benchmarks/bench_sweep.py's hardware study in 1.6-1.8 s of CPU in one process, 2026-12-04
# (2,226-2,463 a second); a study over the output lengths or the decode SLO (each scenario its
# own decode point, one input distribution: benchmarks/bench_sweep_outputs.py, 1,934-2,026 a
# second) runs near it
SECONDS_PER_BATCHED_SCENARIO = 0.0005
# ... whose input-length distribution is its own (an axis over a log-normal's parameters): each
# distinct distribution has its own split constants and TTFT mesh; 4,000 in 3.4-3.7 s of CPU,
# 2026-12-04 (benchmarks/bench_sweep_lhs.py, 1,074-1,189 a second)
SECONDS_PER_BATCHED_WORKLOAD_SCENARIO = 0.0009
WORKLOAD_AXES = ("workload.input_tokens.",)


def seconds_per_scenario(sweep: Sweep) -> float | None:
    """The estimate for one scenario of `sweep`'s command, or None when it cannot be told
    (a simulation over a duration or a trace: its requests depend on the rate)."""
    command = sweep.spec.command
    if command == "optimize" and sweep.spec.fast_path:
        from prfaas_plan.sweep.commands import SWEEPABLE

        sizing = {"target_rps", "max_prfaas_gpus", "ttft_target_s"} & set(sweep.spec.axes)
        if not sizing and SWEEPABLE["optimize"].vectorised(dict(sweep.spec.parameters)):
            if any(axis.startswith(WORKLOAD_AXES) for axis in sweep.spec.axes):
                return SECONDS_PER_BATCHED_WORKLOAD_SCENARIO
            return SECONDS_PER_BATCHED_SCENARIO
    if command != "simulate":
        return SECONDS_PER_SCENARIO.get(command)
    from prfaas_plan.use_cases.simulate import SECONDS_PER_SIMULATED_REQUEST
    from prfaas_plan.use_cases.simulate_request import SimulateRequest

    params: dict[str, Any] = {k: v for k, v in sweep.spec.parameters.items() if v is not None}
    if "requests" in sweep.spec.axes:
        params["requests"] = _largest(sweep, "requests")
    try:
        spec = SimulateRequest(**params).spec()
    except (PrfaasPlanError, ValueError):  # a bad parameter: each scenario reports its error row
        return None
    requests, load = spec.arrivals.requests, spec.load
    if requests is None or spec.arrivals.duration_s is not None:
        return None
    runs = 1 if load.rate_rps is not None else max(len(load.fractions), 1)
    return requests * runs * SECONDS_PER_SIMULATED_REQUEST


def _largest(sweep: Sweep, name: str) -> int | None:
    axis = sweep.spec.axes[name]
    ends = axis.values if axis.values is not None else (axis.stop, axis.high)
    numbers = [v for v in ends if isinstance(v, int | float) and not isinstance(v, bool)]
    return int(max(numbers)) if numbers else None
