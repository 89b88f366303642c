"""What the model is given for a batch of problems (a sweep's group, or a single plan: a batch
of one): their systems share everything but the link and the decode point (which their input
and output lengths move), and their input lengths are one shared distribution, or one
truncated log-normal each (analytic/log_normal_rows.py). A batch of any other mixture is cut
into batches that are (`batches`). Units: SI (req/s, tokens).
"""

from collections.abc import Hashable, Sequence

from prfaas_plan.analytic.capacity import Lengths
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.log_normal_rows import LogNormalRows
from prfaas_plan.inputs.scenario import Problem


def shared_workload(problems: Sequence[Problem]) -> LengthDistribution | None:
    """The problems' one length distribution, or None where they differ."""
    first = problems[0].workload
    comparable = isinstance(first, TruncatedLogNormal)  # others may hold arrays
    if all(p.workload is first or (comparable and p.workload == first) for p in problems):
        return first
    return None


def batches(problems: Sequence[Problem]) -> list[list[int]]:
    """The problems' indices cut into batches the model takes at once: the truncated
    log-normals together (whatever their parameters), any other distribution with the problems
    that share it (histograms, observed traces, prefix-cache hit rates: one batch each)."""
    found: dict[Hashable, list[int]] = {}
    for i, problem in enumerate(problems):
        w = problem.workload
        key: Hashable = "log-normal" if isinstance(w, TruncatedLogNormal) else id(w)
        found.setdefault(key, []).append(i)
    return list(found.values())


def log_normals(workloads: Sequence[LengthDistribution]) -> list[TruncatedLogNormal]:
    """`workloads`, each a truncated log-normal (a batch of `batches`)."""
    out = []
    for w in workloads:
        assert isinstance(w, TruncatedLogNormal), "a batch of differing workloads: log-normals"
        out.append(w)
    return out


def decode_rows(
    problems: Sequence[Problem], repeat: int = 1, shared: bool = False
) -> list[float] | None:
    """The decode capacity (req/s per instance) of `repeat` rows per problem; for problems of
    one `shared` workload, None where every problem's is the first's (the model then takes
    the system's own: their output lengths, which move it, are then alike)."""
    capacities = [p.system.decode_rps_per_instance for p in problems]
    if shared and all(c == capacities[0] for c in capacities):
        return None
    return [c for c in capacities for _ in range(repeat)]


def model_inputs(
    problems: Sequence[Problem], repeat: int = 1
) -> tuple[Lengths, list[float] | None]:
    """The lengths and decode capacities (req/s per instance) of `repeat` rows per problem,
    as `evaluate_many` takes them: the shared distribution, or one truncated log-normal per
    row, with a decode capacity per row where they may differ (`decode_rows`)."""
    if shared_workload(problems) is not None:
        return problems[0].workload, decode_rows(problems, repeat, shared=True)
    workloads = log_normals([p.workload for p in problems for _ in range(repeat)])
    return LogNormalRows.of(workloads), decode_rows(problems, repeat)


def search_inputs(
    problems: Sequence[Problem],
) -> tuple[LengthDistribution | list[TruncatedLogNormal], list[float] | None]:
    """The lengths and decode capacities as the threshold optimiser takes them (one per
    problem), as `model_inputs`."""
    shared = shared_workload(problems)
    if shared is not None:
        return shared, decode_rows(problems, shared=True)
    return log_normals([p.workload for p in problems]), decode_rows(problems)
