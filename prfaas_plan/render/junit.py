"""`prfaas-plan check --junit-xml FILE`: the check's report as JUnit XML, the test report format
CI systems read (GitHub Actions test reporters, GitLab, Jenkins). One test suite for the tables
(one test case each file or table folder checked) and one for the golden plans (one test case each
golden scenario, plus one for the expectations file when it is missing or unreadable); a test
case fails exactly where `check` reports a finding or a moved output, its failure text naming the
output, the expected and found figures, the change and the tolerance (use_cases/check.py
TOLERANCES). Nothing is timed: every `time` is 0."""

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from prfaas_plan.use_cases.check import TOLERANCES, CheckReport, Drift
from prfaas_plan.use_cases.table_checks import Finding

SUITE = "prfaas-plan check"
TABLES_CLASS = "prfaas-plan.check.tables"
GOLDEN_CLASS = "prfaas-plan.check.golden"
EXPECTATIONS_CASE = "expectations"  # the test case of a missing or unreadable expectations file
# characters XML 1.0 cannot hold (a message may quote a hostile file): shown as U+FFFD
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def tolerance_text(key: str) -> str:
    """What output `key` (e.g. plan.system_rps) may move by: 'exact', '±0.5%' or 'none'."""
    tolerance = TOLERANCES.get(key.split(".", 1)[-1])
    if tolerance is None:
        return "none (an output check no longer produces)"
    absolute, relative = tolerance
    parts = [f"±{relative * 100:g}%"] if relative else []
    parts += [f"±{absolute:g}"] if absolute else []
    return " + ".join(parts) or "exact"


def _figure(value: float | None) -> str:
    return "(none)" if value is None else f"{value:.6g}"


def drift_text(drift: Drift) -> str:
    """One moved output: 'plan.system_rps: expected 3.24922, found 3.1 (-4.59%); tolerance ±0.5%'."""
    if drift.key.startswith("("):  # a scenario missing, or new
        return f"{drift.scenario}: {drift.key.strip('()')}"
    change = "" if drift.change is None else f" ({drift.change:+.2%})"
    return (
        f"{drift.key}: expected {_figure(drift.expected)}, found {_figure(drift.found)}{change}; "
        f"tolerance {tolerance_text(drift.key)}"
    )


def _finding_text(finding: Finding) -> str:
    return f"{finding.where}: {finding.message}" if finding.where else finding.message


def _case(suite: ET.Element, classname: str, name: str, failures: Sequence[str], kind: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=_text(name), time="0")
    if failures:
        first = failures[0] + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
        failure = ET.SubElement(case, "failure", message=_text(first), type=kind)
        failure.text = _text("\n".join(failures))


def _suite(parent: ET.Element, name: str) -> ET.Element:
    return ET.SubElement(parent, "testsuite", name=name)


def _count(element: ET.Element) -> tuple[int, int]:
    cases = element.iter("testcase")
    tests = failures = 0
    for case in cases:
        tests += 1
        failures += case.find("failure") is not None
    return tests, failures


def _totals(element: ET.Element) -> None:
    tests, failures = _count(element)
    element.set("tests", str(tests))
    element.set("failures", str(failures))
    element.set("errors", "0")
    element.set("skipped", "0")
    element.set("time", "0")


def check_junit_xml(report: CheckReport) -> str:
    """The JUnit XML document of a check report (UTF-8 text, with its XML declaration)."""
    root = ET.Element("testsuites", name=SUITE)
    tables = _suite(root, f"{SUITE}: tables in {_text(report.data_dir)}")
    by_case: dict[str, list[str]] = {}
    for finding in report.findings:
        by_case.setdefault(finding.case, []).append(_finding_text(finding))
    for table in report.tables:
        _case(tables, TABLES_CLASS, table, by_case.get(table, []), "table")
    golden = _suite(root, f"{SUITE}: golden plans against {_text(report.expectations_file)}")
    moved: dict[str, list[str]] = {}
    for drift in report.drifts:
        moved.setdefault(drift.scenario, []).append(drift_text(drift))
    for name, files in report.changed_inputs.items():
        moved.setdefault(name, []).append(
            "inputs changed since the expectations were written: "
            + (", ".join(files) or "none (the code changed, or the expectations were edited)")
        )
    scenarios = list(report.scenarios) + [s for s in moved if s not in report.scenarios]
    for scenario in scenarios:
        failures = by_case.get(scenario, []) + moved.get(scenario, [])
        _case(golden, GOLDEN_CLASS, scenario, failures, "moved" if scenario in moved else "plan")
    # findings of no table or scenario (the expectations file), each its own test case
    for case in sorted(set(by_case) - set(report.tables) - set(scenarios)):
        _case(golden, GOLDEN_CLASS, case or EXPECTATIONS_CASE, by_case[case], "expectations")
    for suite in (tables, golden):
        _totals(suite)
    _totals(root)
    root.attrib.pop("skipped")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
