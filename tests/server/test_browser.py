"""The what-if page in a real browser: Debian's headless Chromium (playwright pointed at
/usr/bin/chromium) against `prfaas-plan serve` running in uvicorn on 127.0.0.1. Moving the
bandwidth slider with the keyboard re-plans, and the table shown is the API's for that scenario;
"Download deployment" saves the API's export of the plan shown.

A slow test (.ci/run runs it). Without Chromium (a fresh machine with only Python) it skips,
saying so in one line; PRFAAS_PLAN_REQUIRE_BROWSER=1, which .ci/run sets after installing
Chromium, makes that a failure, so CI always runs the real browser.
PRFAAS_PLAN_SCREENSHOT=docs/serve.png also saves the screenshot docs/serve.md shows."""

import json
import os
import shutil
import urllib.request
import zipfile
from pathlib import Path

import pytest

from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import load_scenario
from tests.browser import CHROMIUM, chromium_page, served

pytestmark = pytest.mark.slow
REQUIRE_BROWSER = os.environ.get("PRFAAS_PLAN_REQUIRE_BROWSER") == "1"


def require_chromium() -> None:
    """Skip in one line when Chromium is absent; fail instead under PRFAAS_PLAN_REQUIRE_BROWSER=1."""
    if shutil.which(CHROMIUM):
        return
    reason = f"{CHROMIUM} is missing (apt-get install chromium)"
    if REQUIRE_BROWSER:
        pytest.fail(f"{reason}; PRFAAS_PLAN_REQUIRE_BROWSER=1 requires the browser test")
    pytest.skip(reason)


def api(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def shown_table(page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#plan-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def wait_for_plan(page, renders: int, bandwidth_gbps: int) -> None:
    page.wait_for_selector(
        f"#plan-table[data-renders='{renders}'][data-bandwidth-gbps='{bandwidth_gbps}']",
        timeout=20_000,
    )


def test_moving_the_bandwidth_slider_replans_as_the_api(tmp_path):
    require_chromium()
    case = load_scenario(default_scenario_file()).model_dump(mode="json")
    with served() as url, chromium_page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url + "/")
        wait_for_plan(page, 1, 100)
        first = shown_table(page)

        def expected(bandwidth_gbps: int) -> tuple[list[list[str]], float]:
            scenario = {**case, "link": {"bandwidth_gbps": bandwidth_gbps}}
            answer = api(url, "/api/v1/whatif", {"scenario": scenario, "mode": "paper"})
            plan = api(url, "/api/v1/plan", {"scenario": scenario})
            assert answer["plan"] == plan
            rows = [[label, *cells] for label, cells in answer["view"]["rows"]]
            return rows, plan["plan"]["throughput_rps"]["system"]

        rows, system_rps = expected(100)
        assert first == rows

        slider = page.get_by_label("Link bandwidth (Gbps)")
        slider.focus()
        page.keyboard.press("Home")  # keyboard only: the slider's minimum, 1 Gbps
        wait_for_plan(page, 2, 1)
        rows_1, system_1 = expected(1)
        assert shown_table(page) == rows_1
        assert float(page.get_attribute("#plan-table", "data-system-rps")) == system_1
        assert system_1 < system_rps  # a 1 Gbps link binds: the plan changed
        assert "1 Gbps" in page.inner_text("#bandwidth_out")

        for _ in range(9):  # one step each, one plan after the last (debounced)
            page.keyboard.press("ArrowRight")
        wait_for_plan(page, 3, 10)
        rows_10, _ = expected(10)
        assert shown_table(page) == rows_10
        assert page.inner_text("#status").startswith("planned in")

        with page.expect_download() as download:
            page.get_by_role("button", name="Download plan (JSON)").click()
        scenario_10 = {**case, "link": {"bandwidth_gbps": 10}}
        saved = json.loads(Path(download.value.path()).read_text())
        assert saved == api(url, "/api/v1/plan", {"scenario": scenario_10})
        with page.expect_download() as download:
            page.get_by_role("button", name="Download plan (Markdown)").click()
        markdown = Path(download.value.path()).read_text()
        assert markdown.startswith("## prfaas-plan · paper-case-study") and "| Λ_max" in markdown

        # the plan shown, as Dynamo's manifests: the zip holds the API's files for that plan
        page.get_by_label("Stack").select_option("dynamo")  # choosing a stack does not re-plan
        with page.expect_download() as download:
            page.get_by_role("button", name="Download deployment (zip)").click()
        assert download.value.suggested_filename == "paper-case-study-dynamo.zip"
        with zipfile.ZipFile(download.value.path()) as archive:
            zipped = {e.filename: archive.read(e).decode() for e in archive.infolist()}
        files = api(url, "/api/v1/export", {"scenario": scenario_10, "mode": "paper",
                                            "target": "dynamo"})  # fmt: skip
        assert zipped == {f"paper-case-study-dynamo/{path}": text for path, text in files.items()}
        assert {"NOTE.md", "note.json", "sites/pd/dynamo-graph.yaml"} <= set(files)
        shown_rps = float(page.get_attribute("#plan-table", "data-system-rps"))
        assert json.loads(files["note.json"])["plan"]["system_rps"] == shown_rps
        page.wait_for_selector("#export-status:has-text('downloaded paper-case-study-dynamo.zip')")
        assert page.get_attribute("#plan-table", "data-renders") == "3"

        # the Procure panel, by keyboard: the cheapest deployment for 4 req/s and the frontiers
        target = page.get_by_label("Target (req/s)")
        target.fill("4")
        target.press("Enter")
        page.wait_for_selector("#procure[data-runs='1']", timeout=60_000)
        assert page.inner_text("#procure-status").startswith("procured in")
        procured = {"scenario": scenario_10, "mode": "paper"}
        chosen = api(url, "/api/v1/procure", {**procured, "target_rps": 4})
        shown_usd = float(page.get_attribute("#procure-summary", "data-usd-per-hour"))
        assert shown_usd == chosen["usd_per_hour_total"]
        summary = page.inner_text("#procure-summary")
        assert f"{chosen['usd_per_hour_total']:,.1f} $/h" in summary
        assert f"bound by {chosen['bound'].replace('_', ' ', 1)}" in summary
        total_row = page.eval_on_selector_all(
            "#procure-table tbody tr", "rows => [...rows.at(-1).cells].map(c => c.textContent)"
        )
        assert total_row[0] == "total" and total_row[-1] == f"{chosen['usd_per_hour_total']:,.1f}"
        pareto = api(url, "/api/v1/procure/pareto", {**procured, "target_rps": 4})
        for chart, frontier in (("capacity", "capacity_frontier"), ("ttft", "ttft_frontier")):
            svg = f"#pareto-{chart}"
            assert int(page.get_attribute(svg, "data-plans")) == len(pareto[frontier])
            drawn = page.eval_on_selector_all(f"{svg} circle.frontier-plan", "c => c.length")
            assert drawn == int(page.get_attribute(svg, "data-shown")) > 0
            assert page.locator(f"{svg} polygon title").count() >= 3  # baselines, scenario

        shot = tmp_path / "serve.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if target := os.environ.get("PRFAAS_PLAN_SCREENSHOT"):
            Path(target).write_bytes(shot.read_bytes())

        # a scenario file loaded through the page: read by the server's strict loader
        uploaded = tmp_path / "bigger.yaml"
        uploaded.write_text(
            default_scenario_file().read_text().replace("instances: 8", "instances: 12")
        )
        page.set_input_files("#file", str(uploaded))
        wait_for_plan(page, 4, 100)
        assert page.input_value("#pd_instances") == "12"
        scenario_12 = {**case, "pd_cluster": {**case["pd_cluster"], "instances": 12}}
        answer = api(url, "/api/v1/whatif", {"scenario": scenario_12, "mode": "paper"})
        assert shown_table(page) == [[label, *cells] for label, cells in answer["view"]["rows"]]
        assert errors == []
