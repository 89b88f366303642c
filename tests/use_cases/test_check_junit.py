"""`prfaas-plan check --junit-xml FILE`: valid JUnit XML (read back with xml.etree against the
JUnit structure CI systems read, and with junitparser, a JUnit-reading library), one test case
per table and per golden plan, failing exactly where `check` fails (its JSON report says where),
the moved figure and its tolerance in the failure text; the exit code is check's (8 on a
failure), and a bad --junit-xml is refused before any work."""

import json
import re
import shutil
import xml.etree.ElementTree as ET

import pytest
import yaml

from prfaas_plan.render.junit import check_junit_xml, tolerance_text
from prfaas_plan.use_cases.check import TOLERANCES, CheckReport, Drift
from prfaas_plan.use_cases.table_checks import Finding
from tests.cli.test_cli import assert_clean_error, data_copy, run
from tests.conftest import ROOT
from tests.use_cases.test_catalog import KV_TABLE, PREFILL_H20, rewrite_csv, scale_column, write


def junit_structure(text: str) -> dict[str, str | None]:
    """Check `text` against the JUnit XML structure (testsuites > testsuite > testcase, at most
    one failure or error each with a message, counts that add up); {case: failure text or None}."""
    root = ET.fromstring(text.encode())
    assert root.tag == "testsuites" and root.get("name")
    cases: dict[str, str | None] = {}
    total = failed = 0
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name")
        assert {c.tag for c in suite} <= {"testcase"}
        tests = list(suite)
        failures = [c for c in tests if c.find("failure") is not None]
        assert int(suite.get("tests")) == len(tests) and int(suite.get("failures")) == len(failures)
        assert suite.get("errors") == "0" and suite.get("skipped") == "0"
        float(suite.get("time"))
        for case in tests:
            assert case.get("classname") and case.get("name")
            float(case.get("time"))
            children = list(case)
            assert len(children) <= 1 and all(c.tag == "failure" for c in children)
            key = f"{case.get('classname')}::{case.get('name')}"
            assert key not in cases, f"test case {key} twice"
            if children:
                assert children[0].get("message") and children[0].get("type")
                assert children[0].text.startswith(children[0].get("message").split(" (and ")[0])
            cases[key] = children[0].text if children else None
        total, failed = total + len(tests), failed + len(failures)
    assert int(root.get("tests")) == total and int(root.get("failures")) == failed
    return cases


def read_with_junitparser(path) -> dict[str, bool]:
    """{classname::name: passed} as a JUnit-reading library sees the file."""
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {f"{c.classname}::{c.name}": c.is_passed for suite in xml for c in suite}


def checked(data, tmp_path, *extra):
    """Run check on `data` with --junit-xml: (exit code, JSON report, {case: failure}, parsed)."""
    target = tmp_path / "check.xml"
    given = [data] if data is not None else []
    result = run("check", *given, "-f", "json", "--junit-xml", target, *extra)
    doc = json.loads(result.stdout)
    cases = junit_structure(target.read_text(encoding="utf-8"))
    assert read_with_junitparser(target) == {k: v is None for k, v in cases.items()}
    return result.returncode, doc, cases


def failing_where_check_fails(doc) -> set[str]:
    """The test cases `check`'s own report says fail: each finding's case, each moved scenario."""
    tables = set(doc["tables"])
    failing = set()
    for f in doc["findings"]:
        if f["case"] in tables:
            failing.add(f"prfaas-plan.check.tables::{f['case']}")
        else:
            failing.add(f"prfaas-plan.check.golden::{f['case'] or 'expectations'}")
    failing |= {f"prfaas-plan.check.golden::{m['scenario']}" for m in doc["moved"]}
    return failing


def test_the_shipped_data_passes_one_case_per_table_and_golden_plan(tmp_path):
    code, doc, cases = checked(None, tmp_path)
    assert code == 0 and doc["ok"]
    assert all(failure is None for failure in cases.values())
    tables = {k.split("::", 1)[1] for k in cases if k.startswith("prfaas-plan.check.tables::")}
    golden = {k.split("::", 1)[1] for k in cases if k.startswith("prfaas-plan.check.golden::")}
    assert tables == set(doc["tables"]) and len(tables) == doc["tables_checked"]
    assert golden == set(doc["scenarios"])
    assert "data/profiles/internal-1t-hybrid/prefill/h200-x8" in tables
    assert "models.yaml" in tables


def drop_derivation(d):
    (d / "profiles/minimax-m2.5/prefill/h200-x8/kv_throughput.csv").unlink()


def bad_folder(d):
    shutil.copytree(d / "profiles/internal-1t-hybrid/prefill/h200-x8",
                    d / "profiles/internal-1t-hybrid/prefill/h200")  # fmt: skip


def retire_case_study(d):
    path = d / "golden/expectations.yaml"
    document = yaml.safe_load(path.read_text())
    document["scenarios"]["retired.yaml"] = document["scenarios"].pop("case_study.yaml")
    path.write_text(yaml.safe_dump(document))


# one row per corruption: what is done to a copy of the data, the test cases that must fail
# (every other case passes), and a fragment of the first failing case's text
CORRUPTIONS = [
    (lambda d: rewrite_csv(d / PREFILL_H20, lambda rows: [rows[1], rows[0], *rows[2:]]),
     {"tables::{data}/profiles/internal-1t-hybrid/prefill/h20-x8",
      "golden::case_study.yaml", "golden::histogram_workload.yaml",
      "golden::observed_lengths.yaml", "golden::prefix_bands.yaml"},
     "must be strictly increasing"),
    (lambda d: rewrite_csv(d / KV_TABLE, scale_column(2)),
     {"tables::{data}/profiles/internal-1t-hybrid/kv/bf16", "golden::case_study.yaml",
      "golden::histogram_workload.yaml", "golden::observed_lengths.yaml",
      "golden::prefix_bands.yaml"},
     "from the architecture estimate"),
    (drop_derivation, {"tables::{data}/profiles/minimax-m2.5/prefill/h200-x8"},
     "needs the Φ_kv table it was derived from"),
    (bad_folder, {"tables::{data}/profiles/internal-1t-hybrid/prefill/h200"},
     "<gpu>-x<gpus per instance>"),
    (lambda d: write(d / "golden/expectations.yaml", "scenarios: [a, b]\n"),
     {"golden::expectations"}, "scenarios"),
    (retire_case_study, {"golden::retired.yaml", "golden::case_study.yaml"}, "scenario missing"),
]  # fmt: skip


@pytest.mark.parametrize(
    "corrupt, failing, fragment",
    CORRUPTIONS,
    ids=["unsorted table", "KV table 2x", "derivation missing", "bad folder name",
         "bad expectations file", "retired golden scenario"],
)  # fmt: skip
def test_cases_fail_exactly_where_check_fails(tmp_path, corrupt, failing, fragment):
    data = data_copy(tmp_path)
    corrupt(data)
    code, doc, cases = checked(data, tmp_path)
    assert code == 8 and not doc["ok"]
    failed = {k for k, failure in cases.items() if failure is not None}
    assert failed == failing_where_check_fails(doc)
    assert failed == {f"prfaas-plan.check.{c.format(data=data)}" for c in failing}
    assert any(fragment in cases[k] for k in failed), cases


def test_a_moved_plan_names_the_figure_and_its_tolerance(tmp_path):
    data = data_copy(tmp_path)
    rewrite_csv(data / PREFILL_H20, scale_column(0.84))  # physically fine, the plans move
    code, doc, cases = checked(data, tmp_path)
    assert code == 8 and not doc["findings"]
    failed = {k for k, failure in cases.items() if failure is not None}
    assert failed == failing_where_check_fails(doc)
    text = cases["prfaas-plan.check.golden::case_study.yaml"]
    moved = next(m for m in doc["moved"] if m["key"] == "plan.threshold_tokens"
                 and m["scenario"] == "case_study.yaml")  # fmt: skip
    assert (
        f"plan.threshold_tokens: expected {moved['expected']:.6g}, found {moved['found']:.6g} "
        f"({moved['relative_change']:+.2%}); tolerance ±1%"
    ) in text
    assert f"inputs changed since the expectations were written: {PREFILL_H20}" in text
    shown = re.search(r"```text\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), re.S).group(1)
    assert text + "\n" == shown  # docs/ci.md shows this very failure
    # the same run with --update blesses the change: every case passes, exit 0
    code, _, cases = checked(data, tmp_path, "--update")
    assert code == 0 and all(failure is None for failure in cases.values())


@pytest.mark.parametrize(
    "key, shown",
    [("plan.system_rps", "±0.5%"), ("naive.threshold_tokens", "±1%"),
     ("plan.pd_decode_instances", "exact"), ("plan.gone", "none (an output check no longer produces)")],
)  # fmt: skip
def test_tolerance_text(key, shown):
    assert tolerance_text(key) == shown
    assert set(TOLERANCES) >= {"system_rps", "threshold_tokens", "pd_decode_instances"}


def test_a_message_xml_cannot_hold_is_still_valid_xml():
    """A finding may quote a hostile file: control characters become U+FFFD, markup is escaped."""
    report = CheckReport(
        data_dir="d", tables_checked=1, tables=("t<&>\x00",),
        findings=(Finding("t", "bad \x01 value ]]> <x/>", "t<&>\x00"),),
        drifts=(Drift("s.yaml", "plan.system_rps", 3.0, None),), scenarios=("s.yaml",),
        planned=("s.yaml",), expectations_file="e", expectations_present=True, updated=False,
        update_refused=False, changed_inputs={},
    )  # fmt: skip
    cases = junit_structure(check_junit_xml(report))
    assert cases["prfaas-plan.check.tables::t<&>\ufffd"] == "t: bad \ufffd value ]]> <x/>"
    assert "expected 3, found (none); tolerance ±0.5%" in cases["prfaas-plan.check.golden::s.yaml"]


@pytest.mark.parametrize(
    "target, fragment",
    [("{tmp}/missing/check.xml", "--junit-xml: directory"),
     ("{tmp}", "--junit-xml: "),
     ("{tmp}/report.json", "--output and --junit-xml name the same file")],
    ids=["no such directory", "a directory", "the --output file"],
)  # fmt: skip
def test_a_bad_junit_target_is_refused_before_any_work(tmp_path, target, fragment):
    path = target.format(tmp=tmp_path)
    result = run("check", "--junit-xml", path, "-o", tmp_path / "report.json")
    assert_clean_error(result, 3, fragment)
    assert not (tmp_path / "report.json").exists()
