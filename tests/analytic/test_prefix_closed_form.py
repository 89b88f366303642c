"""Prefix caching in the closed form (workload.prefix_cache_hit_rate) against the simulator's
prefix-aware routing (sim/prefix.py) on a trace whose every request finds the same share of
its tokens cached: offloaded share, prefill work per side and KV bytes sent to PD agree."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.distributions import ObservedLengths, UncachedLengths
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import build_problem, load_scenario, open_problem
from prfaas_plan.sim.arrivals import MOONCAKE_BLOCK_TOKENS, PrefixBlocks
from prfaas_plan.sim.prefix import BandwidthRegime, PrefixAwareThreshold, route_with_prefix_cache
from tests.cli.test_cli import assert_clean_error, run
from tests.conftest import ROOT

BLOCK = MOONCAKE_BLOCK_TOKENS


def _trace(hit_rate, requests: int, seed: int, multiple_of_blocks: int = 1):
    """Lengths of whole blocks (a multiple of `multiple_of_blocks`); request i shares its first
    round(h(L_i)·n_i) blocks with a common prefix (blocks 0..), the rest are its own, with
    `hit_rate` a number or a function of the lengths L (tokens). A first warm-up request holds
    the whole common prefix, so every later request finds exactly its shared blocks cached."""
    rng = np.random.default_rng(seed)
    units = np.clip(np.round(np.exp(rng.normal(3.6, 0.8, requests)) / multiple_of_blocks), 1, None)
    blocks = np.clip(units * multiple_of_blocks, 2, 256).astype(int)
    rates = hit_rate(blocks * BLOCK) if callable(hit_rate) else np.full(requests, hit_rate)
    shared = np.minimum(np.round(rates * blocks), blocks - 1).astype(int)  # >= 1 block to prefill
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
    uncached = UncachedLengths(full, (hit_rate,))
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


def _trace_of(requests):
    """A RequestTrace of (input tokens, block ids) pairs, arriving one a second."""
    from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace

    ids = [b for _, blocks in requests for b in blocks]
    offsets = np.cumsum([0] + [len(blocks) for _, blocks in requests])
    lengths = np.array([float(n) for n, _ in requests])
    return RequestTrace(
        np.arange(len(requests), dtype=float), lengths, np.ones(len(requests)),
        PrefixBlocks(np.array(ids, dtype=np.int64), offsets), "t",
    )  # fmt: skip


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

    trace = _trace_of(requests)
    seen: set[int] = set()
    cached = 0.0
    for n, blocks in requests:
        cached += min(512.0 * sum(b in seen for b in blocks), n)
        seen.update(blocks)
    assert prefix_hit_rate(trace, 512) == pytest.approx(
        cached / sum(n for n, _ in requests), abs=1e-12
    )


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


# --- a hit-rate per band of the input length (prefix_cache_hit_rate: {bands: [...]}) ---

QUARTERS = st.sampled_from([0.0, 0.25, 0.5, 0.75])


@settings(max_examples=15, deadline=None)
@given(rates=st.tuples(QUARTERS, QUARTERS, QUARTERS), edges_blocks=st.tuples(
       st.integers(4, 60), st.integers(64, 160)), seed=st.integers(0, 10**6),
       quantile=st.floats(0.05, 0.95))  # fmt: skip
def test_banded_closed_form_matches_the_simulators_prefix_routing(
    rates, edges_blocks, seed, quantile
):
    """As the constant case, each request sharing its band's share of its blocks; lengths are
    multiples of 4 blocks, so h·n is a whole number of blocks and the agreement is exact."""
    edges = tuple(float(4 * BLOCK * e) for e in edges_blocks)

    def band_rate(tokens):
        return np.asarray(rates)[np.searchsorted(edges, tokens, side="left")]

    lengths, blocks, cached = _trace(band_rate, 400, seed, multiple_of_blocks=4)
    full_lengths = lengths[1:]
    uncached = UncachedLengths(ObservedLengths(full_lengths), rates, edges)
    threshold = float(uncached.quantile(quantile)) + 100.0  # U is a multiple of 512: no ties
    policy = PrefixAwareThreshold(BandwidthRegime.ABUNDANT, pd_caches_offloaded=True)
    routes = route_with_prefix_cache(lengths, blocks, threshold, policy)
    u_sim = full_lengths - cached
    assert np.array_equal(u_sim, uncached.uncached_tokens(full_lengths))
    offloaded = routes.offloaded[1:]
    assert np.array_equal(offloaded, u_sim > threshold)  # routing on the uncached length
    assert np.array_equal(routes.prefill_tokens[1:], u_sim)  # prefill the uncached length
    assert np.array_equal(routes.to_pd_tokens[1:][offloaded], u_sim[offloaded])
    m = uncached.partial_moments(threshold, np.inf, max_order=2)
    assert offloaded.mean() == pytest.approx(m[0], abs=1e-12)
    assert np.sum(u_sim[offloaded]) / u_sim.size == pytest.approx(m[1], rel=1e-12)
    assert np.sum(u_sim[offloaded] ** 2) / u_sim.size == pytest.approx(m[2], rel=1e-12)
    assert routes.prefill_tokens[1:].mean() == pytest.approx(uncached.mean_tokens, rel=1e-12)


def test_banded_moments_and_quantiles_against_direct_integration():
    """Oracle: E[U^k ; U > t] by scipy.integrate.quad over the truncated log-normal density of
    L, band by band, with U = (1 − h(L))·L and the hit-rate rising at 8,000 and 32,000 tokens
    (so U drops there and thresholds between 7,200 and 12,800 tokens are met twice)."""
    from scipy import integrate, stats

    full = TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0)
    rates, edges = (0.1, 0.4, 0.6), (8000.0, 32000.0)
    uncached = UncachedLengths(full, rates, edges)
    mass = stats.norm.cdf(np.log(131072.0) - 9.9) - stats.norm.cdf(np.log(128.0) - 9.9)

    def density(tokens):
        return stats.lognorm.pdf(tokens, 1.0, scale=np.exp(9.9)) / mass

    pieces = [(128.0, 8000.0, 0.9), (8000.0, 32000.0, 0.6), (32000.0, 131072.0, 0.4)]
    for t in (3000.0, 7500.0, 12000.0, 13000.0, 19000.0, 40000.0):
        above = uncached.partial_moments(t, np.inf)
        for k in range(3):
            direct = sum(
                integrate.quad(lambda x, c=c, k=k: (c * x) ** k * density(x), max(lo, t / c), hi)[0]
                for lo, hi, c in pieces
                if t / c < hi
            )
            assert above[k] == pytest.approx(direct, rel=1e-7), (t, k)
    assert uncached.min_tokens == pytest.approx(0.9 * 128) and uncached.max_tokens == 0.4 * 131072
    u = np.array([0.01, 0.3, 0.5, 0.62, 0.9, 0.999])
    q = uncached.quantile(u)
    assert np.allclose(uncached.probability_above(q), 1 - u, rtol=0, atol=1e-12)
    values, weights = uncached.mesh()
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.dot(values, weights) == pytest.approx(uncached.mean_tokens, rel=1e-12)
    assert uncached.hit_rate == pytest.approx(1 - uncached.mean_tokens / full.mean_tokens)


def _bands(draw_rates, edges):
    return st.lists(draw_rates, min_size=len(edges) + 1, max_size=len(edges) + 1)


EDGES = st.lists(st.floats(200.0, 120_000.0), min_size=1, max_size=4, unique=True).map(
    lambda e: tuple(sorted(e))
)
LOGNORMAL = st.builds(
    TruncatedLogNormal, st.floats(7.0, 11.0), st.floats(0.3, 2.0), st.just(128.0),
    st.just(131072.0),
)  # fmt: skip
POINTS = st.lists(st.floats(50.0, 140_000.0), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(full=LOGNORMAL, edges=EDGES, points=POINTS)
def test_zero_hit_rates_in_every_band_are_no_caching(full, edges, points):
    uncached = UncachedLengths(full, (0.0,) * (len(edges) + 1), edges)
    a = np.asarray(points)
    assert np.allclose(
        uncached.partial_moments(a, np.inf), full.partial_moments(a, np.inf), rtol=1e-12, atol=0
    )
    u = np.linspace(0.0, 0.999, 7)
    assert np.allclose(uncached.quantile(u), full.quantile(u), rtol=1e-12)
    assert (uncached.min_tokens, uncached.max_tokens) == (full.min_tokens, full.max_tokens)


@settings(max_examples=40, deadline=None)
@given(full=LOGNORMAL, edges=EDGES, rate=st.floats(0.0, 0.99), points=POINTS)
def test_one_rate_in_every_band_is_the_constant_form(full, edges, rate, points):
    banded = UncachedLengths(full, (rate,) * (len(edges) + 1), edges)
    constant = UncachedLengths(full, (rate,))
    a = np.asarray(points)
    assert np.allclose(
        banded.partial_moments(a, np.inf), constant.partial_moments(a, np.inf), rtol=1e-9,
        atol=1e-300,
    )  # fmt: skip
    u = np.linspace(0.0, 0.999, 7)
    assert np.allclose(banded.quantile(u), constant.quantile(u), rtol=1e-12)
    assert banded.hit_rate == pytest.approx(rate, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(100, 130_000), min_size=1, max_size=60),
    edges=EDGES,
    data=st.data(),
)
def test_banded_observed_lengths_are_the_mapped_lengths(lengths, edges, data):
    """Oracle for a trace's lengths: U's moments are sums over the mapped lengths, its quantile
    the mapped lengths' own (sorted, the ⌊u·n⌋-th), whatever the order the bands put them in."""
    rates = tuple(data.draw(_bands(st.floats(0.0, 0.99), edges)))
    x = np.asarray(lengths, float)
    uncached = UncachedLengths(ObservedLengths(x), rates, edges)
    mapped = (1 - np.asarray(rates)[np.searchsorted(edges, x, side="left")]) * x
    for t in [0.0, *np.quantile(mapped, [0.2, 0.5, 0.8]).tolist()]:
        m = uncached.partial_moments(t, np.inf)
        above = mapped[mapped > t]
        assert m[0] == pytest.approx(above.size / x.size, abs=1e-12)
        assert m[1] == pytest.approx(above.sum() / x.size, rel=1e-12, abs=1e-9)
    u = np.array(data.draw(st.lists(st.floats(0.0, 0.9999), min_size=1, max_size=5)))
    expected = np.sort(mapped)[np.minimum((u * x.size).astype(int), x.size - 1)]
    assert np.allclose(uncached.quantile(u), expected, rtol=1e-12)
    assert np.array_equal(uncached.threshold_candidates(), np.unique(mapped))


@settings(max_examples=30, deadline=None)
@given(full=LOGNORMAL, edges=EDGES, data=st.data())
def test_a_banded_quantile_inverts_its_cdf(full, edges, data):
    rates = tuple(data.draw(_bands(st.floats(0.0, 0.99), edges)))
    uncached = UncachedLengths(full, rates, edges)
    u = np.linspace(0.001, 0.999, 9)
    q = uncached.quantile(u)
    assert np.all(np.diff(q) >= 0)
    assert np.allclose(uncached.probability_above(q), 1 - u, atol=1e-9)
    assert uncached.probability_above(0.0) == 1.0  # every request counted exactly once
    samples = uncached.sample(np.random.default_rng(0), 64, stratified=True)
    assert np.all((samples >= uncached.min_tokens) & (samples <= uncached.max_tokens))


def _scenario_with_hit_rate(tmp_path, spec: str, name: str = "s.yaml"):
    path = tmp_path / name
    text = (ROOT / "examples" / "case_study.yaml").read_text()
    path.write_text(
        text.replace("output_tokens: 1024", f"output_tokens: 1024\n  prefix_cache_hit_rate: {spec}")
    )
    return path


def test_uniform_bands_plan_as_the_constant_rate(tmp_path):
    from prfaas_plan.use_cases.plan import plan

    banded = _scenario_with_hit_rate(tmp_path, "{bands: [{max_input_tokens: 8000, hit_rate: 0.3}, "
                                     "{max_input_tokens: 32000, hit_rate: 0.3}, {hit_rate: 0.3}]}")  # fmt: skip
    constant = _scenario_with_hit_rate(tmp_path, "0.3", "c.yaml")
    plans = [plan(build_problem(load_scenario(p), p, Catalog.open())).plan.evaluation
             for p in (banded, constant)]  # fmt: skip
    assert plans[0].system_throughput_rps == pytest.approx(plans[1].system_throughput_rps, rel=1e-9)
    banded_t, constant_t = (e.configuration for e in plans)
    assert banded_t.threshold_tokens == pytest.approx(constant_t.threshold_tokens, rel=1e-6)
    assert banded_t.pd_prefill_instances == constant_t.pd_prefill_instances


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5000), st.lists(st.integers(0, 12), max_size=10)),
        min_size=1, max_size=30,
    ),
    EDGES.map(lambda e: tuple(x / 30 for x in e)),  # edges among the lengths drawn
)  # fmt: skip
def test_the_trace_hit_rate_per_band_is_each_bands_share_an_unbounded_cache_serves(requests, edges):
    """Oracle: the same set replay, cached and total tokens summed per band of the length."""
    from prfaas_plan.inputs.traces import prefix_hit_rates_by_band

    trace = _trace_of(requests)
    seen: set[int] = set()
    cached, total = [0.0] * (len(edges) + 1), [0.0] * (len(edges) + 1)
    for n, blocks in requests:
        band = sum(n > e for e in edges)
        cached[band] += min(512.0 * sum(b in seen for b in blocks), n)
        total[band] += n
        seen.update(blocks)
    expected = [c / t if t else 0.0 for c, t in zip(cached, total, strict=True)]
    assert prefix_hit_rates_by_band(trace, 512, edges) == pytest.approx(expected, abs=1e-12)


def test_hit_rates_per_band_from_the_trace_plan_as_those_rates_given(tmp_path):
    lines = [
        '{"timestamp": 0, "input_length": 20000, "output_length": 100, "hash_ids": [1, 2, 3]}',
        '{"timestamp": 5, "input_length": 30000, "output_length": 100, "hash_ids": [1, 2, 4, 5]}',
        '{"timestamp": 9, "input_length": 1500, "output_length": 100, "hash_ids": [1, 7, 8]}',
        '{"timestamp": 12, "input_length": 9000, "output_length": 100, "hash_ids": [1, 6]}',
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    case = (ROOT / "examples" / "case_study.yaml").read_text().split("workload:")[0]
    # band <= 8,000: 512 of 1,500 tokens cached; (8,000, 25,000]: 512 of 29,000; above: 1,024
    # of 30,000
    stated_spec = (
        f"{{bands: [{{max_input_tokens: 8000, hit_rate: {512 / 1500!r}}}, {{max_input_tokens: "
        f"25000, hit_rate: {512 / 29000!r}}}, {{hit_rate: {1024 / 30000!r}}}]}}"
    )
    workloads = []
    for i, hit in enumerate(("{from_trace_band_max_input_tokens: [8000, 25000]}", stated_spec)):
        path = tmp_path / f"s{i}.yaml"
        path.write_text(case + "workload:\n  input_tokens: {distribution: observed, file: t.jsonl}\n"
                        f"  output_tokens: 1024\n  prefix_cache_hit_rate: {hit}\n"
                        "slo: {decode_tokens_per_s: 40}\n")  # fmt: skip
        workloads.append(build_problem(load_scenario(path), path, Catalog.open()).workload)
    measured, stated = workloads
    assert measured.band_max_tokens == stated.band_max_tokens == (8000.0, 25000.0)
    assert measured.hit_rates == pytest.approx(stated.hit_rates, abs=1e-15)
