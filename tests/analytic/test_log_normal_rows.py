"""A sweep's block of differing truncated log-normals computed together (analytic/ttft_rows.py:
meshes and unloaded TTFTs in 2-D passes; analytic/log_normal_rows.py `prepare`: normalisers,
means and split constants in one pass) gives, to the last bit, what each distribution's own
code gives, for bounds shared or not, thresholds at and past the bounds, and distributions
whose mesh has cells without mass or whose numbers cannot be computed."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.log_normal import TruncatedLogNormal, _log_normal_mesh, split_constants
from prfaas_plan.analytic.log_normal_rows import LogNormalRows, interval_masses, prepare
from prfaas_plan.analytic.ttft import unloaded_ttfts
from prfaas_plan.analytic.ttft_rows import (
    ROWS_PER_PASS,
    THRESHOLD_ROWS_PER_PASS,
    mesh_moments,
    unloaded_ttfts_rows,
)
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.scenario import build_workload
from prfaas_plan.inputs.scenario_schema import LogNormalLengths

BOUNDS = [(128.0, 131072.0), (1000.0, 65536.0)]
# sigma_log below ~0.2 (these bounds) meshes by the closed form, above by quadrature: a block
# mixes both (analytic/log_normal.py `quadrature_fits`)
sigmas = st.one_of(st.floats(0.3, 1.8), st.floats(0.05, 0.3))
distributions = st.tuples(st.floats(6.0, 12.0), sigmas, st.sampled_from(BOUNDS)).map(
    lambda p: TruncatedLogNormal(p[0], p[1], *p[2])
)
# a narrow log-normal far below its upper bound: most of its mesh cells have no mass
NARROW = TruncatedLogNormal(5.0, 0.05, 128.0, 131072.0)
thresholds = st.one_of(st.floats(0.0, 150000.0), st.just(np.inf), st.sampled_from([128.0, 0.0]))
links = st.floats(5e8, 2e10)


def fresh(d: TruncatedLogNormal) -> TruncatedLogNormal:
    """An instance of `d`'s parameters with nothing memoised."""
    return TruncatedLogNormal(d.mu_log, d.sigma_log, d.min_tokens, d.max_tokens)


@given(st.lists(distributions, min_size=1, max_size=6), st.booleans())
@settings(max_examples=40, deadline=None)
def test_meshes_in_rows_are_each_distributions_mesh(ds, narrow):
    """Distributions of differing length ranges too (each row its own range's edges)."""
    group = ds + [NARROW] * narrow
    mass, moment = mesh_moments(group)
    for i, d in enumerate(group):
        lengths, weights = _log_normal_mesh.__wrapped__(d)
        keep = mass[i] > 0
        np.testing.assert_array_equal(moment[i][keep] / mass[i][keep], lengths)
        np.testing.assert_array_equal(mass[i][keep], weights)


@given(
    st.lists(
        st.tuples(distributions, st.lists(st.tuples(thresholds, links), min_size=1, max_size=4)),
        min_size=1, max_size=8,
    ),
    st.booleans(),
    st.booleans(),
)  # fmt: skip
@settings(max_examples=60, deadline=None)
def test_unloaded_ttfts_in_rows_are_those_of_each_workload(case_problem, rows, narrow, one_link):
    """Any workloads, thresholds and links; `one_link`: each workload's thresholds at one link
    (a plan and its baselines: their remote TTFTs computed once per workload)."""
    if narrow:
        rows = [*rows, (NARROW, [(20000.0, 1e9), (np.inf, 1e9)])]
    s = case_problem.system
    ws = [d for d, _ in rows]
    ts = [[t for t, _ in pairs] for _, pairs in rows]
    ls = [[pairs[0][1] if one_link else b for _, b in pairs] for _, pairs in rows]
    got = unloaded_ttfts_rows(s, ws, ts, ls)
    for w, t, b, summaries in zip(ws, ts, ls, got, strict=True):
        assert repr(summaries) == repr(unloaded_ttfts(s, w, t, b))  # repr: nan == nan


def test_more_workloads_than_one_pass_holds(case_problem):
    ws = [
        TruncatedLogNormal(8.0 + 0.02 * i, 1.0, 128.0, 131072.0) for i in range(ROWS_PER_PASS + 3)
    ]
    ts, ls = [[5000.0 * (i % 7), np.inf] for i in range(len(ws))], [[1e9, 3e9]] * len(ws)
    got = unloaded_ttfts_rows(case_problem.system, ws, ts, ls)
    for w, t, b, summaries in zip(ws, ts, ls, got, strict=True):
        assert repr(summaries) == repr(unloaded_ttfts(case_problem.system, w, t, b))


def test_more_thresholds_than_one_pass_holds(case_problem):
    """A pass holds at most THRESHOLD_ROWS_PER_PASS (workload, threshold) rows, so its arrays
    stay small whatever a workload's evaluations; a workload with more is computed alone: the
    same summaries either way (a review measured 315 MB for one extra distribution in a block
    of 1,000 evaluations' thresholds before the cap)."""
    counts = [THRESHOLD_ROWS_PER_PASS + 5, 3, THRESHOLD_ROWS_PER_PASS - 2, 7, 1]
    ws = [TruncatedLogNormal(9.0 + 0.1 * i, 1.0, 128.0, 131072.0) for i in range(len(counts))]
    ts = [[float(t) for t in np.linspace(0.0, 131072.0, n)] for n in counts]
    ls = [[1e9 + 1e7 * j for j in range(n)] for n in counts]
    got = unloaded_ttfts_rows(case_problem.system, ws, ts, ls)
    for w, t, b, summaries in zip(ws, ts, ls, got, strict=True):
        assert repr(summaries) == repr(unloaded_ttfts(case_problem.system, w, t, b))


@given(st.lists(distributions, min_size=1, max_size=8))
@settings(max_examples=40, deadline=None)
def test_prepared_constants_are_each_distributions_own(ds):
    prepared = [fresh(d) for d in ds]
    prepare(prepared)
    for d, p in zip(ds, prepared, strict=True):
        own = fresh(d)
        assert p.__dict__["_normaliser"] == own._normaliser
        assert p.__dict__["mean_tokens"] == own.mean_tokens
        for ndim in (0, 1, 2):
            a, b = split_constants.__wrapped__(p, ndim), split_constants.__wrapped__(own, ndim)
            for name in a.__dataclass_fields__:
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name), strict=True)


def test_a_log_normal_without_mass_is_left_to_its_own_checks():
    """No mass on [min, max] (its scale would divide by zero): prepare leaves it alone and
    the workload's own check still refuses it."""
    spec = LogNormalLengths(
        distribution="truncated_lognormal", mu_log=-40.0, sigma_log=0.01, min_tokens=128,
        max_tokens=131072,
    )  # fmt: skip
    d = TruncatedLogNormal(-40.0, 0.01, 128.0, 131072.0)
    prepare([d])
    assert "mean_tokens" not in d.__dict__ and "_split_constants" not in d.__dict__
    with pytest.raises(ConfigError, match="puts 0 of its probability"):
        build_workload(spec, Path("."))


@given(
    st.lists(distributions, min_size=1, max_size=6),
    st.lists(st.floats(0.0, 200000.0), min_size=1, max_size=4),
)
@settings(max_examples=40, deadline=None)
def test_interval_masses_are_each_distributions_partial_moments(ds, ends):
    """The masses range notes read (below and above the profiled ranges), any ends."""
    a = np.array([-np.inf, *ends])
    b = np.array([*ends, np.inf])
    rows = interval_masses([*ds, NARROW], a, b)
    for d, row in zip([*ds, NARROW], rows, strict=True):
        np.testing.assert_array_equal(row, d.partial_moments(a, b, max_order=0)[0])


def test_interval_masses_leave_a_distribution_without_mass_to_its_own_code():
    d = TruncatedLogNormal(-40.0, 0.01, 128.0, 131072.0)
    assert np.isnan(interval_masses([d], np.array([-np.inf]), np.array([np.inf]))).all()


@given(
    st.lists(distributions, min_size=1, max_size=5),
    st.lists(st.integers(0, 4), min_size=2, max_size=12),
    st.lists(thresholds, min_size=1, max_size=8),
)
@settings(max_examples=40, deadline=None)
def test_rows_at_shared_thresholds_split_each_distinct_distribution_once(ds, picks, ts):
    """A column of repeated rows at one row of thresholds (the optimiser's coarse grid) is
    split per distinct distribution, then spread: the numbers of every row split as itself."""
    rows = LogNormalRows.of(ds).take(np.array([p % len(ds) for p in picks]))
    grid = np.array(ts)[None, :]
    short, long = rows.column().split(grid)
    for i, p in enumerate(picks):
        own_short, own_long = ds[p % len(ds)].split(np.array(ts))
        np.testing.assert_array_equal(short[:, i], own_short)
        np.testing.assert_array_equal(long[:, i], own_long)


@given(
    st.lists(distributions, min_size=1, max_size=5),
    st.lists(st.integers(0, 4), min_size=2, max_size=12),
    st.lists(thresholds, min_size=2, max_size=8),
    st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_rows_at_their_own_distributions_thresholds_split_each_distinct_distribution_once(
    ds, picks, ts, disturb
):
    """A row of thresholds per row, the same for the rows of one distribution (the coarse grid
    over differing length ranges), is split once per distinct distribution too; one row's
    thresholds changed (`disturb`), every row is split as itself: the numbers of each row's own
    split either way, and the split per distinct distribution is taken only when it applies."""
    chosen = np.array([p % len(ds) for p in picks])
    rows = LogNormalRows.of(ds).take(chosen)
    per_distribution = np.array([np.array(ts) * (1 + 0.25 * k) for k in range(len(ds))])
    grid = per_distribution[chosen]
    if disturb:
        grid[-1, 0] = 7777.0 if grid[-1, 0] != 7777.0 else 8888.0
    import prfaas_plan.analytic.log_normal_rows as module

    split_rows = []  # the rows each split's arithmetic (split_at) computes
    original = module.split_at

    def counted(t: np.ndarray, *rest: object) -> tuple[np.ndarray, np.ndarray]:
        split_rows.append(np.shape(t)[0])
        return original(t, *rest)  # type: ignore[arg-type]

    module.split_at = counted  # type: ignore[assignment]
    try:
        short, long = rows.column().split(grid)
    finally:
        module.split_at = original
    for i, p in enumerate(chosen):
        own_short, own_long = ds[p].split(grid[i])
        np.testing.assert_array_equal(short[:, i], own_short)
        np.testing.assert_array_equal(long[:, i], own_long)
    # the rows of each distribution at one row of thresholds (the disturbed row may be its
    # distribution's only one), and fewer distributions than rows (`of`: one per instance)
    consistent = all(
        np.array_equal(grid[i], grid[j])
        for i in range(len(chosen)) for j in range(len(chosen)) if chosen[i] == chosen[j]
    )  # fmt: skip
    once = consistent and len(ds) < len(chosen)
    assert split_rows == [len(set(chosen.tolist())) if once else len(chosen)]
