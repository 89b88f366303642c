"""Decode latency vs batch and context (the derived H20 roofline table) and output lengths as a
distribution: the paper point is reproduced exactly, BS_max follows its closed form, the
table is verified by `check`, and a degenerate output distribution plans like the constant."""

import importlib.util
import math
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.architecture import KvFootprint
from prfaas_plan.analytic.decode_point import decode_point_at_context, mean_decode_context_tokens
from prfaas_plan.analytic.derive import DecodeRoofline, calibrate_decode_roofline
from prfaas_plan.choices import Mode
from prfaas_plan.errors import InfeasibleError, ProfileError, RangeError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import build_problem, load_scenario, open_problem
from prfaas_plan.use_cases.plan import plan
from tests.cli.test_cli import data_copy, run
from tests.conftest import ROOT

DECODE = "profiles/internal-1t-hybrid/decode/h20-x8"
CASE = ROOT / "examples" / "case_study.yaml"


def _scenario(tmp_path, slo=40.0, output="1024", name="s.yaml"):
    text = CASE.read_text().replace("decode_tokens_per_s: 40", f"decode_tokens_per_s: {slo}")
    text = text.replace("output_tokens: 1024", f"output_tokens: {output}")
    path = tmp_path / name
    path.write_text(text)
    return path


def _plan(path):
    return plan(build_problem(load_scenario(path), path, Catalog.open()), mode=Mode.PAPER)


def test_the_derived_table_reproduces_the_paper_point_and_the_case_study():
    problem = open_problem()
    assert problem.system.decode.batch_size == 20
    assert problem.system.decode.step_latency_s == pytest.approx(0.025, rel=1e-12)
    # the reference §5: 0.78 req/s per decode instance, the plan 3.24 req/s at t ~ 19.4K
    assert problem.system.decode_rps_per_instance == pytest.approx(20 / (0.025 * 1024), rel=1e-12)
    evaluation = plan(problem, mode=Mode.PAPER).plan.evaluation
    assert evaluation.system_throughput_rps == pytest.approx(3.249, abs=5e-4)


def test_derivation_script_reproduces_the_committed_decode_table(tmp_path):
    for folder in ("data", "examples"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    spec = importlib.util.spec_from_file_location(
        "derive_h20", ROOT / "scripts/derive_h20_decode.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in ("decode_step.csv", "decode_calibration.csv", "meta.yaml"):
        assert (tmp_path / "data" / DECODE / name).read_text() == (
            ROOT / "data" / DECODE / name
        ).read_text()


def _bs_oracle(roofline: DecodeRoofline, context: float, slo: float) -> int:
    """BS_max = floor((1/SLO - W/B) · η·B / S_kv(c)), the roofline solved for the batch."""
    budget_s = 1 / slo - roofline.weights_bytes / roofline.hbm_bytes_per_s
    per_request_s = float(roofline.footprint.size_bytes(context)) / (
        roofline.efficiency * roofline.hbm_bytes_per_s
    )
    return math.floor(budget_s / per_request_s * (1 + 1e-12))


@pytest.mark.parametrize("slo", [30.0, 40.0, 50.0])
def test_case_study_at_slo_30_40_50_follows_the_roofline(tmp_path, slo):
    from prfaas_plan.inputs.reading import read_csv_columns
    from prfaas_plan.use_cases.table_checks import decode_roofline

    batch, context, step_s = read_csv_columns(
        ROOT / "data" / DECODE / "decode_calibration.csv",
        ("batch_size", "context_tokens", "decode_step_latency_s"),
    )
    roofline = decode_roofline(
        Catalog.open(), "internal-1t-hybrid", "h20", 8,
        batch_size=batch[0], context_tokens=context[0], step_s=step_s[0],
    )  # fmt: skip
    report = _plan(_scenario(tmp_path, slo))
    decode = report.plan.evaluation.configuration
    point = build_problem(
        load_scenario(tmp_path / "s.yaml"), tmp_path / "s.yaml", Catalog.open()
    ).system.decode
    assert point.batch_size == _bs_oracle(roofline, context[0], slo)
    assert point.step_latency_s <= 1 / slo * (1 + 1e-12)
    assert point.step_latency_s == pytest.approx(
        float(roofline.step_s(point.batch_size, context[0])), rel=1e-9
    )
    assert decode.prfaas_instances == 4 and report.plan.evaluation.system_throughput_rps > 3.0


footprints = st.builds(
    KvFootprint,
    per_token_bytes=st.floats(1e3, 1e6),
    fixed_state_bytes=st.floats(0, 1e9),
    swa_bytes_per_token=st.just(0.0),
    swa_window_tokens=st.just(0),
)


@settings(max_examples=40, deadline=None)
@given(
    footprint=footprints,
    context=st.floats(1024, 131072),
    slo=st.floats(5, 200),
    point_batch=st.integers(1, 64),
)
def test_bilinear_interpolation_of_a_roofline_table_finds_its_closed_form_batch(
    footprint, context, slo, point_batch
):
    roofline = calibrate_decode_roofline(
        1e10, footprint, 3.2e13, batch_size=point_batch, context_tokens=30000, step_s=0.5
    )
    contexts, batches = (1024, 8192, 32768, 131072), (1, 2, 4, 8, 16, 32, 64, 128, 256)
    rows = [(c, b) for c in contexts for b in batches]
    c_col = [c for c, _ in rows]
    b_col = [b for _, b in rows]
    steps = roofline.step_s(b_col, c_col)
    want = min(_bs_oracle(roofline, context, slo), 256)
    if want < 1:
        with pytest.raises(InfeasibleError):
            decode_point_at_context(c_col, b_col, steps, decode_context_tokens=context,
                                    slo_tokens_per_s=slo, source="t.csv")  # fmt: skip
        return
    point = decode_point_at_context(
        c_col, b_col, steps, decode_context_tokens=context, slo_tokens_per_s=slo, source="t.csv"
    )
    # the oracle's floor may sit within rounding of an integer: allow that one case
    assert point.batch_size == want or (
        abs(point.batch_size - want) == 1
        and math.isclose(
            float(roofline.step_s(max(point.batch_size, want), context)), 1 / slo, rel_tol=1e-9
        )
    )


@settings(max_examples=40, deadline=None)
@given(
    footprint=footprints,
    context=st.floats(1100, 130000),
    slo=st.floats(5, 200),
    point_batch=st.integers(1, 64),
)
def test_the_decode_point_says_how_it_moves_with_the_context(footprint, context, slo, point_batch):
    """A roofline table is exactly bilinear, so each side's step slope is the roofline's
    ∂T/∂C = b · S_kv'(C) / (η B) at BS_max = b, and BS_max = floor(budget η B / S_kv(C)) holds
    while S_kv(C) stays in (budget η B / (b + 1), budget η B / b]: the plateau ends where
    S_kv reaches those bounds (one fewer batch above, one more below) or at the bracket."""
    roofline = calibrate_decode_roofline(
        1e10, footprint, 3.2e13, batch_size=point_batch, context_tokens=30000, step_s=0.5
    )
    contexts, batches = (1024, 8192, 32768, 131072), tuple(range(1, 257))
    rows = [(c, b) for c in contexts for b in batches]
    c_col, b_col = [c for c, _ in rows], [b for _, b in rows]
    budget_s = 1 / slo - roofline.weights_bytes / roofline.hbm_bytes_per_s
    if _bs_oracle(roofline, context, slo) < 1 or _bs_oracle(roofline, context, slo) >= 256:
        return
    point = decode_point_at_context(
        c_col, b_col, roofline.step_s(b_col, c_col), decode_context_tokens=context,
        slo_tokens_per_s=slo, source="t.csv",
    )  # fmt: skip
    b = point.batch_size
    per_token_s = roofline.footprint.per_token_bytes / (
        roofline.efficiency * roofline.hbm_bytes_per_s
    )
    size_at = budget_s * roofline.efficiency * roofline.hbm_bytes_per_s  # S_kv bounds x batch

    def context_of(size_bytes):  # S_kv is affine: its inverse
        return (
            size_bytes - roofline.footprint.fixed_state_bytes
        ) / roofline.footprint.per_token_bytes

    below, above = point.context_sides
    for side, edge, change in (
        (above, context_of(size_at / b), -1),
        (below, context_of(size_at / (b + 1)), 1),
    ):
        assert side.step_slope_s_per_token == pytest.approx(b * per_token_s, rel=1e-6)
        lo, hi = side.bracket_tokens
        assert lo <= context <= hi
        inside = lo <= edge <= hi and (edge - context) * change < 0
        if inside:
            assert side.batch_change == change
            assert side.plateau_end_tokens == pytest.approx(edge, rel=1e-9)
        else:
            assert side.batch_change == 0
            assert side.plateau_end_tokens == (hi if change < 0 else lo)


def test_a_context_outside_the_table_is_refused_not_extrapolated():
    with pytest.raises(RangeError, match="outside the profiled contexts"):
        decode_point_at_context([1024, 1024], [1, 2], [0.01, 0.02], decode_context_tokens=4096,
                                slo_tokens_per_s=40, source="t.csv")  # fmt: skip


def test_the_decode_calibration_cannot_beat_reading_the_weights():
    footprint = KvFootprint(1e4, 0.0, 0.0, 0)
    with pytest.raises(ProfileError, match="faster than reading"):
        calibrate_decode_roofline(1e12, footprint, 1e12, batch_size=1, context_tokens=1, step_s=0.5)


def test_check_catches_an_edited_derived_decode_table(tmp_path):
    data = data_copy(tmp_path)
    table = data / DECODE / "decode_step.csv"
    lines = table.read_text().splitlines()
    c, b, s = lines[5].split(",")
    lines[5] = f"{c},{b},{float(s) * 1.01!r}"
    table.write_text("\n".join(lines) + "\n")
    result = run("check", data, "-f", "json")
    assert result.returncode == 8 and "derived decode table disagrees" in result.stdout
    (data / DECODE / "decode_calibration.csv").unlink()
    result = run("check", data, "-f", "json")
    assert result.returncode == 8 and "needs its calibration point" in result.stdout


def test_a_degenerate_output_distribution_plans_like_the_constant(tmp_path):
    constant = _plan(_scenario(tmp_path))
    narrow = "{distribution: histogram, bin_edges_tokens: [1023.999, 1024.001], weights: [1]}"
    degenerate = _plan(_scenario(tmp_path, output=narrow, name="d.yaml"))
    a, b = constant.plan.evaluation, degenerate.plan.evaluation
    assert b.system_throughput_rps == pytest.approx(a.system_throughput_rps, rel=1e-6)
    assert b.configuration == a.configuration


def test_decode_capacity_uses_the_mean_output_and_the_length_biased_context(tmp_path):
    path = _scenario(tmp_path, output=SPREAD)
    problem = build_problem(load_scenario(path), path, Catalog.open())
    assert problem.system.output_tokens == pytest.approx(1024.0)  # (768 + 1280) / 2
    m2 = ((1024**3 - 512**3) + (1536**3 - 1024**3)) / (3 * 512) / 2
    want = problem.workload.mean_tokens + m2 / (2 * 1024)
    assert mean_decode_context_tokens(
        problem.workload.mean_tokens * 1024, 1024, m2
    ) == pytest.approx(want)
    assert problem.output_lengths.mean_squared_tokens == pytest.approx(m2, rel=1e-9)
    # a longer mean decode context than the constant's: a smaller or equal batch at the SLO
    assert problem.system.decode.batch_size <= open_problem().system.decode.batch_size


def test_output_lengths_from_a_trace_are_read_jointly(tmp_path):
    lines = [
        f'{{"timestamp": {i * 100}, "input_length": {l_in}, "output_length": {l_out}, "hash_ids": []}}'
        for i, (l_in, l_out) in enumerate([(20000, 500), (30000, 1500), (25000, 1000)])
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    text = CASE.read_text().split("workload:")[0] + (
        "workload:\n  input_tokens: {distribution: observed, file: t.jsonl}\n"
        "  output_tokens: {distribution: from_trace}\nslo: {decode_tokens_per_s: 40}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    problem = build_problem(load_scenario(path), path, Catalog.open())
    assert problem.system.output_tokens == pytest.approx(1000.0)
    joint = (20000 * 500 + 30000 * 1500 + 25000 * 1000) / 3
    assert problem.output_lengths.mean_input_times_output_tokens == pytest.approx(joint)


def test_from_trace_needs_a_trace(tmp_path):
    path = _scenario(tmp_path, output="{distribution: from_trace}")
    result = run("optimize", str(path))
    assert result.returncode == 3 and "from_trace needs" in result.stderr


def test_simulate_draws_each_requests_own_output_length(tmp_path):
    from prfaas_plan.use_cases.simulation_inputs import draw_output_tokens

    path = _scenario(tmp_path, output=SPREAD)
    problem = build_problem(load_scenario(path), path, Catalog.open())
    drawn = draw_output_tokens(problem, np.random.default_rng(1), 20000)
    assert drawn.min() >= 512 and drawn.max() <= 1536 and np.unique(drawn).size > 1000
    assert drawn.mean() == pytest.approx(1024, rel=0.02)


SPREAD = "{distribution: histogram, bin_edges_tokens: [512, 1024, 1536], weights: [1, 1]}"


def _drawn_outputs(spy: list, lengths) -> None:
    """Each request of the run has its own output length, drawn from the histogram SPREAD
    (uniform on [512, 1536], mean 1024), not the mean for every request."""
    drawn = np.concatenate([np.asarray(d, dtype=float) for d in spy])
    assert drawn.min() >= 512 and drawn.max() <= 1536 and np.unique(drawn).size > 0.9 * drawn.size
    assert drawn.mean() == pytest.approx(lengths.mean_tokens, rel=0.03)


def test_compare_policies_draws_each_requests_own_output_length(tmp_path, monkeypatch):
    """Without a trace, the stress runs draw output lengths as `simulate` does (the output
    drift then scales each request's own length)."""
    from prfaas_plan.sim import compare
    from prfaas_plan.use_cases.simulate import compare_policies_for
    from prfaas_plan.use_cases.simulation_spec import ComparisonSpec

    made, spy = compare._scenario_requests, []

    def spying(name, *args, **kwargs):
        requests = made(name, *args, **kwargs)
        if name != "output_drift":
            spy.append(requests.output_tokens)
        return requests

    monkeypatch.setattr(compare, "_scenario_requests", spying)
    path = _scenario(tmp_path, output=SPREAD)
    problem = build_problem(load_scenario(path), path, Catalog.open())
    compare_policies_for(problem, ComparisonSpec(requests=2000))
    assert len(spy) == 2  # burst, bandwidth_dip
    _drawn_outputs(spy, problem.output_lengths)


def test_the_sustainable_rate_draws_each_requests_own_output_length(tmp_path, monkeypatch):
    from prfaas_plan.sim import sustainable
    from prfaas_plan.use_cases.simulate import run_simulations
    from prfaas_plan.use_cases.simulation_spec import ArrivalSpec, LoadSpec, SimulationRequest

    search, spy = sustainable.sustainable_rate, []

    def spying(system, configuration, unit_arrival_s, input_tokens, output_tokens=None, **kw):
        spy.append(output_tokens)
        return search(system, configuration, unit_arrival_s, input_tokens, output_tokens, **kw)

    monkeypatch.setattr(sustainable, "sustainable_rate", spying)
    path = _scenario(tmp_path, output=SPREAD)
    problem = build_problem(load_scenario(path), path, Catalog.open())
    request = SimulationRequest(
        arrivals=ArrivalSpec(requests=4000), load=LoadSpec(fractions=(0.5,))
    )
    report = run_simulations(problem, request, find_sustainable=True)
    assert report.sustainable is not None and len(spy) == 1
    _drawn_outputs(spy, problem.output_lengths)


def test_the_readme_slo_table_is_what_the_planner_finds(tmp_path):
    """Each row of the decode-SLO table of docs/workloads.md (SLO, BS_max, T_decode ms, req/s
    per decode instance, Λ_max, t*) is recomputed."""
    import re

    readme = (ROOT / "docs" / "workloads.md").read_text()
    rows = re.findall(
        r"^\| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", readme, re.M
    )
    assert [int(r[0]) for r in rows] == [20, 30, 40, 50, 60]
    for slo, batch, step_ms, decode_rps, rps, t_k in rows:
        path = _scenario(tmp_path, float(slo))
        problem = build_problem(load_scenario(path), path, Catalog.open())
        evaluation = plan(problem, mode=Mode.PAPER).plan.evaluation
        assert problem.system.decode.batch_size == int(batch)
        assert f"{problem.system.decode.step_latency_s * 1e3:.2f}" == step_ms
        assert f"{problem.system.decode_rps_per_instance:.3f}" == decode_rps
        assert f"{evaluation.system_throughput_rps:.3f}" == rps
        assert f"{evaluation.configuration.threshold_tokens / 1e3:.2f}" == t_k


@pytest.mark.parametrize(
    ("workload_line", "fragments"),
    [
        ("output_tokens: {distribution: foo}", ["workload.output_tokens", "expected a number"]),
        ("output_tokens: 0", ["workload.output_tokens", "greater than or equal to 1"]),
        ("output_tokens: 1024\n  prefix_cache_hit_rate: 1", ["prefix_cache_hit_rate", "0.99"]),
        ("output_tokens: 1024\n  prefix_cache_hit_rate: -0.1", ["prefix_cache_hit_rate"]),
    ],
    ids=["unknown output form", "zero output", "hit-rate 1", "negative hit-rate"],
)
def test_bad_workload_fields_are_one_line_errors(tmp_path, workload_line, fragments):
    from tests.cli.test_cli import assert_clean_error

    path = tmp_path / "s.yaml"
    path.write_text(CASE.read_text().replace("output_tokens: 1024", workload_line))
    assert_clean_error(run("optimize", str(path)), 3, *fragments)


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ("context_tokens,batch_size,decode_step_latency_s\n2048,1,0.01\n1024,1,0.01\n", "sorted"),
        (
            "context_tokens,batch_size,decode_step_latency_s\n1024,2,0.01\n1024,1,0.01\n",
            "strictly increasing",
        ),
        (
            "batch_size,context_tokens,decode_step_latency_s\n1,1024,0.01\n2,1024,0.02\n",
            "outside the profiled contexts",
        ),
    ],
    ids=["contexts unsorted", "batches unsorted in a context", "context out of range"],
)
def test_bad_context_decode_tables_are_refused(tmp_path, table, fragment):
    from tests.cli.test_cli import assert_clean_error

    data = data_copy(tmp_path)
    (data / DECODE / "decode_step.csv").write_text(table)
    (data / DECODE / "decode_calibration.csv").unlink()
    result = run("optimize", "--data-dir", str(data))
    assert result.returncode in (4, 5)
    assert_clean_error(result, result.returncode, fragment)


@pytest.mark.parametrize(
    ("name", "columns"),
    [("azure_sample.csv", ("ContextTokens", "GeneratedTokens")),
     ("burstgpt_sample.csv", ("Request tokens", "Response tokens"))],
)  # fmt: skip
def test_output_lengths_from_a_csv_trace_are_its_generated_tokens(tmp_path, name, columns):
    """from_trace reads the Azure and BurstGPT traces' output column jointly with the inputs
    (BurstGPT's failed requests, with 0 response tokens, dropped from both)."""
    import csv
    import shutil

    shutil.copy(ROOT / "examples" / "traces" / name, tmp_path / name)
    with open(tmp_path / name, newline="") as handle:
        rows = [(float(r[columns[0]]), float(r[columns[1]])) for r in csv.DictReader(handle)]
    rows = [(i, o) for i, o in rows if o > 0]
    text = CASE.read_text().split("workload:")[0] + (
        f"workload:\n  input_tokens: {{distribution: observed, file: {name}}}\n"
        "  output_tokens: {distribution: from_trace}\nslo: {decode_tokens_per_s: 40}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    problem = build_problem(load_scenario(path), path, Catalog.open())
    assert problem.system.output_tokens == pytest.approx(sum(o for _, o in rows) / len(rows))
    joint = sum(i * o for i, o in rows) / len(rows)
    assert problem.output_lengths.mean_input_times_output_tokens == pytest.approx(joint)


@given(
    st.lists(st.integers(1, 64), min_size=1, max_size=5),
    st.integers(1, 64),  # up to the table's largest batch, as a decode point's BS_max
    st.sampled_from([0, 1, 2]),
)
@settings(max_examples=60, deadline=None)
def test_a_tables_kept_steps_are_each_batchs_own(asked_first, batch_size, at):
    """A decode table keeps each profiled context's steps of every batch (ContextSteps), made
    when a context is first asked for: each batch's step is the one interpolated for it alone,
    whatever was asked before (a sweep's decode points share a table's), and inf past the
    batches profiled there."""
    from prfaas_plan.analytic.decode_point import ContextSteps, _step_at_batches

    contexts = np.array([1024.0, 8192.0, 32768.0])
    batches = {1024.0: [1, 4, 16, 64], 8192.0: [2, 8, 32], 32768.0: [1, 3, 9, 27, 60]}
    rows = [(c, b, 0.01 + 1e-3 * b + 1e-7 * c * b) for c in contexts for b in batches[c]]
    context, batch, step = (np.array(column, float) for column in zip(*rows, strict=True))
    kept = ContextSteps(context, batch, step)
    for b in asked_first:  # other batches, at every context, asked for first
        for c in contexts:
            kept.pair(float(c), b)
    c = float(contexts[at])
    alone = [
        _step_at_batches(batch[context == c], step[context == c], np.array([float(b)]))[0]
        for b in (batch_size, batch_size + 1)
    ]
    got = kept.pair(c, batch_size)
    assert got.tolist() == alone  # the same bits (inf where not profiled)
    assert kept.at(c)[batch_size - 1] == alone[0]


@given(
    st.lists(
        st.one_of(
            st.floats(500.0, 40000.0),  # some outside the profiled 1,024-32,768
            st.sampled_from([1024.0, 8192.0, 32768.0]),  # profiled contexts exactly
        ),
        min_size=1, max_size=12,
    ),
    st.floats(2.0, 120.0),  # SLOs some of whose steps no batch meets
)  # fmt: skip
@settings(max_examples=80, deadline=None)
def test_a_blocks_prepared_decode_points_are_each_contexts_own(decode_contexts, slo):
    """`prepare_points` computes a block's decode points in a few numpy calls, and
    `decode_point_at_context` returns them: each the point it computes alone (batch, the step's
    bits, sides), and a context outside the table or without a batch meeting the SLO left to
    it, which refuses it as before."""
    from prfaas_plan.analytic.decode_point import ContextSteps, prepare_points

    contexts = np.array([1024.0, 8192.0, 32768.0])
    batches = {1024.0: [1, 4, 16, 64], 8192.0: [2, 8, 32], 32768.0: [1, 3, 9, 27, 60]}
    rows = [(c, b, 0.01 + 1e-3 * b + 1e-7 * c * b) for c in contexts for b in batches[c]]
    context, batch, step = (np.array(column, float) for column in zip(*rows, strict=True))

    def point(steps, c):
        kwargs = dict(decode_context_tokens=c, slo_tokens_per_s=slo, source="t.csv")
        try:
            return decode_point_at_context(
                context, batch, step, contexts=contexts, context_steps=steps, **kwargs
            )
        except (InfeasibleError, RangeError) as exc:
            return type(exc), str(exc)

    def fields(p):
        if isinstance(p, tuple):
            return p
        return (p.batch_size, p.step_latency_s, p.source, p.context_tokens, p.context_sides)

    prepared = ContextSteps(context, batch, step)
    prepare_points(prepared, contexts, decode_contexts, slo_tokens_per_s=slo, source="t.csv")
    for c in decode_contexts:
        alone = point(ContextSteps(context, batch, step), c)
        if not isinstance(alone, tuple):
            assert prepared.prepared[(c, slo, "t.csv")] is not None
        assert fields(point(prepared, c)) == fields(alone)


def test_a_prepared_point_is_found_only_by_its_own_context():
    """Keys are equal only where the numbers are the same bits: a zero context (0.0 == -0.0,
    whose points differ in the context's sign) is never prepared, and a context given as an
    array (unhashable) is computed as before (a review's cases)."""
    from prfaas_plan.analytic.decode_point import ContextSteps, prepare_points

    contexts = np.array([0.0, 10.0])
    context = np.array([0.0, 0.0, 10.0, 10.0])
    batch = np.array([1.0, 2.0, 1.0, 2.0])
    step = np.array([0.01, 0.02, 0.015, 0.03])
    kept = ContextSteps(context, batch, step)
    prepare_points(kept, contexts, [-0.0, 5.0], slo_tokens_per_s=40.0, source="t.csv")
    assert list(kept.prepared) == [(5.0, 40.0, "t.csv")]
    for c in (0.0, -0.0, np.array(5.0), 5):
        kwargs = dict(decode_context_tokens=c, slo_tokens_per_s=40.0, source="t.csv")
        alone = decode_point_at_context(context, batch, step, contexts=contexts, **kwargs)
        got = decode_point_at_context(
            context, batch, step, contexts=contexts, context_steps=kept, **kwargs
        )
        assert (got.batch_size, got.step_latency_s, got.context_tokens) == (
            alone.batch_size, alone.step_latency_s, alone.context_tokens
        )  # fmt: skip
        assert math.copysign(1.0, got.context_tokens) == math.copysign(1.0, alone.context_tokens)
