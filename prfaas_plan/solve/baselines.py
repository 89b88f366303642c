"""The baselines the planner is measured against, computed by the same model: homogeneous PD
(no PrfaaS, the best prefill/decode split, memoised per process), naive heterogeneous (every
request offloaded), and the paper's exhaustive grid search (every split x a fixed threshold
step), the brute-force oracle for tests and benchmarks."""

from collections.abc import Sequence

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, Evaluation, ServingSystem, evaluate
from prfaas_plan.analytic.decode_point import DecodePoint
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.choices import Mode
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware_batch


def exhaustive_grid_search(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    mode: Mode = Mode.PAPER,
    step_tokens: float = 100.0,
) -> Evaluation:
    """The paper's search: every split × thresholds every `step_tokens`, one model evaluation
    per point (brute force, for tests and benchmarks)."""
    best: Evaluation | None = None
    thresholds = np.arange(workload.min_tokens, workload.max_tokens + step_tokens, step_tokens)
    for n_p in range(space.pd_instances):
        for t in thresholds:
            candidate = evaluate(
                system,
                workload,
                Configuration(space.prfaas_instances, n_p, space.pd_instances - n_p, float(t)),
                mode,
            )
            if best is None or candidate.system_throughput_rps > best.system_throughput_rps:
                best = candidate
    assert best is not None  # pd_instances >= 1 and the grid is non-empty
    return best


def homogeneous_baseline(
    system: ServingSystem, workload: LengthDistribution, pd_instances: int, mode: Mode = Mode.PAPER
) -> Evaluation:
    """Ordinary PD on `pd_instances` local instances (no PrfaaS), best prefill/decode split."""
    configuration = homogeneous_configuration(system, workload, pd_instances, mode)
    return evaluate(system, workload, configuration, mode)


def homogeneous_configuration(
    system: ServingSystem, workload: LengthDistribution, pd_instances: int, mode: Mode = Mode.PAPER
) -> Configuration:
    """The configuration `homogeneous_baseline` evaluates (memoised: see below)."""
    return homogeneous_configurations([system], [workload], [pd_instances], mode)[0]


UNUSED_LINK_BYTES_PER_S = 1.0  # the homogeneous search's link: no request crosses one
MAX_MEMO = 4096  # a sweep's equal-cost baselines span many instance counts and workloads


class _Profiles:
    """A system's three curves as one memo key member, hashed once (a block's thousand
    systems share one set: hashing them in every key was a third of the memo's cost)."""

    __slots__ = ("curves", "hash")

    def __init__(self, curves: tuple[FittedCurve, FittedCurve, FittedCurve]) -> None:
        self.curves = curves
        self.hash = hash(curves)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Profiles) and self.curves == other.curves


# the memo's key: the system but for its link (its three curves, decode point and output
# length, ServingSystem's other fields), the workload, the PD instances and the mode
_Key = tuple[_Profiles, DecodePoint, float, LengthDistribution, int, Mode]
_memo: dict[_Key, Configuration] = {}


def homogeneous_configurations(
    systems: Sequence[ServingSystem],
    workloads: Sequence[LengthDistribution],
    pd_instances: Sequence[int],
    mode: Mode,
) -> list[Configuration]:
    """`homogeneous_configuration` of each (system, workload, PD instances), memoised per
    process on exact inputs (all frozen values), those not yet known searched together: the
    split does not depend on the link (nothing is offloaded: t = inf, no PrfaaS instance), so
    a server planning the same PD cluster and workload at many link bandwidths or PrfaaS sizes
    (the what-if page's sliders; a sweep over links) searches it once. The systems share their
    profiles (they may differ in link and decode point), the workloads are one distribution or
    truncated log-normals (solve/threshold.py `optimize_fixed_hardware_batch`). Each key is
    hashed once, and each distinct key twice more at most; the systems' curves are hashed once
    per set of them (`_Profiles`: a sweep's block asks for a thousand keys of one set)."""
    slots: dict[_Key, int] = {}  # distinct key -> its place in `distinct`
    distinct: list[ServingSystem] = []  # each distinct key's first system
    profiles: dict[tuple[int, int, int], _Profiles] = {}  # by the curves' identities
    at = []
    for system, workload, n in zip(systems, workloads, pd_instances, strict=True):
        curves = (system.prfaas_prefill_latency, system.pd_prefill_latency, system.kv_cache_size)
        ids = (id(curves[0]), id(curves[1]), id(curves[2]))  # the systems hold the curves
        shared = profiles.get(ids)
        if shared is None:
            shared = profiles[ids] = _Profiles(curves)
        key = (shared, system.decode, system.output_tokens, workload, n, mode)
        slot = slots.setdefault(key, len(slots))
        if slot == len(distinct):
            distinct.append(system)
        at.append(slot)
    keys = list(slots)
    found = [_memo.get(key) for key in keys]
    missing = [i for i, c in enumerate(found) if c is None]
    if missing:
        searched = _search(
            [distinct[i] for i in missing], [keys[i][3] for i in missing],
            [keys[i][4] for i in missing], mode,
        )  # fmt: skip
        if len(_memo) + len(missing) > MAX_MEMO:
            _memo.clear()
        for i, configuration in zip(missing, searched, strict=True):
            found[i] = _memo[keys[i]] = configuration
    configurations = [c for c in found if c is not None]  # every key found or searched
    return [configurations[slot] for slot in at]


def _search(
    systems: list[ServingSystem],
    workloads: list[LengthDistribution],
    pd_instances: list[int],
    mode: Mode,
) -> list[Configuration]:
    """The homogeneous split of each (system, workload, PD instances), in one search when the
    workloads are one or all truncated log-normals, else one search each; each one's own
    decode capacity where the systems' differ."""
    first = workloads[0]
    shared = all(w is first for w in workloads)
    if not shared and not all(isinstance(w, TruncatedLogNormal) for w in workloads):
        return [
            _search([system], [workload], [n], mode)[0]
            for system, workload, n in zip(systems, workloads, pd_instances, strict=True)
        ]
    count = len(systems)
    decode = np.array([s.decode_rps_per_instance for s in systems])
    t, n_p, n_d = optimize_fixed_hardware_batch(
        systems[0], first if shared else [w for w in workloads if isinstance(w, TruncatedLogNormal)],
        np.zeros(count, int), np.array(pd_instances), np.full(count, UNUSED_LINK_BYTES_PER_S),
        np.inf, mode, None if shared and np.all(decode == decode[0]) else decode,
    )  # fmt: skip
    return [Configuration(0, int(n_p[i]), int(n_d[i]), float(t[i])) for i in range(count)]


def naive_configuration(prfaas_instances: int, pd_instances: int) -> Configuration:
    """The configuration `naive_heterogeneous` evaluates."""
    return Configuration(prfaas_instances, 0, pd_instances, threshold_tokens=0.0)
