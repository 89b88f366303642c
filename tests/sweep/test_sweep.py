"""Sweeps: the vectorised optimize path equals per-scenario plan(), a local sweep equals the same
sweep on a Dask LocalCluster of processes, a killed study resumed equals an uninterrupted one,
and sweep files are refused with one line."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prfaas_plan.choices import CostModel, Mode
from prfaas_plan.inputs.scenario import build_problem, problem_like
from prfaas_plan.render.plan import plan_to_json
from prfaas_plan.sweep import fast
from prfaas_plan.sweep.commands import parameter_names
from prfaas_plan.sweep.flat import flatten
from prfaas_plan.sweep.results import read_results
from prfaas_plan.sweep.rows import _catalog
from prfaas_plan.sweep.spec import load_sweep, scenario_of
from tests.cli.test_cli import assert_clean_error, run
from tests.memos import forget_memos

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
name: small
scenario: {root}/examples/case_study.yaml
command: optimize
axes:
  link.bandwidth_gbps: {{values: [5, 50, 400]}}
  prfaas_cluster.instances: {{start: 0, stop: 6, step: 2, integer: true}}
  pd_cluster.instances: {{values: [3, 8]}}
  mode: {{values: [paper, exact]}}
filters: ["prfaas_cluster.instances <= 2 * pd_cluster.instances"]
chunk_size: 10
"""


def _sweep_file(tmp_path: Path, text: str = SMALL, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text.format(root=ROOT))
    return path


def _frame(results: Path) -> list[dict]:
    return read_results(results).to_pylist()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    link=st.lists(st.floats(1, 800), min_size=1, max_size=6),
    prfaas=st.integers(0, 12),
    pd=st.integers(1, 14),
    mu=st.floats(8.0, 11.0),
    sigma=st.floats(0.4, 1.6),
    mode=st.sampled_from(["paper", "exact"]),
)
@pytest.mark.slow
def test_vectorised_optimize_equals_plan_per_scenario(
    tmp_path_factory, link, prfaas, pd, mu, sigma, mode
):
    text = f"""
name: v
scenario: {ROOT}/examples/case_study.yaml
command: optimize
parameters: {{mode: {mode}}}
axes:
  link.bandwidth_gbps: {{values: {link}}}
  prfaas_cluster.instances: {{values: [0, {prfaas}]}}
  pd_cluster.instances: {{values: [1, {pd}]}}
  workload.input_tokens.mu_log: {{values: [{mu}]}}
  workload.input_tokens.sigma_log: {{values: [{sigma}]}}
"""
    path = tmp_path_factory.mktemp("v") / "v.yaml"
    path.write_text(text)
    sweep = load_sweep(path, parameter_names)
    points = list(sweep.points())
    scenarios = [scenario_of(sweep, p, i) for i, p in points]
    catalog = _catalog(None)
    problem = build_problem(scenarios[0], ROOT / "examples/case_study.yaml", catalog)
    columns = fast.optimize_block(
        [problem_like(problem, s, catalog) for s in scenarios], {"mode": mode}, catalog
    )
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest

    for i, scenario in enumerate(scenarios):  # to the last bit: one search each or together
        one = build_problem(scenario, ROOT / "examples/case_study.yaml", catalog)
        report = calls.optimize(one, PlanRequest(mode=Mode(mode)), catalog)
        expected = flatten(plan_to_json(report))
        assert _rows(columns)[i] == {k: v for k, v in expected.items() if v is not None}


WORKLOADS = """
name: workloads
scenario: {base}
command: optimize
parameters: {{mode: exact}}
sampling: latin_hypercube
samples: 12
seed: 5
axes:
  workload.input_tokens.mu_log: {{low: 8.5, high: 10.5}}
  workload.input_tokens.sigma_log: {{low: 0.5, high: 1.5}}
  workload.input_tokens.min_tokens: {{values: [128, 512]}}
  link.bandwidth_gbps: {{low: 5, high: 100, log: true}}
  prfaas_cluster.instances: {{low: 0, high: 8, integer: true}}
  cost.gpu_prices_usd_per_gpu_hour.h200: {{low: 1.0, high: 10.0}}
  workload.output_tokens: {{low: 64, high: 4096}}
  slo.decode_tokens_per_s: {{low: 10, high: 80}}
"""


def test_a_sweep_over_workloads_and_prices_is_one_group_whose_rows_are_single_plans(
    tmp_path, monkeypatch
):
    """Scenarios differing in mu_log, sigma_log, min_tokens, link, PrfaaS size, the H200's
    price, the output length and the decode SLO share one fast-path group, planned in one
    batch: each row is the document of its scenario planned alone (`optimize`), to the last
    bit."""
    import yaml

    from prfaas_plan.sweep.rows import chunk_table
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest

    base = yaml.safe_load((ROOT / "examples/case_study.yaml").read_text())
    base["cost"] = {"gpu_prices_usd_per_gpu_hour": {"h200": 4.0, "h20": 1.6}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    path = _sweep_file(tmp_path, WORKLOADS.replace("{base}", str(tmp_path / "base.yaml")))
    sweep = load_sweep(path, parameter_names)
    points = list(sweep.points())
    assert len({fast.group_key(p, sweep.parameters(p)) for _, p in points}) == 1

    def one_at_a_time(*_: object) -> None:
        raise AssertionError("the block fell back to one plan per scenario")

    monkeypatch.setattr("prfaas_plan.sweep.rows._one", one_at_a_time)
    rows = chunk_table(sweep, points).to_pylist()
    forget_memos()  # each plan alone from nothing: not from what the block's batch memoised
    catalog = _catalog(None)
    for (i, point), row in zip(points, rows, strict=True):
        assert row["error_class"] is None, row["error_message"]
        problem = build_problem(scenario_of(sweep, point, i), tmp_path / "sweep.yaml", catalog)
        expected = flatten(
            plan_to_json(calls.optimize(problem, PlanRequest(mode="exact"), catalog))
        )
        assert {k: row[k] for k in expected} == expected


def _rows_and_alone(
    sweep: object, points: list, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[dict], list[object]]:
    """A chunk's rows, and the scenarios it planned one at a time (sweep/rows.py `_one`)."""
    from prfaas_plan.sweep import rows as sweep_rows
    from prfaas_plan.sweep.rows import chunk_table

    alone: list[object] = []
    one = sweep_rows._one

    def recorded(sweep_: object, scenario: object, *rest: object) -> dict:
        alone.append(scenario)
        return one(sweep_, scenario, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr("prfaas_plan.sweep.rows._one", recorded)
    return chunk_table(sweep, points).to_pylist(), alone  # type: ignore[arg-type]


def test_a_scenario_whose_problem_does_not_build_leaves_its_block_batched(tmp_path, monkeypatch):
    """One scenario of a group has a log-normal with no mass on its range (mu_log 2): it alone
    goes the per-scenario path and gets its error row; the others are still planned in one
    batch, each its single plan."""
    from prfaas_plan.sweep import rows as sweep_rows
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest

    text = WORKLOADS.replace("{base}", str(ROOT / "examples/case_study.yaml"))
    text = text.split("sampling:")[0] + (
        "sampling: grid\naxes:\n  workload.input_tokens.mu_log: {{values: [9.0, 2.0, 10.0]}}\n"
        "  workload.input_tokens.sigma_log: {{values: [0.1]}}\n"
    )
    sweep = load_sweep(_sweep_file(tmp_path, text), parameter_names)
    points = list(sweep.points())
    rows, alone = _rows_and_alone(sweep, points, monkeypatch)
    assert len(alone) == 1 and rows[1]["error_class"] == "ConfigError"
    assert "puts 3.28e-179 of its probability" in rows[1]["error_message"]
    catalog = _catalog(None)
    for i in (0, 2):
        problem = sweep_rows._problem(sweep, scenario_of(sweep, points[i][1], i), None)
        report = calls.optimize(problem, PlanRequest(mode="exact"), catalog)
        expected = flatten(plan_to_json(report))
        assert rows[i]["error_class"] is None
        assert {k: rows[i][k] for k in expected} == expected


@pytest.mark.parametrize("refused", [(20,), (3, 17)])
def test_a_refused_batch_is_halved_until_its_refused_scenario_is_alone(
    tmp_path, monkeypatch, refused
):
    """Under `out_of_range: error` a scenario of 21 with min_tokens 128 (below the prefill
    tables' 1,000) refuses its block's batch. One refused (the last): the block is planned as
    halves, and only a refused part smaller than SPLIT_FROM goes one scenario at a time. Two
    refused, one in each half: both halves are refused, so all 21 go one at a time (the
    halving costs at most a batch more than that). Each refused scenario gets its error row,
    and every other row is its scenario's single plan."""
    from prfaas_plan.sweep import rows as sweep_rows
    from prfaas_plan.sweep.rows import SPLIT_FROM
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest

    lows = [128 if i in refused else 1000 + i for i in range(21)]
    text = (
        f"name: halves\nscenario: {ROOT}/examples/case_study.yaml\ncommand: optimize\n"
        "parameters: {{out_of_range: error}}\nsampling: grid\naxes:\n"
        f"  workload.input_tokens.min_tokens: {{{{values: {lows}}}}}\n"
        "  workload.input_tokens.max_tokens: {{values: [120000]}}\n"  # the tables' 128,000
    )
    sweep = load_sweep(_sweep_file(tmp_path, text), parameter_names)
    points = list(sweep.points())
    rows, alone = _rows_and_alone(sweep, points, monkeypatch)
    if len(refused) == 1:
        assert 1 <= len(alone) < SPLIT_FROM < len(points) // 2
    else:
        assert len(alone) == len(points)
    assert [r["error_class"] for r in rows] == [
        "RangeError" if i in refused else None for i in range(21)
    ]
    forget_memos()
    catalog = _catalog(None)
    for i in (0, 14, 19):
        problem = sweep_rows._problem(sweep, scenario_of(sweep, points[i][1], i), None)
        report = calls.optimize(problem, PlanRequest(out_of_range="error"), catalog)
        expected = flatten(plan_to_json(report))
        assert {k: rows[i][k] for k in expected} == expected


def test_scenarios_whose_prices_are_refused_are_planned_alone_and_the_rest_as_a_block(
    tmp_path, monkeypatch
):
    """A priced study whose links go beyond every link offering (250 and 400 Gbps; the widest
    carries 100): each such scenario's prices are refused, which refuses its block's batch.
    Those scenarios alone go one at a time (their error rows); the others are planned as a
    block, each its single plan. (Halving had sent all ten one at a time: both halves held a
    refused scenario.)"""
    from prfaas_plan.sweep import rows as sweep_rows
    from prfaas_plan.use_cases import calls
    from prfaas_plan.use_cases.requests import PlanRequest

    base = (ROOT / "examples/case_study.yaml").read_text()
    (tmp_path / "priced.yaml").write_text(
        base + "cost:\n  gpu_prices_usd_per_gpu_hour: {h200: 3.5, h20: 1.2}\n"
    )
    text = (
        "name: priced\nscenario: priced.yaml\ncommand: optimize\nsampling: grid\naxes:\n"
        "  link.bandwidth_gbps: {{values: [50, 400, 100, 250, 25]}}\n"
        "  prfaas_cluster.instances: {{values: [2, 4]}}\n"
    )
    sweep = load_sweep(_sweep_file(tmp_path, text), parameter_names)
    points = list(sweep.points())
    rows, alone = _rows_and_alone(sweep, points, monkeypatch)
    refused = [i for i, (_, point) in enumerate(points) if point["link.bandwidth_gbps"] > 100]
    assert len(refused) == 4 and len(alone) == len(refused)
    assert [i for i, r in enumerate(rows) if r["error_class"] is not None] == refused
    assert all("no link offering" in rows[i]["error_message"] for i in refused)
    catalog = _catalog(None)
    for i in (0, 4, 9):
        problem = sweep_rows._problem(sweep, scenario_of(sweep, points[i][1], i), None)
        expected = flatten(plan_to_json(calls.optimize(problem, PlanRequest(), catalog)))
        assert {k: rows[i][k] for k in expected} == expected


def test_every_chunk_has_one_schema_so_pandas_reads_the_directory(tmp_path):
    """Chunks of 2: the first without an error (its error columns would be typed null), later
    ones with errors, and one where both scenarios fail (it has none of the plan's columns).
    Every chunk file is written with the study's one schema, so `pandas.read_parquet` of the
    directory (which takes the first file's schema for all) reads every row and column, the
    values `read_results` reads. (It had refused: "Unsupported cast from string to null".)"""
    import pandas
    import pyarrow.parquet as pq

    text = (
        "name: chunks\nscenario: {root}/examples/case_study.yaml\ncommand: optimize\n"
        "sampling: grid\naxes:\n  pd_cluster.instances: {{values: [8, 3, 0]}}\n"
        "  link.bandwidth_gbps: {{values: [50, 100]}}\nchunk_size: 2\n"
    )
    path = _sweep_file(tmp_path, text)
    assert run("sweep", str(path), str(tmp_path / "r"), "--workers", "1").returncode == 0
    files = sorted((tmp_path / "r").glob("chunk-*.parquet"))
    assert len(files) == 3
    kinds = [pq.read_table(f, columns=["error_class"]).column(0).null_count for f in files]
    assert kinds == [2, 2, 0]  # errors only in the last chunk, whose two scenarios both fail
    schemas = [pq.read_schema(f) for f in files]
    assert all(schema.equals(schemas[0]) for schema in schemas)
    frame = pandas.read_parquet(tmp_path / "r").sort_values("scenario_id")
    rows = _frame(tmp_path / "r")
    assert list(frame.columns) == list(rows[0]) and len(frame) == len(rows) == 6
    assert frame["error_class"].tolist()[4:] == ["ConfigError"] * 2
    assert frame["plan.throughput_rps.system"].tolist()[:4] == [
        r["plan.throughput_rps.system"] for r in rows[:4]
    ]
    # the reader pandas uses, every value
    assert pq.read_table(tmp_path / "r").sort_by("scenario_id").to_pylist() == rows


def test_an_error_without_a_message_is_named_by_its_class():
    """A bare MemoryError (no message) still makes an error row (it had raised IndexError)."""
    from prfaas_plan.sweep.rows import _error_row

    assert _error_row(MemoryError()) == {
        "error_class": "MemoryError", "error_message": "MemoryError"
    }  # fmt: skip
    assert _error_row(ValueError("one\ntwo"))["error_message"] == "one"


@pytest.mark.slow
def test_fast_path_rows_equal_the_per_scenario_path(tmp_path):
    """The whole study both ways: the fast path's columns are the generic path's values."""
    path = _sweep_file(tmp_path)
    slow_file = _sweep_file(tmp_path, SMALL + "fast_path: false\n", "slow.yaml")
    assert run("sweep", str(path), str(tmp_path / "fast"), "--workers", "1").returncode == 0
    assert run("sweep", str(slow_file), str(tmp_path / "slow"), "--workers", "1").returncode == 0
    fast_rows, slow_rows = _frame(tmp_path / "fast"), _frame(tmp_path / "slow")
    assert len(fast_rows) == len(slow_rows) > 0
    for f, s in zip(fast_rows, slow_rows, strict=True):  # to the last bit; each names its file
        assert f.pop("inputs.scenario_file").endswith("/sweep.yaml")
        assert s.pop("inputs.scenario_file").endswith("/slow.yaml")
        assert f == s
    assert "inputs.mean_input_tokens" in slow_rows[0]  # the generic path keeps every output


@pytest.mark.slow
def test_local_sweep_equals_the_same_sweep_on_a_dask_cluster(tmp_path):
    from dask.distributed import LocalCluster

    path = _sweep_file(tmp_path)
    assert run("sweep", str(path), str(tmp_path / "local"), "--workers", "1").returncode == 0
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:  # fmt: skip
        result = run(
            "sweep",
            str(path),
            str(tmp_path / "dask"),
            "--dask-scheduler",
            cluster.scheduler_address,
        )
        assert result.returncode == 0, result.stderr
    assert _frame(tmp_path / "local") == _frame(tmp_path / "dask")


@pytest.mark.slow
def test_a_killed_study_resumes_to_the_uninterrupted_dataset(tmp_path):
    text = SMALL.replace("chunk_size: 10", "chunk_size: 4").replace("fast_path", "x")
    path = _sweep_file(tmp_path, text + "fast_path: false\n")
    results = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "prfaas_plan", "sweep", str(path), str(results), "--workers", "1"]
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(results.glob("chunk-*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    landed = len(list(results.glob("chunk-*.parquet")))
    total = -(-len(list(load_sweep(path, parameter_names).points())) // 4)
    assert 1 <= landed < total  # killed mid-study
    assert run("sweep", str(path), str(results), "--workers", "1").returncode == 3  # not empty
    assert run("sweep", str(path), str(results), "--resume", "--workers", "1").returncode == 0
    assert run("sweep", str(path), str(tmp_path / "whole"), "--workers", "1").returncode == 0
    resumed, whole = _frame(results), _frame(tmp_path / "whole")
    assert [r["scenario_id"] for r in resumed] == sorted({r["scenario_id"] for r in resumed})
    assert resumed == whole


def test_failures_are_rows_and_the_report_summarises(tmp_path):
    text = SMALL.replace("values: [3, 8]", "values: [0, 8]")  # pd_cluster.instances 0 is refused
    path = _sweep_file(tmp_path, text)
    assert run("sweep", str(path), str(tmp_path / "r"), "--workers", "1").returncode == 0
    rows = _frame(tmp_path / "r")
    failed = [r for r in rows if r["error_class"] is not None]
    assert failed and all(r["axis.pd_cluster.instances"] == 0 for r in failed)
    assert all("pd_cluster.instances must be >= 1" in r["error_message"] for r in failed)
    import pandas

    frame = pandas.read_parquet(tmp_path / "r")
    assert len(frame) == len(rows)
    report = run("sweep-report", str(tmp_path / "r"), "--format", "json", "--plot", str(tmp_path / "f.png"),
                 "--x", "link.bandwidth_gbps", "--y", "prfaas_cluster.instances")  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "f.png").stat().st_size > 0
    beats = sum(1 for r in rows if (r.get("speedup_vs_homogeneous") or 0) > 1)
    assert f'"beats": {beats}' in report.stdout


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (
            ("link.bandwidth_gbps", "link.bandwidth_mbps"),
            "axes.link.bandwidth_mbps: neither a field",
        ),
        (("command: optimize", "command: procure2"), "cannot be swept"),
        (("<= 2 *", "<= __import__('os') and 2 *"), "filters take names"),
        (("{values: [5, 50, 400]}", "{values: [5], low: 1}"), "exactly one of"),
        (("chunk_size: 10", "chunk_size: 0"), "chunk_size"),
        (  # one axis inside another: the order of setting them would decide (found by review)
            (
                "axes:\n",
                "axes:\n  workload.output_tokens: {{values: [512]}}\n"
                "  workload.output_tokens.mu_log: {{values: [6.0]}}\n",
            ),
            "axes.workload.output_tokens.mu_log: inside axes.workload.output_tokens",
        ),
    ],
)
def test_bad_sweep_files_are_refused_in_one_line(tmp_path, edit, fragment):
    path = _sweep_file(tmp_path, SMALL.replace(*edit))
    assert_clean_error(run("sweep", str(path), str(tmp_path / "r")), 3, fragment)


STUDY = re.search(r"```bash\n(.*?)```", (ROOT / "docs" / "sweeps.md").read_text(), re.S).group(1)


@pytest.mark.slow
def test_the_readme_study_runs(tmp_path):
    """The study of docs/sweeps.md, with its results and figure redirected into tmp_path."""
    (tmp_path / "docs").mkdir()
    for line in STUDY.splitlines():
        args = shlex.split(line)
        assert args[0] == "prfaas-plan"
        args = [str(tmp_path / a) if a.startswith(("results/", "docs/")) else a for a in args[1:]]
        result = run(*args, cwd=ROOT)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "docs/sweep_link_prfaas.png").stat().st_size > 0


@pytest.mark.parametrize(
    "path", sorted((ROOT / "examples/sweeps").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_sweep_is_valid(path):
    sweep = load_sweep(path, parameter_names)
    points = list(sweep.points())
    assert points and all(set(p) == set(sweep.spec.axes) for _, p in points)


@pytest.mark.slow
def test_a_sensitivity_sweep_row_is_the_sensitivity_report(tmp_path):
    """Each row of a `sensitivity` study is the command's JSON for that scenario, flattened."""
    from prfaas_plan.inputs.pricing import resolve_pricing
    from prfaas_plan.render.sensitivity import sensitivity_to_json
    from prfaas_plan.use_cases.sensitivity import sensitivity_report

    text = (
        "name: s\nscenario: {root}/examples/case_study.yaml\ncommand: sensitivity\n"
        "parameters: {{bins: 100}}\naxes:\n  link.bandwidth_gbps: {{values: [5, 100]}}\n"
    )
    path = _sweep_file(tmp_path, text)
    assert run("sweep", str(path), str(tmp_path / "out"), "--workers", "1").returncode == 0
    rows = _frame(tmp_path / "out")
    sweep = load_sweep(path, parameter_names)
    catalog = _catalog(None)
    for row in rows:
        assert row["error_class"] is None
        scenario = scenario_of(
            sweep, {"link.bandwidth_gbps": row["axis.link.bandwidth_gbps"]}, row["scenario_id"]
        )
        problem = build_problem(scenario, ROOT / "examples" / "case_study.yaml", catalog)
        expected = flatten(
            sensitivity_to_json(
                sensitivity_report(
                    problem,
                    Mode.PAPER,
                    100,
                    catalog,
                    resolve_pricing(catalog, problem.scenario, problem.source),
                )
            )
        )
        assert {k: row[k] for k in expected} == pytest.approx(expected)
    gains = {
        r["axis.link.bandwidth_gbps"]: r["marginal_gains.link_bandwidth_10pct.gain_rps"]
        for r in rows
    }
    assert gains[5] > 0 == gains[100]  # the link binds at 5 Gbps, not at 100


def _procure_study(tmp_path, parameters: str, axes: str):
    """Run a `procure` study of the case study; its rows, the catalog and the problem."""
    text = (
        "name: p\nscenario: {root}/examples/case_study.yaml\ncommand: procure\n"
        f"parameters: {{{{{parameters}}}}}\naxes:\n{axes}"
    )
    path = _sweep_file(tmp_path, text)
    assert run("sweep", str(path), str(tmp_path / "out"), "--workers", "1").returncode == 0
    catalog = _catalog(None)
    scenario = scenario_of(load_sweep(path, parameter_names), {}, 0)  # no scenario axis
    problem = build_problem(scenario, ROOT / "examples" / "case_study.yaml", catalog)
    return _frame(tmp_path / "out"), catalog, problem


def test_a_procure_sweep_row_is_the_procure_report(tmp_path):
    """Each row of a `procure` study is the command's JSON for that scenario, flattened."""
    from prfaas_plan.inputs.pricing import resolve_pricing
    from prfaas_plan.render.procure import procure_to_json
    from prfaas_plan.use_cases.procure import procure

    rows, catalog, problem = _procure_study(
        tmp_path, "max_instances_per_site: 8",
        "  target_rps: {{values: [2, 4]}}\n  cost_model: {{values: [on-demand, tco]}}\n",
    )  # fmt: skip
    assert len(rows) == 4
    for row in rows:
        assert row["error_class"] is None
        model = CostModel(row["axis.cost_model"])
        pricing = resolve_pricing(catalog, problem.scenario, problem.source, cost_model=model)
        assert pricing is not None
        report = procure(catalog, problem, pricing, target_rps=row["axis.target_rps"],
                         max_instances_per_site=8)  # fmt: skip
        expected = flatten(procure_to_json(report))
        assert {k: row[k] for k in expected} == pytest.approx(expected)
        # HiGHS meets Λ >= target to its feasibility tolerance: 3.9999999999999973 for 4 req/s
        # at TCO prices on the cross-connect sites (solve/procure_milp.py point_from_solution
        # reports the solver's Λ, not the target)
        assert row["served_rps"] >= row["axis.target_rps"] * (1 - 1e-9)


@pytest.mark.slow
def test_a_procure_sweep_takes_a_ttft_target(tmp_path):
    """`procure` rows with a TTFT target equal the command's JSON with the same target (its
    load defaulting to the target rate, as on the command line)."""
    from prfaas_plan.inputs.pricing import resolve_pricing
    from prfaas_plan.render.procure import procure_to_json
    from prfaas_plan.use_cases.plan import TtftTarget
    from prfaas_plan.use_cases.procure import procure

    rows, catalog, problem = _procure_study(
        tmp_path, "max_instances_per_site: 4, target_rps: 2",
        "  ttft_target_s: {{values: [8, 30]}}\n",
    )  # fmt: skip
    pricing = resolve_pricing(catalog, problem.scenario, problem.source)
    assert len(rows) == 2
    tight, loose = sorted(rows, key=lambda r: r["axis.ttft_target_s"])
    assert tight["ttft.binds"] and tight["usd_per_hour_total"] > loose["usd_per_hour_total"]
    for row in rows:
        assert row["error_class"] is None
        report = procure(catalog, problem, pricing, target_rps=2.0, max_instances_per_site=4,
                         ttft=TtftTarget(row["axis.ttft_target_s"], load_fraction=1.0))  # fmt: skip
        expected = flatten(procure_to_json(report))
        assert {k: row[k] for k in expected} == pytest.approx(expected)


def test_planning_a_group_in_blocks_equals_one_pass(tmp_path, monkeypatch):
    """`optimize_group` plans BLOCK scenarios at a time: blocks of 3 give the one-pass columns."""
    sweep = load_sweep(_sweep_file(tmp_path), parameter_names)
    points = [(i, p) for i, p in sweep.points() if p["mode"] == "exact"]
    scenarios = [scenario_of(sweep, p, i) for i, p in points]
    problem = build_problem(scenarios[0], ROOT / "examples/case_study.yaml", _catalog(None))
    problems = [problem_like(problem, s, _catalog(None)) for s in scenarios]
    whole = _rows(fast.optimize_block(problems, {"mode": "exact"}, _catalog(None)))
    blocks = [
        row
        for start in range(0, len(problems), 3)
        for row in _rows(
            fast.optimize_block(problems[start : start + 3], {"mode": "exact"}, _catalog(None))
        )
    ]
    assert len(scenarios) > 3 and blocks == whole


def _rows(columns: dict[str, list]) -> list[dict]:
    """Columns as rows, without the keys a row does not have (a column other rows brought)."""
    count = len(next(iter(columns.values())))
    return [{k: v[i] for k, v in columns.items() if v[i] is not None} for i in range(count)]


def test_a_parameter_may_be_true_or_false(tmp_path):
    """simulate's `sustainable` is a bool: a sweep's parameters take it (they had refused it,
    naming a union member, `parameters.sustainable.float`)."""
    text = (
        "name: s\nscenario: {root}/examples/case_study.yaml\ncommand: simulate\n"
        "parameters: {{sustainable: true}}\naxes:\n  link.bandwidth_gbps: {{values: [5, 50]}}\n"
    )
    sweep = load_sweep(_sweep_file(tmp_path, text), parameter_names)
    _, point = next(iter(sweep.points()))
    assert sweep.parameters(point)["sustainable"] is True


@pytest.mark.parametrize("enabled", [True, False])
def test_a_task_pauses_the_cycle_collector_and_leaves_it_as_it_was(tmp_path, monkeypatch, enabled):
    """A chunk runs with the cyclic garbage collector paused (its objects form almost no
    cycles: the collector's passes were a tenth of its time) and leaves it as it found it."""
    import gc

    from prfaas_plan.sweep import rows
    from prfaas_plan.sweep.run import chunks

    sweep = load_sweep(_sweep_file(tmp_path), parameter_names)
    during = []
    plan = rows._ChunkRows.plan

    def watched(self, group):
        during.append(gc.isenabled())
        return plan(self, group)

    monkeypatch.setattr(rows._ChunkRows, "plan", watched)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        table = rows.chunk_table(sweep, next(chunks(sweep)))
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert table.num_rows > 0 and during and not any(during)


def _overlapping(task) -> list:
    """Two threads' tasks overlapping: A begins, B begins, A ends, B ends; what each saw
    inside (`task`'s answer) after both had begun, A's then B's."""
    import threading

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def a() -> None:
        with task():
            a_in.set()
            assert b_in.wait(10)
            seen["a"] = task.probe()
        a_out.set()

    def b() -> None:
        assert a_in.wait(10)
        with task():
            b_in.set()
            assert a_out.wait(10)
            seen["b"] = task.probe()

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return [seen.get("a"), seen.get("b")]


def test_tasks_on_threads_keep_the_collector_paused_until_the_last_ends():
    """A Dask worker runs chunks on several threads: the collector stays paused while any
    runs (B's task, still running when A's ended, was left unpaused), and is as it was after
    the last (a task that began while another held it paused had kept it off for good)."""
    import gc

    from prfaas_plan.sweep import task_process

    class Task:
        def __call__(self):
            return task_process.collector_paused()

        def probe(self):
            return gc.isenabled()

    was = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            assert _overlapping(Task()) == [False, False]
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_tasks_on_threads_set_the_allocator_once_and_restore_it_after_the_last(monkeypatch):
    """The malloc thresholds are set when the first task begins and restored (with a trim)
    when the last ends, not when the first does while another still runs."""
    from prfaas_plan.sweep import task_process

    calls: list[tuple] = []

    class Recorder:
        def __call__(self, parameter, value):
            calls.append(("mallopt", parameter, value))

        def trim(self):
            calls.append(("trim",))

    monkeypatch.setattr(task_process, "_mallopt", lambda: Recorder())
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")

    class Task:
        def __call__(self):
            return task_process.array_allocator()

        def probe(self):
            return len(calls)

    assert _overlapping(Task()) == [2, 2]  # the thresholds set once, nothing restored inside
    assert calls[:2] == [
        ("mallopt", task_process._M_MMAP_THRESHOLD, task_process._TASK_MMAP_THRESHOLD_BYTES),
        ("mallopt", task_process._M_TRIM_THRESHOLD, task_process._TASK_TRIM_THRESHOLD_BYTES),
    ]
    assert calls[2:] == [
        ("mallopt", task_process._M_TRIM_THRESHOLD, 65536),
        ("mallopt", task_process._M_MMAP_THRESHOLD, task_process._DEFAULT_THRESHOLD_BYTES),
        ("trim",),
    ]
