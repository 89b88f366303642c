"""The library speaks its own terms, the CLI maps them to flags: a failing library call names
the Python parameter (and carries it in `PrfaasPlanError.parameter`), never a `--flag`; the same
mistake made on the command line names the flag (cli/failures.py: parameter_flags(), error_message)."""

import math
from pathlib import Path

import pytest

from prfaas_plan.choices import RangePolicy
from prfaas_plan.cli.failures import error_message, exit_code, flag_conflicts, parameter_flags
from prfaas_plan.errors import (
    ConfigError,
    InfeasibleError,
    PrfaasPlanError,
    ProfileError,
    RangeError,
)
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import open_problem
from prfaas_plan.use_cases.egress import egress_report
from prfaas_plan.use_cases.kv import kv_report
from prfaas_plan.use_cases.plan import TtftTarget, evaluate_configuration, plan, ttft_target
from prfaas_plan.use_cases.simulate_request import in_request_terms
from tests.cli.test_cli import assert_clean_error, run

CATALOG = Catalog.open()

# (library call, parameter, library message fragment, CLI args, CLI message fragment)
CASES = [
    (lambda p: plan(p, max_prfaas_gpus=4), "max_prfaas_gpus",
     "max_prfaas_gpus must be a non-negative multiple of prfaas_cluster.gpus_per_instance (8)",
     ["optimize", "--max-prfaas-gpus", "4"],
     "--max-prfaas-gpus must be a non-negative multiple of prfaas_cluster.gpus_per_instance (8)"),
    (lambda p: plan(p, threshold_tokens=-1.0), "threshold_tokens",
     "threshold_tokens must be >= 0, got -1",
     ["optimize", "--threshold-tokens", "-1"], "--threshold-tokens must be >= 0, got -1"),
    (lambda p: plan(p, threshold_tokens=1e4, target_rps=4), "threshold_tokens",
     "threshold_tokens cannot be combined with sizing (target_rps/max_prfaas_gpus)",
     ["optimize", "--threshold-tokens", "1e4", "--target-rps", "4"],
     "--threshold-tokens cannot be combined with sizing (--target-rps/--max-prfaas-gpus)"),
    (lambda p: plan(p, range_policy=RangePolicy.ERROR), "out_of_range",
     "out_of_range error forbids extrapolating the fit (use out_of_range extrapolate,",
     ["optimize", "--out-of-range", "error"],
     "--out-of-range error forbids extrapolating the fit (use --out-of-range extrapolate,"),
    (lambda p: evaluate_configuration(p, threshold_tokens=1e4, pd_prefill_instances=8),
     "pd_prefill_instances", "pd_prefill_instances must be in [0, 7]",
     ["evaluate", "--threshold-tokens", "1e4", "--pd-prefill-instances", "8"],
     "--pd-prefill-instances must be in [0, 7]"),
    (lambda p: evaluate_configuration(p, threshold_tokens=1e4, pd_prefill_instances=3,
                                      prfaas_instances=-1),
     "prfaas_instances", "prfaas_instances must be >= 0",
     ["evaluate", "--threshold-tokens", "1e4", "--pd-prefill-instances", "3",
      "--prfaas-instances", "-1"], "--prfaas-instances must be >= 0"),
    (lambda p: ttft_target(None, 90, None, 0.8), "ttft_target_s",
     "ttft_load/ttft_load_rps need ttft_target_s",
     ["optimize", "--ttft-load", "0.8"], "--ttft-load/--ttft-load-rps need --ttft-target-s"),
    (lambda p: TtftTarget(5.0, 90), "ttft_load_rps",
     "exactly one of ttft_load_rps and ttft_load",
     ["optimize", "--ttft-target-s", "5"], "exactly one of --ttft-load-rps and --ttft-load"),
    (lambda p: TtftTarget(5.0, "95", load_fraction=0.8), "ttft_percentile",
     "ttft_percentile must be mean, 50, 90 or 99, got '95'",
     ["optimize", "--ttft-target-s", "5", "--ttft-load", "0.8", "--ttft-percentile", "95"],
     "--ttft-percentile: input should be 'mean', '50', '90' or '99', got '95'"),
    (lambda p: open_problem(bandwidth_gbps=math.inf), "bandwidth_gbps",
     "bandwidth_gbps must be a finite number > 0, got inf",
     ["optimize", "--bandwidth-gbps", "inf"], "--bandwidth-gbps must be a finite number > 0"),
    (lambda p: kv_report(CATALOG, None, [1024], kv_dtype="int3"), "kv_dtype",
     "kv_dtype: unknown dtype 'int3'", ["kv", "--kv-dtype", "int3"],
     "--kv-dtype: unknown dtype 'int3'"),
    (lambda p: kv_report(CATALOG, None, [1024], gpu="h100"), "gpu", "gpu: unknown GPU 'h100'",
     ["kv", "--gpu", "h100"], "--gpu: unknown GPU 'h100'"),
    (lambda p: kv_report(CATALOG, None, [-1.0]), "lengths_tokens",
     "lengths_tokens: expected positive token counts", ["kv", "--lengths", "-1"],
     "--lengths: expected positive token counts"),
    (lambda p: egress_report(CATALOG, prfaas_gpus=4), "prfaas_gpus",
     "prfaas_gpus must be a positive multiple of gpus_per_instance, got 4 and 8",
     ["egress", "--prfaas-gpus", "4"],
     "--prfaas-gpus must be a positive multiple of --gpus-per-instance, got 4 and 8"),
    (lambda p: egress_report(CATALOG, link_gbps=-1.0), "link_gbps",
     "link_gbps must be a finite number > 0", ["egress", "--link-gbps", "-1"],
     "--link-gbps must be a finite number > 0"),
    (lambda p: egress_report(CATALOG, models=["kimi-k2"], scenario=Path("x.yaml")), "scenario",
     "egress: give model names or scenario, not both",
     ["egress", "kimi-k2", "--scenario", "x.yaml"],
     "egress: give model names or --scenario, not both"),
]  # fmt: skip


@pytest.mark.parametrize("call, parameter, library, args, cli", CASES, ids=[c[3][1] for c in CASES])
def test_library_names_the_parameter_and_the_cli_the_flag(
    case_problem, call, parameter, library, args, cli
):
    with pytest.raises(PrfaasPlanError) as caught:
        call(case_problem)
    message = str(caught.value)
    assert library in message and "--" not in message, message
    assert caught.value.parameter == parameter
    assert parameter in parameter_flags()
    assert_clean_error(run(*args), exit_code(caught.value), cli)


@pytest.mark.parametrize(
    "error, shown",
    [
        # file fields stay as they are: a dotted path, or a `field:` prefix
        (ConfigError("s.yaml: link.bandwidth_gbps must be > 0, got -1"),
         "s.yaml: link.bandwidth_gbps must be > 0, got -1"),
        (ConfigError("s.yaml: kv_dtype: no kv profile for model 'x'"),
         "s.yaml: kv_dtype: no kv profile for model 'x'"),
        (ProfileError("/d/meta.yaml: gpus_per_instance must be 8 to match its directory"),
         "/d/meta.yaml: gpus_per_instance must be 8 to match its directory"),
        (ConfigError("lengths.jsonl:3: expected a JSON object with a numeric input_length"),
         "lengths.jsonl:3: expected a JSON object with a numeric input_length"),
        (RangeError("d/t.csv: 1% below; out_of_range error forbids", parameter="out_of_range"),
         "d/t.csv: 1% below; --out-of-range error forbids"),
        # an identifier-like parameter is translated wherever it appears ...
        (InfeasibleError("best is 6.25 req/s; add PD instances or relax target_rps"),
         "best is 6.25 req/s; add PD instances or relax --target-rps"),
        (ConfigError("sizing needs target_rps or max_prfaas_gpus (or both)"),
         "sizing needs --target-rps or --max-prfaas-gpus (or both)"),
        # ... a plain-word one only when the error is about it, as the word is also English
        (ConfigError("egress: give model names or scenario, not both", parameter="scenario"),
         "egress: give model names or --scenario, not both"),
        (ConfigError("the run has 3 requests for 2 scenario files"),
         "the run has 3 requests for 2 scenario files"),
        # flags already spelled as flags are left alone
        (ConfigError("--target-rps must be finite"), "--target-rps must be finite"),
    ],
)  # fmt: skip
def test_error_message_maps_parameters_to_flags(error: PrfaasPlanError, shown: str):
    assert error_message(error) == shown


@pytest.mark.parametrize(
    "error, shown",
    [
        (ConfigError("give exactly one of arrivals.requests and arrivals.duration_s",
                     parameter="arrivals.requests"),
         "give exactly one of --requests and --duration-s"),
        (ConfigError("load.fractions must be > 0, for fewer requests", parameter="load.fractions"),
         "--load must be > 0, for fewer requests"),
        (ConfigError("trace.jsonl: policy.kind prefix needs hash_ids", parameter="policy.kind"),
         "trace.jsonl: --policy prefix needs hash_ids"),
        (ConfigError("arrivals.requests must be >= 1, got 0"), "--requests must be >= 1, got 0"),
        (ConfigError("replay its own requests: drop arrivals.requests/arrivals.duration_s",
                     parameter="arrivals.trace"),
         "replay its own requests: drop --requests/--duration-s"),
        (ConfigError("fits about 10 per run (arrivals.duration_s/arrivals.requests)"),
         "fits about 10 per run (--duration-s/--requests)"),
    ],
)  # fmt: skip
def test_the_simulators_spec_fields_are_the_requests_then_flags(error: PrfaasPlanError, shown):
    """The simulator names its spec (`arrivals.requests`); simulate tells it in its request's
    fields (use_cases/simulate_request.py in_request_terms: what the API and a sweep row show), which
    the CLI shows as flags."""
    assert error_message(in_request_terms(error)) == shown


def test_every_mapped_flag_is_a_flag():
    assert all(flag.startswith("--") and "_" not in flag for flag in parameter_flags().values())


def test_every_mapped_flag_exists_on_some_command():
    import typer.main

    from prfaas_plan.cli import app

    group = typer.main.get_command(app)
    options = {
        name
        for command in group.commands.values()
        for param in command.params
        for name in param.opts
        if name.startswith("--")
    }
    assert set(parameter_flags().values()) <= options, set(parameter_flags().values()) - options


def test_a_file_field_named_like_a_parameter_stays_a_field(tmp_path):
    from tests.cli.test_cli import data_copy

    data = data_copy(tmp_path)
    meta = data / "profiles/internal-1t-hybrid/decode/h20-x8/meta.yaml"
    meta.write_text(meta.read_text().replace("gpus_per_instance: 8", "gpus_per_instance: 4"))
    assert_clean_error(run("optimize", "--data-dir", data), 4,
                       f"{meta}: gpus_per_instance must be 8 to match its directory, found 4")  # fmt: skip


def test_the_flag_table_is_derived_from_the_declared_options_without_conflict():
    """No hand table: each option's parameter name (a request field) and its `Sets` names map
    to its flag, and no library name maps to two flags across commands."""
    assert flag_conflicts() == []
    flags = parameter_flags()
    assert flags["gpu_prices_usd_per_gpu_hour"] == "--gpu-price"  # the request's field
    assert flags["comparison.requests"] == "--requests"  # a spec field, by the option's Sets
    assert flags["max_prfaas_instances"] == "--max-prfaas-gpus"
    assert flags["lengths_tokens"] == "--lengths"
