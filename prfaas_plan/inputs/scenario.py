"""Scenario files (YAML): what is deployed, over which link, for which workload and SLO.

Units are in every key: `bandwidth_gbps` is 10^9 bit/s (the paper's unit), lengths in tokens;
the schema is scenario_schema.py. `build_problem` turns a validated scenario plus the catalog into the model's inputs
(SI units inside).
"""

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.decode_point import (
    DecodePoint,
    decode_point_at_context,
    decode_point_for_slo,
    mean_decode_context_tokens,
    prepare_points,
)
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import truncated_log_normal
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog, DecodeTable
from prfaas_plan.inputs.reading import parse, read_yaml
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario_schema import (
    BandedHitRates,
    ClusterSpec,
    HistogramLengths,
    InputLengths,
    LogNormalLengths,
    ObservedLengthsFile,
    OutputFromTrace,
    Scenario,
    WorkloadSpec,
)
from prfaas_plan.inputs.workload_files import MetricsLengths, OutputFromMetrics


@dataclass(frozen=True)
class OutputLengths:
    """Output lengths as the model uses them: their first two moments (equation 5 uses the mean,
    the decode context the second moment), what the simulator samples, and for lengths read
    from a trace jointly with the inputs E[L_in·L_out] (None: independent of the input)."""

    mean_tokens: float
    mean_squared_tokens: float
    distribution: LengthDistribution | None  # None: every request has mean_tokens
    mean_input_times_output_tokens: float | None = None

    @classmethod
    def constant(cls, tokens: float) -> "OutputLengths":
        return cls(tokens, tokens * tokens, None)

    @classmethod
    def of(cls, distribution: LengthDistribution) -> "OutputLengths":
        m = distribution.partial_moments(-math.inf, math.inf, max_order=2)
        return cls(float(m[1] / m[0]), float(m[2] / m[0]), distribution)


def load_scenario(path: Path) -> Scenario:
    return scenario_from_data(read_yaml(path, "scenario"), str(path))


def scenario_from_data(data: object, path: str) -> Scenario:
    """A scenario from parsed YAML or JSON (`path` names its source in messages): the schema,
    then the checks across fields."""
    return check_scenario(parse(Scenario, data, path), path)


def check_scenario(scenario: Scenario, where: str) -> Scenario:
    """The checks across fields a schema cannot state (a file's, or a generated scenario's)."""
    if scenario.pd_cluster.instances < 1:
        raise ConfigError(
            f"{where}: pd_cluster.instances must be >= 1 (every request is decoded in the PD cluster), "
            f"got {scenario.pd_cluster.instances}"
        )
    for name in ("prfaas_cluster", "pd_cluster"):
        cluster: ClusterSpec = getattr(scenario, name)
        if cluster.gpus > plausible.MAX_GPUS:
            raise ConfigError(
                f"{where}: {name}: gpus_per_instance x instances must be <= {plausible.MAX_GPUS:,} "
                f"GPUs, got {cluster.gpus_per_instance} x {cluster.instances} = {cluster.gpus:,}"
            )
    return scenario


MIN_LOGNORMAL_MASS = 1e-12


def build_output_lengths(
    spec: float | LogNormalLengths | HistogramLengths | OutputFromTrace | OutputFromMetrics,
    input_spec: InputLengths,
    base_dir: Path,
    where: str = "",
) -> OutputLengths:
    """workload.output_tokens as OutputLengths; `from_trace` needs workload.input_tokens to be
    an observed trace with output lengths (the lengths are then read jointly), `from_metrics` a
    metrics snapshot (its generation lengths, independent of the input lengths)."""
    if isinstance(spec, float | int):
        return OutputLengths.constant(float(spec))
    if isinstance(spec, OutputFromMetrics):
        if not isinstance(input_spec, MetricsLengths):
            raise ConfigError(
                f"{where}workload.output_tokens: from_metrics needs workload.input_tokens to be "
                f"`distribution: metrics`, found {input_spec.distribution}"
            )
        from prfaas_plan.inputs import file_workloads

        return OutputLengths.of(file_workloads.metrics_workload(input_spec, base_dir).outputs)
    if not isinstance(spec, OutputFromTrace):
        return OutputLengths.of(build_workload(spec, base_dir, where, "output_tokens"))
    if not isinstance(input_spec, ObservedLengthsFile):
        raise ConfigError(
            f"{where}workload.output_tokens: from_trace needs workload.input_tokens to be "
            "`distribution: observed` with a trace (Mooncake JSONL, Azure or BurstGPT CSV), found "
            f"{input_spec.distribution}"
        )
    from prfaas_plan.inputs import file_workloads

    mean, mean_square, outputs, joint = file_workloads.outputs_of_trace(input_spec, base_dir, where)
    return OutputLengths(mean, mean_square, outputs, joint)


def build_workload(
    spec: InputLengths | LogNormalLengths | HistogramLengths,
    base_dir: Path,
    where: str = "",
    field: str = "input_tokens",
) -> LengthDistribution:
    if isinstance(spec, LogNormalLengths):
        d = truncated_log_normal(spec.mu_log, spec.sigma_log, spec.min_tokens, spec.max_tokens)
        try:  # plausible.py keeps this finite; outside use_cases/numerics.py's guard, so guarded here
            with np.errstate(over="raise", invalid="raise", divide="raise"):
                mass = d.untruncated_mass
        except FloatingPointError as exc:
            raise ConfigError(
                f"{where}workload.{field}: the log-normal (mu_log={spec.mu_log:g}, "
                f"sigma_log={spec.sigma_log:g}) cannot be computed with ({exc})"
            ) from None
        if not mass > MIN_LOGNORMAL_MASS:
            raise ConfigError(
                f"{where}workload.{field}: the log-normal (mu_log={spec.mu_log:g}, "
                f"sigma_log={spec.sigma_log:g}) puts {mass:.3g} of its probability on "
                f"[{spec.min_tokens:g}, {spec.max_tokens:g}] tokens; expected > {MIN_LOGNORMAL_MASS:g} "
                "(mu_log is the mean of ln(tokens), e.g. 9.9 for a ~20K-token median)"
            )
        return d
    if isinstance(spec, HistogramLengths):
        # the empirical distributions' module: off the log-normal's path
        from prfaas_plan.analytic.distributions import Histogram

        return Histogram(tuple(spec.bin_edges_tokens), tuple(spec.weights))
    from prfaas_plan.inputs import file_workloads  # the file-backed kinds: off the plan's path

    if isinstance(spec, MetricsLengths):
        return file_workloads.metrics_workload(spec, base_dir).inputs
    return file_workloads.trace_lengths(spec, base_dir).inputs


def _hit_rates(
    workload: WorkloadSpec, base_dir: Path, where: str
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """workload.prefix_cache_hit_rate as (hit-rate per band, band upper edges in tokens): one
    band for a constant; `from_trace` forms measure the rates on the observed trace's hash_ids
    (Mooncake JSONL), bounded like a given rate."""
    spec, inputs = workload.prefix_cache_hit_rate, workload.input_tokens
    if isinstance(spec, float | int):
        return (float(spec),), ()
    if isinstance(spec, BandedHitRates):
        return tuple(b.hit_rate for b in spec.bands), spec.band_max_tokens
    from prfaas_plan.inputs import file_workloads

    return file_workloads.trace_hit_rates(spec, inputs, base_dir, where)


def decode_point(
    table: DecodeTable, slo_tokens_per_s: float, inputs: LengthDistribution, output: OutputLengths
) -> DecodePoint:
    """BS_max and its step time at the SLO; where the table has a context column, at the
    workload's mean decode context (analytic/decode_point.py mean_decode_context_tokens)."""
    if table.context_tokens is None:
        return decode_point_for_slo(
            table.batch_sizes, table.step_latencies_s, slo_tokens_per_s=slo_tokens_per_s,
            source=table.source,
        )  # fmt: skip
    return decode_point_at_context(
        table.context_tokens, table.batch_sizes, table.step_latencies_s,
        decode_context_tokens=_decode_context_tokens(inputs, output),
        slo_tokens_per_s=slo_tokens_per_s, source=table.source, contexts=table.contexts,
        context_steps=table.context_steps,
    )  # fmt: skip


def _decode_context_tokens(inputs: LengthDistribution, output: OutputLengths) -> float:
    """The mean decode context of `inputs` and `output` lengths (their joint moment where the
    output lengths carry one, else independent lengths)."""
    joint = output.mean_input_times_output_tokens
    return mean_decode_context_tokens(
        inputs.mean_tokens * output.mean_tokens if joint is None else joint,
        output.mean_tokens, output.mean_squared_tokens,
    )  # fmt: skip


@dataclass(frozen=True)
class Problem:
    """Everything the planner needs, in SI units."""

    scenario: Scenario
    source: str
    system: ServingSystem
    workload: LengthDistribution
    prfaas_instances: int
    pd_instances: int
    output_lengths: OutputLengths | None = None  # None: every request has system.output_tokens


def build_problem(
    scenario: Scenario,
    source: Path,
    catalog: Catalog,
    bandwidth_gbps: float | None = None,
) -> Problem:
    """Scenario + catalog -> model inputs. `bandwidth_gbps` overrides link.bandwidth_gbps."""
    catalog.model(scenario.model, where=f"{source}: model: ")
    for cluster in ("prfaas_cluster", "pd_cluster"):
        catalog.gpu(getattr(scenario, cluster).gpu, where=f"{source}: {cluster}.gpu: ")
    if bandwidth_gbps is not None:
        if not (bandwidth_gbps > 0 and math.isfinite(bandwidth_gbps)):
            raise ConfigError(
                f"bandwidth_gbps must be a finite number > 0, got {bandwidth_gbps:g}",
                parameter="bandwidth_gbps",
            )
        # the override is held to the file field's own bound
        plausible.check_in_range(
            "bandwidth_gbps", bandwidth_gbps, plausible.MIN_BANDWIDTH_GBPS,
            plausible.MAX_BANDWIDTH_GBPS, "Gbps",
        )  # fmt: skip
    full = build_workload(scenario.workload.input_tokens, source.parent, f"{source}: ")
    hit_rates, band_max_tokens = _hit_rates(scenario.workload, source.parent, f"{source}: ")
    workload = full
    if max(hit_rates) > 0:
        from prfaas_plan.analytic.distributions import UncachedLengths

        workload = UncachedLengths(full, hit_rates, band_max_tokens)
    output = build_output_lengths(
        scenario.workload.output_tokens, scenario.workload.input_tokens, source.parent,
        f"{source}: ",
    )  # fmt: skip
    reach = workload.max_tokens
    model, prfaas, pd = scenario.model, scenario.prfaas_cluster, scenario.pd_cluster
    decode = catalog.decode_table(
        model, pd.gpu, pd.gpus_per_instance, where=f"{source}: pd_cluster: "
    )
    system = ServingSystem(
        prfaas_prefill_latency=catalog.prefill_latency(
            model, prfaas.gpu, prfaas.gpus_per_instance, reach, where=f"{source}: prfaas_cluster: "
        ),
        pd_prefill_latency=catalog.prefill_latency(
            model, pd.gpu, pd.gpus_per_instance, reach, where=f"{source}: pd_cluster: "
        ),
        kv_cache_size=catalog.kv_cache_size(
            model, scenario.kv_dtype, reach, where=f"{source}: kv_dtype: "
        ),
        decode=decode_point(decode, scenario.slo.decode_tokens_per_s, full, output),
        output_tokens=output.mean_tokens,
        link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(
            scenario.link.bandwidth_gbps if bandwidth_gbps is None else bandwidth_gbps
        ),
    )
    return Problem(scenario, str(source), system, workload, prfaas.instances, pd.instances, output)


def problem_like(problem: Problem, scenario: Scenario, catalog: Catalog) -> Problem:
    """`build_problem(scenario)` for a scenario like `problem.scenario` (a sweep's group:
    sweep/fast.py), the same Problem field for field, reading only what differs: the instance
    counts and the link's bandwidth alone, a truncated log-normal's parameters but for its
    upper bound (the profiles are checked up to it) and the decode point they move
    (`_with_input_lengths`), the output lengths and the decode point they move, the input
    distribution kept (`_with_output_lengths`), the decode SLO and the decode point it moves,
    or else the whole scenario (`build_problem`)."""
    old, new = problem.scenario.workload, scenario.workload
    if new != old:
        if new.input_tokens == old.input_tokens and (
            new.model_copy(update={"output_tokens": old.output_tokens}) == old
        ):  # the input lengths first: a sweep over them need not copy the workload
            return _with_output_lengths(problem, scenario, catalog)
        return _with_input_lengths(problem, scenario, catalog)
    if scenario.slo != problem.scenario.slo:  # the decode point alone moves
        if problem.output_lengths is None:
            return build_problem(scenario, Path(problem.source), catalog)
        return _like(
            problem, scenario, catalog, problem.workload, _full_input(problem),
            problem.output_lengths,
        )  # fmt: skip
    return dataclasses.replace(
        problem, scenario=scenario,
        system=dataclasses.replace(
            problem.system,
            link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(scenario.link.bandwidth_gbps),
        ),
        prfaas_instances=scenario.prfaas_cluster.instances, pd_instances=scenario.pd_cluster.instances,
    )  # fmt: skip


def _with_output_lengths(problem: Problem, scenario: Scenario, catalog: Catalog) -> Problem:
    """`problem_like` of a scenario whose workload differs in its output lengths alone: the
    problem's input distribution, the same object (a batch of them searches it once), and the
    output lengths and the decode point they move built as `build_problem` builds them."""
    source = Path(problem.source)
    output = build_output_lengths(
        scenario.workload.output_tokens, scenario.workload.input_tokens, source.parent,
        f"{source}: ",
    )  # fmt: skip
    return _like(problem, scenario, catalog, problem.workload, _full_input(problem), output)


def _full_input(problem: Problem) -> LengthDistribution:
    """The problem's input lengths before a prefix cache's share (build_problem's `full`: the
    decode point's)."""
    from prfaas_plan.analytic.distributions import UncachedLengths

    workload = problem.workload
    return workload.full if isinstance(workload, UncachedLengths) else workload


def _like(
    problem: Problem,
    scenario: Scenario,
    catalog: Catalog,
    workload: LengthDistribution,
    full: LengthDistribution,
    output: OutputLengths,
) -> Problem:
    """`problem` with `scenario`'s instance counts and link, `workload` its input lengths, and
    the decode point of `full` input and `output` lengths (build_problem's, where they are
    what build_problem would build)."""
    pd = scenario.pd_cluster
    table = _decode_table(problem.source, scenario, catalog)
    system = dataclasses.replace(
        problem.system, decode=decode_point(table, scenario.slo.decode_tokens_per_s, full, output),
        output_tokens=output.mean_tokens,
        link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(scenario.link.bandwidth_gbps),
    )  # fmt: skip
    return dataclasses.replace(
        problem, scenario=scenario, system=system, workload=workload, output_lengths=output,
        prfaas_instances=scenario.prfaas_cluster.instances, pd_instances=pd.instances,
    )  # fmt: skip


def _decode_table(source: str, scenario: Scenario, catalog: Catalog) -> DecodeTable:
    pd = scenario.pd_cluster
    return catalog.decode_table(
        scenario.model, pd.gpu, pd.gpus_per_instance, where=f"{source}: pd_cluster: "
    )


def prepare_like(problem: Problem, scenarios: Sequence[Scenario], catalog: Catalog) -> None:
    """For `problem_like(problem, s, catalog)` of each scenario: the decode points of those
    whose new input lengths are truncated log-normals (`_with_input_lengths`), each at its
    mean decode context with `problem`'s output lengths and decode SLO, in a few numpy calls
    (analytic/decode_point.py `prepare_points`, kept on the decode table where building each
    problem finds them: the same points). A sweep's block; a speed-up only: a scenario whose
    context or SLO is not one of these computes its own point."""
    output, table = problem.output_lengths, _decode_table(problem.source, problem.scenario, catalog)
    steps = table.context_steps
    if output is None or steps is None or table.contexts is None:
        return
    contexts = [
        _decode_context_tokens(
            truncated_log_normal(x.mu_log, x.sigma_log, x.min_tokens, x.max_tokens), output
        )
        for x in (s.workload.input_tokens for s in scenarios)
        if isinstance(x, LogNormalLengths)
    ]
    prepare_points(
        steps, table.contexts, contexts, slo_tokens_per_s=problem.scenario.slo.decode_tokens_per_s,
        source=table.source,
    )  # fmt: skip


@lru_cache(maxsize=16)
def _source_parts(source: str) -> tuple[Path, str]:
    """A scenario file's directory and the prefix its errors start with (build_problem's), once
    per source: a sweep's block builds a workload per scenario from one source."""
    path = Path(source)
    return path.parent, f"{path}: "


def _with_input_lengths(problem: Problem, scenario: Scenario, catalog: Catalog) -> Problem:
    """`problem_like` of a scenario whose workload differs: where only the parameters of a
    truncated log-normal input length but max_tokens do (no prefix cache), its workload and
    the decode point at its mean context are built anew; otherwise the whole problem is."""
    old, new = problem.scenario.workload, scenario.workload
    lengths = new.input_tokens
    if (
        not isinstance(lengths, LogNormalLengths)
        or not isinstance(old.input_tokens, LogNormalLengths)
        or lengths.max_tokens != old.input_tokens.max_tokens
        or new.prefix_cache_hit_rate != 0
        or new.output_tokens != old.output_tokens
        or problem.output_lengths is None
    ):
        return build_problem(scenario, Path(problem.source), catalog)
    directory, where = _source_parts(problem.source)
    workload = build_workload(lengths, directory, where)
    return _like(problem, scenario, catalog, workload, workload, problem.output_lengths)


def open_problem(
    scenario: Path | None = None,
    data_dir: Path | None = None,
    bandwidth_gbps: float | None = None,
) -> Problem:
    """Read a scenario file (default: the paper's case study) against the catalog in
    `data_dir` (default: the shipped data) and build its Problem."""
    return open_problem_and_catalog(scenario, data_dir, bandwidth_gbps)[0]


def open_problem_and_catalog(
    scenario: Path | None = None,
    data_dir: Path | None = None,
    bandwidth_gbps: float | None = None,
) -> tuple[Problem, Catalog]:
    """`open_problem`, and the catalog the scenario was read against: a command prices the
    problem with it, so each catalog file is read once (a catalog keeps what it read)."""
    path = scenario if scenario is not None else default_scenario_file()
    loaded = load_scenario(path)
    catalog = Catalog.open(data_dir)
    return build_problem(loaded, path, catalog, bandwidth_gbps), catalog
