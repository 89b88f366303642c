"""`procure` at the continuous threshold (solve/procure_exact.py) equals an independent brute
force (tests/oracles/procure_brute_force.py: every count vector, the threshold scanned and
refined continuously, no grid, no MILP, its own tie rule) on small random spaces of 1-3 sites,
in both service-time modes: the cost of a target, the rate of a budget and the cost of buying
it, within 1e-9 relative; and a target the oracle reaches is never called unreachable. The
default run tries a few spaces; `-m slow` (run by .ci/run) tries 60 more of each mode."""

import numpy as np
import pytest

from prfaas_plan.solve.procure_budget import exact_budget
from prfaas_plan.solve.procure_exact import (
    ExactPoint,
    ProcureModel,
    SitePrices,
    exact_target,
    monotone_violation,
)
from prfaas_plan.solve.procure_milp import solve_procure
from prfaas_plan.solve.search import milp_threshold_grid
from tests.oracles.procure_brute_force import (
    OracleSpace,
    cheapest_for_target,
    most_within_budget,
    random_budget,
    random_space,
    random_target,
)

pytestmark = pytest.mark.slow  # subprocesses and brute force: .ci/run runs them

RTOL = 1e-9  # the oracle is accurate to 1e-10, procure's rates to ~1e-13 (ASCENT_RTOL 1e-10)


def model_of(space: OracleSpace) -> ProcureModel:
    """The oracle's space as procure's model (the same sites, systems, prices and limits)."""
    return ProcureModel(
        pd_system=space.pd_system,
        site_systems=tuple(s.system for s in space.sites),
        sites=tuple(
            SitePrices(
                s.name, s.usd_per_instance_hour, s.fixed_usd_per_hour, s.usd_per_gb, s.max_instances
            )
            for s in space.sites
        ),
        workload=space.workload,
        mode=space.mode,
        pd_usd_per_instance_hour=space.pd_usd_per_instance_hour,
        max_pd_instances=space.max_pd_instances,
    )


def tolerance(model: ProcureModel) -> float:
    """RTOL, or the model's departure from monotone work curves where it has one (paper mode on
    a long tail: the threshold search is then exact only to that, as its report says)."""
    return max(RTOL, 10 * monotone_violation(model))


def check_target(space: OracleSpace, target: float) -> None:
    model = model_of(space)
    oracle = cheapest_for_target(space, target)
    found = exact_target(model, target)
    if oracle is None:
        assert found is None
        return
    assert found is not None, f"reachable target {target:g} called unreachable"
    assert found.point.usd_per_hour == pytest.approx(oracle.usd_per_hour, rel=tolerance(model))


def check_budget(space: OracleSpace, budget: float) -> None:
    model = model_of(space)
    grid = model.space(milp_threshold_grid(model.workload))
    start = solve_procure(grid, budget_usd_per_hour=budget)
    found = exact_budget(model, budget, None if start is None else ExactPoint(grid, start))
    oracle = most_within_budget(space, budget)
    if oracle is None or oracle.max_rps <= 0:
        assert found is None
        return
    assert found is not None and found.proven
    rtol = tolerance(model)
    assert found.point.served_rps == pytest.approx(oracle.max_rps, rel=rtol)
    assert found.point.usd_per_hour <= budget * (1 + 1e-12)
    # the cheapest of the highest-throughput deployments (the oracle's tie rule is relative
    # 1e-9 on the rate, so its cost may sit that much below a rate 1e-10 higher)
    assert found.point.usd_per_hour == pytest.approx(oracle.point.usd_per_hour, rel=max(rtol, 2e-9))


def spaces(seed: int, count: int, mode_index: int | None = None):
    from prfaas_plan.choices import Mode

    rng = np.random.default_rng(seed)
    mode = None if mode_index is None else tuple(Mode)[mode_index]
    return [(rng, random_space(rng, mode=mode, max_instances=4, max_pd_instances=8))
            for _ in range(count)]  # fmt: skip


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_target_equals_the_brute_force(seed):
    for rng, space in spaces(seed, 2):
        check_target(space, random_target(rng, space))


@pytest.mark.parametrize("seed", [21, 22])
def test_budget_equals_the_brute_force(seed):
    for rng, space in spaces(seed, 2):
        check_budget(space, random_budget(rng, space))


@pytest.mark.slow
@pytest.mark.parametrize("mode_index", [0, 1])
def test_target_equals_the_brute_force_on_60_spaces(mode_index):
    for rng, space in spaces(100 + mode_index, 60, mode_index):
        check_target(space, random_target(rng, space))


@pytest.mark.slow
@pytest.mark.parametrize("mode_index", [0, 1])
def test_budget_equals_the_brute_force_on_60_spaces(mode_index):
    for rng, space in spaces(200 + mode_index, 60, mode_index):
        check_budget(space, random_budget(rng, space))
