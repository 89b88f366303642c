"""Input-length distributions (tokens) and their split at a routing threshold.

Every distribution answers one question, vectorised over interval ends:
partial_moments(a, b)[k] = E[L^k ; a < L <= b] for k = 0, 1, 2 (probability-weighted, not
conditional). With those, p = P(L > t) = m0, l_long = E[L | L > t] = m1 / m0, and, because
profiles are polynomials, the exact conditional mean service time E[T(L) | L > t] too.

Distributions: truncated log-normal (density conditioned on [min, max], not clipped),
an empirical histogram (uniform density inside each bin) and observed lengths (each sample
equally likely).
"""

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

MOMENT_ORDERS = 3  # k = 0, 1, 2: enough for a quadratic latency fit
_SQRT2 = math.sqrt(2.0)
_erfc = np.frompyfunc(math.erfc, 1, 1)  # scipy.special costs 0.2 s of start-up; math does not


def _small_tail(z):
    """min(Phi(z), 1 - Phi(z)) = erfc(|z| / sqrt 2) / 2: one erfc per element, exact in the tail."""
    return 0.5 * np.asarray(_erfc(np.abs(np.asarray(z, float)) / _SQRT2), dtype=float)


def _mass_between(z_lo, tail_lo, z_hi, tail_hi):
    """P(z_lo < Z <= z_hi) from the small tails at both ends, without cancellation: a
    difference of lower tails below 0, of upper tails above 0, else 1 minus both tails."""
    return np.where(
        z_hi <= 0,
        tail_hi - tail_lo,
        np.where(z_lo >= 0, tail_lo - tail_hi, 1.0 - tail_lo - tail_hi),
    )


def _normal_mass(z_lo, z_hi):
    """P(z_lo < Z <= z_hi) for a standard normal Z, accurate in both tails."""
    return _mass_between(z_lo, _small_tail(z_lo), z_hi, _small_tail(z_hi))


class LengthDistribution:
    """Common interface; subclasses implement `partial_moments`, `mesh` and `describe`."""

    min_tokens: float
    max_tokens: float

    def partial_moments(self, a, b) -> np.ndarray:
        """Array of shape (3, *broadcast(a, b).shape): E[L^k ; a < L <= b], k = 0, 1, 2."""
        raise NotImplementedError

    def mesh(self) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, probabilities) approximating the distribution, for percentiles."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def split(self, threshold_tokens):
        """(short, long) partial moments at threshold t: L <= t stays local, L > t offloads."""
        return (
            self.partial_moments(-np.inf, threshold_tokens),
            self.partial_moments(threshold_tokens, np.inf),
        )

    def probability_above(self, tokens):
        return self.partial_moments(tokens, np.inf)[0]

    @property
    def mean_tokens(self) -> float:
        m = self.partial_moments(-np.inf, np.inf)
        return float(m[1] / m[0])

    def threshold_candidates(self) -> np.ndarray | None:
        """Lengths where P(L > t) jumps (discrete distributions), else None."""
        return None


@dataclass(frozen=True)
class TruncatedLogNormal(LengthDistribution):
    """ln L ~ Normal(mu_log, sigma_log), conditioned on min_tokens <= L <= max_tokens.

    E[L^k ; a < L <= b] = exp(k mu + k^2 sigma^2 / 2)
                          * [Phi((ln b - mu - k sigma^2)/sigma) - Phi((ln a - mu - k sigma^2)/sigma)] / Z
    with Z = Phi((ln max - mu)/sigma) - Phi((ln min - mu)/sigma).
    """

    mu_log: float
    sigma_log: float
    min_tokens: float
    max_tokens: float
    mesh_cells: int = 4096

    def _z(self, tokens, k):
        with np.errstate(divide="ignore"):
            log_tokens = np.log(np.asarray(tokens, float))
        return (log_tokens - self.mu_log - k * self.sigma_log**2) / self.sigma_log

    @cached_property
    def _normaliser(self) -> float:
        return float(_normal_mass(self._z(self.min_tokens, 0), self._z(self.max_tokens, 0)))

    @property
    def untruncated_mass(self) -> float:
        """P(min <= L <= max) before conditioning; ~0 means the parameters miss the interval."""
        return self._normaliser

    def _scale(self, k: int) -> float:
        return math.exp(k * self.mu_log + 0.5 * k**2 * self.sigma_log**2) / self._normaliser

    def split(self, threshold_tokens):
        """As the base class, with one erfc per element and order for each side (the optimiser
        calls this in its inner loop): below = (min, t], above = (t, max]."""
        t = np.clip(np.asarray(threshold_tokens, float), self.min_tokens, self.max_tokens)
        short = np.empty((MOMENT_ORDERS, *t.shape))
        long = np.empty((MOMENT_ORDERS, *t.shape))
        for k, (scale, z_min, tail_min, z_max, tail_max) in enumerate(self._split_constants):
            z = self._z(t, k)
            tail = _small_tail(z)
            short[k] = scale * np.maximum(_mass_between(z_min, tail_min, z, tail), 0.0)
            long[k] = scale * np.maximum(_mass_between(z, tail, z_max, tail_max), 0.0)
        return short, long

    @cached_property
    def _split_constants(self):
        """Per order k: (scale, z and small tail at min, z and small tail at max)."""
        out = []
        for k in range(MOMENT_ORDERS):
            z_min, z_max = float(self._z(self.min_tokens, k)), float(self._z(self.max_tokens, k))
            out.append(
                (self._scale(k), z_min, float(_small_tail(z_min)), z_max, float(_small_tail(z_max)))
            )
        return out

    def partial_moments(self, a, b):
        a = np.clip(np.asarray(a, float), self.min_tokens, self.max_tokens)
        b = np.clip(np.asarray(b, float), self.min_tokens, self.max_tokens)
        a, b = np.broadcast_arrays(a, b)
        b = np.maximum(a, b)
        out = np.empty((MOMENT_ORDERS, *a.shape))
        for k in range(MOMENT_ORDERS):
            out[k] = self._scale(k) * _normal_mass(self._z(a, k), self._z(b, k))
        return out

    @cached_property
    def _mesh(self):
        edges = np.geomspace(self.min_tokens, self.max_tokens, self.mesh_cells + 1)
        m = np.diff(self.partial_moments(self.min_tokens, edges), axis=1)
        keep = m[0] > 0
        return m[1][keep] / m[0][keep], m[0][keep]

    def mesh(self):
        return self._mesh

    def describe(self):
        return (
            f"truncated log-normal (mu_log={self.mu_log:g}, sigma_log={self.sigma_log:g}) "
            f"on [{self.min_tokens:g}, {self.max_tokens:g}] tokens"
        )


@dataclass(frozen=True)
class Histogram(LengthDistribution):
    """Bins [edges[i], edges[i+1]) with the given weights, uniform density inside each bin."""

    bin_edges_tokens: tuple[float, ...]
    weights: tuple[float, ...]
    min_tokens: float = field(init=False)
    max_tokens: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "min_tokens", float(self.bin_edges_tokens[0]))
        object.__setattr__(self, "max_tokens", float(self.bin_edges_tokens[-1]))

    def partial_moments(self, a, b):
        edges = np.asarray(self.bin_edges_tokens, float)
        w = np.asarray(self.weights, float)
        density = w / w.sum() / np.diff(edges)
        a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
        lo = np.clip(a[..., None], edges[:-1], edges[1:])
        hi = np.clip(b[..., None], edges[:-1], edges[1:])
        hi = np.maximum(lo, hi)
        out = np.empty((MOMENT_ORDERS, *a.shape))
        for k in range(MOMENT_ORDERS):
            out[k] = ((hi ** (k + 1) - lo ** (k + 1)) / (k + 1) * density).sum(axis=-1)
        return out

    def mesh(self):
        edges = np.asarray(self.bin_edges_tokens, float)
        fine = np.unique(np.linspace(edges[:-1], edges[1:], 65).ravel())  # 64 cells per bin
        m = self.partial_moments(fine[:-1], fine[1:])
        keep = m[0] > 0
        return m[1][keep] / m[0][keep], m[0][keep]

    def describe(self):
        return f"histogram of {len(self.weights)} bins on [{self.min_tokens:g}, {self.max_tokens:g}] tokens"


@dataclass(frozen=True, eq=False)
class ObservedLengths(LengthDistribution):
    """Each observed length equally likely (an empirical distribution of a trace)."""

    lengths_tokens: np.ndarray
    source: str = "observed lengths"
    _cumulative: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        x = np.sort(np.asarray(self.lengths_tokens, float))
        object.__setattr__(self, "lengths_tokens", x)
        powers = np.stack([x**k for k in range(MOMENT_ORDERS)])  # k = 0 counts exactly
        cumulative = np.concatenate(
            [np.zeros((MOMENT_ORDERS, 1)), np.cumsum(powers, axis=1)], axis=1
        )
        object.__setattr__(self, "_cumulative", cumulative)

    @property
    def min_tokens(self):
        return float(self.lengths_tokens[0])

    @property
    def max_tokens(self):
        return float(self.lengths_tokens[-1])

    def partial_moments(self, a, b):
        a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
        i = np.searchsorted(self.lengths_tokens, a, side="right")
        j = np.searchsorted(self.lengths_tokens, np.maximum(a, b), side="right")
        return (self._cumulative[:, j] - self._cumulative[:, i]) / self.lengths_tokens.size

    def mesh(self):
        values, counts = np.unique(self.lengths_tokens, return_counts=True)
        return values, counts / counts.sum()

    def threshold_candidates(self):
        return np.unique(self.lengths_tokens)

    def describe(self):
        return f"{self.lengths_tokens.size} observed lengths from {self.source}"
