"""The README's commands and examples are executed, so they cannot rot: `prfaas-plan ...`
lines in process (typer's CliRunner), the setup command and the example scripts as real
processes."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import run

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SETUP_BLOCKS = re.findall(r"```bash\n(python3 -m venv .+?)\n```", README)


def console_script() -> str:
    """The installed `prfaas-plan` next to this interpreter (what the README's command runs)."""
    exe = Path(sys.executable).with_name("prfaas-plan")
    if not exe.exists():
        pytest.skip("prfaas-plan console script not installed next to this Python")
    return str(exe)


def test_readme_gives_exactly_two_setup_commands():
    assert len(SETUP_BLOCKS) == 2
    run_main, run_tests = SETUP_BLOCKS
    assert run_main.endswith("prfaas-plan optimize")
    assert "pytest" in run_tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert SETUP_BLOCKS[1] in ci.splitlines()


def test_readme_main_command_runs_from_another_directory(tmp_path):
    """The run half of the first command, executed from outside the checkout so that the
    installed package (and its bundled data) is what runs."""
    command = SETUP_BLOCKS[0].split("&& ")[-1]
    assert command == ".venv/bin/prfaas-plan optimize"
    result = subprocess.run(
        [console_script(), "optimize"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "PrfaaS-PD (plan)" in result.stdout and "4 / 3 / 5" in result.stdout


def test_example_blocks_are_current():
    """Every `<!-- example:NAME -->` block is exactly what its command prints now
    (scripts/update_readme_example.py rewrites them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "update", ROOT / "scripts" / "update_readme_example.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    blocks = dict(re.findall(r"<!-- example:([\w-]+) -->\n(.*?)<!-- /example -->", README, re.S))
    assert set(blocks) == set(module.EXAMPLES)
    for name in module.EXAMPLES:

        def stdout(args, name=name):
            result = run(*args, cwd=ROOT)
            assert result.returncode == 0, (name, result.stderr)
            return result.stdout

        assert module.example_output(name, stdout) == blocks[name], name


@pytest.mark.parametrize(
    "example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_plans(example, tmp_path):
    result = run("optimize", example, "-f", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert '"speedup_vs_homogeneous"' in result.stdout


OTHER_COMMANDS = re.search(r"### Other things to ask\n\n```bash\n(.*?)```", README, re.S).group(1)


@pytest.mark.parametrize("line", [c for c in OTHER_COMMANDS.splitlines() if c.strip()])
def test_readme_other_commands_run(line, tmp_path):
    command = shlex.split(line, comments=True)
    assert command[0] == "prfaas-plan"
    scenario = ROOT / "examples" / "case_study.yaml"
    args = [str(scenario) if part == "my-scenario.yaml" else part for part in command[1:]]
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_readme_infeasible_example_message_is_current(tmp_path):
    quoted = re.search(r"`(error: no plan reaches 7 req/s.*?)`", README).group(1)
    result = run("optimize", "--target-rps", "7", cwd=tmp_path)
    assert result.returncode == 6
    assert result.stderr.strip() == quoted


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.sh")), ids=lambda p: p.name)
def test_every_example_script_runs(script):
    import os

    env = {**os.environ, "PATH": f"{Path(console_script()).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["sh", str(script), "--requests", "2000", "--format", "json"],
                            capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.lstrip().startswith("{")
