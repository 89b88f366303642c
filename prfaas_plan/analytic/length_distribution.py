"""The interface every input-length distribution implements (tokens): moments, split at a
routing threshold, quantiles and samples.

Every distribution answers, vectorised over interval ends,
partial_moments(a, b, max_order)[k] = E[L^k ; a < L <= b] for k = 0..max_order
(probability-weighted, not conditional). With those, p = P(L > t) = m0, l_long = E[L | L > t]
= m1 / m0, and, because profiles are polynomials, the exact conditional mean service time
E[T(L) | L > t] (order 2 for a quadratic fit) and its second moment (order 4) too.
`quantile(u)` is the inverse CDF and `sample(rng, count)` draws through it. The distributions
themselves: analytic/log_normal.py and analytic/distributions.py.
"""

from abc import ABC, abstractmethod
from functools import cached_property

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.errors import ConfigError

MOMENT_ORDERS = 3  # k = 0, 1, 2 by default: enough for a quadratic latency fit


def mesh_of(moments: FloatArray) -> tuple[FloatArray, FloatArray]:
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
        self, rng: "np.random.Generator", count: int, *, stratified: bool = False
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
