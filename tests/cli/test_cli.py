"""`optimize` and `evaluate` through the CLI, in process (typer's CliRunner): JSON contract,
views, flags, and hostile inputs failing with one clean line. What only a real process shows
(the console script, exit status, no traceback) is in tests/cli/test_smoke.py."""

import json
import os
import shutil
from contextlib import chdir, nullcontext
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from prfaas_plan.cli import app
from prfaas_plan.inputs.resources import default_data_dir, default_scenario_file

CASE = default_scenario_file()


@dataclass(frozen=True)
class Ran:
    """What a command run gave, named as subprocess.CompletedProcess names it."""

    returncode: int
    stdout: str
    stderr: str


def run(*args, cwd=None) -> Ran:
    """`prfaas-plan ARGS` in this process (from `cwd`, if given); unexpected exceptions raise."""
    runner = CliRunner(env={"COLUMNS": "80"})
    with chdir(cwd) if cwd is not None else nullcontext():
        result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def scenario_with(tmp_path, **changes) -> Path:
    data = yaml.safe_load(CASE.read_text())
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def data_copy(tmp_path) -> Path:
    root = tmp_path / "catalog"
    shutil.copytree(default_data_dir(), root / "data")
    shutil.copy(default_data_dir().parent / "models.yaml", root / "models.yaml")
    return root / "data"


def assert_clean_error(result, code, *fragments):
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert result.stdout == ""


def test_json_is_the_machine_contract():
    result = run("optimize", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    plan = doc["plan"]
    assert plan["prfaas_instances"] == 4 and plan["pd_prefill_instances"] == 3
    assert 19100 <= plan["threshold_tokens"] <= 19700
    assert plan["throughput_rps"]["system"] == pytest.approx(3.24, rel=0.01)
    assert plan["ttft"]["queueing_included"] is False
    assert doc["baselines"]["homogeneous_pd"]["threshold_tokens"] is None  # inf is not JSON
    assert doc["inputs"]["link_bandwidth_bytes_per_s"] == 12.5e9
    assert doc["mode_comparison"]["paper_overstatement"] > 0

    def keys(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield k
                yield from keys(v)
        elif isinstance(node, list):
            for v in node:
                yield from keys(v)

    for key in keys(doc):
        assert not key.endswith(("_ms", "_gbps", "_mib", "_ktokens")), f"non-SI key {key}"


def test_table_and_markdown_views():
    table = run("optimize")
    assert table.returncode == 0
    assert "PrfaaS-PD (plan)" in table.stdout and "Homogeneous PD" in table.stdout
    assert "no queueing" in table.stdout
    markdown = run("optimize", "--format", "markdown")
    assert markdown.stdout.startswith("## prfaas-plan")
    assert "| Λ_max (req/s) | 3.249 | 2.110 | 2.469 |" in markdown.stdout


def test_exact_mode_and_fixed_threshold():
    doc = json.loads(run("optimize", "--mode", "exact", "-f", "json").stdout)
    assert doc["mode"] == "exact" and doc["plan"]["mode"] == "exact"
    assert doc["plan"]["throughput_rps"]["system"] < 3.24
    fixed = json.loads(run("optimize", "--threshold-tokens", "30000", "-f", "json").stdout)
    assert fixed["plan"]["threshold_tokens"] == 30000


def test_bandwidth_override_can_make_the_link_bind():
    doc = json.loads(run("optimize", "--bandwidth-gbps", "5", "-f", "json").stdout)
    assert "prfaas_link" in doc["plan"]["bounds"]
    assert doc["plan"]["link_utilization"] == pytest.approx(1.0, abs=1e-6)


def test_sizing_from_the_cli():
    doc = json.loads(run("optimize", "--target-rps", "4", "-f", "json").stdout)
    assert doc["sizing"]["prfaas_instances"] == doc["plan"]["prfaas_instances"] == 6
    assert doc["plan"]["throughput_rps"]["system"] >= 4
    capped = json.loads(run("optimize", "--max-prfaas-gpus", "16", "-f", "json").stdout)
    assert capped["plan"]["prfaas_gpus"] <= 16


def test_evaluate_one_configuration():
    doc = json.loads(
        run(
            "evaluate", "--threshold-tokens", "19400", "--pd-prefill-instances", "3", "-f", "json"
        ).stdout
    )
    c = doc["configuration"]
    assert (c["prfaas_instances"], c["pd_prefill_instances"], c["pd_decode_instances"]) == (4, 3, 5)
    assert c["throughput_rps"]["system"] == pytest.approx(3.247, rel=1e-3)


def test_output_file_is_written(tmp_path):
    out = tmp_path / "plan.json"
    assert run("optimize", "-f", "json", "-o", out).returncode == 0
    assert json.loads(out.read_text())["plan"]["prfaas_instances"] == 4
    assert list(tmp_path.iterdir()) == [out]  # no temporary files left


def test_failure_leaves_existing_output_untouched(tmp_path):
    out = tmp_path / "plan.json"
    out.write_text("previous result")
    result = run("optimize", "--target-rps", "100", "-f", "json", "-o", out)
    assert_clean_error(result, 6, "no plan reaches 100 req/s", "bound by pd_decode")
    assert out.read_text() == "previous result"
    assert list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize(
    "changes, code, fragments",
    [
        ({"link.bandwidth_gbps": -100}, 3, ["link.bandwidth_gbps", "greater than 0", "-100"]),
        ({"link.bandwidth_gbps": "fast"}, 3, ["link.bandwidth_gbps", "'fast'"]),
        ({"prfaas_cluster.gpu": "h100"}, 3, ["unknown GPU 'h100'", "known: h20, h200"]),
        ({"model": "gpt-9"}, 3, ["unknown model 'gpt-9'", "internal-1t-hybrid"]),
        ({"pd_cluster.instances": 0}, 3, ["pd_cluster.instances must be >= 1"]),
        ({"workload.input_tokens.max_tokens": 100}, 3, ["max_tokens must exceed min_tokens"]),
        ({"slo.decode_tokens_per_s": 1000}, 6, ["decode SLO of 1000 tokens/s", "decode_step.csv"]),
        ({"link.bandwidth": 100}, 3, ["link.bandwidth"]),
        ({"prfaas_cluster.gpus_per_instance": 4}, 3, ["no prefill profile", "h200-x4", "h200-x8"]),
    ],
)
def test_bad_scenarios_fail_cleanly(tmp_path, changes, code, fragments):
    path = scenario_with(tmp_path, **changes)
    if code == 3:  # scenario mistakes name the scenario file
        fragments = [str(path), *fragments]
    assert_clean_error(run("optimize", path), code, *fragments)


def test_malformed_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nlink: [unclosed\n")
    assert_clean_error(run("optimize", bad), 3, str(bad), "malformed YAML")
    assert_clean_error(run("optimize", tmp_path / "nope.yaml"), 3, "nope.yaml", "not found")


@pytest.mark.parametrize(
    "rewrite, fragments",
    [
        (
            lambda rows: [rows[0], rows[2], rows[1], *rows[3:]],
            ["input_tokens must be strictly increasing"],
        ),
        (lambda rows: [*rows[:3], "32000,0.5", *rows[4:]], ["prefill_latency_s must not decrease"]),
        (
            lambda rows: [rows[0], *rows[1:3], "32000,abc", *rows[4:]],
            ["expected a number", "'abc'"],
        ),
        (
            lambda rows: ["tokens,latency_ms", *rows[1:]],
            ["header must be input_tokens,prefill_latency_s"],
        ),
    ],
)
def test_broken_profile_tables_fail_cleanly(tmp_path, rewrite, fragments):
    data = data_copy(tmp_path)
    table = data / "profiles/internal-1t-hybrid/prefill/h200-x8/prefill_latency.csv"
    table.write_text("\n".join(rewrite(table.read_text().splitlines())) + "\n")
    assert_clean_error(run("optimize", "--data-dir", data), 4, str(table), *fragments)


def test_range_policy_error_refuses_extrapolation():
    assert_clean_error(
        run("optimize", "--out-of-range", "error"), 5, "profiled range", "extrapolate"
    )


def test_usage_errors_use_exit_code_2():
    result = run("optimize", "--mode", "fastest")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_runs_from_another_directory(tmp_path):
    result = run("optimize", "-f", "json", cwd=tmp_path)
    assert result.returncode == 0


@pytest.mark.slow
def test_plot_is_written_atomically(tmp_path):
    figure = tmp_path / "balance.png"
    result = run("optimize", "--plot", figure, "-f", "json")
    assert result.returncode == 0, result.stderr
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    umask = os.umask(0)
    os.umask(umask)
    assert figure.stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file, not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["balance.png"]


def test_plot_rejects_unknown_format(tmp_path):
    assert_clean_error(run("optimize", "--plot", tmp_path / "x.bmp"), 3, "--plot", ".png")


def test_zero_prfaas_instances_plan_without_division_errors(tmp_path):
    path = scenario_with(tmp_path, **{"prfaas_cluster.instances": 0})
    result = run("optimize", path, "-f", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["plan"]["offload_fraction"] == 0
    assert doc["baselines"]["naive_heterogeneous"]["throughput_rps"]["system"] == 0
    assert doc["speedup_vs_naive_heterogeneous"] is None  # the naive baseline serves nothing


@pytest.mark.parametrize(
    "args, code, fragments",
    [
        (["--target-rps", "inf"], 3, ["--target-rps", "finite"]),
        (["--bandwidth-gbps", "inf"], 3, ["--bandwidth-gbps", "finite"]),
        (["--max-prfaas-gpus", "4"], 3, ["multiple of prfaas_cluster.gpus_per_instance (8)"]),
        (["--threshold-tokens", "nan"], 3, ["--threshold-tokens"]),
    ],
)
def test_bad_flag_values_fail_cleanly(args, code, fragments):
    assert_clean_error(run("optimize", *args, "-f", "json"), code, *fragments)


def test_output_that_is_a_directory_is_refused(tmp_path):
    assert_clean_error(run("optimize", "-o", tmp_path), 3, "--output", "is a directory")


def test_unreadable_inputs_fail_cleanly(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"name: \xff\n")
    assert_clean_error(run("optimize", binary), 3, "not UTF-8")
    (tmp_path / "lengths").mkdir()
    folder = scenario_with(
        tmp_path, **{"workload.input_tokens": {"distribution": "observed", "file": "lengths"}}
    )
    assert_clean_error(run("optimize", folder), 3, "is a directory")
    (tmp_path / "trace.jsonl").write_text('{"input_length": true}\n')
    boolean = scenario_with(
        tmp_path, **{"workload.input_tokens": {"distribution": "observed", "file": "trace.jsonl"}}
    )
    assert_clean_error(run("optimize", boolean), 3, "trace.jsonl:1", "numeric input_length")


def test_mooncake_trace_lengths_are_read(tmp_path):
    lines = [{"timestamp": i, "input_length": 1000 * (i + 1), "output_length": 100, "hash_ids": [i]}
             for i in range(50)]  # fmt: skip
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    path = scenario_with(
        tmp_path, **{"workload.input_tokens": {"distribution": "observed", "file": "trace.jsonl"}}
    )
    doc = json.loads(run("optimize", path, "-f", "json").stdout)
    assert doc["inputs"]["mean_input_tokens"] == pytest.approx(25500)


def test_log_normal_that_misses_its_interval_is_refused(tmp_path):
    path = scenario_with(tmp_path, **{"workload.input_tokens.mu_log": 30})
    assert_clean_error(run("optimize", path), 3, "workload.input_tokens", "mu_log=30")


@pytest.mark.slow
def test_ttft_target_under_load():
    """A target the paper plan meets keeps it; a tighter one trades Λ_max for TTFT; one no plan
    meets fails with exit 6 and names what binds (the model is in tests/analytic/test_queueing.py)."""
    loose = json.loads(
        run("optimize", "--ttft-target-s", "7", "--ttft-load", "0.8", "-f", "json").stdout
    )
    assert loose["plan"]["pd_prefill_instances"] == 3
    assert loose["ttft_constraint"]["ttft_under_load"]["p90_s"] <= 7 * (1 + 1e-9)
    tight = json.loads(
        run("optimize", "--ttft-target-s", "6", "--ttft-load", "0.8", "-f", "json").stdout
    )
    assert tight["ttft_constraint"]["ttft_under_load"]["p90_s"] <= 6 * (1 + 1e-9)
    assert tight["plan"]["throughput_rps"]["system"] < loose["plan"]["throughput_rps"]["system"]
    assert tight["ttft_constraint"]["load_rps"] == pytest.approx(
        loose["ttft_constraint"]["load_rps"]
    )
    assert_clean_error(run("optimize", "--ttft-target-s", "2", "--ttft-load", "0.8"), 6,
                       "no plan meets P90 TTFT <= 2 s", "bound by")  # fmt: skip


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--ttft-target-s", "5"], "exactly one of --ttft-load-rps and --ttft-load"),
        (["--ttft-load", "0.8"], "need --ttft-target-s"),
        (
            ["--ttft-target-s", "5", "--ttft-load", "0.8", "--ttft-percentile", "95"],
            "--ttft-percentile",
        ),
        (["--ttft-target-s", "-1", "--ttft-load", "0.8"], "--ttft-target-s"),
        (["--ttft-target-s", "5", "--ttft-load", "0.8", "--target-rps", "4"], "cannot be combined"),
    ],
)
def test_bad_ttft_target_flags(args, fragment):
    assert_clean_error(run("optimize", *args), 3, fragment)
