"""Input-length distributions (tokens): moments, split at a routing threshold, quantiles and
samples. One home per distribution: each class owns its closed forms.

Every distribution answers, vectorised over interval ends,
partial_moments(a, b, max_order)[k] = E[L^k ; a < L <= b] for k = 0..max_order
(probability-weighted, not conditional). With those, p = P(L > t) = m0, l_long = E[L | L > t]
= m1 / m0, and, because profiles are polynomials, the exact conditional mean service time
E[T(L) | L > t] (order 2 for a quadratic fit) and its second moment (order 4) too.
`quantile(u)` is the inverse CDF and `sample(rng, count)` draws through it.

Distributions: truncated log-normal (density conditioned on [min, max], not clipped),
an empirical histogram (uniform density inside each bin) and observed lengths (each sample
equally likely).
"""

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray
from prfaas_plan.analytic.normal import (
    mass_between,
    normal_mass,
    small_tail,
    small_tails,
    truncated_normal_quantile,
)
from prfaas_plan.errors import ConfigError

MOMENT_ORDERS = 3  # k = 0, 1, 2 by default: enough for a quadratic latency fit
# banded prefix-cache hit-rates: bisection steps of a non-monotone U's quantile, on ln U
# (64 halve a ratio of up to 1e9 well below double precision), and cells of its mesh
_QUANTILE_BISECTIONS = 64
UNCACHED_MESH_CELLS = 4096


def _mesh_of(moments: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(cell means, cell probabilities) of cells with mass, from their partial moments."""
    keep = moments[0] > 0
    return moments[1][keep] / moments[0][keep], moments[0][keep]


class LengthDistribution(ABC):
    """The interface of a length distribution on [min_tokens, max_tokens]."""

    min_tokens: float
    max_tokens: float

    @abstractmethod
    def partial_moments(self, a: ArrayLike, b: ArrayLike, max_order: int = 2) -> FloatArray:
        """E[L^k ; a < L <= b], k = 0..max_order: shape (max_order + 1, *broadcast(a, b))."""

    @abstractmethod
    def quantile(self, u: ArrayLike) -> FloatArray:
        """Inverse CDF: the length L with P(length <= L) = u, for u in [0, 1) (vectorised)."""

    @abstractmethod
    def mesh(self) -> tuple[FloatArray, FloatArray]:
        """(lengths, probabilities) approximating the distribution, for percentiles."""

    @abstractmethod
    def describe(self) -> str:
        """One line for reports."""

    def sample(
        self, rng: np.random.Generator, count: int, *, stratified: bool = False
    ) -> FloatArray:
        """`count` lengths (tokens, float) drawn by inverse CDF from uniforms of `rng`.

        Independent draws by default. `stratified=True` draws one length from each of `count`
        equal-probability strata, in random order (Latin hypercube sampling): still each length
        distributed as the law, but the sample's share above any threshold and its mean service
        time match the model to O(1/count) instead of O(1/sqrt(count)).
        """
        if count < 0:
            raise ConfigError(
                f"the number of requests must be >= 0, got {count}", parameter="count"
            )
        if stratified:
            u = (rng.permutation(count) + rng.random(count)) / max(count, 1)
        else:
            u = rng.random(count)
        return self.quantile(u)

    def split(self, threshold_tokens: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """(short, long) partial moments (k = 0, 1, 2) at threshold t: L <= t stays local,
        L > t offloads."""
        return (
            self.partial_moments(-np.inf, threshold_tokens),
            self.partial_moments(threshold_tokens, np.inf),
        )

    def probability_above(self, tokens: ArrayLike) -> FloatArray:
        """P(L > tokens)."""
        above: FloatArray = self.partial_moments(tokens, np.inf, max_order=0)[0]
        return above

    @cached_property
    def mean_tokens(self) -> float:
        """E[L] (computed once per distribution: distributions are frozen)."""
        m = self.partial_moments(-np.inf, np.inf, max_order=1)
        return float(m[1] / m[0])

    def threshold_candidates(self) -> FloatArray | None:
        """Lengths where P(L > t) jumps (discrete distributions), else None."""
        return None


@dataclass(frozen=True)
class TruncatedLogNormal(LengthDistribution):
    """ln L ~ Normal(mu_log, sigma_log), conditioned on min_tokens <= L <= max_tokens.

    E[L^k ; a < L <= b] = exp(k mu + k^2 sigma^2 / 2)
                          * [Phi((ln b - mu - k sigma^2)/sigma) - Phi((ln a - mu - k sigma^2)/sigma)] / Z
    with Z = Phi((ln max - mu)/sigma) - Phi((ln min - mu)/sigma). Quantile:
    exp(mu + sigma Φ⁻¹(Φ(z_min) + u Z)), in whichever tail holds [z_min, z_max].
    """

    mu_log: float
    sigma_log: float
    min_tokens: float
    max_tokens: float
    mesh_cells: int = 4096

    def _z(self, tokens: ArrayLike, k: int) -> FloatArray:
        with np.errstate(divide="ignore"):
            log_tokens = np.log(np.asarray(tokens, float))
        z: FloatArray = (log_tokens - self.mu_log - k * self.sigma_log**2) / self.sigma_log
        return z

    @cached_property
    def _normaliser(self) -> float:
        return float(normal_mass(self._z(self.min_tokens, 0), self._z(self.max_tokens, 0)))

    @property
    def untruncated_mass(self) -> float:
        """P(min <= L <= max) before conditioning; ~0 means the parameters miss the interval."""
        return self._normaliser

    def _scale(self, k: int) -> float:
        return math.exp(k * self.mu_log + 0.5 * k**2 * self.sigma_log**2) / self._normaliser

    def split(self, threshold_tokens: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """As the base class, with one erfc per element and order for each side (the optimiser
        calls this in its inner loop): below = (min, t], above = (t, max]. Every order in the
        same array operations (one numpy call each, not one per order: the arrays are small,
        so the calls' fixed cost is the cost); element by element the same arithmetic as
        `_z`, `small_tail` and `mass_between` per order, with mass_between's branches on the
        fixed end (min or max) decided once per distribution instead of per element."""
        # clip as min(max(.)): np.clip's dispatch costs more than the arithmetic here
        t = np.minimum(np.maximum(threshold_tokens, self.min_tokens), self.max_tokens)
        c = _split_constants(self, t.ndim)
        with np.errstate(divide="ignore"):
            centred = np.log(t) - self.mu_log
        z = (centred - c.offset) / self.sigma_log
        tail = small_tail(z)
        # mass_between(z_min, tail_min, z, tail) and mass_between(z, tail, z_max, tail_max)
        short_mass = np.where(
            z <= 0,
            tail - c.tail_min,
            np.where(c.min_above_median, c.tail_min - tail, c.one_minus_tail_min - tail),
        )
        long_mass = np.where(
            c.max_below_median,
            c.tail_max - tail,
            np.where(z >= 0, tail - c.tail_max, 1.0 - tail - c.tail_max),
        )
        return c.scale * np.maximum(short_mass, 0.0), c.scale * np.maximum(long_mass, 0.0)

    def partial_moments(self, a: ArrayLike, b: ArrayLike, max_order: int = 2) -> FloatArray:
        lo = np.clip(np.asarray(a, float), self.min_tokens, self.max_tokens)
        hi = np.clip(np.asarray(b, float), self.min_tokens, self.max_tokens)
        # lo keeps its own shape: one erfc per distinct end (the mesh's lo is one number)
        hi = np.maximum(lo, hi)
        out = np.empty((max_order + 1, *hi.shape))
        orders = range(max_order + 1)
        z_lo, z_hi = [self._z(lo, k) for k in orders], [self._z(hi, k) for k in orders]
        tails = small_tails(*z_lo, *z_hi)  # one erfc pass for every order and both ends
        for k in orders:
            mass = mass_between(z_lo[k], tails[k], z_hi[k], tails[max_order + 1 + k])
            out[k] = self._scale(k) * mass
        return out

    def quantile(self, u: ArrayLike) -> FloatArray:
        z_lo = (math.log(self.min_tokens) - self.mu_log) / self.sigma_log
        z_hi = (math.log(self.max_tokens) - self.mu_log) / self.sigma_log
        z = truncated_normal_quantile(z_lo, z_hi, np.asarray(u, dtype=float))
        return np.clip(np.exp(self.mu_log + self.sigma_log * z), self.min_tokens, self.max_tokens)

    def mesh(self) -> tuple[FloatArray, FloatArray]:
        return _log_normal_mesh(self)

    def describe(self) -> str:
        return (
            f"truncated log-normal (mu_log={self.mu_log:g}, sigma_log={self.sigma_log:g}) "
            f"on [{self.min_tokens:g}, {self.max_tokens:g}] tokens"
        )


def truncated_log_normal(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> TruncatedLogNormal:
    """The TruncatedLogNormal of these parameters, one instance per parameters in a process:
    what an instance memoises (its split constants, mean and normaliser) is computed once, not
    once per plan, where a server or a study plans the same workload again and again. A zero
    is kept as +0.0 (-0.0 == 0.0 shares its cache entry, so which one came first would show)."""
    return _interned_log_normal(mu_log + 0.0, sigma_log + 0.0, min_tokens + 0.0, max_tokens + 0.0)


@lru_cache(maxsize=64)
def _interned_log_normal(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> TruncatedLogNormal:
    return TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens)


@dataclass(frozen=True)
class _SplitConstants:
    """Per moment order k (the first axis, then ones to broadcast): the scale, k sigma² (as
    `_z` subtracts it), the small tails at min and at max, 1 − the tail at min (as
    mass_between's `1.0 - lo - hi` computes it first), and whether min lies above the median or
    max below it (mass_between's branches that depend on the fixed end only)."""

    scale: FloatArray
    offset: FloatArray
    tail_min: FloatArray
    one_minus_tail_min: FloatArray
    min_above_median: BoolArray
    tail_max: FloatArray
    max_below_median: BoolArray


@lru_cache(maxsize=128)
def _split_constants(d: TruncatedLogNormal, ndim: int) -> _SplitConstants:
    """What `split` needs of `d` alone, shaped to broadcast against `ndim`-dimensional
    thresholds (once per process for equal parameters and dimension)."""
    orders = range(MOMENT_ORDERS)
    column = (MOMENT_ORDERS,) + (1,) * ndim
    z_min = np.array([float(d._z(d.min_tokens, k)) for k in orders])
    z_max = np.array([float(d._z(d.max_tokens, k)) for k in orders])
    tail_min, tail_max = small_tails(z_min, z_max)
    return _SplitConstants(
        scale=np.array([d._scale(k) for k in orders]).reshape(column),
        offset=np.array([k * d.sigma_log**2 for k in orders]).reshape(column),
        tail_min=tail_min.reshape(column),
        one_minus_tail_min=(1.0 - tail_min).reshape(column),
        min_above_median=(z_min >= 0).reshape(column),
        tail_max=tail_max.reshape(column),
        max_below_median=(z_max <= 0).reshape(column),
    )


@lru_cache(maxsize=16)
def _log_normal_mesh(d: TruncatedLogNormal) -> tuple[FloatArray, FloatArray]:
    """The mesh of `d` (~2 ms: 4096 cells, one erfc each per order), computed once per process
    for equal parameters (a frozen dataclass compares by value): a server building a fresh
    Problem per request meets the same length distribution again and again. Read-only, as it
    is shared."""
    edges = np.geomspace(d.min_tokens, d.max_tokens, d.mesh_cells + 1)
    moments = d.partial_moments(d.min_tokens, edges, max_order=1)  # what _mesh_of reads
    lengths, weights = _mesh_of(np.diff(moments, axis=1))
    lengths.setflags(write=False)
    weights.setflags(write=False)
    return lengths, weights


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
        return _mesh_of(moments.transpose(0, 2, 1).reshape(3, -1))

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
        self, rng: np.random.Generator, count: int, *, stratified: bool = False
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
        return _mesh_of(np.diff(cumulative, axis=1))

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
