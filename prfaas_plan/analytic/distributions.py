"""The empirical input-length distributions (tokens): a histogram (uniform density inside each
bin), observed lengths (each sample equally likely) and the lengths left uncached by banded
prefix-cache hit-rates. Each owns its closed forms of the interface of
analytic/length_distribution.py; the truncated log-normal is analytic/log_normal.py's.
"""

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.analytic.length_distribution import MOMENT_ORDERS, LengthDistribution, mesh_of
from prfaas_plan.errors import ConfigError

# banded prefix-cache hit-rates: bisection steps of a non-monotone U's quantile, on ln U
# (64 halve a ratio of up to 1e9 well below double precision), and cells of its mesh
_QUANTILE_BISECTIONS = 64
UNCACHED_MESH_CELLS = 4096


HISTOGRAM_BLOCK_CELLS = 2**20  # (interval, bin) pairs a partial-moment block holds


@dataclass(frozen=True)
class Histogram(LengthDistribution):
    """Bins [edges[i], edges[i+1]) with the given weights, uniform density f_i inside each bin:
    E[L^k ; a < L <= b] = Σ_i f_i (hi_i^(k+1) − lo_i^(k+1)) / (k + 1) over each bin's part of
    (a, b]; the CDF is piecewise linear, and so is the quantile."""

    bin_edges_tokens: tuple[float, ...]
    weights: tuple[float, ...]
    source: str = ""  # where the bins come from (a metrics snapshot), for describe()
    min_tokens: float = field(init=False)
    max_tokens: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_tokens", float(self.bin_edges_tokens[0]))
        object.__setattr__(self, "max_tokens", float(self.bin_edges_tokens[-1]))

    def partial_moments(self, a: ArrayLike, b: ArrayLike, max_order: int = 2) -> FloatArray:
        edges = np.asarray(self.bin_edges_tokens, float)
        w = np.asarray(self.weights, float)
        density = w / w.sum() / np.diff(edges)
        a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
        out = np.empty((max_order + 1, *a.shape))
        flat_a, flat_b = a.reshape(-1), b.reshape(-1)
        flat = out.reshape(max_order + 1, -1)
        # every (interval, bin) pair at once, a block of intervals at a time: memory stays
        # ~HISTOGRAM_BLOCK_CELLS numbers a quantity whatever the bins and intervals
        step = max(1, HISTOGRAM_BLOCK_CELLS // density.size)
        for start in range(0, flat_a.size, step):
            part = slice(start, start + step)
            lo = np.clip(flat_a[part, None], edges[:-1], edges[1:])
            hi = np.maximum(lo, np.clip(flat_b[part, None], edges[:-1], edges[1:]))
            for k in range(max_order + 1):
                flat[k, part] = ((hi ** (k + 1) - lo ** (k + 1)) / (k + 1) * density).sum(axis=-1)
        return out

    def quantile(self, u: ArrayLike) -> FloatArray:
        edges = np.asarray(self.bin_edges_tokens, dtype=float)
        weights = np.asarray(self.weights, dtype=float)
        cumulative = np.concatenate([[0.0], np.cumsum(weights)])
        target = np.asarray(u, dtype=float) * cumulative[-1]
        bins = np.clip(np.searchsorted(cumulative, target, side="right") - 1, 0, weights.size - 1)
        inside = np.clip((target - cumulative[bins]) / weights[bins], 0.0, 1.0)
        lengths: FloatArray = edges[bins] + inside * (edges[bins + 1] - edges[bins])
        return lengths

    def mesh(self) -> tuple[FloatArray, FloatArray]:
        """Each bin cut into equal cells (64 up to 128 bins, fewer above, at least 4: the mesh
        stays ~8K-40K cells), each cell's moments from its own bin's density alone."""
        edges = np.asarray(self.bin_edges_tokens, float)
        w = np.asarray(self.weights, float)
        density = w / w.sum() / np.diff(edges)
        cells = int(min(64, max(4, math.ceil(8192 / density.size))))
        fine = np.linspace(edges[:-1], edges[1:], cells + 1)  # (cells + 1, bins)
        lo, hi = fine[:-1], fine[1:]
        moments = np.stack([(hi ** (k + 1) - lo ** (k + 1)) / (k + 1) * density
                            for k in range(3)])  # fmt: skip
        return mesh_of(moments.transpose(0, 2, 1).reshape(3, -1))

    def describe(self) -> str:
        shown = f"histogram of {len(self.weights)} bins on [{self.min_tokens:g}, {self.max_tokens:g}] tokens"
        return f"{shown} from {self.source}" if self.source else shown


@dataclass(frozen=True, eq=False)
class ObservedLengths(LengthDistribution):
    """Each observed length equally likely (an empirical distribution of a trace), a length
    seen c_i times weighing c_i: E[L^k ; a < L <= b] = Σ_{a < x_i <= b} c_i x_i^k / Σ c_i, from
    cumulative sums of weighted powers. `counts` None: each length once. A full public trace is
    kept as its distinct lengths and their counts (inputs/trace_stream.py), not per request."""

    lengths_tokens: FloatArray
    source: str = "observed lengths"
    counts: FloatArray | None = None
    _cumulative: dict[int, FloatArray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths_tokens, float)
        if self.counts is None:
            object.__setattr__(self, "lengths_tokens", np.sort(lengths))
            return
        counts = np.asarray(self.counts, float)
        if counts.shape != lengths.shape:
            raise ValueError(f"{counts.size} counts for {lengths.size} lengths")
        order = np.argsort(lengths, kind="stable")
        object.__setattr__(self, "lengths_tokens", lengths[order])
        object.__setattr__(self, "counts", counts[order])

    @cached_property
    def _weights(self) -> FloatArray:
        if self.counts is None:
            return np.ones(self.lengths_tokens.size)
        return self.counts

    @cached_property
    def requests(self) -> float:
        """How many lengths were observed (Σ c_i)."""
        return float(self._weights.sum())

    def _cumulative_powers(self, max_order: int) -> FloatArray:
        """Σ_{j < i} c_j x_j^k for i = 0..n, k = 0..max_order (k = 0 counts exactly); cached."""
        orders = max(max_order + 1, MOMENT_ORDERS)
        if orders not in self._cumulative:
            x, c = self.lengths_tokens, self._weights
            powers = np.stack([c * x**k for k in range(orders)])
            self._cumulative[orders] = np.concatenate(
                [np.zeros((orders, 1)), np.cumsum(powers, axis=1)], axis=1
            )
        return self._cumulative[orders][: max_order + 1]

    @property
    def min_tokens(self) -> float:  # type: ignore[override]
        return float(self.lengths_tokens[0])

    @property
    def max_tokens(self) -> float:  # type: ignore[override]
        return float(self.lengths_tokens[-1])

    def partial_moments(self, a: ArrayLike, b: ArrayLike, max_order: int = 2) -> FloatArray:
        a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
        i = np.searchsorted(self.lengths_tokens, a, side="right")
        j = np.searchsorted(self.lengths_tokens, np.maximum(a, b), side="right")
        cumulative = self._cumulative_powers(max_order)
        moments: FloatArray = (cumulative[:, j] - cumulative[:, i]) / self.requests
        return moments

    def quantile(self, u: ArrayLike) -> FloatArray:
        x = self.lengths_tokens  # sorted
        if self.counts is None:
            index = (np.asarray(u, dtype=float) * x.size).astype(np.int64)
            return x[np.minimum(index, x.size - 1)]
        # the length of observation floor(u·N), as if the lengths were written out one by one
        seen = self._cumulative_powers(0)[0, 1:]
        rank = np.floor(np.asarray(u, dtype=float) * self.requests)
        return x[np.minimum(np.searchsorted(seen, rank, side="right"), x.size - 1)]

    def mesh(self) -> tuple[FloatArray, FloatArray]:
        values, inverse = np.unique(self.lengths_tokens, return_inverse=True)
        counts = np.bincount(inverse, weights=self._weights, minlength=values.size)
        return values, counts / counts.sum()

    def threshold_candidates(self) -> FloatArray:
        return np.unique(self.lengths_tokens)

    def describe(self) -> str:
        if self.counts is None:
            return f"{self.lengths_tokens.size} observed lengths from {self.source}"
        return (
            f"{self.requests:,.0f} observed lengths ({self.lengths_tokens.size:,} distinct) "
            f"from {self.source}"
        )


@dataclass(frozen=True, eq=False)
class UncachedLengths(LengthDistribution):
    """U = (1 − h(L))·L: the part of each request a prefix cache does not hold, the hit-rate
    h(L) constant in each band of the full input length L. Band i holds
    band_max_tokens[i − 1] < L <= band_max_tokens[i] (the first band from 0, the last open-ended),
    so `hit_rates` has one entry more than `band_max_tokens`; one band is the constant form
    (every request has the same share h of its tokens cached). With c_i = 1 − h_i and e_i the
    band edges, the moments follow from L's, band by band:
        E[U^k ; a < U <= b] = Σ_i c_i^k · E[L^k ; max(a/c_i, e_(i−1)) < L <= min(b/c_i, e_i)].
    The map L -> U drops at an edge where the hit-rate rises, so U is not monotone in L: the
    quantile is then the inverse of that CDF (bisection), not the image of L's quantile. For
    observed lengths U is itself observed lengths (each request's), used as such. Samples are drawn as L's and mapped (each request keeps its
    own full length; with `stratified`, L's strata)."""

    full: LengthDistribution
    hit_rates: tuple[float, ...]  # h_i in [0, 1), one per band
    band_max_tokens: tuple[float, ...] = ()  # strictly increasing upper edges of all but the last

    def __post_init__(self) -> None:
        if len(self.hit_rates) != len(self.band_max_tokens) + 1:
            raise ConfigError(
                f"prefix-cache bands: expected one hit-rate per band ({len(self.band_max_tokens) + 1}), "
                f"got {len(self.hit_rates)}"
            )

    @cached_property
    def _shares(self) -> FloatArray:
        """c_i = 1 − h_i per band."""
        return 1.0 - np.asarray(self.hit_rates, float)

    @cached_property
    def _edges(self) -> tuple[FloatArray, FloatArray]:
        """(lower, upper) edge of each band of L: (−inf, e_0], (e_0, e_1], ..., (e_(n−2), inf)."""
        inner = np.asarray(self.band_max_tokens, float)
        return np.concatenate([[-np.inf], inner]), np.concatenate([inner, [np.inf]])

    def uncached_tokens(self, full_tokens: ArrayLike) -> FloatArray:
        """U = (1 − h(L))·L for lengths L (vectorised)."""
        tokens = np.asarray(full_tokens, float)
        band = np.searchsorted(np.asarray(self.band_max_tokens, float), tokens, side="left")
        uncached: FloatArray = self._shares[band] * tokens
        return uncached

    @property
    def _monotone(self) -> bool:
        """U non-decreasing in L: hit-rates never rise from one band to the next."""
        return bool(np.all(np.diff(self._shares) >= 0))

    @cached_property
    def _mapped(self) -> ObservedLengths | None:
        """For observed lengths L, U's own observed lengths (each request's U), else None: U's
        moments are then sums over them, exact at every threshold (the division a/c_i of the
        band formula could put a length equal to t on the wrong side)."""
        if not isinstance(self.full, ObservedLengths):
            return None
        return ObservedLengths(
            self.uncached_tokens(self.full.lengths_tokens), self.full.source, self.full.counts
        )

    @cached_property
    def _range(self) -> tuple[float, float]:
        """(inf U, sup U) over the bands that hold mass."""
        if self._mapped is not None:
            return self._mapped.min_tokens, self._mapped.max_tokens
        lower, upper = self._edges
        lo = np.maximum(lower, self.full.min_tokens)
        hi = np.minimum(upper, self.full.max_tokens)
        held = self.full.partial_moments(lo, hi, max_order=0)[0] > 0
        c = self._shares
        return float(np.min((c * lo)[held])), float(np.max((c * hi)[held]))

    @property
    def min_tokens(self) -> float:  # type: ignore[override]
        return self._range[0]

    @property
    def max_tokens(self) -> float:  # type: ignore[override]
        return self._range[1]

    @property
    def hit_rate(self) -> float:
        """The share of all input tokens cached, 1 − E[U]/E[L] (h itself for one band)."""
        if len(self.hit_rates) == 1:
            return self.hit_rates[0]
        return 1.0 - self.mean_tokens / self.full.mean_tokens

    def partial_moments(self, a: ArrayLike, b: ArrayLike, max_order: int = 2) -> FloatArray:
        if self._mapped is not None:
            return self._mapped.partial_moments(a, b, max_order)
        a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
        c = self._shares.reshape((-1,) + (1,) * a.ndim)
        lower, upper = (e.reshape(c.shape) for e in self._edges)
        lo = np.maximum(a / c, lower)
        hi = np.maximum(lo, np.minimum(b / c, upper))
        moments = self.full.partial_moments(lo, hi, max_order)  # (order, band, *shape)
        scale = c[None] ** np.arange(max_order + 1, dtype=float).reshape((-1,) + (1,) * c.ndim)
        # over the bands' total mass (1 up to rounding), so that every request counts exactly
        # once: P(U > t) is exactly 1 below the shortest uncached length, as for L
        # bands summed along a contiguous last axis, for any shape of a and b: numpy then sums
        # each element's bands pairwise, as for one threshold (a middle axis would be summed
        # band after band, and with 8 bands or more the last bits would depend on the shape)
        by_band = np.ascontiguousarray(np.moveaxis(moments * scale, 1, -1))
        summed: FloatArray = by_band.sum(axis=-1) / self._band_mass
        return summed

    @cached_property
    def _band_mass(self) -> float:
        """Σ_i P(L in band i), summed as partial_moments sums it."""
        lower, upper = self._edges
        return float(self.full.partial_moments(lower, upper, max_order=0)[0].sum())

    def quantile(self, u: ArrayLike) -> FloatArray:
        q = np.asarray(u, dtype=float)
        if self._mapped is not None:
            return self._mapped.quantile(q)
        if self._monotone:
            return self.uncached_tokens(self.full.quantile(q))
        lo = np.full(q.shape, self.min_tokens)
        hi = np.full(q.shape, self.max_tokens)
        for _ in range(_QUANTILE_BISECTIONS):  # on ln U: relative precision ~1e-15 of the range
            mid = np.sqrt(lo * hi)
            below = self.partial_moments(-np.inf, mid, max_order=0)[0] < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return hi

    def sample(
        self, rng: "np.random.Generator", count: int, *, stratified: bool = False
    ) -> FloatArray:
        return self.uncached_tokens(self.full.sample(rng, count, stratified=stratified))

    def mesh(self) -> tuple[FloatArray, FloatArray]:
        return self._mesh

    @cached_property
    def _mesh(self) -> tuple[FloatArray, FloatArray]:
        """L's mesh mapped where that is exact (one band, or observed lengths); else cells of U
        itself on a geometric grid that also holds the image of every band edge."""
        if self._mapped is not None:
            return self._mapped.mesh()
        if len(self.hit_rates) == 1:
            values, weights = self.full.mesh()
            return self.uncached_tokens(values), weights
        c, (lower, upper) = self._shares, self._edges
        images = np.concatenate([c * lower, c * upper])
        grid = np.geomspace(self.min_tokens, self.max_tokens, UNCACHED_MESH_CELLS + 1)
        edges = np.unique(np.clip(np.concatenate([grid, images]), self.min_tokens, self.max_tokens))
        cumulative = self.partial_moments(-np.inf, np.concatenate([[-np.inf], edges]))
        return mesh_of(np.diff(cumulative, axis=1))

    def threshold_candidates(self) -> FloatArray | None:
        return None if self._mapped is None else self._mapped.threshold_candidates()

    def describe(self) -> str:
        if len(self.hit_rates) == 1:
            h = self.hit_rates[0]
            return (
                f"uncached {1 - h:.0%} (prefix-cache hit-rate {h:.0%}) of " + self.full.describe()
            )
        bands = ", ".join(
            f"{h:.0%} up to {e:,.0f}"
            for h, e in zip(self.hit_rates, self.band_max_tokens, strict=False)
        )
        return (
            f"uncached part (prefix-cache hit-rate {bands}, {self.hit_rates[-1]:.0%} above; "
            f"{self.hit_rate:.1%} of all tokens) of " + self.full.describe()
        )
