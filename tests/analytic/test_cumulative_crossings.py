"""analytic/ttft_rows.py `cumulative_crossings` finds the cells where a row's sequential
cumulative share (np.cumsum, divided by its last) first reaches each quantile, from block sums
that round differently: the same index as the sequential sums for every row, including
quantiles placed at a share's exact value or an ulp or two away from it (where the two sums'
rounding decides), equal weights (whose shares hit simple quantiles exactly), weights spanning
sixty binary orders (whose blocked sums keep digits the sequential ones drop), subnormal
weights and sums near the largest double (past the relative bound: the sequential sum answers),
and cell counts that do not fill the last block."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.ttft_rows import CROSSING_BLOCK_CELLS, cumulative_crossings

CELLS = [1, 2, 3, CROSSING_BLOCK_CELLS - 1, CROSSING_BLOCK_CELLS, CROSSING_BLOCK_CELLS + 1, 200,
         4 * CROSSING_BLOCK_CELLS, 4096, 4097]  # fmt: skip


def sequential(weights: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """`_weighted_percentiles`' index: the sequential cumulative share, searched."""
    out = []
    for row in weights:
        cumulative = np.cumsum(row)
        cumulative /= cumulative[-1]
        out.append(np.searchsorted(cumulative, quantiles, side="left"))
    return np.array(out)


@st.composite
def rows_and_quantiles(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    cells = draw(st.sampled_from(CELLS))
    count = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(
        st.sampled_from(["uniform", "equal", "binary orders", "log-normal mesh", "extremes"])
    )
    if kind == "uniform":
        weights = rng.uniform(1e-6, 1.0, (count, cells))
    elif kind == "extremes":  # subnormal weights, or sums near the largest double
        scale = draw(st.sampled_from([5e-324, 2.0**-1070, 2.0**-1000, 1.7e308 / (4 * cells)]))
        weights = scale * rng.integers(1, 5, (count, cells)).astype(float)
    elif kind == "equal":
        weights = np.full((count, cells), draw(st.sampled_from([1.0, 0.1, 1 / 3])))
    elif kind == "binary orders":  # 2^-60 to 1: sums that lose what the blocks keep
        weights = np.ldexp(1.0, rng.integers(-60, 1, (count, cells)))
    else:  # a mesh's masses: a normal density over the cells, tails down to ~1e-300
        x = np.linspace(-draw(st.floats(1.0, 37.0)), draw(st.floats(1.0, 37.0)), cells)
        weights = np.tile(np.exp(-0.5 * x * x), (count, 1))
        weights *= rng.uniform(0.5, 1.5, (count, cells))
    # quantiles at a row's own sequential shares, nudged by 0-2 ulps either way, and plain ones
    with np.errstate(over="ignore", invalid="ignore"):  # sums near the largest double
        shares = np.cumsum(weights, axis=1)
        shares /= shares[:, -1:]
    picked = []
    for _ in range(draw(st.integers(1, 4))):
        share = shares[draw(st.integers(0, count - 1)), draw(st.integers(0, cells - 1))]
        for _ in range(draw(st.integers(-2, 2)) % 5):
            share = np.nextafter(share, draw(st.sampled_from([0.0, 1.0])))
        picked.append(float(share))
    picked += draw(st.lists(st.sampled_from([0.5, 0.9, 0.99, 0.25, 1 / 3, 2.0**-1050]), max_size=3))
    quantiles = np.array([q for q in picked if 0.0 < q < 1.0] or [0.5])
    return weights, quantiles


@given(rows_and_quantiles())
@settings(max_examples=400, deadline=None)
def test_crossings_are_the_sequential_sums(case):
    weights, quantiles = case
    with np.errstate(over="ignore", invalid="ignore"):  # sums near the largest double
        expected = sequential(weights, quantiles)
        got = cumulative_crossings(weights, quantiles)
    np.testing.assert_array_equal(got, expected)


def test_totals_past_the_bound_take_the_sequential_sum():
    """Subnormal weights (the relative bound fails: 5e-324 a cell) and sums that overflow
    sequentially but not in blocks (a review's cases)."""
    tiny = np.full((1, 5), 5e-324)
    huge = np.full((1, 66), np.finfo(float).max / 65.5)
    for weights in (tiny, huge):
        quantiles = np.array([0.5, 0.9, 0.99])
        with np.errstate(over="ignore", invalid="ignore"):
            expected = sequential(weights, quantiles)
            got = cumulative_crossings(weights, quantiles)
        np.testing.assert_array_equal(got, expected)


def test_a_quantile_at_every_share_takes_the_sequential_sum():
    """Quantiles at each cell's sequential share and an ulp either side: where the blocked
    sums round the other way, only the certificate's margin sends the cell to the sequential
    sum (with no margin, some of these indices are one off)."""
    rng = np.random.default_rng(7)
    weights = rng.uniform(0.0, 1.0, (2, 3 * CROSSING_BLOCK_CELLS + 5))
    shares = np.cumsum(weights[0])
    shares /= shares[-1]
    quantiles = np.concatenate(
        [shares[:-1], np.nextafter(shares[:-1], 0.0), np.nextafter(shares[:-1], 1.0)]
    )
    np.testing.assert_array_equal(
        cumulative_crossings(weights, quantiles), sequential(weights, quantiles)
    )
