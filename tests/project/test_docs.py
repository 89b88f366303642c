"""The docs/ site holds together: every page is in mkdocs.yml's nav (and the other way round), the
commands page is what the CLI says (scripts/commands_reference.py), and the CI page's GitHub
Actions job and pre-commit hooks are valid YAML whose `prfaas-plan check` command runs on a
repository of profile tables. `mkdocs build --strict` itself (broken links) is a .ci/run step."""

import importlib.util
import re
import shlex

import yaml

from tests.cli.test_cli import data_copy, run
from tests.conftest import ROOT

DOCS = ROOT / "docs"
CI_PAGE = (DOCS / "ci.md").read_text()


def _nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_is_in_the_nav_once():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = _nav_pages(config["nav"])
    assert sorted(pages) == sorted(p.name for p in DOCS.glob("*.md"))
    assert len(pages) == len(set(pages))


def test_the_commands_page_is_current():
    spec = importlib.util.spec_from_file_location(
        "commands_reference", ROOT / "scripts" / "commands_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.PAGE.read_text()
    block = page.split(module.START, 1)[1].split(module.END, 1)[0]
    assert block == module.reference(), "run python scripts/commands_reference.py"


def _yaml_blocks() -> list:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", CI_PAGE, re.S)]


def test_the_github_actions_job_runs_check_with_a_junit_report(tmp_path):
    (workflow,) = [b for b in _yaml_blocks() if isinstance(b, dict) and "jobs" in b]
    steps = workflow["jobs"]["check"]["steps"]
    (command,) = [s["run"] for s in steps if "prfaas-plan check" in s.get("run", "")]
    report = next(s for s in steps if s.get("uses", "").startswith("mikepenz/action-junit-report"))
    assert report["if"] == "always()" and report["with"]["report_paths"] == "check.xml"
    # run it where the job would: a repository with data/ and models.yaml
    args = shlex.split(command.split(">>")[0])
    assert args[:3] == ["prfaas-plan", "check", "data"]
    repository = data_copy(tmp_path).parent
    result = run(*args[1:], cwd=repository)
    assert result.returncode == 0, result.stderr
    assert "PASS" in result.stdout and (repository / "check.xml").read_text().count("<testcase") > 4


def test_the_pre_commit_hooks_run_the_same_check():
    shipped = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = shipped
    assert hook["id"] == "prfaas-plan-check" and not hook["pass_filenames"]
    assert shlex.split(hook["entry"]) + hook["args"] == ["prfaas-plan", "check", "data"]
    pattern = re.compile(hook["files"])
    assert pattern.search("data/profiles/m/prefill/h200-x8/prefill_latency.csv")
    assert pattern.search("models.yaml") and not pattern.search("README.md")
    configs = [b for b in _yaml_blocks() if isinstance(b, dict) and "repos" in b]
    remote, local = (config["repos"][0] for config in configs)
    assert remote["hooks"] == [{"id": hook["id"]}]
    (local_hook,) = local["hooks"]
    assert local_hook["entry"] == "prfaas-plan check data"
    assert local_hook["files"] == hook["files"]


def test_the_exit_code_table_is_the_clis():
    """docs/errors.md's table: each error class at the code EXIT_CODES gives it, and check's 8."""
    from prfaas_plan.cli.failures import CHECK_FAILED_EXIT_CODE, EXIT_CODES

    page = (DOCS / "errors.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| (.*) \|$", page, re.M))
    for cls, code in EXIT_CODES.items():
        assert rows[str(code)].startswith(f"`{cls.__name__}`"), (cls, code)
    assert "check" in rows[str(CHECK_FAILED_EXIT_CODE)]
    assert {"0", "1", "2", "130"} <= set(rows)
    named = {m for row in rows.values() for m in re.findall(r"^`(\w+Error)`", row)}
    assert named == {cls.__name__ for cls in EXIT_CODES}
