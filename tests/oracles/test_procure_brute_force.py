"""Tests OF the procure oracle (tests/oracles/procure_brute_force.py): closed forms on a
uniform workload, the project's grid brute force reproduced on its own grid and never beaten by
a grid, optima found between grid points, the budget tie rule, and its agreement with itself
(denser scans, no pruning)."""

import dataclasses
import time

import numpy as np
import pytest
from numpy.polynomial import Polynomial

from prfaas_plan import units
from prfaas_plan.analytic.distributions import Histogram, ObservedLengths
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import resolve_pricing
from prfaas_plan.solve.procure_milp import solve_procure
from prfaas_plan.solve.procure_space import brute_force
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.use_cases.procure_sites import procure_candidates
from tests.conftest import toy_system
from tests.oracles import procure_brute_force as oracle
from tests.oracles.procure_brute_force import (
    OracleSite,
    OracleSpace,
    capacity_rps,
    cheapest_for_target,
    grid_space,
    most_within_budget,
    oracle_space,
    random_budget,
    random_space,
    random_target,
    served_within_budget,
)

pytestmark = pytest.mark.slow  # subprocesses and brute force: .ci/run runs them

MODES = [Mode.PAPER, Mode.EXACT]

# ---------------------------------------------------------------- closed forms

# one site, one PD pair (N = 2), a uniform workload on [A, B]: every term is a ratio of
# polynomials in t, so each optimum is a root of a polynomial (numpy's companion matrix)
A, B = 1000.0, 9000.0
PRFAAS_S = (0.5, 1e-4, 2e-9)  # T_prfaas(l) = 0.5 + 1e-4 l + 2e-9 l² s
PD_S = (0.5, 3e-4, 6e-9)
KV_BYTES = (1e8, 2e4)
PD_USD, SITE_USD, FIXED_USD, USD_PER_GB = 10.0, 20.0, 3.0, 0.05
INSTANCES_USD = 2 * PD_USD + SITE_USD + FIXED_USD  # one PD-P, one PD-D, one site instance
T = Polynomial([0.0, 1.0])


def uniform_space(mode: Mode, gbps: float = 1e5) -> OracleSpace:
    system = toy_system(prfaas=PRFAAS_S, pd=PD_S, kv=KV_BYTES, batch=20, step_s=0.02,
                        output_tokens=500, bandwidth_gbps=gbps)  # fmt: skip
    site = OracleSite(system, SITE_USD, FIXED_USD, USD_PER_GB, 1, "only")
    return OracleSpace(system, Histogram((A, B), (1.0,)), mode, PD_USD, 2, (site,))


def conditional_mean(coefficients, lo: Polynomial, hi: Polynomial, mode: Mode) -> Polynomial:
    """E[y(L) | lo < L <= hi] for L uniform, y a polynomial, as a polynomial in t: y at the
    mean (PAPER) or E[L^k] = Σ_i hi^i lo^(k − i) / (k + 1) (EXACT)."""
    if mode is Mode.PAPER:
        middle = (lo + hi) / 2
        return sum((c * middle**k for k, c in enumerate(coefficients)), Polynomial([0.0]))
    return sum(
        (c * sum((hi**i * lo ** (k - i) for i in range(k + 1)), Polynomial([0.0])) / (k + 1)
         for k, c in enumerate(coefficients)),
        Polynomial([0.0]),
    )  # fmt: skip


def root_inside(polynomial: Polynomial) -> float:
    roots = [r.real for r in polynomial.roots() if abs(r.imag) < 1e-9 and A < r.real < B]
    assert len(roots) == 1
    return roots[0]


class Uniform:
    """The model's terms on the uniform workload, as polynomials in t."""

    def __init__(self, mode: Mode):
        lo, hi = Polynomial([A]), Polynomial([B])
        self.long_s = conditional_mean(PRFAAS_S, T, hi, mode)  # E[T_prfaas | L > t]
        self.short_s = conditional_mean(PD_S, lo, T, mode)
        self.kv = conditional_mean(KV_BYTES, T, hi, mode)  # affine: both modes agree
        self.p = (hi - T) / (B - A)
        self.s = (T - lo) / (B - A)
        self.usd_per_offloaded = units.per_s_to_per_hour(units.bytes_to_gb(self.kv)) * USD_PER_GB

    def pd_prefill_rps(self, t: float) -> float:  # c / s with one PD-P instance
        return 1 / (self.short_s(t) * self.s(t))

    def cost(self, t: float, rps: float) -> float:
        return INSTANCES_USD + self.usd_per_offloaded(t) * self.p(t) * rps


@pytest.mark.parametrize("mode", MODES)
def test_closed_form_budget_compute_meets_pd_prefill(mode):
    """A wide link and an ample budget: Λ_max where a/p (rising) meets c/s (falling):
    (B − t) E[T_prfaas | L > t] = (t − A) E[T_pd | L <= t], a cubic."""
    u = Uniform(mode)
    t_star = root_inside(u.long_s * u.p - u.short_s * u.s)
    lam = u.pd_prefill_rps(t_star)
    found = most_within_budget(uniform_space(mode), 1e6)
    assert found is not None
    assert found.max_rps == pytest.approx(lam, rel=1e-12)
    point = found.point
    assert (point.site_instances, point.pd_prefill_instances, point.pd_decode_instances) == (
        (1,), 1, 1,
    )  # fmt: skip
    assert point.threshold_tokens == pytest.approx(t_star, rel=1e-6)
    # the tie rule may take a cheaper point reaching Λ_max (1 − 1e-9), a hair further along t
    assert point.served_rps == pytest.approx(lam, rel=2e-9)
    assert point.usd_per_hour == pytest.approx(u.cost(t_star, lam), rel=1e-9)
    assert point.usd_per_hour == pytest.approx(
        u.cost(point.threshold_tokens, point.served_rps), rel=1e-12
    )


@pytest.mark.parametrize("mode", MODES)
def test_closed_form_budget_link_meets_pd_prefill(mode):
    """A 1 Gbps link binds before compute: Λ_max where b/p = B_out / (S_kv p) meets c/s."""
    u = Uniform(mode)
    bandwidth = units.gbps_to_bytes_per_s(1.0)
    t_star = root_inside(u.kv * u.p - bandwidth * u.short_s * u.s)
    lam = u.pd_prefill_rps(t_star)
    assert bandwidth / (u.kv(t_star) * u.p(t_star)) < 1 / (u.long_s(t_star) * u.p(t_star))
    found = most_within_budget(uniform_space(mode, gbps=1.0), 1e6)
    assert found is not None and found.max_rps == pytest.approx(lam, rel=1e-12)
    assert found.point.threshold_tokens == pytest.approx(t_star, rel=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_closed_form_budget_money_meets_pd_prefill(mode):
    """0.5 $/h left for link volume after the instances: Λ_max where what it buys,
    0.5 / (w p), meets c/s; the deployment costs the whole budget."""
    u = Uniform(mode)
    money = 0.5
    t_star = root_inside(money * u.short_s * u.s - u.usd_per_offloaded * u.p)
    lam = u.pd_prefill_rps(t_star)
    found = most_within_budget(uniform_space(mode), INSTANCES_USD + money)
    assert found is not None and found.max_rps == pytest.approx(lam, rel=1e-12)
    assert found.point.usd_per_hour == pytest.approx(INSTANCES_USD + money, rel=1e-9)
    assert found.point.usd_per_hour <= INSTANCES_USD + money


@pytest.mark.parametrize("mode", MODES)
def test_closed_form_target(mode):
    """X = 1.2 req/s: only one site + one PD pair reaches it, on [t1, t2] where both prefill
    pools keep up; the volume cost falls with t, so the optimum is t2: c/s = X."""
    u = Uniform(mode)
    target = 1.2
    t2 = root_inside(u.short_s * u.s * target - 1)
    point = cheapest_for_target(uniform_space(mode), target)
    assert point is not None
    assert (point.site_instances, point.pd_prefill_instances, point.pd_decode_instances) == (
        (1,), 1, 1,
    )  # fmt: skip
    assert point.threshold_tokens == pytest.approx(t2, rel=1e-11)
    assert point.usd_per_hour == pytest.approx(u.cost(t2, target), rel=1e-12)
    assert point.site_rps[0] == pytest.approx(u.p(t2) * target, rel=1e-11)
    # a rate no deployment reaches: None
    assert cheapest_for_target(uniform_space(mode), 2.5) is None


@pytest.mark.parametrize("mode", MODES)
def test_refinement_finds_optima_between_grid_points(mode):
    """The continuous optimum lies strictly between procure's grid points and is strictly
    cheaper than the grid's best (the project's brute force on the same space)."""
    space = uniform_space(mode)
    grid = grid_space(space)
    point = cheapest_for_target(space, 1.2)
    on_grid = brute_force(grid, 1.2)
    assert point is not None and on_grid is not None
    assert np.min(np.abs(grid.thresholds_tokens / point.threshold_tokens - 1)) > 1e-4
    assert point.usd_per_hour < on_grid.usd_per_hour * (1 - 1e-6)
    found = most_within_budget(space, 1e6)
    grid_best = most_within_budget(space, 1e6, thresholds=grid.thresholds_tokens)
    assert found is not None and grid_best is not None
    assert found.max_rps > grid_best.max_rps * (1 + 1e-6)


# ------------------------------------------------------------ against the project's grid


@pytest.mark.parametrize("mode", MODES)
def test_oracle_space_is_procures_space(case_problem, mode):
    """An OracleSpace built from procure's own candidates (oracle_space), tabulated on
    procure's grid (grid_space), is exactly the ProcureSpace procure builds."""
    catalog, problem = Catalog.open(), case_problem
    pricing = resolve_pricing(catalog, problem.scenario, problem.source)
    want = procure_candidates(catalog, problem, pricing, None, 3, mode)[1]
    got = grid_space(oracle_space(catalog, problem, pricing, max_instances_per_site=3, mode=mode))
    for field in dataclasses.fields(want):
        a, b = getattr(want, field.name), getattr(got, field.name)
        if field.name == "sites":
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                for f in dataclasses.fields(x):
                    np.testing.assert_array_equal(getattr(x, f.name), getattr(y, f.name))
        else:
            np.testing.assert_array_equal(a, b)


# two seeds in the default suite (each test ~1 s), the rest with the slow tests
SEEDS = [1, 3, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (0, 2, 4, 5, 6, 7))]


def small_space(seed: int, mode: Mode | None = None) -> OracleSpace:
    return random_space(np.random.default_rng(seed), mode=mode, max_instances=3,
                        max_pd_instances=6)  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS)
def test_on_procures_grid_it_is_the_projects_brute_force(seed):
    """Restricted to procure's thresholds (no refinement), the oracle is the project's
    brute_force: the same model read the same way, to the last bits."""
    space = small_space(seed, MODES[seed % 2])
    grid = grid_space(space)
    rng = np.random.default_rng(100 + seed)
    for target in (random_target(rng, space), random_target(rng, space) / 3):
        mine = cheapest_for_target(space, target, thresholds=grid.thresholds_tokens)
        theirs = brute_force(grid, target)
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert mine.usd_per_hour == pytest.approx(theirs.usd_per_hour, rel=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_never_worse_than_a_grid(seed):
    """A continuous threshold dominates any grid: never dearer than the project's brute force
    on procure's grid (target), never less than the grid's best Λ (budget: the oracle on the
    grid, and procure's MILP on it up to its 1e-6 gap); a target reachable on the grid is
    reachable."""
    space = small_space(seed, MODES[seed % 2])
    grid = grid_space(space)
    rng = np.random.default_rng(200 + seed)
    target = random_target(rng, space) / 2
    point, on_grid = cheapest_for_target(space, target), brute_force(grid, target)
    if on_grid is not None:
        assert point is not None
        assert point.usd_per_hour <= on_grid.usd_per_hour * (1 + 1e-12)
    if point is not None:  # a real deployment: it serves the target at its threshold
        k = capacity_rps(space, point.threshold_tokens, point.site_instances,
                         point.pd_prefill_instances, point.pd_decode_instances)  # fmt: skip
        assert k >= target * (1 - 1e-12)
    budget = random_budget(rng, space)
    found = most_within_budget(space, budget)
    grid_best = most_within_budget(space, budget, thresholds=grid.thresholds_tokens)
    milp = solve_procure(grid, budget_usd_per_hour=budget)
    if found is None:
        assert grid_best is None
        return
    assert grid_best is not None and found.max_rps >= grid_best.max_rps * (1 - 1e-15)
    if milp is not None:
        assert found.max_rps >= milp.served_rps * (1 - 1e-6)
    p = found.point
    assert p.usd_per_hour <= budget * (1 + 1e-12)
    assert served_within_budget(space, p.threshold_tokens, p.site_instances,
                                p.pd_prefill_instances, p.pd_decode_instances,
                                budget) >= p.served_rps * (1 - 1e-12)  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_a_discrete_workload_is_exact_on_its_lengths(mode):
    """Observed lengths: the model is constant between distinct lengths, procure's grid is
    those lengths, and the oracle (no refinement needed) equals the project's brute force."""
    space = dataclasses.replace(
        small_space(7, mode),
        workload=ObservedLengths(np.random.default_rng(7).lognormal(9.9, 1.0, 60).round()),
    )
    grid = grid_space(space)
    np.testing.assert_array_equal(grid.thresholds_tokens, milp_threshold_grid(space.workload))
    for target in (0.3, 0.9, 1.6):
        mine, theirs = cheapest_for_target(space, target), brute_force(grid, target)
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert mine.usd_per_hour == pytest.approx(theirs.usd_per_hour, rel=1e-12)


# ------------------------------------------------------------------------ the tie rule


def test_budget_tie_goes_to_the_cheaper_deployment(monkeypatch):
    """Offloading everything to one site instance with two decode instances gives the most Λ
    (a = 1 / T_prfaas(5,000) = 2/3 req/s, below 2θ = 1); the budget buys either site, not
    both. Two deployments tie on Λ_max, the dearer site first in enumeration order: the
    cheaper is returned."""
    system = toy_system(prfaas=(1.0, 1e-4), pd=(2.0, 1e-3), kv=(1e8, 2e4), batch=10,
                        step_s=0.02, output_tokens=1000, bandwidth_gbps=100.0)  # fmt: skip
    assert system.decode_rps_per_instance == 0.5
    cheap = OracleSite(system, 12.0, 0.0, 0.0, 1, "cheap")
    dear = OracleSite(system, 30.0, 0.0, 0.0, 1, "dear")
    space = OracleSpace(system, Histogram((1000.0, 9000.0), (1.0,)), Mode.PAPER, 5.0, 2,
                        (cheap, dear))  # fmt: skip
    budget = 41.0  # dear + 2 PD = 40, cheap + 2 PD = 22, both = 52
    found = most_within_budget(space, budget)
    assert found is not None and found.max_rps == pytest.approx(1 / 1.5, rel=1e-15)
    p = found.point
    assert (p.site_instances, p.pd_prefill_instances, p.pd_decode_instances) == ((1, 0), 0, 2)
    assert p.usd_per_hour == 12.0 + 2 * 5.0 and p.threshold_tokens <= 1000.0
    # the dear site reaches the same Λ at the same threshold, within the budget
    assert capacity_rps(space, p.threshold_tokens, (0, 1), 0, 2) == found.max_rps
    assert served_within_budget(space, p.threshold_tokens, (0, 1), 0, 2, budget) == found.max_rps
    # without the tie rule (its target search), the first maximum found: the dear site
    monkeypatch.setattr(oracle, "cheapest_for_target", lambda *args, **kwargs: None)
    first = most_within_budget(space, budget)
    assert first is not None and first.point.site_instances == (0, 1)
    assert first.max_rps == found.max_rps and first.point.usd_per_hour == 30.0 + 2 * 5.0


def test_a_budget_that_buys_nothing():
    space = uniform_space(Mode.PAPER)
    assert most_within_budget(space, PD_USD * 0.99) is None
    found = most_within_budget(space, PD_USD * 1.5)  # one decode instance, serving 0
    assert found is not None and found.max_rps == 0.0
    assert found.point.usd_per_hour == PD_USD and found.point.pd_decode_instances == 1


# ---------------------------------------------------------------- the random spaces


def test_random_space_draws_within_its_ranges():
    rng = np.random.default_rng(3)
    spaces = [random_space(rng) for _ in range(40)]
    assert {len(s.sites) for s in spaces} == {1, 2, 3}
    assert {s.mode for s in spaces} == set(MODES)
    assert len({(s.workload.mu_log, s.workload.sigma_log) for s in spaces}) > 1
    for s in spaces:
        assert 2 <= s.max_pd_instances <= 10
        for site in s.sites:
            gbps = units.bytes_per_s_to_gbps(site.system.link_bandwidth_bytes_per_s)
            assert 5.0 <= gbps <= 200.0 and 0.0 <= site.usd_per_gb <= 0.1
            assert 0.0 <= site.fixed_usd_per_hour <= 30.0 and 0 <= site.max_instances <= 5
    fixed = random_space(np.random.default_rng(1), sites=2, mode=Mode.EXACT)
    assert len(fixed.sites) == 2 and fixed.mode is Mode.EXACT
    assert random_space(np.random.default_rng(1), sites=2, mode=Mode.EXACT) == fixed


def test_a_small_space_is_quick():
    """The default-suite size (2 sites, <= 3 instances each, N <= 6): both modes in seconds."""
    space = random_space(np.random.default_rng(4), sites=2, mode=Mode.EXACT, max_instances=3,
                         max_pd_instances=6)  # fmt: skip
    start = time.perf_counter()
    cheapest_for_target(space, 1.0)
    most_within_budget(space, 90.0)
    assert time.perf_counter() - start < 20.0  # ~0.5 s alone on 2 cores; generous under load


# ------------------------------------------------------------- agreement with itself


def slow_space(seed: int, mode: Mode) -> OracleSpace:
    """J = 3, U_j = 5, N = 10: 11,880 count vectors."""
    space = random_space(np.random.default_rng(seed), sites=3, mode=mode)
    sites = tuple(dataclasses.replace(s, max_instances=5) for s in space.sites)
    return dataclasses.replace(space, sites=sites, max_pd_instances=10)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_denser_scan_agrees(mode):
    """The accuracy claim: 4x the scan points change neither optimum beyond 1e-12."""
    rng = np.random.default_rng(31)
    for seed in (5, 6):
        space = small_space(seed, mode)
        target, budget = random_target(rng, space) * 0.6, random_budget(rng, space)
        a = cheapest_for_target(space, target)
        b = cheapest_for_target(space, target, scan_points=4 * oracle.DEFAULT_SCAN_POINTS - 3)
        assert (a is None) == (b is None)
        if a is not None:
            assert a.usd_per_hour == pytest.approx(b.usd_per_hour, rel=1e-12)
        c = most_within_budget(space, budget)
        d = most_within_budget(space, budget, scan_points=4 * oracle.DEFAULT_SCAN_POINTS - 3)
        assert c is not None and d is not None
        assert c.max_rps == pytest.approx(d.max_rps, rel=1e-12)
        assert c.point.usd_per_hour == pytest.approx(d.point.usd_per_hour, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_no_dense_grid_beats_it(seed):
    """60,001 thresholds, unrefined, never find a cheaper deployment or a larger Λ."""
    space = small_space(40 + seed, MODES[seed % 2])
    rng = np.random.default_rng(seed)
    dense = np.concatenate([[0.0], np.geomspace(space.workload.min_tokens,
                                                space.workload.max_tokens, 60_001), [np.inf]])  # fmt: skip
    target = random_target(rng, space) * 0.6
    point, grid = cheapest_for_target(space, target), cheapest_for_target(space, target,
                                                                          thresholds=dense)  # fmt: skip
    if grid is not None:
        assert point is not None and point.usd_per_hour <= grid.usd_per_hour * (1 + 1e-12)
    budget = random_budget(rng, space)
    found, grid_best = most_within_budget(space, budget), most_within_budget(space, budget,
                                                                            thresholds=dense)  # fmt: skip
    if grid_best is not None:
        assert found is not None and found.max_rps >= grid_best.max_rps * (1 - 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_pruning_changes_nothing(mode, monkeypatch):
    """The bracket bounds only skip work: with pruning off (every bracket refined), the same
    optima, on the slow space size."""
    space = slow_space(11, mode)
    rng = np.random.default_rng(12)
    target, budget = random_target(rng, space) * 0.5, random_budget(rng, space) * 0.6
    pruned = cheapest_for_target(space, target), most_within_budget(space, budget)
    monkeypatch.setattr(oracle, "_monotone", lambda terms: False)
    full = cheapest_for_target(space, target), most_within_budget(space, budget)
    assert (pruned[0] is None) == (full[0] is None)
    if pruned[0] is not None:
        assert pruned[0].usd_per_hour == pytest.approx(full[0].usd_per_hour, rel=1e-12)
    assert pruned[1] is not None and full[1] is not None
    assert pruned[1].max_rps == pytest.approx(full[1].max_rps, rel=1e-12)
    assert pruned[1].point.usd_per_hour == pytest.approx(full[1].point.usd_per_hour, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_slow_space_never_worse_than_the_grid(mode):
    space = slow_space(21, mode)
    grid = grid_space(space)
    rng = np.random.default_rng(22)
    target = random_target(rng, space) * 0.5
    point, on_grid = cheapest_for_target(space, target), brute_force(grid, target)
    if on_grid is not None:
        assert point is not None and point.usd_per_hour <= on_grid.usd_per_hour * (1 + 1e-12)
    budget = random_budget(rng, space)
    found = most_within_budget(space, budget)
    grid_best = most_within_budget(space, budget, thresholds=grid.thresholds_tokens)
    assert found is not None and grid_best is not None
    assert found.max_rps >= grid_best.max_rps * (1 - 1e-15)
