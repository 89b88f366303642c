"""Prefix caching in the closed form (workload.prefix_cache_hit_rate) against the simulator's
prefix-aware routing (sim/prefix.py) on a trace whose every request finds the same share of
its tokens cached: offloaded share, prefill work per side and KV bytes sent to PD agree."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.distributions import ObservedLengths, UncachedLengths
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import build_problem, load_scenario, open_problem
from prfaas_plan.sim.arrivals import MOONCAKE_BLOCK_TOKENS, PrefixBlocks
from prfaas_plan.sim.prefix import BandwidthRegime, PrefixAwareThreshold, route_with_prefix_cache
from tests.test_cli import assert_clean_error, run

from .conftest import ROOT

BLOCK = MOONCAKE_BLOCK_TOKENS


def _trace(hit_rate: float, requests: int, seed: int):
    """Lengths of whole blocks; request i shares its first round(h·n_i) blocks with a common
    prefix (blocks 0..), the rest are its own. A first warm-up request holds the whole common
    prefix, so every later request finds exactly its shared blocks cached."""
    rng = np.random.default_rng(seed)
    blocks = np.clip(np.round(np.exp(rng.normal(3.6, 0.8, requests))), 2, 256).astype(int)
    shared = np.minimum(np.round(hit_rate * blocks), blocks - 1).astype(
        int
    )  # >= 1 block to prefill
    longest = int(blocks.max())
    values, offsets, fresh = [list(range(longest))], [0, longest], 10**6
    for n, k in zip(blocks.tolist(), shared.tolist(), strict=True):
        own = list(range(fresh, fresh + n - k))
        fresh += n - k
        values.append(list(range(k)) + own)
        offsets.append(offsets[-1] + n)
    flat = np.concatenate([np.asarray(v, dtype=np.int64) for v in values])
    lengths = np.concatenate([[longest * BLOCK], blocks * BLOCK]).astype(float)
    return lengths, PrefixBlocks(flat, np.asarray(offsets)), shared * BLOCK


@settings(max_examples=15, deadline=None)
@given(hit_rate=st.sampled_from([0.0, 0.25, 0.5, 0.75]), seed=st.integers(0, 10**6),
       quantile=st.floats(0.1, 0.9))  # fmt: skip
def test_closed_form_matches_the_simulators_prefix_routing(hit_rate, seed, quantile):
    lengths, blocks, cached = _trace(hit_rate, 400, seed)
    full = ObservedLengths(lengths[1:])
    uncached = UncachedLengths(full, hit_rate)
    threshold = float(uncached.quantile(quantile)) + 0.5 * BLOCK * (1 - hit_rate)
    policy = PrefixAwareThreshold(BandwidthRegime.ABUNDANT, pd_caches_offloaded=True)
    routes = route_with_prefix_cache(lengths, blocks, threshold, policy)
    sim = slice(1, None)  # the warm-up request aside
    # exact where h·n is a whole number of blocks (h = 0, 0.5 on even n): the difference is the
    # rounding of the shared prefix to whole blocks, at most half a block per request
    slack = 0.5 * BLOCK / lengths[1:].min() if hit_rate not in (0.0,) else 0.0
    m = uncached.partial_moments(threshold, np.inf, max_order=1)
    offloaded = routes.offloaded[sim]
    u_sim = lengths[1:] - cached
    assert np.array_equal(offloaded, u_sim > threshold)  # routing on the uncached length
    assert np.allclose(routes.prefill_tokens[sim], u_sim)  # prefill the uncached length
    assert np.allclose(routes.to_pd_tokens[sim][offloaded], u_sim[offloaded])  # PD holds the rest
    share_sim = offloaded.mean()
    assert (
        abs(share_sim - m[0]) <= np.mean(np.abs(u_sim - (1 - hit_rate) * lengths[1:]) > 0) + 1e-12
    )
    work_sim = routes.prefill_tokens[sim].mean()
    assert work_sim == pytest.approx(uncached.mean_tokens, rel=slack + 1e-12)


def test_the_hit_rate_scales_prefill_routing_and_transfer_not_decode(tmp_path):
    text = (
        (ROOT / "examples" / "case_study.yaml")
        .read_text()
        .replace("output_tokens: 1024", "output_tokens: 1024\n  prefix_cache_hit_rate: 0.3")
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    cached = build_problem(load_scenario(path), path, Catalog.open())
    plain = open_problem()
    assert cached.workload.mean_tokens == pytest.approx(0.7 * plain.workload.mean_tokens)
    assert cached.system.decode == plain.system.decode  # decode reads the full context
    for t in (5e3, 2e4, 6e4):
        assert cached.workload.probability_above(t) == pytest.approx(
            plain.workload.probability_above(t / 0.7)
        )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5000), st.lists(st.integers(0, 12), max_size=10)),
        min_size=1, max_size=30,
    )
)  # fmt: skip
def test_the_trace_hit_rate_is_the_share_an_unbounded_cache_serves(requests):
    """Oracle: replay the trace through a set of seen block ids, one request at a time."""
    from prfaas_plan.inputs.traces import prefix_hit_rate
    from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace

    ids = [b for _, blocks in requests for b in blocks]
    offsets = np.cumsum([0] + [len(blocks) for _, blocks in requests])
    lengths = np.array([float(n) for n, _ in requests])
    trace = RequestTrace(
        np.arange(len(requests), dtype=float), lengths, np.ones(len(requests)),
        PrefixBlocks(np.array(ids, dtype=np.int64), offsets), "t",
    )  # fmt: skip
    seen: set[int] = set()
    cached = 0.0
    for n, blocks in requests:
        cached += min(512.0 * sum(b in seen for b in blocks), n)
        seen.update(blocks)
    assert prefix_hit_rate(trace, 512) == pytest.approx(cached / lengths.sum(), abs=1e-12)


def test_a_hit_rate_from_the_trace_plans_as_that_rate_given(tmp_path):
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.scenario import build_problem, load_scenario
    from prfaas_plan.inputs.traces import prefix_hit_rate, read_mooncake_trace

    lines = [
        '{"timestamp": 0, "input_length": 20000, "output_length": 100, "hash_ids": [1, 2, 3]}',
        '{"timestamp": 5, "input_length": 30000, "output_length": 100, "hash_ids": [1, 2, 4, 5]}',
        '{"timestamp": 9, "input_length": 1500, "output_length": 100, "hash_ids": [1, 2, 3]}',
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    rate = prefix_hit_rate(read_mooncake_trace(tmp_path / "t.jsonl"), 512)
    assert rate == pytest.approx((1024 + 1500) / 51500)
    case = (ROOT / "examples" / "case_study.yaml").read_text().split("workload:")[0]
    plans = []
    for hit in ("from_trace", repr(rate)):
        path = tmp_path / f"s{len(plans)}.yaml"
        path.write_text(case + "workload:\n  input_tokens: {distribution: observed, file: t.jsonl}\n"
                        f"  output_tokens: 1024\n  prefix_cache_hit_rate: {hit}\n"
                        "slo: {decode_tokens_per_s: 40}\n")  # fmt: skip
        plans.append(build_problem(load_scenario(path), path, Catalog.open()).workload.hit_rate)
    assert plans[0] == pytest.approx(plans[1])
    bad = tmp_path / "bad.yaml"
    bad.write_text(case + "workload:\n  input_tokens: {distribution: truncated_lognormal, mu_log: 9, "
                   "sigma_log: 1, min_tokens: 128, max_tokens: 131072}\n  output_tokens: 1024\n"
                   "  prefix_cache_hit_rate: from_trace\nslo: {decode_tokens_per_s: 40}\n")  # fmt: skip
    assert_clean_error(run("optimize", bad), 3, "prefix_cache_hit_rate: from_trace needs")
