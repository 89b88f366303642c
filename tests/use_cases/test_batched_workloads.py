"""Scenarios of differing truncated log-normal input lengths (mu_log, sigma_log, bounds), instance
counts, links and GPU prices planned in one batch (use_cases/calls.py optimize_many) give, to the
last bit, the document `optimize` gives for each alone: the JSON texts are compared as strings.
The case study's decode table has a context column, so each log-normal also moves the decode
point. Also: a histogram among log-normals (planned in its own batch)."""

import dataclasses
import json
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.distributions import UncachedLengths
from prfaas_plan.errors import PrfaasPlanError
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.reading import read_yaml
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import Problem, build_problem, problem_like, scenario_from_data
from prfaas_plan.render.plan import plan_to_json
from prfaas_plan.use_cases import calls
from prfaas_plan.use_cases.requests import PlanRequest
from tests.memos import forget_memos

CASE = default_scenario_file()
CATALOG = CachedCatalog.open(None)
BASE: dict[str, Any] = read_yaml(CASE, "scenario")  # type: ignore[assignment]


def scenario_data(
    mu: float, sigma: float, low: float, high: float, prfaas: int, pd: int, link: float,
    price: float | None,
) -> dict[str, Any]:  # fmt: skip
    data = {**BASE, "prfaas_cluster": {**BASE["prfaas_cluster"], "instances": prfaas}}
    data["pd_cluster"] = {**BASE["pd_cluster"], "instances": pd}
    data["link"] = {"bandwidth_gbps": link}
    lengths = {**BASE["workload"]["input_tokens"], "mu_log": mu, "sigma_log": sigma}
    data["workload"] = {**BASE["workload"], "input_tokens": {**lengths, "min_tokens": low,
                                                             "max_tokens": high}}  # fmt: skip
    if price is not None:
        data["cost"] = {"gpu_prices_usd_per_gpu_hour": {"h200": price, "h20": 1.5}}
    return data


def problem(data: dict[str, Any]) -> Problem:
    return build_problem(scenario_from_data(data, str(CASE)), CASE, CATALOG)


def text(report: Any) -> str:
    return json.dumps(plan_to_json(report), sort_keys=True)


def assert_batch_is_each_alone(problems: list[Problem], request: PlanRequest) -> None:
    """The batch's documents are each problem's own, as JSON text; a batch refused (numpy
    overflow: use_cases/numerics.py) is refused for one of its problems alone, alike. A numpy
    warning fails the test: the model's arithmetic either answers or refuses.

    Each side plans problems built afresh from the scenarios, after every memo of the package
    is emptied (`fresh`, tests/memos.py): a value one path leaves behind (an interned log-normal's split
    constants, normaliser or mean written by log_normal_rows.prepare, a mesh) cannot be what
    the other path reads."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        alone: list[str] = []
        refusals: list[str] = []
        for p in fresh(problems):
            try:
                alone.append(text(calls.optimize(p, request, CATALOG)))
            except PrfaasPlanError as exc:
                refusals.append(str(exc))
        try:
            together = [text(r) for r in calls.optimize_many(fresh(problems), request, CATALOG)]
        except PrfaasPlanError as refused:
            assert str(refused) in refusals
            return
    assert not refusals, f"the batch planned what alone was refused: {refusals[0]}"
    for i, (batched, single) in enumerate(zip(together, alone, strict=True)):
        assert batched == single, f"problem {i} differs"


def fresh(problems: list[Problem]) -> list[Problem]:
    """The problems built again from their scenarios, with nothing memoised (tests/memos.py)."""
    forget_memos()
    return [build_problem(p.scenario, CASE, CATALOG) for p in problems]


SCENARIO = st.tuples(
    st.floats(8.0, 11.0),  # mu_log
    st.floats(0.3, 1.8),  # sigma_log
    st.sampled_from([128.0, 256.0, 1000.0]),  # min_tokens
    st.sampled_from([65536.0, 131072.0]),  # max_tokens
    st.integers(0, 10),  # PrfaaS instances
    st.integers(1, 12),  # PD instances
    st.floats(5, 100),  # link, Gbps (a priced plan buys an offering: up to 100 Gbps)
    st.one_of(st.none(), st.floats(0.5, 12.0)),  # the H200's $/GPU-hour (None: the catalog's)
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenarios=st.lists(SCENARIO, min_size=1, max_size=7),
    mode=st.sampled_from(["paper", "exact"]),
    repeat=st.booleans(),
)
def test_a_batch_of_workloads_and_prices_is_each_scenario_planned_alone(scenarios, mode, repeat):
    """Random log-normals, bounds, counts, links and prices (a scenario repeated, too)."""
    chosen = scenarios + scenarios[:1] if repeat else scenarios
    problems = [problem(scenario_data(*s)) for s in chosen]
    assert_batch_is_each_alone(problems, PlanRequest(mode=mode))


WIDE = st.tuples(
    st.floats(4.0, 12.5),  # mu_log, far outside the profiles as well
    st.floats(0.02, 3.5),  # sigma_log
    st.sampled_from([1.0, 16.0, 4000.0, 30000.0]),  # min_tokens
    st.sampled_from([32768.0, 65536.0, 131072.0]),  # max_tokens
    st.integers(0, 16),
    st.integers(1, 24),
    st.floats(1, 100),
    st.one_of(st.none(), st.floats(0.1, 20.0)),
)


def _buildable(scenario: tuple[Any, ...]) -> Problem | None:
    try:
        return problem(scenario_data(*scenario))
    except PrfaasPlanError:  # e.g. a range whose mass is too small to plan with
        return None


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios=st.lists(WIDE, min_size=2, max_size=6), mode=st.sampled_from(["paper", "exact"]))
def test_a_batch_at_the_edges_of_the_inputs_is_each_scenario_planned_alone(scenarios, mode):
    """Near-degenerate distributions and shares (one a subnormal share of requests): the batch
    answers as each plan alone does, or is refused as one of them is."""
    problems = [p for p in map(_buildable, scenarios) if p is not None]
    if problems:
        assert_batch_is_each_alone(problems, PlanRequest(mode=mode))


def test_a_batch_searched_a_few_deployments_a_pass_is_each_scenario_planned_alone(
    monkeypatch,
):
    """The optimiser searches at most MAX_SPLIT_ROWS (deployment, split) rows a pass; here 24,
    so these deployments (both modes, 3 to 20 PD instances, three length ranges) are searched
    one or two a pass, each as alone."""
    monkeypatch.setattr("prfaas_plan.solve.threshold.MAX_SPLIT_ROWS", 24)
    problems = [
        problem(scenario_data(mu, 1.0, low, high, prfaas, pd, 40, None))
        for mu, low, high, prfaas, pd in (
            (9.0, 128, 131072, 2, 3), (9.8, 1000, 65536, 6, 20), (10.3, 128, 65536, 4, 12),
            (9.4, 1000, 65536, 0, 7), (8.8, 256, 131072, 9, 16),
        )
    ]  # fmt: skip
    assert_batch_is_each_alone(problems, PlanRequest(mode="exact"))


def test_a_role_serving_a_subnormal_share_never_binds():
    """mu_log 10, sigma_log 0.25, max 32,768 tokens, 1 Gbps: the search meets thresholds where
    the offloaded share is subnormal and capacity / share overflows; that role never binds (a
    plan, not an overflow error), alone and in a batch (found by a review of the batched path,
    which had planned what a single optimize refused)."""
    edge = problem(scenario_data(10.0, 0.25, 1, 32768, 1, 2, 1, None))
    report = calls.optimize(edge, PlanRequest(), CATALOG)
    assert 0 < report.plan.evaluation.configuration.threshold_tokens < 32768
    assert_batch_is_each_alone(
        [edge, problem(scenario_data(9.0, 1.0, 128, 131072, 4, 8, 50, 2.0))], PlanRequest()
    )


def test_a_role_given_a_subnormal_mass_serves_nobody():
    """sigma_log 0.02 on [2,007, 130,966] tokens at 1 Gbps: the search meets a long share of
    5e-324 whose first moment underflows to 0 (a mean length of 0, a KV size of 0); such a
    role serves nobody (capacity.LEAST_SHARE), as at a share of 0: a plan, no warning (it had
    printed a RuntimeWarning and exited 3; found by a review)."""
    narrow = problem(scenario_data(9.744890112883393, 0.02, 2007, 130966, 1, 2, 1, None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = calls.optimize(narrow, PlanRequest(), CATALOG)
    assert 2007 < report.plan.evaluation.configuration.threshold_tokens < 130966
    other = problem(scenario_data(9.0, 1.0, 128, 131072, 4, 8, 50, 2.0))
    assert_batch_is_each_alone([narrow, other], PlanRequest(mode="exact"))


def test_a_fixed_threshold_batch_is_each_scenario_planned_alone():
    problems = [
        problem(scenario_data(mu, 1.0, 128, 131072, 4, 8, 100, 3.0)) for mu in (8.5, 9.9, 10.5)
    ]
    assert_batch_is_each_alone(problems, PlanRequest(threshold_tokens=20000))


def test_a_histogram_among_log_normals_is_planned_in_its_own_batch():
    histogram = {**BASE, "workload": {**BASE["workload"], "input_tokens": {
        "distribution": "histogram", "bin_edges_tokens": [128, 4096, 32768, 131072],
        "weights": [0.5, 0.3, 0.2]}}}  # fmt: skip
    problems = [
        problem(scenario_data(9.0, 1.2, 128, 131072, 2, 6, 50, None)),
        problem(histogram),
        problem(scenario_data(10.2, 0.7, 128, 131072, 6, 9, 200, None)),
    ]
    assert_batch_is_each_alone(problems, PlanRequest(mode="exact"))


@pytest.mark.parametrize(
    "changed",
    [
        {"mu_log": 9.1},
        {"sigma_log": 1.3},
        {"min_tokens": 512},
        {"max_tokens": 65536},  # the profiles are checked up to it: the problem built anew
    ],
)
def test_a_problem_like_another_is_the_problem_built_from_its_scenario(changed):
    """sweep/rows.py builds a group's problems from its first (inputs/scenario.py
    problem_like): the same Problem, field for field, as build_problem."""
    first = problem(scenario_data(9.9, 1.0, 128, 131072, 4, 8, 100, None))
    data = scenario_data(9.9, 1.0, 128, 131072, 2, 5, 30, 4.0)
    data["workload"]["input_tokens"].update(changed)
    scenario = scenario_from_data(data, str(CASE))
    like = problem_like(first, scenario, CATALOG)
    assert like == build_problem(scenario, CASE, CATALOG)


def test_a_batch_under_out_of_range_error_refuses_as_its_first_scenario_alone():
    """Range notes of a batch's log-normals are computed together: under `out_of_range:
    error` the batch is refused with the message of its first scenario planned alone."""
    from prfaas_plan.errors import RangeError

    problems = [
        problem(scenario_data(mu, 1.0, low, high, 4, 8, 50, None))
        for mu, low, high in ((9.9, 1000, 65536), (9.0, 128, 131072), (8.5, 128, 131072))
    ]
    request = PlanRequest(out_of_range="error")
    with pytest.raises(RangeError) as alone:
        calls.optimize(problems[1], request, CATALOG)
    with pytest.raises(RangeError) as together:
        calls.optimize_many(problems, request, CATALOG)
    assert str(together.value) == str(alone.value)
    assert text(calls.optimize(problems[0], request, CATALOG))  # the first is in range


def with_output(data: dict[str, Any], output: float | dict[str, Any]) -> dict[str, Any]:
    """The scenario with `workload.output_tokens` replaced (a number or a distribution)."""
    return {**data, "workload": {**data["workload"], "output_tokens": output}}


def log_normal_output(mu: float, sigma: float) -> dict[str, Any]:
    return {"distribution": "truncated_lognormal", "mu_log": mu, "sigma_log": sigma,
            "min_tokens": 1, "max_tokens": 16384}  # fmt: skip


OUTPUT = st.one_of(
    st.floats(16, 8192),  # a constant output length
    st.builds(log_normal_output, st.floats(4.0, 8.5), st.floats(0.2, 1.5)),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    outputs=st.lists(OUTPUT, min_size=2, max_size=6),
    inputs=st.lists(SCENARIO, min_size=1, max_size=2),
    mode=st.sampled_from(["paper", "exact"]),
)
def test_a_batch_of_output_lengths_is_each_scenario_planned_alone(outputs, inputs, mode):
    """Scenarios that differ in their output lengths (each its own decode point), sharing an
    input distribution or each with their own: a decode capacity per row, never the first
    scenario's for all (sweep/fast.py batches workload.output_tokens)."""
    problems = [
        problem(with_output(scenario_data(*inputs[i % len(inputs)]), output))
        for i, output in enumerate(outputs)
    ]
    assert_batch_is_each_alone(problems, PlanRequest(mode=mode))


def assert_built_alike(like: Problem, scenario: Any) -> None:
    """`like` (problem_like's) is build_problem's Problem of `scenario`, field for field (a
    prefix cache's uncached lengths, equal by identity, compared by their parts)."""
    built = build_problem(scenario, CASE, CATALOG)
    if isinstance(built.workload, UncachedLengths):
        parts = [(w.full, w.hit_rates, w.band_max_tokens) for w in (like.workload, built.workload)]
        assert parts[0] == parts[1]
        like = dataclasses.replace(like, workload=built.workload)
    assert like == built


BAND = {"max_input_tokens": 8192, "hit_rate": 0.5}
HISTOGRAM_INPUT = {"distribution": "histogram", "bin_edges_tokens": [128, 4096, 32768, 131072],
                   "weights": [0.5, 0.3, 0.2]}  # fmt: skip


@pytest.mark.parametrize(
    "workload",
    [
        {},  # the case study's log-normal
        {"input_tokens": HISTOGRAM_INPUT},
        {"prefix_cache_hit_rate": 0.3},
        {
            "prefix_cache_hit_rate": {
                "bands": [{"max_input_tokens": 8192, "hit_rate": 0.5}, {"hit_rate": 0.1}]
            }
        },
    ],
    ids=["log-normal", "histogram", "cached share", "cached bands"],
)
@pytest.mark.parametrize(
    "output", [300.0, log_normal_output(6.5, 0.7)], ids=["number", "log-normal"]
)
def test_a_problem_like_another_but_for_its_output_keeps_its_input(workload, output):
    """A group's scenario that differs from its first in the output lengths alone (and counts,
    link, prices) keeps the first's input distribution, the same object, so the batch
    searches it once; the Problem is build_problem's, field for field."""
    base = {**BASE, "workload": {**BASE["workload"], **workload}}
    first = problem(base)
    data = with_output(scenario_data(9.9, 1.0, 128, 131072, 2, 5, 30, 4.0), output)
    data["workload"] = {**data["workload"], **workload}
    scenario = scenario_from_data(data, str(CASE))
    like = problem_like(first, scenario, CATALOG)
    assert like.workload is first.workload
    assert_built_alike(like, scenario)


def with_slo(data: dict[str, Any], tokens_per_s: float) -> dict[str, Any]:
    """The scenario with `slo.decode_tokens_per_s` replaced."""
    return {**data, "slo": {"decode_tokens_per_s": tokens_per_s}}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slos=st.lists(st.floats(5.0, 120.0), min_size=2, max_size=6),
    inputs=st.lists(SCENARIO, min_size=1, max_size=2),
    output=OUTPUT,
    mode=st.sampled_from(["paper", "exact"]),
)
def test_a_batch_of_decode_slos_is_each_scenario_planned_alone(slos, inputs, output, mode):
    """Scenarios that differ in their decode SLO (each its own decode point), sharing an input
    distribution or each with their own (sweep/fast.py batches slo.decode_tokens_per_s)."""
    problems = [
        problem(with_slo(with_output(scenario_data(*inputs[i % len(inputs)]), output), slo))
        for i, slo in enumerate(slos)
    ]
    assert_batch_is_each_alone(problems, PlanRequest(mode=mode))


@pytest.mark.parametrize(
    "workload",
    [
        {},  # the case study's log-normal
        {"input_tokens": HISTOGRAM_INPUT},
        {"prefix_cache_hit_rate": 0.3},
        {"output_tokens": log_normal_output(6.5, 0.7)},
    ],
    ids=["log-normal", "histogram", "cached share", "log-normal output"],
)
@pytest.mark.parametrize("slo", [8.0, 75.0])
def test_a_problem_like_another_but_for_its_slo_keeps_its_workload(workload, slo):
    """A group's scenario that differs from its first in the decode SLO alone (and counts,
    link, prices) keeps the first's input distribution, the same object, and moves only the
    decode point: the Problem is build_problem's, field for field."""
    base = {**BASE, "workload": {**BASE["workload"], **workload}}
    first = problem(base)
    data = with_slo(scenario_data(9.9, 1.0, 128, 131072, 2, 5, 30, 4.0), slo)
    data["workload"] = {**base["workload"]}
    scenario = scenario_from_data(data, str(CASE))
    like = problem_like(first, scenario, CATALOG)
    assert like.workload is first.workload and like.system.decode != first.system.decode
    assert_built_alike(like, scenario)
