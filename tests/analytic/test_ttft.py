import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.distributions import ObservedLengths
from prfaas_plan.analytic.ttft import _weighted_percentiles, unloaded_ttft
from tests.conftest import toy_system


def test_hand_computed_ttft():
    """Lengths 1,000 (local) and 10,000 (offloaded), equally likely."""
    system = toy_system(prfaas=(1.0, 1e-4), pd=(0.5, 2e-4), kv=(0.0, 1e4), bandwidth_gbps=8.0)
    t = unloaded_ttft(system, ObservedLengths(np.array([1000.0, 10000.0])), 5000.0)
    local = 0.5 + 2e-4 * 1000  # 0.7 s
    offloaded = (1.0 + 1e-4 * 10000) + 1e4 * 10000 / 1e9  # 2 s prefill + 0.1 s transfer
    assert t.local_mean_s == pytest.approx(local)
    assert t.offloaded_mean_s == pytest.approx(offloaded)
    assert t.mean_s == pytest.approx((local + offloaded) / 2)
    assert t.p50_s == pytest.approx(local)
    assert t.p99_s == pytest.approx(offloaded)


def test_ttft_matches_monte_carlo(case_problem, rng):
    """Oracle: sample lengths from the truncated log-normal and average per-request TTFTs."""
    s, w = case_problem.system, case_problem.workload
    x = np.exp(rng.normal(9.9, 1.0, size=2_000_000))
    x = x[(x >= 128) & (x <= 131072)]
    t = 19400.0
    per_request = np.where(
        x > t,
        s.prfaas_prefill_latency(x) + s.kv_cache_size(x) / s.link_bandwidth_bytes_per_s,
        s.pd_prefill_latency(x),
    )
    got = unloaded_ttft(s, w, t)
    assert got.mean_s == pytest.approx(per_request.mean(), rel=2e-3)
    for q, value in ((50, got.p50_s), (90, got.p90_s), (99, got.p99_s)):
        assert value == pytest.approx(np.percentile(per_request, q), rel=5e-3)


def test_routing_everything_local_or_remote(case_problem):
    s, w = case_problem.system, case_problem.workload
    local = unloaded_ttft(s, w, np.inf)
    remote = unloaded_ttft(s, w, 0.0)
    assert np.isnan(local.offloaded_mean_s) and np.isnan(remote.local_mean_s)
    assert local.mean_s == pytest.approx(
        float(s.pd_prefill_latency.expectation(w.partial_moments(0, np.inf)))
    )


@given(
    values=st.lists(
        st.floats(0, 100, allow_nan=False) | st.sampled_from([1.0, 2.0, float("nan")]),
        min_size=1,
        max_size=40,
    ),
    seed=st.integers(0, 2**32 - 1),
    presorted=st.booleans(),
)
@settings(max_examples=300, deadline=None)
@pytest.mark.slow
def test_percentiles_skip_the_sort_only_where_it_changes_nothing(values, seed, presorted):
    """Given the cumulative weights, values already in order are not sorted again: the
    percentiles are the sorting path's to the last bit, for ordered values (ties included)
    and for unordered ones or nan (which take the sorting path)."""
    x = np.array(sorted(values) if presorted else values)
    weights = np.random.default_rng(seed).uniform(0.0, 1.0, x.size) + 1e-3
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    expected = _weighted_percentiles(x, weights, (1, 50, 90, 99, 100))
    given_cumulative = _weighted_percentiles(x, weights, (1, 50, 90, 99, 100), cumulative)
    np.testing.assert_array_equal(given_cumulative, expected)
