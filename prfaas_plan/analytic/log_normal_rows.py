"""Many truncated log-normal length distributions at once, one per row of a batch (a sweep's
scenarios that differ in mu_log, sigma_log or the bounds): `split` at one threshold per row (or
a row of thresholds per row) in the same few numpy calls as one distribution's.

Each distribution's split constants (analytic/log_normal.py `split_constants`: normaliser,
scales, tails at the bounds) are computed by the scalar code once per distinct distribution
and stacked, and `split` runs the scalar `split_at` on the stacked arrays, so a row's numbers
are the same to the last bit as its distribution's own `split`. Units: tokens.
"""

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray, IntArray
from prfaas_plan.analytic.log_normal import (
    SplitConstants,
    TruncatedLogNormal,
    split_at,
    split_constants,
)


@dataclass(frozen=True)
class LogNormalRows:
    """Row i's length distribution is ln L ~ Normal(mu_log[i], sigma_log[i]) on
    [min_tokens[i], max_tokens[i]]: parameters of shape (rows,) (or (rows, 1) once `column`ed),
    split constants of shape (orders, *that)."""

    mu_log: FloatArray
    sigma_log: FloatArray
    min_tokens: FloatArray
    max_tokens: FloatArray
    constants: SplitConstants

    @classmethod
    def of(cls, distributions: Sequence[TruncatedLogNormal]) -> "LogNormalRows":
        """The rows of `distributions` (one per row; the constants once per distinct one)."""
        position: dict[TruncatedLogNormal, int] = {}
        rows = np.array([position.setdefault(d, len(position)) for d in distributions], int)
        distinct = list(position)
        per_distinct = [split_constants(d, 0) for d in distinct]  # each of shape (orders,)
        stacked = SplitConstants(
            *(
                np.stack([getattr(c, f.name) for c in per_distinct], axis=1)[:, rows]
                for f in fields(SplitConstants)
            )
        )

        def parameter(name: str) -> FloatArray:
            values: FloatArray = np.array([getattr(d, name) for d in distinct], float)[rows]
            return values

        return cls(
            parameter("mu_log"), parameter("sigma_log"), parameter("min_tokens"),
            parameter("max_tokens"), stacked,
        )  # fmt: skip

    def take(self, rows: ArrayLike) -> "LogNormalRows":
        """The distributions of `rows` (indices or a mask over the rows)."""
        index = np.asarray(rows)
        return LogNormalRows(
            self.mu_log[index], self.sigma_log[index], self.min_tokens[index],
            self.max_tokens[index],
            SplitConstants(
                *(getattr(self.constants, f.name)[:, index] for f in fields(SplitConstants))
            ),
        )  # fmt: skip

    def repeat(self, times: int) -> "LogNormalRows":
        """Each row `times` times in a row (a deployment's distribution for each of its splits)."""
        rows: IntArray = np.repeat(np.arange(self.mu_log.size), times)
        return self.take(rows)

    def column(self) -> "LogNormalRows":
        """The rows as a column, to broadcast against a row of thresholds per row."""
        return LogNormalRows(
            self.mu_log[:, None], self.sigma_log[:, None], self.min_tokens[:, None],
            self.max_tokens[:, None],
            SplitConstants(
                *(getattr(self.constants, f.name)[..., None] for f in fields(SplitConstants))
            ),
        )  # fmt: skip

    def split(self, threshold_tokens: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """(short, long) partial moments (k = 0, 1, 2) of each row's distribution at its
        threshold(s): `threshold_tokens` of the rows' shape, or broadcasting against it."""
        t = np.minimum(np.maximum(threshold_tokens, self.min_tokens), self.max_tokens)
        return split_at(t, self.mu_log, self.sigma_log, self.constants)
