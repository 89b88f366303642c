"""The batched model calls a plan makes (several configurations, thresholds or modes in one
vectorised call) give the numbers of one call each, to the last bit, for every kind of length
distribution: the server's speed comes from these, and no answer may depend on what was
computed alongside it."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.capacity import (
    Configuration,
    evaluate,
    evaluate_many,
    prefill_limits,
    prefill_limits_of_splits,
    rates,
)
from prfaas_plan.analytic.distributions import Histogram, ObservedLengths, UncachedLengths
from prfaas_plan.analytic.log_normal import TruncatedLogNormal, truncated_log_normal
from prfaas_plan.analytic.log_normal_rows import LogNormalRows
from prfaas_plan.analytic.ttft import unloaded_ttft, unloaded_ttfts
from prfaas_plan.choices import Mode

WORKLOADS = {
    "log-normal": TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0),
    "histogram": Histogram((128.0, 4096.0, 16384.0, 65536.0, 131072.0), (5.0, 3.0, 1.5, 0.5)),
    "observed": ObservedLengths(np.array([300.0, 2000.0, 9000.0, 20000.0, 20000.0, 90000.0])),
    "uncached": UncachedLengths(
        TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0), (0.1, 0.4), (16384.0,)
    ),
    # 8 bands or more: numpy sums them pairwise, so their order of summation is tested too
    "uncached-12-bands": UncachedLengths(
        TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0),
        tuple(0.05 * i for i in range(12)),
        tuple(float(2**k) for k in range(8, 19)),
    ),
}
thresholds = st.one_of(st.floats(0.0, 150000.0), st.just(np.inf))
configurations = st.builds(
    Configuration, st.integers(0, 12), st.integers(0, 12), st.integers(1, 12), thresholds
)


@given(
    st.sampled_from(sorted(WORKLOADS)),
    st.lists(st.tuples(configurations, st.sampled_from(list(Mode))), min_size=1, max_size=5),
)
@settings(max_examples=120, deadline=None)
def test_evaluate_many_is_evaluate_of_each(case_problem, kind, pairs):
    s, w = case_problem.system, WORKLOADS[kind]
    batched = evaluate_many(s, w, [c for c, _ in pairs], [m for _, m in pairs])
    for (c, mode), got in zip(pairs, batched, strict=True):
        assert repr(got) == repr(evaluate(s, w, c, mode))  # repr: nan == nan, every field


@given(st.sampled_from(sorted(WORKLOADS)), st.lists(thresholds, min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_unloaded_ttfts_is_unloaded_ttft_of_each(case_problem, kind, ts):
    s, w = case_problem.system, WORKLOADS[kind]
    for t, got in zip(ts, unloaded_ttfts(s, w, ts), strict=True):
        assert repr(got) == repr(unloaded_ttft(s, w, t))


@given(
    st.sampled_from(sorted(WORKLOADS)),
    st.lists(st.tuples(configurations, st.booleans()), min_size=1, max_size=6),
)
@settings(max_examples=60, deadline=None)
def test_prefill_limits_are_the_rates_terms(case_problem, kind, rows):
    """The root search's two terms, with a mode per row, equal rates()'s limits."""
    s, w = case_problem.system, WORKLOADS[kind]
    t = np.array([c.threshold_tokens for c, _ in rows])
    prfaas = np.array([float(c.prfaas_instances) for c, _ in rows])
    n_p = np.array([float(c.pd_prefill_instances) for c, _ in rows])
    n_d = np.array([float(c.pd_decode_instances) for c, _ in rows])
    exact = np.array([e for _, e in rows])
    f, g = prefill_limits(s, w, t, prfaas, n_p, exact)
    r = rates(s, w, t, prfaas, n_p, n_d, exact)
    np.testing.assert_array_equal(f, r.limits_rps[:2].min(axis=0))
    np.testing.assert_array_equal(g, r.limits_rps[2])


deployments = st.tuples(
    st.integers(0, 12),  # PrfaaS instances
    st.booleans(),  # exact mode
    st.floats(1e9, 1e11),  # link bytes/s
    st.sampled_from(
        [(9.9, 1.0, 128.0, 131072.0), (8.5, 0.6, 128.0, 131072.0), (10.4, 1.4, 300.0, 60000.0)]
    ),  # log-normal parameters, where a deployment has its own
)


@given(
    st.sampled_from([*sorted(WORKLOADS), "log-normal rows"]),
    st.lists(deployments, min_size=1, max_size=4),
    st.integers(1, 5),
    st.lists(thresholds, min_size=1, max_size=6),
    st.booleans(),
    st.booleans(),
)
@settings(max_examples=80, deadline=None)
def test_prefill_limits_of_splits_are_those_of_each_row(
    case_problem, kind, chosen, splits, ts, grid_per_deployment, modes_per_row
):
    """The optimiser's coarse grid: what does not depend on the PD split computed once per
    deployment gives every row the terms `prefill_limits` gives it (a workload for all, or
    one per deployment; one row of thresholds for all, or one per deployment; one mode, or a
    mode per deployment)."""
    s = case_problem.system
    count = len(chosen)
    if kind == "log-normal rows":
        workload = LogNormalRows.of([truncated_log_normal(*d[3]) for d in chosen])
    else:
        workload = WORKLOADS[kind]
    grid = np.array(ts)[None, :]
    if grid_per_deployment:  # each deployment's thresholds scaled: no two rows alike
        grid = grid * np.linspace(0.5, 1.5, count)[:, None]
    prfaas = np.array([float(d[0]) for d in chosen])
    links = np.array([d[2] for d in chosen])
    exact = np.array([d[1] for d in chosen])
    mode = exact if modes_per_row else (Mode.EXACT if exact[0] else Mode.PAPER)
    n_p = np.tile(np.arange(splits), count)  # each deployment's splits: 0 .. splits - 1
    per_deployment = workload.column() if isinstance(workload, LogNormalRows) else workload
    f, g = prefill_limits_of_splits(
        s, per_deployment, grid, prfaas[:, None], n_p[:, None],
        mode if isinstance(mode, Mode) else mode[:, None], links[:, None], splits,
    )  # fmt: skip
    spread = np.repeat(np.arange(count), splits)
    rows_workload = (
        workload.take(spread).column() if isinstance(workload, LogNormalRows) else workload
    )
    expected_f, expected_g = prefill_limits(
        s, rows_workload, grid if grid.shape[0] == 1 else grid[spread], prfaas[spread][:, None],
        n_p[:, None], mode if isinstance(mode, Mode) else mode[spread][:, None],
        links[spread][:, None],
    )  # fmt: skip
    shape = (count * splits, grid.shape[1])
    np.testing.assert_array_equal(f, np.broadcast_to(expected_f, shape))
    np.testing.assert_array_equal(g, np.broadcast_to(expected_g, shape))
    assert f.shape == g.shape == shape


def test_one_log_normal_instance_per_parameters():
    a = truncated_log_normal(9.9, 1.0, 128.0, 131072.0)
    assert truncated_log_normal(9.9, 1.0, 128.0, 131072.0) is a
    assert a == TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0)
    assert truncated_log_normal(9.8, 1.0, 128.0, 131072.0) is not a


@given(
    st.lists(st.floats(0.0, 0.9), min_size=1, max_size=64),
    st.lists(st.floats(0.0, 150000.0), min_size=1, max_size=6),
)
@settings(max_examples=80, deadline=None)
def test_banded_moments_of_many_thresholds_are_those_of_each(hit_rates, ts):
    """The reference path: one threshold at a time (what a plan computed before it batched);
    up to 64 bands (the bound), every shape of thresholds."""
    edges = tuple(float(e) for e in np.geomspace(300.0, 120000.0, len(hit_rates) + 1)[1:-1])
    u = UncachedLengths(TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0), tuple(hit_rates), edges)
    t = np.array(ts)
    for a, b in ((t, np.inf), (-np.inf, t)):
        one_each = np.stack([u.partial_moments(x, y) for x, y in np.broadcast(a, b)], axis=1)
        np.testing.assert_array_equal(u.partial_moments(a, b), one_each)
        np.testing.assert_array_equal(
            u.partial_moments(np.reshape(a, (1, -1)), np.reshape(b, (1, -1)))[:, 0], one_each
        )


def test_a_negative_zero_parameter_reads_the_same_whichever_came_first():
    """-0.0 == 0.0 would share a cache entry, so the first one seen would decide how the
    other is described (found by a review): both are kept as +0.0."""
    first = truncated_log_normal(-0.0, 1.5, 100.0, 200000.0)
    assert first is truncated_log_normal(0.0, 1.5, 100.0, 200000.0)
    assert "mu_log=0," in first.describe()
