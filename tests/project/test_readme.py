"""The README and the docs/ pages are executed, so they cannot rot: their example blocks are
what the commands print now, their `prfaas-plan ...` lines run (in process, typer's CliRunner),
the setup command and the example scripts as real processes. The README stays a five-minute
read: at most 250 lines, linking to the docs pages, each of which exists."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import run

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
SETUP_BLOCKS = re.findall(r"```bash\n(python3 -m venv .+?)\n```", README)
README_MAX_LINES = 250


def _update_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "update", ROOT / "scripts" / "update_readme_example.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UPDATE = _update_module()
# examples that run a simulation or enumerate a million plans: checked by .ci/run (-m slow)
SLOW_EXAMPLES = {"simulate-markdown", "compare-markdown", "procure-pareto-markdown"}


def console_script() -> str:
    """The installed `prfaas-plan` next to this interpreter (what the README's command runs)."""
    exe = Path(sys.executable).with_name("prfaas-plan")
    if not exe.exists():
        pytest.skip("prfaas-plan console script not installed next to this Python")
    return str(exe)


def test_readme_is_short_and_links_to_the_docs_pages():
    assert len(README.splitlines()) <= README_MAX_LINES
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)(?:#[\w-]+)?\)", README))
    assert len(linked) >= 8, linked
    assert all((ROOT / page).is_file() for page in linked), linked


def test_readme_gives_exactly_two_setup_commands():
    assert len(SETUP_BLOCKS) == 2
    run_main, run_tests = SETUP_BLOCKS
    assert run_main.endswith("prfaas-plan optimize")
    assert "pytest" in run_tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert SETUP_BLOCKS[1] in ci.splitlines()


@pytest.mark.slow
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


def test_every_example_block_is_in_exactly_one_document():
    blocks = UPDATE.blocks()
    assert set(blocks) == set(UPDATE.EXAMPLES)
    assert {name: len(found) for name, found in blocks.items() if len(found) != 1} == {}


EXAMPLE_PARAMS = [
    pytest.param(name, marks=[pytest.mark.slow] if name in SLOW_EXAMPLES else [], id=name)
    for name in UPDATE.EXAMPLES
]


@pytest.mark.parametrize("name", EXAMPLE_PARAMS)
def test_example_block_is_current(name):
    """Each `<!-- example:NAME -->` block (README or docs/) is exactly what its command prints
    now (scripts/update_readme_example.py rewrites them)."""
    ((document, shown),) = UPDATE.blocks()[name]

    def stdout(args):
        result = run(*args, cwd=ROOT)
        assert result.returncode == 0, (name, result.stderr)
        return result.stdout

    assert UPDATE.example_output(name, stdout) == shown, f"{document.name}: {name}"


@pytest.mark.parametrize(
    "example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_example_plans(example, tmp_path):
    result = run("optimize", example, "-f", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert '"speedup_vs_homogeneous"' in result.stdout


def _command_lines(text: str) -> list[str]:
    """The `prfaas-plan ...` lines of a document's bash blocks."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines += [line for line in block.splitlines() if line.startswith("prfaas-plan ")]
    return lines


def _resolved(line: str, tmp_path: Path) -> list[str]:
    """A document's command line as arguments run from `tmp_path`: the repository's files
    (examples/...) named from the checkout, everything the command writes into tmp_path."""
    command = shlex.split(line, comments=True)
    assert command[0] == "prfaas-plan"
    scenario = ROOT / "examples" / "case_study.yaml"
    return [
        str(scenario)
        if part == "my-scenario.yaml"
        else str(ROOT / part)
        if part.startswith("examples/")
        else part
        for part in command[1:]
    ]


README_COMMANDS = _command_lines(README)
NOT_RUN = {"prfaas-plan serve"}  # runs until stopped: tests/server/test_server_api.py serves it


README_PARAMS = [
    pytest.param(
        line,
        marks=[pytest.mark.slow] if line.split()[1] in {"sweep", "simulate"} else [],
        id=f"{i}-{line.split()[1]}",
    )
    for i, line in enumerate(README_COMMANDS)
]


def test_readme_shows_one_command_per_capability():
    capabilities = {line.split()[1] for line in README_COMMANDS}
    assert capabilities >= {
        "optimize", "egress", "procure", "sensitivity", "import-profile", "simulate", "sweep",
        "serve", "export", "check",
    }  # fmt: skip
    assert set(README_COMMANDS) >= NOT_RUN


@pytest.mark.parametrize("line", README_PARAMS)
def test_readme_commands_run(line, tmp_path):
    if line in NOT_RUN:
        assert run(*_resolved(line, tmp_path), "--help").returncode == 0
        return
    result = run(*_resolved(line, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr


PLAN_PAGE = (DOCS / "plan.md").read_text()
OTHER_COMMANDS = re.search(r"## Other things to ask\n\n```bash\n(.*?)```", PLAN_PAGE, re.S).group(1)


PLANNING_PARAMS = [
    pytest.param(
        line, marks=[pytest.mark.slow] if "--solver cbc" in line or "--plot" in line else []
    )
    for line in OTHER_COMMANDS.splitlines()
    if line.strip()
]


@pytest.mark.parametrize("line", PLANNING_PARAMS)
def test_planning_page_commands_run(line, tmp_path):
    result = run(*_resolved(line, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_planning_page_infeasible_message_is_current(tmp_path):
    quoted = re.search(r"`(error: no plan reaches 7 req/s.*?)`", PLAN_PAGE).group(1)
    result = run("optimize", "--target-rps", "7", cwd=tmp_path)
    assert result.returncode == 6
    assert result.stderr.strip() == quoted


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.sh")), ids=lambda p: p.name)
def test_every_example_script_runs(script):
    import os

    env = {**os.environ, "PATH": f"{Path(console_script()).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["sh", str(script), "--requests", "2000", "--format", "json"],
                            capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.lstrip().startswith("{")
