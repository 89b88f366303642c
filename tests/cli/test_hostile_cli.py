"""Hostile command-line input (issue 8), table-driven and in process: usage errors as one
`error:` line and one usage line (exit 2); flags with no effect in their combination, and every
numeric flag outside plausible.py's plausible range, refused before any work (exit 3); runs that
would not fit in memory or time refused up front (exit 3, naming the flag); outputs written only
onto a regular file or a new path, every OSError one line naming the path, the old file intact;
numpy floating-point errors never printed on success. What only a real process shows (a memory
limit, the console script's usage line) is in tests/cli/test_smoke.py."""

import errno
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.errors import ConfigError
from prfaas_plan.use_cases.numerics import model_numerics
from tests.cli.test_cli import CASE, assert_clean_error, data_copy, run

BIG = "1e300"
TINY = "1e-300"
LONG = "b" * 300  # a path component longer than any file system's 255 bytes


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory) -> Path:
    """A Mooncake trace of 150 requests, far fewer than compare-policies' default."""
    path = tmp_path_factory.mktemp("trace") / "short.jsonl"
    lines = [
        json.dumps({"timestamp": i * 100, "input_length": 1000 + 37 * i, "output_length": 100,
                    "hash_ids": [i]})
        for i in range(150)
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


# --- usage errors: exit 2, one error line and one usage line --------------------------------

USAGE = [
    (["optimize", "--bogus"], "error: No such option: --bogus"),
    (["--bogus"], "error: No such option: --bogus"),
    (["foo"], "error: No such command 'foo'"),
    (["evaluate"], "error: Missing option '--threshold-tokens'"),
    (["simulate", "--requests", "abc"], "error: Invalid value for '--requests'"),
    (["simulate", "--seed", "1.5"], "error: Invalid value for '--seed'"),
    (["kv", "--gpus-per-instance", "x"], "error: Invalid value for '--gpus-per-instance'"),
    (["optimize", "--mode", "fastest"], "error: Invalid value for '--mode'"),
    (["compare-policies", "--requests"], "error: Option '--requests' requires an argument"),
]


@pytest.mark.parametrize("args, first", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_usage_error_is_one_error_line_and_one_usage_line(args, first):
    result = run(*args)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(first), lines[0]
    assert lines[1].startswith("Usage: ") and "--help" in lines[1], lines[1]
    assert "╭" not in result.stderr and "Traceback" not in result.stderr


# --- refused up front: exit 3, one line naming the flag ---------------------------------------

SIM = ["simulate", "--requests", "1000"]
REFUSED = [
    # flags without effect in their combination
    (["egress", "--threshold-tokens", "5"], "--threshold-tokens needs a scenario"),
    (["egress", "--scenario", CASE, "--mean-tokens", "100"],
     "--mean-tokens has no effect with a scenario"),
    (["simulate", "--arrivals", "gamma", "--trace", "TRACE"],
     "--arrivals gamma has no effect with --trace (a trace replays its own arrival times)"),
    (["simulate", "--load", "0.5", "--load", "0.8"],
     "--load given more than once (only the last would count); give it once, a sweep as one list"),
    (["compare-policies", "--load", "0.5", "--load", "0.8"], "--load given more than once"),
    # one rule for the threshold everywhere
    ([*SIM, "--threshold-tokens", "-5"], "--threshold-tokens must be >= 0, got -5"),
    (["optimize", "--threshold-tokens", "-5"], "--threshold-tokens must be >= 0, got -5"),
    ([*SIM, "--threshold-tokens", BIG], "--threshold-tokens must be in [0, 1e+09] tokens"),
    (["optimize", "--threshold-tokens", BIG], "--threshold-tokens must be in [0, 1e+09] tokens"),
    (["evaluate", "--threshold-tokens", BIG, "--pd-prefill-instances", "2"],
     "--threshold-tokens must be in [0, 1e+09] tokens"),
    (["egress", "--scenario", CASE, "--threshold-tokens", BIG],
     "--threshold-tokens must be in [0, 1e+09] tokens"),
    # seeds
    ([*SIM, "--seed", "-1"], "--seed must be in [0, 9223372036854775807], got -1"),
    (["compare-policies", "--seed", "-1"], "--seed must be in [0, 9223372036854775807], got -1"),
    ([*SIM, "--seed", str(2**63)], "--seed must be in [0, 9223372036854775807]"),
    # rates and loads
    ([*SIM, "--rate-rps", TINY], "--rate-rps must be in [1e-06, 1e+06] req/s, got 1e-300"),
    ([*SIM, "--rate-rps", BIG], "--rate-rps must be in [1e-06, 1e+06] req/s"),
    ([*SIM, "--load", BIG], "--load must be in [0.001, 100], got 1e+300"),
    ([*SIM, "--load", TINY], "--load must be in [0.001, 100], got 1e-300"),
    (["compare-policies", "--load", "1e-7"], "--load must be in [0.001, 100], got 1e-07"),
    (["optimize", "--target-rps", BIG], "--target-rps must be in [1e-06, 1e+06] req/s"),
    (["optimize", "--ttft-target-s", "1", "--ttft-load-rps", BIG],
     "--ttft-load-rps must be in [1e-06, 1e+06] req/s"),
    (["optimize", "--ttft-target-s", "1", "--ttft-load", BIG], "--ttft-load must be in [0.001, 100]"),
    (["optimize", "--ttft-target-s", "5", "--ttft-load", TINY],
     "--ttft-load must be in [0.001, 100], got 1e-300"),
    (["optimize", "--ttft-target-s", "5", "--ttft-load-rps", TINY],
     "--ttft-load-rps must be in [1e-06, 1e+06] req/s, got 1e-300"),
    # seconds
    (["optimize", "--ttft-target-s", BIG, "--ttft-load", "0.5"],
     "--ttft-target-s must be in [0, 3.2e+07] s"),
    (["simulate", "--duration-s", BIG], "--duration-s must be in [0, 3.2e+07] s"),
    ([*SIM, "--link-latency-s", BIG], "--link-latency-s must be in [0, 3.2e+07] s"),
    ([*SIM, "--arrivals", "sinusoidal", "--period-s", BIG], "--period-s must be in [0, 3.2e+07] s"),
    ([*SIM, "--dip-start-s", BIG, "--dip-duration-s", "1"],
     "--dip-start-s must be in [0, 3.2e+07] s"),
    ([*SIM, "--arrivals", "gamma", "--burst-cv", BIG], "--burst-cv must be in [0.01, 100]"),
    (["simulate", "--arrivals", "gamma", "--burst-cv", TINY, "--requests", "2000"],
     "--burst-cv must be in [0.01, 100], got 1e-300"),
    (["simulate", "--arrivals", "gamma", "--burst-cv", "1000", "--requests", "2000"],
     "--burst-cv must be in [0.01, 100], got 1000"),
    (["simulate", "--duration-s", "1e-6"],
     "--duration-s of 1e-06 s holds no request at 2.54 req/s; give a window of at least"),
    # lengths, counts, bandwidth
    (["egress", "--mean-tokens", BIG], "--mean-tokens must be in [1, 1e+09] tokens, got 1e+300"),
    (["egress", "--mean-tokens", "0.5"], "--mean-tokens must be in [1, 1e+09] tokens"),
    (["egress", "--link-gbps", BIG], "--link-gbps must be in [1e-06, 1e+06] Gbps"),
    (["egress", "--prfaas-gpus", str(8 * 10**12)], "--prfaas-gpus must be in [1, 1e+06] GPUs"),
    (["kv", "--lengths", "1024,10000000000"], "--lengths must be in [1, 1e+09] tokens, got 1e+10"),
    (["kv", "--gpus-per-instance", str(10**9)], "--gpus-per-instance must be in [1, 1e+06] GPUs"),
    (["optimize", "--max-prfaas-gpus", "1000000000000"],
     "--max-prfaas-gpus must be in [0, 1e+06] GPUs, got 1e+12"),
    (["evaluate", "--threshold-tokens", "1000", "--pd-prefill-instances", "2",
      "--prfaas-instances", str(10**9)], "--prfaas-instances must be in [0, 100000] instances"),
    # memory and time, estimated before anything is allocated
    (["compare-policies", "--requests", str(10**11)],
     "1e+11 requests would need ~46,566 GiB, more than the 1 GiB a run may use: about "),
    # measured ~463 B a request for compare-policies (10^6: 511 MB)
    (["compare-policies", "--requests", "2500000"],
     "about 2,013,265 requests fit per run (--requests)"),
    (["simulate", "--requests", str(10**11)], "1e+11 requests would need ~24,214 GiB"),
    # measured ~237 B a request: 10^7 took 2.3 GB, now refused (the limit keeps a run < ~1 GB)
    (["simulate", "--requests", str(10**7)],
     "1e+07 requests would need ~2.48 GiB, more than the 1 GiB a run may use: about 3,871,665 "
     "requests fit per run (--requests/--duration-s)"),
    (["simulate", "--requests", "4000000", "--sustainable"], "4e+06 requests would need"),
    # time: ~30 s on a 2-core machine (plausible.MAX_SIMULATION_S)
    (["simulate", "--requests", "1000000", "--sustainable"],
     "13 simulations of 1,000,000 requests would take ~32 s, more than 30 s"),
    (["compare-policies", "--requests", "1000000"],
     "1 simulation of 1,000,000 requests would take ~35 s, more than 30 s"),
    # a sweep: every finished run keeps its results (300 fractions took 2.77 GB)
    (["simulate", "--load", ",".join(["0.5"] * 300)],
     "300 runs of 100,000 requests would need ~3.43 GiB (each finished run keeps its results), "
     "more than the 1 GiB limit; give fewer --load values or fewer requests"),
    ([*SIM, "--rate-rps", "1e-6"],
     "1,000 requests at 1e-06 req/s span ~1e+09 s, more than 3.2e+07 s (a year); raise --rate-rps"),
    (["compare-policies", "--requests", "500000", "--load", "0.001"],
     "span ~1.6e+08 s, more than 3.2e+07 s (a year); raise --load or ask for fewer requests"),
    # a list with an empty item is a typo, not a shorter list
    ([*SIM, "--load", "0.5,,0.8"],
     "--load: expected comma-separated numbers with none empty, got '0.5,,0.8'"),
    ([*SIM, "--load", "0.8,"], "--load: expected comma-separated numbers with none empty"),
    (["kv", "--lengths", "1024,,2048"],
     "--lengths: expected comma-separated whole token counts with none empty"),
    # a value just past a bound is quoted as given, never rounded onto the bound
    (["optimize", "--bandwidth-gbps", "1000001"],
     "--bandwidth-gbps must be in [1e-06, 1e+06] Gbps, got 1000001"),
    (["optimize", "--threshold-tokens", "1000000001"],
     "--threshold-tokens must be in [0, 1e+09] tokens, got 1000000001"),
    # the --bandwidth-gbps override: the scenario file's own bound, on every command
    *[([command, *extra, "--bandwidth-gbps", value],
       f"--bandwidth-gbps must be in [1e-06, 1e+06] Gbps, got {value_shown}")
      for command, extra in [("optimize", []), ("simulate", []), ("compare-policies", []),
                             ("evaluate", ["--threshold-tokens", "1000",
                                           "--pd-prefill-instances", "2"])]
      for value, value_shown in [(TINY, "1e-300"), ("1e-7", "1e-07"), ("1e7", "1e+07"),
                                 (BIG, "1e+300")]],
    # any option given twice: click would keep the last one without a word
    *[(args, f"{flag} given more than once (only the last would count); give it once")
      for flag, args in [
          ("--bandwidth-gbps", ["optimize", "--bandwidth-gbps", "100", "--bandwidth-gbps", "1"]),
          ("--seed", [*SIM, "--seed", "1", "--seed", "2"]),
          ("--requests", [*SIM, "--requests", "2000"]),
          ("--threshold-tokens", ["optimize", "--threshold-tokens", "1", "--threshold-tokens", "2"]),
          ("--mode", ["optimize", "--mode", "exact", "--mode", "paper"]),
          ("--format", ["optimize", "-f", "json", "--format", "table"]),
          ("--output", ["optimize", "-o", "a.json", "--output", "b.json"]),
          ("--trace", ["simulate", "--trace", "TRACE", "--trace", "TRACE"]),
          ("--policy", [*SIM, "--policy", "static", "--policy", "adaptive"]),
          ("--data-dir", ["optimize", "--data-dir", "data", "--data-dir", "data"]),
          ("--link-gbps", ["egress", "--link-gbps", "100", "--link-gbps", "1"]),
          ("--lengths", ["kv", "--lengths", "1024", "--lengths", "2048"]),
          ("--sustainable", [*SIM, "--sustainable", "--sustainable"]),
      ]],
    # flags that only another combination reads
    ([*SIM, "--burst-cv", "2"],
     "--burst-cv has no effect here: only gamma arrivals have a burst CV (--arrivals is poisson)"),
    ([*SIM, "--arrivals", "sinusoidal", "--burst-cv", "2"], "(--arrivals is sinusoidal)"),
    ([*SIM, "--period-s", "60"],
     "--period-s has no effect here: only sinusoidal arrivals have a period"),
    ([*SIM, "--arrivals", "gamma", "--amplitude", "0.2"],
     "--amplitude has no effect here: only sinusoidal arrivals have an amplitude"),
    ([*SIM, "--dip-fraction", "0.5"],
     "--dip-fraction has no effect here: it is the share of the link left during a dip; give "
     "--dip-start-s and --dip-duration-s"),
    (["optimize", "--ttft-percentile", "50"],
     "--ttft-percentile has no effect without a target (--ttft-target-s)"),
    (["optimize", "--solver", "highs"], "--solver has no effect without sizing"),
    (["egress", "--mode", "exact"], "--mode has no effect without a scenario"),
    # the table would overwrite the figure
    (["optimize", "--plot", "same.png", "-o", "same.png"],
     "--output and --plot name the same file (same.png)"),
    (["optimize", "--plot", "same.png", "-o", "./same.png"], "name the same file"),
    (["kv", "--plot", "same.png", "-o", "same.png"], "name the same file"),
    # paths: a name the system refuses (a component over 255 bytes), an empty name, a slash
    (["optimize", "-o", LONG + ".json"], "--output: cannot write 'bbb"),
    (["optimize", "-o", LONG + ".json"], "bbb.json': File name too long"),
    (["optimize", "--plot", LONG + ".png"], "--plot: cannot write 'bbb"),
    (["kv", "--plot", LONG + ".png"], "--plot: cannot write 'bbb"),
    (["simulate", "--trace", LONG + ".jsonl"], "--trace: cannot read 'bbb"),
    (["compare-policies", "--trace", LONG + ".jsonl"], "--trace: cannot read 'bbb"),
    (["optimize", "--data-dir", LONG], "--data-dir: cannot read 'bbb"),
    (["check", LONG], "data directory: cannot read 'bbb"),
    (["optimize", LONG + ".yaml"], "scenario file: cannot read 'bbb"),
    (["egress", "--scenario", LONG + ".yaml"], "--scenario: cannot read 'bbb"),
    (["check", "--scenario", LONG + ".yaml"], "--scenario: cannot read 'bbb"),
    (["optimize", "-o", ""], "--output: the file name is empty"),
    (["optimize", "--plot", ""], "--plot: the file name is empty"),
    (["optimize", "-o", "newdir/"], "--output: newdir/ ends in a slash (a directory); give a file"),
    (["optimize", "-o", "AFILE/x.json"], "afile is not a directory"),
    # a trace shorter than the requests asked for: refused, not silently shortened
    (["compare-policies", "--requests", "5000", "--trace", "TRACE"],
     "short.jsonl: the trace has 150 requests, fewer than --requests 5,000; ask for at most 150"),
]  # fmt: skip


@pytest.mark.parametrize(
    "args, fragment", REFUSED, ids=[" ".join(map(str, a))[:60] for a, _ in REFUSED]
)
def test_refused_up_front_with_one_line_naming_the_flag(args, fragment, short_trace, tmp_path):
    (tmp_path / "afile").write_text("")
    args = [short_trace if a == "TRACE" else tmp_path / "afile/x.json" if a == "AFILE/x.json"
            else a for a in args]  # fmt: skip
    assert_clean_error(run(*args, cwd=tmp_path), 3, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written


def _machine_of(monkeypatch, gib: float) -> None:
    real = os.sysconf
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": int(gib * 2**30) // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages.get(name) or real(name))


def test_the_memory_guard_refuses_compare_policies_of_10_8_requests(monkeypatch):
    """The issue's case on a 16 GiB machine: the limit is 1 GiB whatever the machine."""
    _machine_of(monkeypatch, 16)
    result = run("compare-policies", "--requests", "100000000")
    assert_clean_error(result, 3, "1e+08 requests would need ~46.6 GiB, more than the 1 GiB a "
                       "run may use", "(--requests)")  # fmt: skip


def test_a_small_machine_lowers_the_memory_limit_to_half_its_memory(monkeypatch):
    _machine_of(monkeypatch, 1)
    result = run("simulate", "--requests", "3000000")
    assert_clean_error(result, 3, "more than the 0.5 GiB a run may use: about 1,806,777 requests")


def test_the_time_estimate_counts_every_run_of_a_sweep_and_of_the_bisection(monkeypatch):
    """A run takes ~2.2 µs a request; --sustainable adds ~12 bisection runs."""
    from prfaas_plan import plausible

    monkeypatch.setattr(plausible, "MAX_SIMULATION_S", 0.5)
    result = run("simulate", "--requests", "20000", "--load", "0.5,0.8", "--sustainable")
    assert_clean_error(result, 3, "14 simulations of 20,000 requests would take ~0.7 s, more "
                       "than 0.5 s; ask for fewer requests (--requests/--duration-s)")  # fmt: skip
    assert run("simulate", "--requests", "20000", "--load", "0.5,0.8", "-f", "json").returncode == 0


def test_an_option_declared_a_list_may_be_repeated():
    result = run("check", "--scenario", CASE, "--scenario", CASE, "-f", "json")
    assert "given more than once" not in result.stderr and result.returncode in (0, 8)


def test_gamma_arrivals_refuse_a_cv_whose_shape_is_not_finite():
    from prfaas_plan.sim.arrivals import gamma_arrivals

    rng = np.random.default_rng(0)
    for cv in (0.0, -1.0, 1e-300, float("nan")):
        with pytest.raises(ConfigError, match="coefficient of variation must be a finite number"):
            gamma_arrivals(1.0, cv, rng=rng, count=10)


def test_output_through_a_symbolic_link_replaces_its_target_and_keeps_the_link(tmp_path):
    """Decided: a link is written through (its target replaced atomically), not replaced."""
    target = tmp_path / "target.json"
    target.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("new.json")
    for name in (link, dangling):
        result = run("optimize", "-f", "json", "-o", name)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert name.is_symlink()
    assert json.loads(target.read_text())["mode"] == "paper"
    assert json.loads((tmp_path / "new.json").read_text())["mode"] == "paper"
    _no_temporary_left(tmp_path)


@pytest.mark.slow
def test_flags_given_in_their_own_combination_still_run(tmp_path):
    for args in (["egress", "--scenario", CASE, "--mode", "exact", "-f", "json"],
                 ["simulate", "--requests", "2000", "--arrivals", "gamma", "--burst-cv", "100",
                  "-f", "json"],
                 ["simulate", "--requests", "2000", "--arrivals", "sinusoidal", "--period-s", "60",
                  "--amplitude", "0.2", "-f", "json"],
                 ["simulate", "--requests", "2000", "--dip-start-s", "1", "--dip-duration-s", "5",
                  "--dip-fraction", "0.5", "-f", "json"],
                 ["optimize", "--ttft-target-s", "5", "--ttft-load", "0.5", "--ttft-percentile",
                  "50", "-f", "json"],
                 ["optimize", "--plot", tmp_path / "f.png", "-o", tmp_path / "t.json"]):  # fmt: skip
        result = run(*args)
        assert result.returncode == 0, (args, result.stderr)


def test_a_trace_long_enough_is_compared_on_the_requests_asked_for(short_trace):
    result = run("compare-policies", "--requests", "150", "--trace", short_trace, "-f", "json")
    assert result.returncode == 0 and result.stderr == ""
    assert json.loads(result.stdout)["requests"] == 150


# --- outputs --------------------------------------------------------------------------------


def _old_file(tmp_path) -> Path:
    path = tmp_path / "plan.json"
    path.write_text("old\n")
    return path


def _no_temporary_left(directory: Path) -> None:
    assert [p.name for p in directory.iterdir() if p.name.startswith(".")] == []


def test_output_onto_a_device_is_refused_and_the_device_kept():
    before = os.stat("/dev/null")
    result = run("optimize", "-f", "json", "-o", "/dev/null")
    assert_clean_error(result, 3, "--output: /dev/null is not a regular file")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_output_onto_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert_clean_error(run("optimize", "-f", "json", "-o", fifo), 3, "is not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    _no_temporary_left(tmp_path)


@pytest.mark.parametrize(
    "target, fragment",
    [(".", "is a directory, expected a file name"), ("missing/out.json", "does not exist")],
)
def test_output_into_a_directory_or_nowhere_is_refused(tmp_path, target, fragment):
    assert_clean_error(run("optimize", "-f", "json", "-o", tmp_path / target), 3, fragment)


def test_plot_onto_a_link_to_a_device_is_refused(tmp_path):
    pytest.importorskip("matplotlib")
    link = tmp_path / "null.png"
    link.symlink_to("/dev/null")
    result = run("kv", "--plot", link, "-f", "json")
    assert_clean_error(result, 3, f"--plot: {link} is not a regular file")
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def _failing(monkeypatch, where: str, code: int) -> None:
    """Make one step of the atomic write fail with OSError `code` (what a read-only directory,
    a full device or a vanished directory gives; as root, permissions alone would not)."""
    import prfaas_plan.inputs.files as files

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    if where == "mkstemp":
        monkeypatch.setattr(files.tempfile, "mkstemp", fail)
    elif where == "write":
        monkeypatch.setattr(files, "write_text", fail)
    else:
        monkeypatch.setattr(files.os, "replace", fail)


@pytest.mark.parametrize(
    "where, code, exit_code, fragment",
    [
        ("mkstemp", errno.EROFS, 3, "cannot write {path}: Read-only file system"),
        ("mkstemp", errno.EACCES, 3, "cannot write {path}: Permission denied"),
        ("write", errno.ENOSPC, 9, "cannot write {path}: No space left on device; free space"),
        ("write", errno.EDQUOT, 9, "cannot write {path}: Disk quota exceeded"),
        ("replace", errno.EIO, 3, "cannot write {path}: Input/output error"),
    ],
)
def test_a_failing_write_is_one_line_and_the_old_file_stays(
    monkeypatch, tmp_path, where, code, exit_code, fragment
):
    path = _old_file(tmp_path)
    _failing(monkeypatch, where, code)
    result = run("optimize", "-f", "json", "-o", path)
    assert_clean_error(result, exit_code, "--output: " + fragment.format(path=path))
    assert path.read_text() == "old\n"
    _no_temporary_left(tmp_path)


def test_check_update_refuses_to_write_onto_a_fifo(tmp_path):
    data = data_copy(tmp_path)
    expectations = data / "golden" / "expectations.yaml"
    expectations.unlink()
    os.mkfifo(expectations)
    result = run("check", data, "--update", "--scenario", CASE, "-f", "json")
    assert_clean_error(result, 3, "--update: ", "expectations.yaml is not a regular file")


# --- numerics: no floating-point warning on success, an error inside the model ---------------


def test_valid_runs_print_nothing_on_stderr():
    for args in (["optimize", "-f", "json"], ["egress", "-f", "json"],
                 ["simulate", "--requests", "2000", "-f", "json"]):  # fmt: skip
        result = run(*args)
        assert result.returncode == 0 and result.stderr == "", (args, result.stderr)


@pytest.mark.parametrize(
    "args",
    [["simulate", "--requests", "1000", "--rate-rps", TINY], ["egress", "--mean-tokens", BIG]],
)
def test_inputs_that_overflowed_with_warnings_are_refused_by_a_bound(args):
    """Both printed numpy RuntimeWarnings before (one then reported 0.00 s TTFT, the other a
    traceback); a bound now refuses them in one line."""
    result = run(*args)
    assert_clean_error(result, 3, "must be in [")
    assert "Warning" not in result.stderr


def test_floating_point_errors_inside_a_use_case_raise_one_config_error():
    @model_numerics("optimize")
    def overflow() -> float:
        return float(np.float64(1e300) * np.float64(1e300))

    @model_numerics("simulate")
    def invalid() -> float:
        return float(np.array([np.inf]) - np.array([np.inf]))

    with pytest.raises(ConfigError, match=r"^optimize: the model's arithmetic failed \(overflow"):
        overflow()
    with pytest.raises(ConfigError, match=r"^simulate: .*invalid value"):
        invalid()


def test_the_model_may_still_compute_inf_where_it_says_so():
    @model_numerics("optimize")
    def intended() -> float:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return float(np.float64(1e300) * np.float64(1e300) - np.inf)

    assert np.isnan(intended())


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    """`check --update -o /dev/null` used to rewrite the expectations, then fail on the output."""
    data = data_copy(tmp_path)
    expectations = data / "golden" / "expectations.yaml"
    before = expectations.read_text()
    result = run("check", data, "--update", "-f", "json", "-o", "/dev/null")
    assert_clean_error(result, 3, "--output: /dev/null is not a regular file")
    assert expectations.read_text() == before


def test_output_onto_the_commands_own_input_is_refused_and_the_input_kept(tmp_path):
    """`optimize s.yaml -o s.yaml` would replace the scenario with its plan."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(Path(CASE).read_text())
    before = scenario.read_bytes()
    for target in (scenario, tmp_path / "." / "s.yaml"):
        result = run("optimize", scenario, "-o", target, "-f", "json")
        assert_clean_error(result, 3, f"--output {target} is an input of this command")
        assert scenario.read_bytes() == before


def test_import_profile_output_onto_its_benchmark_file_is_refused_before_any_import(tmp_path):
    from tests.inputs.test_hostile_import import H200, SAMPLES

    source = tmp_path / "run.json"
    source.write_bytes((SAMPLES / "vllm_h200_prefill.json").read_bytes())
    before = source.read_bytes()
    result = run("import-profile", "vllm", source, *H200, "--data-dir", tmp_path / "d",
                 "-o", source, "-f", "json")  # fmt: skip
    assert_clean_error(result, 3, "is an input of this command")
    assert source.read_bytes() == before and not (tmp_path / "d").exists()


@pytest.mark.parametrize("flag", ["--engine-version", "--parallelism"])
@pytest.mark.parametrize("text, fragment", [("v1\x07", "U+0007"), ("v" * 201, "at most 200")])
def test_import_metadata_flags_are_printable_short_text(tmp_path, flag, text, fragment):
    """They are written into the table's meta.yaml: a control character broke it."""
    from tests.inputs.test_hostile_import import H200, SAMPLES

    value = text.encode().decode("unicode_escape")
    result = run("import-profile", "vllm", SAMPLES / "vllm_h200_prefill.json", *H200,
                 "--data-dir", tmp_path / "d", flag, value)  # fmt: skip
    assert_clean_error(result, 3, flag, fragment)
    assert not (tmp_path / "d").exists()


def test_a_deployment_that_serves_nobody_has_no_time_to_a_first_token():
    """0 PD-P, 0 PrfaaS instances at t = 0: Λ_max 0; the TTFT of an empty pool is undefined
    (NaN, null in JSON), not the unloaded TTFT of a pool that does not exist."""
    result = run("evaluate", "--threshold-tokens", "0", "--pd-prefill-instances", "0",
                 "--prfaas-instances", "0", "-f", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    configuration = json.loads(result.stdout)["configuration"]
    assert configuration["throughput_rps"]["system"] == 0
    ttft = {k: v for k, v in configuration["ttft"].items() if k.endswith("_s")}
    assert len(ttft) == 6 and all(v is None for v in ttft.values()), ttft


def test_a_plan_that_offloads_nothing_says_so_instead_of_t_inf():
    result = run("optimize", "--max-prfaas-gpus", "0")
    assert result.returncode == 0, result.stderr
    assert "infK" not in result.stdout and "offloading nothing" in result.stdout


# --- a target no deployment reaches: exit 6, one line, and what was written said -------------

# (args, fragments of the one line, files there afterwards besides o.json, kept as it was)
UNREACHABLE = [
    (["procure", "--target-rps", "1e6", "-o", "o.json"],
     ["no deployment in the candidate space reaches --target-rps 1e+06 req/s", "or relax the "
      "target"], []),
    # the model of an infeasible target is kept (a solver's diagnosis reads it), and said
    (["procure", "--target-rps", "1e6", "--export-model", "m.mps", "-o", "o.json"],
     ["reaches --target-rps 1e+06", "; the model was written to m.mps all the same "
      "(--export-model)"], ["m.mps"]),
    # --pareto as plain procure (it exited 0 with an empty cost-P90 frontier)
    (["procure", "--pareto", "--target-rps", "1e6", "-f", "csv", "-o", "o.json", "--plot",
      "f.png"],
     ["reaches --target-rps 1e+06 req/s, so the cost-P90 frontier (plans reaching it) would be "
      "empty: the highest capacity of a one-site plan is 20.5 req/s; give a --target-rps at "
      "most that"], []),
    (["procure", "--pareto", "--target-rps", "1e6", "--ttft-load-rps", "2", "-o", "o.json"],
     ["would be empty"], []),
]  # fmt: skip


@pytest.mark.parametrize("args, fragments, written", UNREACHABLE,
                         ids=[" ".join(a[:4]) for a, _, _ in UNREACHABLE])  # fmt: skip
def test_an_unreachable_target_exits_6_and_says_what_it_wrote(tmp_path, args, fragments, written):
    (tmp_path / "o.json").write_text("old")
    assert_clean_error(run(*args, cwd=tmp_path), 6, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["o.json", *written])
    assert (tmp_path / "o.json").read_text() == "old"
    if written:
        assert (tmp_path / "m.mps").read_text().startswith(("NAME", "*"))  # a whole MPS file
