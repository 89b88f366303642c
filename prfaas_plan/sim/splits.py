"""The long-timescale scheduler's measure of a PD split (reference prfaas-model.md §8): the
bottleneck utilisation of each candidate number of PD-P instances, with the threshold it would
run at (the formulas are in rebalance.py's module docstring). Units: seconds, tokens, bytes.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


@dataclass(frozen=True, eq=False)
class SplitChoice:
    """Bottleneck utilisation of each candidate split (`prefill_instances`), queued work
    included, with the threshold it would run at; and that of the split and threshold in
    force (`current_utilization`), which a conversion has to beat."""

    prefill_instances: np.ndarray  # N_p of each candidate
    producer_utilization: np.ndarray  # ρ_pre(N_p)
    decode_utilization: np.ndarray  # ρ_pd-d(N − N_p)
    threshold_tokens: np.ndarray  # re-optimised: minimises the producers' ρ without queues
    current_utilization: float

    @property
    def utilization(self) -> np.ndarray:
        return np.asarray(np.maximum(self.producer_utilization, self.decode_utilization))


def evaluate_splits(
    lengths_tokens: ArrayLike,
    prfaas_work_s: ArrayLike,
    pd_work_s: ArrayLike,
    kv_bytes: ArrayLike,
    decode_slot_work_s: float,
    *,
    queued_prfaas_s: float,
    queued_pd_prefill_s: float,
    queued_decode_slot_s: float,
    period_s: float,
    link_capacity_bytes: float,
    prfaas_instances: int,
    pd_instances: int,
    decode_slots_per_instance: int,
    prefill_instances: ArrayLike,
    current_prefill_instances: int,
    current_threshold_tokens: float,
    reoptimize_threshold: bool = True,
) -> SplitChoice:
    """The utilisations of the module docstring for each candidate N_p, from the requests of
    one period (per-request arrays) and the work queued at the decision; the candidates at a
    re-optimised threshold (or at the current one if not `reoptimize_threshold`), the current
    split (one of the candidates) also at the threshold in force.

    The threshold for a split balances the arrivals only: a backlog is transient, and a t
    chosen to drain it would stay in force after it has gone (it changes only at the next
    conversion). A threshold between two observed lengths takes their midpoint; below all of
    them it is 0 (offload everything), above all of them inf (offload nothing)."""
    n_p = np.asarray(prefill_instances, dtype=float)
    order = np.argsort(lengths_tokens, kind="stable")
    lengths = np.asarray(lengths_tokens, dtype=float)[order]
    m = lengths.size

    def tail_sums(
        values: ArrayLike,
    ) -> np.ndarray:  # k -> sum over the requests from the k-th shortest on
        v = np.asarray(values, dtype=float)[order]
        return np.concatenate([np.cumsum(v[::-1])[::-1], [0.0]])

    def ratio(work: np.ndarray, capacity: float) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(work > 0, work / capacity if capacity > 0 else np.inf, 0.0)

    remote = tail_sums(prfaas_work_s)
    local = np.concatenate([[0.0], np.cumsum(np.asarray(pd_work_s, dtype=float)[order])])
    link = ratio(tail_sums(kv_bytes), link_capacity_bytes)
    separable = np.ones(m + 1, dtype=bool)  # a threshold cannot separate equal lengths
    separable[1:m] = lengths[1:] != lengths[:-1]

    def utilization(
        queued_prfaas: float, queued_pd: float
    ) -> np.ndarray:  # (split, k local) -> max over the producers
        prfaas = np.maximum(ratio(remote + queued_prfaas, period_s * prfaas_instances), link)
        pd = (local[None, :] + queued_pd) / (period_s * n_p[:, None])
        return np.where(separable, np.maximum(prfaas[None, :], pd), np.inf)

    loaded = utilization(queued_prfaas_s, queued_pd_prefill_s)
    in_force = int(np.searchsorted(lengths, current_threshold_tokens, side="right"))
    decode_capacity = period_s * (pd_instances - n_p) * decode_slots_per_instance
    decode = (decode_slot_work_s + queued_decode_slot_s) / decode_capacity
    current = int(np.flatnonzero(n_p == current_prefill_instances)[0])
    if reoptimize_threshold:
        middle = np.concatenate([[0.0], 0.5 * (lengths[:-1] + lengths[1:]), [np.inf]])
        thresholds = middle[utilization(0.0, 0.0).argmin(axis=1)]
        producers = loaded.min(axis=1)
    else:
        thresholds = np.full(n_p.size, float(current_threshold_tokens))
        producers = loaded[:, in_force]
    return SplitChoice(
        prefill_instances=np.asarray(prefill_instances, dtype=int),
        producer_utilization=producers,
        decode_utilization=decode,
        threshold_tokens=thresholds,
        current_utilization=float(max(loaded[current, in_force], decode[current])),
    )
