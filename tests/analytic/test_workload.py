import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from prfaas_plan.analytic.distributions import Histogram, ObservedLengths
from prfaas_plan.analytic.log_normal import TruncatedLogNormal

LOGNORMAL = TruncatedLogNormal(9.9, 1.0, 128, 131072)


@pytest.mark.parametrize(
    "a, b", [(128, 131072), (128, 19400), (19400, 131072), (1000, 2000), (60000, 1e9)]
)
def test_lognormal_partial_moments_match_numerical_integration(a, b):
    """Oracle: the truncated density integrated numerically (scipy.integrate.quad)."""
    d = stats.lognorm(s=1.0, scale=np.exp(9.9))
    z = d.cdf(131072) - d.cdf(128)
    hi = min(b, 131072)
    got = LOGNORMAL.partial_moments(a, b)
    for k in range(3):
        want, _ = integrate.quad(lambda x, k=k: x**k * d.pdf(x) / z, a, hi, limit=200, epsabs=0)
        assert got[k] == pytest.approx(want, rel=1e-7)


def test_lognormal_is_conditioned_not_clipped():
    total = LOGNORMAL.partial_moments(-np.inf, np.inf)
    assert total[0] == pytest.approx(1.0, abs=1e-12)
    assert LOGNORMAL.partial_moments(-np.inf, 128)[0] == 0.0  # no atom at the truncation point


def test_mesh_reproduces_moments():
    lengths, probs = LOGNORMAL.mesh()
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert (lengths * probs).sum() == pytest.approx(LOGNORMAL.mean_tokens, rel=1e-12)


def test_equal_log_normals_share_one_read_only_mesh_equal_to_the_cells_moments():
    d = TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0)
    twin = TruncatedLogNormal(9.9, 1.0, 128.0, 131072.0)
    other = TruncatedLogNormal(9.9, 1.1, 128.0, 131072.0)
    assert twin.mesh()[0] is d.mesh()[0] and other.mesh()[0] is not d.mesh()[0]
    lengths, weights = d.mesh()
    with pytest.raises(ValueError):
        weights[0] = 0.0
    edges = np.geomspace(d.min_tokens, d.max_tokens, d.mesh_cells + 1)
    cells = d.partial_moments(edges[:-1], edges[1:])  # each cell's mass and first moment
    keep = cells[0] > 0
    np.testing.assert_allclose(weights, cells[0][keep], rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(lengths, cells[1][keep] / cells[0][keep], rtol=1e-9)


def test_histogram_closed_form():
    # uniform on [0, 10) with weight 1 and [10, 20) with weight 3 -> E[L] = 0.25*5 + 0.75*15
    h = Histogram((0.0, 10.0, 20.0), (1.0, 3.0))
    assert h.mean_tokens == pytest.approx(12.5)
    m = h.partial_moments(5.0, 15.0)
    assert m[0] == pytest.approx(0.25 * 0.5 + 0.75 * 0.5)
    assert m[1] == pytest.approx(0.025 * (10**2 - 5**2) / 2 + 0.075 * (15**2 - 10**2) / 2)


def test_observed_lengths_match_numpy(rng):
    x = rng.integers(100, 50_000, size=1000).astype(float)
    o = ObservedLengths(x)
    for t in (99.0, 5000.0, 20_000.5, 50_000.0):
        long = x[x > t]
        m = o.partial_moments(t, np.inf)
        assert m[0] == pytest.approx(long.size / x.size)
        assert m[1] == pytest.approx(long.sum() / x.size)
        assert m[2] == pytest.approx((long**2).sum() / x.size)


distributions = st.sampled_from(
    [
        LOGNORMAL,
        Histogram((100.0, 1000.0, 8000.0, 64000.0), (1.0, 5.0, 2.0)),
        ObservedLengths(np.array([200.0, 800.0, 800.0, 5000.0, 40000.0])),
    ]
)


@given(distributions, st.floats(0, 2e5), st.floats(0, 2e5))
@settings(max_examples=200, deadline=None)
def test_higher_threshold_never_raises_offloaded_share(d, t1, t2):
    lo, hi = sorted((t1, t2))
    assert d.probability_above(hi) <= d.probability_above(lo) + 1e-12


@given(distributions, st.floats(0, 2e5))
@settings(max_examples=200, deadline=None)
@pytest.mark.slow
def test_split_conserves_requests_and_tokens(d, t):
    short, long = d.split(t)
    total = d.partial_moments(-np.inf, np.inf)
    assert short + long == pytest.approx(total, rel=1e-9)


@pytest.mark.parametrize("t", [0.0, 128.0, 500.0, 19400.0, 120000.0, 131000.0, 131072.0, 1e9])
def test_fast_split_agrees_with_partial_moments_in_both_tails(t):
    short, long = LOGNORMAL.split(t)
    want_short = LOGNORMAL.partial_moments(-np.inf, t)
    want_long = LOGNORMAL.partial_moments(t, np.inf)
    assert short == pytest.approx(want_short, rel=1e-9, abs=1e-300)
    assert long == pytest.approx(want_long, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("mu", [5.0, 9.9, 11.5])
@pytest.mark.parametrize("sigma", [0.05, 1.0, 5.0])
def test_fast_split_is_tail_accurate_across_shapes(mu, sigma):
    d = TruncatedLogNormal(mu, sigma, 128, 131072)
    total = d.partial_moments(-np.inf, np.inf)
    for t in np.geomspace(100, 140000, 25):
        short, long = d.split(t)
        for got, want in (
            (short, d.partial_moments(-np.inf, t)),
            (long, d.partial_moments(t, np.inf)),
        ):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-13 * total.max())


def test_a_histogram_of_many_bins_costs_memory_in_proportion():
    """A 10^4-bin histogram (the bound) once built (64 x bins) x bins arrays, gigabytes: its
    mesh is now a few cells a bin and its partial moments go a block of intervals at a time,
    equal to the one-block computation; 64 cells a bin up to 128 bins, as before."""
    import numpy as np

    from prfaas_plan.analytic import distributions
    from prfaas_plan.analytic.distributions import Histogram

    edges = np.linspace(128.0, 131072.0, 10_001)
    many = Histogram(tuple(edges), tuple(np.linspace(1.0, 2.0, 10_000)))
    lengths, weights = many.mesh()
    assert lengths.size == 40_000 and np.all(np.diff(lengths) > 0)
    assert weights.sum() == pytest.approx(1.0, rel=1e-12)
    few = Histogram((100.0, 1_000.0, 5_000.0, 20_000.0), (1.0, 3.0, 2.0))
    assert few.mesh()[0].size == 3 * 64
    t = np.geomspace(50.0, 30_000.0, 257)
    whole = few.partial_moments(t[:-1], t[1:])
    small = distributions.HISTOGRAM_BLOCK_CELLS
    try:
        distributions.HISTOGRAM_BLOCK_CELLS = 7  # two intervals a block
        blocked = few.partial_moments(t[:-1], t[1:])
    finally:
        distributions.HISTOGRAM_BLOCK_CELLS = small
    np.testing.assert_array_equal(blocked, whole)


def test_a_histogram_has_at_most_ten_thousand_bins(tmp_path):
    from pathlib import Path

    import yaml

    from tests.cli.test_cli import assert_clean_error, run

    scenario = yaml.safe_load(Path("examples/case_study.yaml").read_text())
    scenario["workload"]["input_tokens"] = {
        "distribution": "histogram",
        "bin_edges_tokens": [128.0 + 10 * i for i in range(10_002)],
        "weights": [1.0] * 10_001,
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert_clean_error(run("optimize", path), 3, "bin_edges_tokens", "at most 10001")
