"""What only a real process shows: the console script and `python -m prfaas_plan` run, exit
statuses reach the shell, data and messages go to separate streams, an expected failure prints
no traceback, and `--help` starts without numpy. Everything else runs in process
(tests/cli/test_cli.py and friends, through typer's CliRunner)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocesses and brute force: .ci/run runs them


def console_script() -> str:
    exe = Path(sys.executable).with_name("prfaas-plan")
    if not exe.exists():
        pytest.skip("prfaas-plan console script not installed next to this Python")
    return str(exe)


def process(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prfaas_plan", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_console_script_plans_with_data_on_stdout_only(tmp_path):
    result = subprocess.run(
        [console_script(), "optimize", "-f", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert json.loads(result.stdout)["plan"]["prfaas_instances"] == 4


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["optimize", "--target-rps", "100"], 6, "no plan reaches 100 req/s"),
        (["optimize", "--bandwidth-gbps", "inf"], 3, "--bandwidth-gbps must be a finite number"),
        (["kv", "--kv-dtype", "int3"], 3, "--kv-dtype: unknown dtype 'int3'"),
    ],
)
def test_expected_failure_is_one_line_on_stderr_with_its_exit_status(args, code, fragment):
    result = process(*args)
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and fragment in line, line


def test_usage_error_exits_2_without_traceback():
    result = process("optimize", "--mode", "fastest")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_check_failure_reaches_the_shell(tmp_path):
    """A missing expectations file is a failed check (exit 8), reported on stdout."""
    from tests.cli.test_cli import data_copy

    data = data_copy(tmp_path)
    (data / "golden" / "expectations.yaml").unlink()
    result = process("check", str(data))
    assert result.returncode == 8, result.stderr
    assert "no expectations file" in result.stdout


def test_help_is_fast_and_imports_no_numpy():
    code = (
        "import sys; sys.argv = ['prfaas-plan', 'optimize', '--help']\n"
        "from prfaas_plan.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\n"
        "heavy = {'numpy', 'scipy', 'pulp', 'matplotlib', 'yaml'} & set(sys.modules)\n"
        "print(code, sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "--ttft-target-s" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "0 []"


def test_the_exit_skips_the_collectors_pass_and_keeps_the_output(tmp_path):
    """`main` moves what is alive at exit out of the cyclic collector's reach (gc.freeze, an
    atexit handler that runs before the teardown: a handler registered before `main` runs after
    it, and sees the objects frozen), and the command's output, on stdout and in --output, is
    whole."""
    written = tmp_path / "plan.json"
    code = (
        "import atexit, gc, sys\n"
        "assert gc.get_freeze_count() == 0\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        f"sys.argv = ['prfaas-plan', 'optimize', '-f', 'json', '-o', {str(written)!r}]\n"
        "from prfaas_plan.cli import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "frozen True"
    assert json.loads(written.read_text())["plan"]["threshold_tokens"] > 0


PLAN_RUN = (
    "import sys; sys.argv = ['prfaas-plan', 'optimize', '-f', 'json']\n"
    "from prfaas_plan.cli import main\n"
    "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
    "unused = {{'importlib.metadata', 'statistics', 'numpy.random', 'scipy', "
    "'prfaas_plan.use_cases.simulation_spec', 'prfaas_plan.cli.procure'}} & set(sys.modules)\n"
    "print({check}, sorted(unused), file=sys.stderr)"
)


@pytest.mark.parametrize(
    ("plugins", "stubbed"), [(None, True), ("__all__", True), ("1", True), ("logfire", False)]
)
def test_a_plan_imports_nothing_it_does_not_use(plugins, stubbed):
    """`optimize` leaves out what start-up would spend on modules it does not use: pydantic's
    plugin loader (importlib.metadata) when every plugin is off, `statistics` and numpy.random;
    with plugins named one by one, pydantic's own loader runs. PyYAML's pure reader's pattern
    is left to its first use (and re.compile is re.compile again); other commands' modules are
    not imported."""
    check = (
        "len(list(sys.modules['pydantic.plugin._loader'].get_plugins())), "
        "type(sys.modules['yaml'].reader.Reader.NON_PRINTABLE).__name__, "
        "sys.modules['re'].compile.__module__"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if plugins is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = plugins
    result = subprocess.run(
        [sys.executable, "-c", PLAN_RUN.format(check=check)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["plan"]["threshold_tokens"] > 0
    loader_answer, pattern, compile_restored, unused = result.stderr.strip().split(" ", 3)
    assert loader_answer == "0"  # no plugin, from either loader
    assert (pattern, compile_restored) == ("_CompiledWhenUsed", "re")
    expected = [] if stubbed else ["importlib.metadata"]
    assert unused == str(expected)


def test_usage_error_is_one_error_line_and_one_usage_line_in_a_real_process():
    result = process("optimize", "--bogus")
    assert result.returncode == 2 and result.stdout == ""
    error, usage = result.stderr.splitlines()
    assert error == "error: No such option: --bogus"
    assert usage.startswith("Usage: ") and "optimize [OPTIONS]" in usage and "--help" in usage


def test_a_huge_policy_comparison_is_refused_within_a_memory_limit():
    """compare-policies --requests 10^8 (9 GB before the up-front guard) under a 1.5 GB address
    space limit: refused in one line (exit 3 by the estimate, or 9 if the machine is so large
    that the estimate lets it start), never killed, no traceback."""
    resource = pytest.importorskip("resource")
    limit = 1536 * 2**20

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    result = subprocess.run(
        [sys.executable, "-m", "prfaas_plan", "compare-policies", "--requests", "100000000"],
        capture_output=True, text=True, timeout=120, preexec_fn=limited,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode in (3, 9), result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "requests" in line, line


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_stdout_on_a_full_device_is_one_line_with_the_resource_exit_code(fmt):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "prfaas_plan", "optimize", "-f", fmt],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 9
    assert result.stderr == (
        "error: stdout: cannot write the result: No space left on device; "
        "free space or write elsewhere\n"
    )
