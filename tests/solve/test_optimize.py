import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.capacity import Bound, Configuration, evaluate, rates
from prfaas_plan.analytic.distributions import Histogram, ObservedLengths
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.choices import Mode
from prfaas_plan.solve.baselines import exhaustive_grid_search, homogeneous_baseline
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from tests.conftest import ROOT, toy_system


def test_threshold_balance_matches_symbolic_solution():
    """Uniform lengths on [L, H] and affine latencies: the balance condition
    N_pf / (T_pf(l_long) p) = N_p / (T_pd(l_short) (1 - p)) is a polynomial equation in t, solved
    exactly by sympy as the oracle."""
    lo, hi = 1000, 100000
    a_pf, b_pf, a_pd, b_pd = 0.4, 2e-5, 0.5, 6e-5
    n_pf, n_p = 3, 4
    workload = Histogram((float(lo), float(hi)), (1.0,))
    t = sympy.Symbol("t", positive=True)
    p = (hi - t) / (hi - lo)
    lhs = n_pf / ((a_pf + b_pf * (t + hi) / 2) * p)
    rhs = n_p / ((a_pd + b_pd * (lo + t) / 2) * (1 - p))
    roots = [
        float(r)
        for r in sympy.solve(sympy.together(lhs - rhs).as_numer_denom()[0], t)
        if r.is_real and lo < float(r) < hi
    ]
    assert len(roots) == 1
    # N_pd = n_p + 1 with a huge decode batch: decode never binds, so the best split puts n_p
    # instances on prefill and the best threshold is the balance root
    pinned = toy_system(
        prfaas=(a_pf, b_pf), pd=(a_pd, b_pd), kv=(1.0, 1.0), bandwidth_gbps=1e6, batch=10_000
    )
    best = optimize_fixed_hardware(pinned, workload, SearchSpace(n_pf, n_p + 1), Mode.PAPER)
    assert best.configuration.pd_prefill_instances == n_p
    assert best.configuration.threshold_tokens == pytest.approx(roots[0], rel=1e-9)
    assert set(best.bounds) == {Bound.PRFAAS_COMPUTE, Bound.PD_PREFILL}


@pytest.mark.parametrize(
    "mode, n_pf, n_pd",
    [(Mode.PAPER, 1, 2), (Mode.PAPER, 4, 8), (Mode.EXACT, 2, 4), (Mode.EXACT, 4, 8)],
)
@pytest.mark.slow
def test_optimizer_beats_or_matches_paper_grid(case_problem, mode, n_pf, n_pd):
    """Brute force: every split x thresholds every 100 tokens. The optimiser solves the balance
    exactly, so it is never worse and at most a grid step's worth better."""
    s, w = case_problem.system, case_problem.workload
    space = SearchSpace(n_pf, n_pd)
    best = optimize_fixed_hardware(s, w, space, mode)
    grid = exhaustive_grid_search(s, w, space, mode, step_tokens=100.0)
    assert best.system_throughput_rps >= grid.system_throughput_rps * (1 - 1e-12)
    assert best.system_throughput_rps == pytest.approx(grid.system_throughput_rps, rel=2e-3)
    assert best.configuration.pd_prefill_instances == grid.configuration.pd_prefill_instances or (
        best.system_throughput_rps == pytest.approx(grid.system_throughput_rps, rel=1e-9)
    )


def test_observed_lengths_optimum_is_exact(rng):
    """With a discrete distribution Λ is piecewise constant: brute force over every observed
    length (and 'offload all') must find exactly the optimiser's value."""
    lengths = np.exp(rng.normal(9.5, 1.0, size=300)).round()
    workload = ObservedLengths(lengths)
    system = toy_system()
    space = SearchSpace(2, 6)
    best = optimize_fixed_hardware(system, workload, space, Mode.EXACT)
    brute = max(
        evaluate(
            system, workload, Configuration(2, n_p, 6 - n_p, t), Mode.EXACT
        ).system_throughput_rps
        for n_p in range(6)
        for t in np.concatenate([[0.0], np.unique(lengths)])
    )
    assert best.system_throughput_rps == pytest.approx(brute, rel=1e-12)


def test_fixed_threshold_only_optimises_split(case_problem):
    s, w = case_problem.system, case_problem.workload
    e = optimize_fixed_hardware(s, w, SearchSpace(4, 8, threshold_tokens=30000.0))
    assert e.configuration.threshold_tokens == 30000.0
    brute = max(
        evaluate(s, w, Configuration(4, n_p, 8 - n_p, 30000.0)).system_throughput_rps
        for n_p in range(8)
    )
    assert e.system_throughput_rps == pytest.approx(brute)


def test_no_prfaas_means_nothing_offloaded(case_problem):
    e = optimize_fixed_hardware(case_problem.system, case_problem.workload, SearchSpace(0, 8))
    assert e.offload_fraction == 0
    h = homogeneous_baseline(case_problem.system, case_problem.workload, 8)
    assert e.system_throughput_rps == pytest.approx(h.system_throughput_rps)


def test_decode_bound_plateau_picks_the_balance_point(case_problem):
    """With decode binding, Λ_max is flat in t; the plan reports the t where the two prefill
    terms balance (the most prefill slack), not an arbitrary end of the plateau."""
    s, w = case_problem.system, case_problem.workload
    for space in (SearchSpace(1, 6), SearchSpace(3, 10)):
        e = optimize_fixed_hardware(s, w, space)
        assert e.bounds[0] is Bound.PD_DECODE
        assert e.system_throughput_rps == pytest.approx(e.throughput.pd_decode_rps)
        c = e.configuration
        r = rates(s, w, c.threshold_tokens, c.prfaas_instances, c.pd_prefill_instances,
                  c.pd_decode_instances, Mode.PAPER)  # fmt: skip
        prfaas_term = min(r.limits_rps[0], r.limits_rps[1])
        assert prfaas_term == pytest.approx(float(r.limits_rps[2]), rel=1e-9)
        assert 0 < e.offload_fraction < 1


def random_case(rng):
    """A random but physical system: positive, increasing latency and KV curves."""
    system = toy_system(
        prfaas=(rng.uniform(0.1, 1), rng.uniform(1e-6, 1e-4), rng.uniform(0, 1e-9)),
        pd=(rng.uniform(0.1, 1), rng.uniform(1e-6, 3e-4), rng.uniform(0, 3e-9)),
        kv=(rng.uniform(0, 3e8), rng.uniform(1e3, 3e5)),
        batch=int(rng.integers(1, 64)),
        step_s=rng.uniform(0.01, 0.05),
        output_tokens=rng.uniform(100, 2000),
        bandwidth_gbps=rng.uniform(1, 400),
    )
    if rng.random() < 0.5:
        edges = np.unique(np.round(rng.uniform(100, 200_000, size=int(rng.integers(3, 8)))))
        workload = Histogram(tuple(edges), tuple(rng.uniform(0.001, 1, size=edges.size - 1)))
    else:
        workload = TruncatedLogNormal(rng.uniform(7, 11), rng.uniform(0.2, 2), 128, 131072)
    return system, workload


def test_optimizer_matches_dense_brute_force_on_random_cases():
    """Brute force: 4,000 thresholds x every split, vectorised, on 60 random systems with
    log-normal and histogram workloads in both modes. The optimiser solves t exactly, so it may
    only be better than the grid, never worse."""
    rng = np.random.default_rng(2026)
    for _ in range(60):
        system, workload = random_case(rng)
        n_prfaas, n_pd = int(rng.integers(1, 10)), int(rng.integers(1, 16))
        mode = Mode.EXACT if rng.random() < 0.5 else Mode.PAPER
        best = optimize_fixed_hardware(system, workload, SearchSpace(n_prfaas, n_pd), mode)
        grid = np.geomspace(workload.min_tokens * 0.999, workload.max_tokens, 4000)
        n_p = np.arange(n_pd)[:, None]
        brute = rates(
            system, workload, grid[None, :], n_prfaas, n_p, n_pd - n_p, mode
        ).system_rps.max()
        assert best.system_throughput_rps >= brute * (1 - 1e-9)


@given(st.integers(0, 6), st.integers(1, 8), st.floats(5, 400), st.sampled_from(["prfaas", "pd"]))
@settings(max_examples=40, deadline=None)
def test_more_hardware_or_bandwidth_never_lowers_optimum(case_problem, n_pf, n_pd, gbps, what):
    from dataclasses import replace

    from prfaas_plan import units

    s = replace(case_problem.system, link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(gbps))
    w = case_problem.workload
    base = optimize_fixed_hardware(s, w, SearchSpace(n_pf, n_pd)).system_throughput_rps
    grown = SearchSpace(n_pf + (what == "prfaas"), n_pd + (what == "pd"))
    assert optimize_fixed_hardware(s, w, grown).system_throughput_rps >= base * (1 - 1e-9)
    wider = replace(s, link_bandwidth_bytes_per_s=s.link_bandwidth_bytes_per_s * 2)
    assert optimize_fixed_hardware(
        wider, w, SearchSpace(n_pf, n_pd)
    ).system_throughput_rps >= base * (1 - 1e-9)


def test_search_helpers_against_closed_forms():
    """solve/search.py: golden section finds the vertex of parabolas (one per row) to its
    bracket's resolution; bisection brackets a step; the grids cover both routing extremes."""
    from prfaas_plan.solve.search import bisect, golden_section_max, threshold_grid

    peaks = np.array([0.3, 2.0, -1.5])
    x, fx = golden_section_max(
        lambda t: 5.0 - (t - peaks) ** 2, np.full(3, -4.0), np.full(3, 4.0), steps=60
    )
    np.testing.assert_allclose(x, peaks, atol=1e-7)
    np.testing.assert_allclose(fx, 5.0, atol=1e-12)
    lo, hi = bisect(np.zeros(3), np.full(3, 10.0), lambda t: t < peaks + 5, steps=50)
    assert np.all(lo <= peaks + 5) and np.all(peaks + 5 <= hi) and np.all(hi - lo < 1e-13)
    continuous = threshold_grid(TruncatedLogNormal(9.9, 1.0, 128, 131072), 65)
    assert continuous.size == 65 and continuous[0] == 128 and continuous[-1] == 131072
    observed = threshold_grid(ObservedLengths(np.array([5.0, 3.0, 3.0, 9.0])), 65)
    np.testing.assert_array_equal(observed, [2.0, 3.0, 5.0, 9.0])  # below all, then each length


@pytest.mark.slow
def test_both_modes_solved_together_are_each_mode_alone_to_the_last_bit():
    """A plan solves the paper and exact modes in one pass (best_configurations):
    each mode's search must move as it would alone, so the optima are bit for bit the same,
    also when the two modes' root searches converge after different numbers of steps; and a
    batch of deployments answers each as one call would."""
    from prfaas_plan.solve.threshold import best_configurations, optimize_fixed_hardware_batch

    rng = np.random.default_rng(13)
    for _ in range(40):
        system, workload = random_case(rng)
        space = SearchSpace(int(rng.integers(0, 10)), int(rng.integers(1, 16)))
        together = best_configurations(system, workload, space, tuple(Mode))
        for mode, configuration in zip(Mode, together, strict=True):
            # repr: every float to the last bit, and nan equal to nan
            assert repr(evaluate(system, workload, configuration, mode)) == repr(
                optimize_fixed_hardware(system, workload, space, mode)
            )
        prfaas, pd = rng.integers(0, 10, size=5), rng.integers(1, 40, size=5)
        links = rng.uniform(1e8, 5e10, size=5)
        modes = [Mode.EXACT if x else Mode.PAPER for x in rng.random(5) < 0.5]
        t, n_p, _ = optimize_fixed_hardware_batch(system, workload, prfaas, pd, links, None, modes)
        for i in range(5):
            alone = optimize_fixed_hardware_batch(
                system, workload, prfaas[i : i + 1], pd[i : i + 1], links[i : i + 1], None,
                modes[i],
            )  # fmt: skip
            assert repr((t[i], n_p[i])) == repr((alone[0][0], alone[1][0]))


def test_the_root_search_converges_superlinearly_where_alternating_sides_slowed_it(monkeypatch):
    """A balance point whose regula falsi steps alternate sides (the histogram example at
    1.50 GB/s, 2 PrfaaS and 17 PD instances, exact mode): Anderson–Björck scales a stale end
    only when the same end moves twice, so the search takes 7 model calls (Illinois: 8). A
    variant that scaled the stale end on every step took 37 here, converging only linearly."""
    import dataclasses

    from prfaas_plan.inputs.scenario import open_problem
    from prfaas_plan.solve import threshold

    problem = open_problem(ROOT / "examples" / "histogram_workload.yaml")
    system = dataclasses.replace(problem.system, link_bandwidth_bytes_per_s=1501964642.6)
    calls = []
    counted = threshold.prefill_limits

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return counted(*args, **kwargs)

    monkeypatch.setattr(threshold, "prefill_limits", counting)
    space = SearchSpace(prfaas_instances=2, pd_instances=17)
    plan = optimize_fixed_hardware(system, problem.workload, space, Mode.EXACT)
    assert plan.configuration.pd_prefill_instances == 13
    assert len(calls) <= 8


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.floats(1.0, 1e6), min_size=1, max_size=9),
            st.one_of(
                st.floats(0.0, 2e6), st.sampled_from([float("nan"), float("inf"), -float("inf")])
            ),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_each_rows_position_in_its_own_grid_is_searchsorteds(cases):
    """A batch of differing length ranges searches a grid per row (solve/threshold.py
    `_positions`): each row's position is np.searchsorted's in that row's grid, nan, inf and
    a value equal to a grid point included."""
    from prfaas_plan.solve.threshold import _positions

    width = max(len(g) for g, _ in cases)
    grids = np.array([sorted(g) + [max(g)] * (width - len(g)) for g, _ in cases])
    values = np.array(
        [v if i % 2 else grids[i, -1 - i % len(grids[i])] for i, (_, v) in enumerate(cases)]
    )
    expected = [np.searchsorted(grid, v) for grid, v in zip(grids, values, strict=True)]
    assert _positions(grids, values).tolist() == expected
