"""The shell's less travelled paths, in process: every output format of every planning command,
failures the library reports for each command (one row per case: arguments, exit code, message
fragment), and the interrupt and out-of-memory handling around the commands."""

import json
import sys
from pathlib import Path

import pytest

from prfaas_plan import cli
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs import strict_yaml
from tests.cli.test_cli import assert_clean_error, data_copy, run, scenario_with


@pytest.mark.parametrize(
    "args, starts",
    [
        (["evaluate", "--threshold-tokens", "19400", "--pd-prefill-instances", "3", "-f",
          "markdown"], "## prfaas-plan evaluate · "),
        (["kv", "kimi-linear-48b", "-f", "markdown"], "## prfaas-plan kv · "),
        (["egress", "-f", "markdown"], "## prfaas-plan egress · "),
        (["check", "-f", "markdown"], "## prfaas-plan check · PASS"),
    ],
)  # fmt: skip
def test_markdown_of_each_command(args, starts):
    result = run(*args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(starts) and result.stderr == ""


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["evaluate", "--threshold-tokens", "19400", "--pd-prefill-instances", "3"],
         ["Configuration", "Λ_max (req/s)", "3.247"]),
        (["kv", "kimi-linear-48b"], ["kimi-linear-48b", "8,064"]),
        (["egress", "kimi-linear-48b"], ["512 x H200 at 32,768 tokens", "kimi-linear-48b"]),
        (["check"], ["PASS", "within tolerance"]),
        (["optimize", "--target-rps", "4", "--max-prfaas-gpus", "64"],
         ["Sizing (reach 4 req/s with at most 8 PrfaaS instances)"]),
    ],
)  # fmt: skip
def test_table_of_each_command(args, fragments):
    result = run(*args)
    assert result.returncode == 0, result.stderr
    for fragment in fragments:
        assert fragment in result.stdout, fragment


def test_json_of_kv_and_evaluate():
    kv = json.loads(run("kv", "qwen3-235b", "--lengths", "1024,8192", "-f", "json").stdout)
    assert kv["lengths_tokens"] == [1024, 8192] and kv["models"][0]["model"] == "qwen3-235b"
    doc = json.loads(run("evaluate", "--threshold-tokens", "0", "--pd-prefill-instances", "3",
                         "--prfaas-instances", "2", "-f", "json").stdout)  # fmt: skip
    assert doc["configuration"]["prfaas_instances"] == 2
    assert doc["configuration"]["offload_fraction"] == 1


def test_table_to_a_file_is_the_wide_table(tmp_path):
    out = tmp_path / "plan.txt"
    result = run("optimize", "-o", out)
    assert result.returncode == 0 and result.stdout == ""
    text = out.read_text()
    assert "PrfaaS-PD (plan)" in text and "\x1b[" not in text  # no colour codes in a file


def test_ttft_target_at_an_absolute_load():
    doc = json.loads(
        run("optimize", "--ttft-target-s", "7", "--ttft-load-rps", "2", "-f", "json").stdout
    )
    assert doc["ttft_constraint"]["load_rps"] == 2
    assert doc["ttft_constraint"]["ttft_under_load"]["p90_s"] <= 7 * (1 + 1e-9)


def test_egress_notes_what_it_extrapolates():
    doc = json.loads(run("egress", "kimi-linear-48b", "--mean-tokens", "2e6", "-f", "json").stdout)
    (row,) = doc["models"]
    assert "fits" in row
    text = run("egress", "kimi-linear-48b", "--mean-tokens", "2e6", "-f", "markdown").stdout
    assert "exceeds its context" in text and "extrapolated beyond its profiled" in text


def test_kv_notes_what_it_extrapolates():
    text = run("kv", "kimi-linear-48b", "--lengths", "100,4000000", "-f", "markdown").stdout
    assert "exceeds the model's context" in text and "extrapolates its prefill fit" in text


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["kv", "--lengths", "a,b"], 3, "--lengths: expected comma-separated whole token counts"),
        (["kv", "--gpus-per-instance", "0"], 3, "--gpus-per-instance must be >= 1, got 0"),
        (["kv", "--state-dtype", "int3"], 3, "--state-dtype: unknown dtype 'int3'"),
        (["kv", "kimi-k2", "--plot", "x.png"], 3,
         "--plot: no chosen model has a h200-x8 prefill profile"),
        (["kv", "--plot", "x.bmp"], 3, "--plot: file must end in .png, .svg, .pdf"),
        (["egress", "--gpus-per-instance", "0"], 3, "--gpus-per-instance must be >= 1, got 0"),
        (["egress", "--mean-tokens", "-1"], 3, "--mean-tokens must be a finite number > 0"),
        (["egress", "--gpu", "h100"], 3, "--gpu: unknown GPU 'h100'"),
        (["egress", "kimi-k2"], 3, "no prefill profile for model 'kimi-k2'"),
        (["egress", "--scenario", "examples/case_study.yaml", "--threshold-tokens", "-1"], 3,
         "--threshold-tokens must be >= 0, got -1"),
        (["egress", "--scenario", "examples/case_study.yaml", "--prfaas-gpus", "12"], 3,
         "--prfaas-gpus must be a positive multiple of --gpus-per-instance, got 12 and 8"),
        (["optimize", "--ttft-target-s", "5", "--ttft-load", "-0.5"], 3,
         "--ttft-load (the TTFT target's load) must be a finite number > 0, got -0.5"),
        (["optimize", "--ttft-target-s", "5", "--ttft-load", "0.5", "--ttft-load-rps", "1"], 3,
         "exactly one of --ttft-load-rps and --ttft-load"),
        (["optimize", "--max-prfaas-gpus", "-8"], 3, "e.g. 0 or 8"),
        (["optimize", "-o", "no/such/dir/plan.json"], 3, "--output: directory no/such/dir"),
        (["optimize", "--data-dir", "no/such/data"], 3, "data directory no/such/data"),
    ],
)  # fmt: skip
def test_library_failures_per_command(args, code, fragment):
    from tests.conftest import ROOT

    assert_clean_error(run(*args, cwd=ROOT), code, fragment)


@pytest.mark.parametrize(
    "lengths, fragment",
    [
        ({"distribution": "histogram", "bin_edges_tokens": [100, 200, 300], "weights": [1]},
         "needs one weight per bin (2), got 1"),
        ({"distribution": "histogram", "bin_edges_tokens": [100, 300, 200], "weights": [1, 1]},
         "bin_edges_tokens must be strictly increasing"),
        ({"distribution": "histogram", "bin_edges_tokens": [100, 200], "weights": [0]},
         "weights must not all be zero"),
    ],
)  # fmt: skip
def test_bad_histograms_fail_cleanly(tmp_path, lengths, fragment):
    path = scenario_with(tmp_path, **{"workload.input_tokens": lengths})
    assert_clean_error(run("optimize", path), 3, str(path), fragment)


@pytest.mark.parametrize(
    "text, fragment",
    [
        (
            "tokens\n100\n",
            "lengths.csv: header must be input_tokens (units in the column names), found tokens",
        ),
        (
            "input_tokens\n100\nmany\n",
            "lengths.csv: data row 2, column input_tokens: expected a number, found 'many'",
        ),
        ("input_tokens\n", "no lengths found"),
        ("input_tokens\n100\n-5\n", "input lengths must be finite and > 0 tokens, found -5"),
    ],
)
def test_bad_observed_lengths_fail_cleanly(tmp_path, text, fragment):
    (tmp_path / "lengths.csv").write_text(text)
    path = scenario_with(
        tmp_path, **{"workload.input_tokens": {"distribution": "observed", "file": "lengths.csv"}}
    )
    assert_clean_error(run("optimize", path), 3, fragment)


def test_check_update_refuses_the_installed_data(monkeypatch):
    import prfaas_plan.inputs.resources as resources

    monkeypatch.setattr(resources, "is_installed_copy", lambda path: True)
    assert_clean_error(run("check", "--update"), 3, "--update would rewrite the installed")


def test_check_on_a_copy_without_expectations_fails(tmp_path):
    data = data_copy(tmp_path)
    (data / "golden" / "expectations.yaml").unlink()
    result = run("check", data, "-f", "json")
    assert result.returncode == 8
    assert any(
        "no expectations file" in f["message"] for f in json.loads(result.stdout)["findings"]
    )


@pytest.mark.parametrize(
    "raised, code, line",
    [
        (MemoryError(), 9,
         "error: out of memory; ask for a smaller run (fewer requests, instances or lengths)"),
        (KeyboardInterrupt(), 130, "interrupted"),
        (ConfigError("max_prfaas_gpus must be 8", parameter="max_prfaas_gpus"), 3,
         "error: --max-prfaas-gpus must be 8"),
    ],
)  # fmt: skip
def test_failures_inside_a_command_under_the_runner(monkeypatch, raised, code, line):
    import prfaas_plan.use_cases.plan as use_case

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(use_case, "plan", fail)
    result = run("optimize")
    assert result.returncode == code
    assert result.stderr.strip() == line and result.stdout == ""


def test_main_is_the_console_script(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["prfaas-plan", "optimize", "--target-rps", "100"])
    with pytest.raises(SystemExit) as exit:
        cli.main()
    assert exit.value.code == 6
    assert capsys.readouterr().err.startswith("error: no plan reaches 100 req/s")

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "command_line", lambda args: interrupted)
    with pytest.raises(SystemExit) as exit:
        cli.main()
    assert exit.value.code == 130 and capsys.readouterr().err == "interrupted\n"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ('"two\\nlines"', "must be printable text, found the character U+000A"),
        # a lone surrogate: libyaml's scanner refuses the escape, the pure-Python one reads it
        # and the schema refuses the string
        (
            '"bad\\ud800name"',
            "malformed YAML: found invalid Unicode character escape code"
            if strict_yaml._CParser
            else "unable to parse raw data as a unicode string",
        ),
        ("'" + "x" * 2001 + "'", "name: string should have at most 2000 characters"),
    ],
)
def test_a_scenario_name_every_view_can_print(tmp_path, name, fragment):
    """A scenario name (free text) with a control character, a lone surrogate or a file's worth
    of text is refused with one line, never a traceback in a view."""
    scenario = tmp_path / "s.yaml"
    text = Path("examples/case_study.yaml").read_text()
    scenario.write_text("\n".join(
        f"name: {name}" if line.startswith("name:") else line for line in text.splitlines()
    ))  # fmt: skip
    assert_clean_error(run("optimize", scenario, "-f", "markdown"), 3, fragment)
