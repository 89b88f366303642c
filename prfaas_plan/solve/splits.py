"""The threshold optimiser's rows: candidate (N_p, N_d) splits, each with what its deployment
brings to the model (PrfaaS instances, link bandwidth, service-time mode, length distribution
and decode capacity per instance), so that the rows of many deployments, even of differing
workloads, are searched in the same array operations. Units: instances, bytes/s, req/s.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import BoolArray, FloatArray, IntArray
from prfaas_plan.analytic.capacity import Lengths
from prfaas_plan.analytic.log_normal_rows import LogNormalRows
from prfaas_plan.choices import Mode


@dataclass(frozen=True)
class Splits:
    """Candidate (N_p, N_d) splits, one per row, each with its deployment's PrfaaS instance count
    and link bandwidth: the splits of one deployment, or of many deployments of one system
    (`per_deployment` rows each, padded with N_p = N_d = 0 rows that never win)."""

    prfaas_instances: FloatArray
    n_p: IntArray
    n_d: IntArray
    link_bytes_per_s: FloatArray
    per_deployment: int
    # every row's service-time mode: one Mode, or per row True where Mode.EXACT
    mode: Mode | BoolArray
    # the length distribution: one for every row, or one per row (LogNormalRows)
    workload: Lengths
    # BS_max / (T_decode · L_out) of one decode instance: one number, or one per row
    decode_rps_per_instance: float | FloatArray

    @property
    def valid(self) -> "np.ndarray[tuple[int, ...], np.dtype[np.bool_]]":
        return self.n_d >= 1

    @property
    def decode_rps(self) -> FloatArray:
        """Θ_pd-d of each row: N_d decode instances."""
        decode: FloatArray = np.asarray(self.n_d, float) * self.decode_rps_per_instance
        return decode

    def take(self, rows: IntArray | FloatArray | BoolArray) -> "Splits":
        mode = self.mode if isinstance(self.mode, Mode) else self.mode[rows]
        workload = (
            self.workload.take(rows) if isinstance(self.workload, LogNormalRows) else self.workload
        )
        decode = self.decode_rps_per_instance
        return Splits(
            self.prfaas_instances[rows], self.n_p[rows], self.n_d[rows],
            self.link_bytes_per_s[rows], self.per_deployment, mode, workload,
            decode if isinstance(decode, float) else decode[rows],
        )  # fmt: skip

    def column(self) -> "Splits":
        """The rows as a column, to broadcast against a row of thresholds."""
        mode = self.mode if isinstance(self.mode, Mode) else self.mode[:, None]
        workload = (
            self.workload.column() if isinstance(self.workload, LogNormalRows) else self.workload
        )
        decode = self.decode_rps_per_instance
        return Splits(
            self.prfaas_instances[:, None], self.n_p[:, None], self.n_d[:, None],
            self.link_bytes_per_s[:, None], self.per_deployment, mode, workload,
            decode if isinstance(decode, float) else decode[:, None],
        )  # fmt: skip

    def per_deployment_all(self, values: BoolArray) -> BoolArray:
        """Each row's deployment: are `values` true on all its rows? (one value per row)"""
        every: BoolArray = np.repeat(
            values.reshape(-1, self.per_deployment).all(axis=1), self.per_deployment
        )
        return every

    def per_deployment_max(self, values: FloatArray) -> FloatArray:
        """Each row's deployment maximum of `values` (one value per row)."""
        best = values.reshape(-1, self.per_deployment).max(axis=1)
        spread: FloatArray = np.repeat(best, self.per_deployment)
        return spread
