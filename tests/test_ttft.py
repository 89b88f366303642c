import numpy as np
import pytest

from prfaas_plan.analytic.distributions import ObservedLengths
from prfaas_plan.analytic.ttft import unloaded_ttft

from .conftest import toy_system


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
