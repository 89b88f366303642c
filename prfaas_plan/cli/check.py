"""`check`: the CI regression check of the tables and the golden plans."""

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CHECK_FAILED_EXIT_CODE, CliCommand, flagged
from prfaas_plan.cli.options import (
    FormatOpt,
    OutputFormat,
    OutputOpt,
    check_distinct_outputs,
    source,
)
from prfaas_plan.cli.output import emit
from prfaas_plan.errors import ConfigError


def _junit_name(text: str) -> Path:
    from prfaas_plan.inputs.files import check_name

    return check_name(text, "junit_xml")


def _junit_target(value: Path | None) -> Path | None:
    """--junit-xml is checked before any work, as --output is (a regular file or a new path)."""
    from prfaas_plan.inputs.files import check_target

    if value is not None:
        check_target(value, "junit_xml")
    return value


@app.command("check", cls=CliCommand)
def check_command(
    data_dir: Annotated[
        Path | None,
        typer.Argument(
            help="Data directory to check (default: the shipped data/).",
            callback=source("data directory"),
        ),
    ] = None,
    update: Annotated[
        bool,
        typer.Option(
            "--update", help="Rewrite <data>/golden/expectations.yaml from the current data."
        ),
    ] = False,
    scenario: Annotated[
        list[Path] | None,
        typer.Option(
            "--scenario",
            help="Golden scenario (repeatable; default: the shipped examples).",
            callback=source("scenario"),
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.TABLE,
    output: OutputOpt = None,
    junit_xml: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml",
            help="Also write the report as JUnit XML for a CI system: one test case per table "
            "and per golden plan, failing where the check fails (atomically).",
            callback=_junit_target,
            parser=_junit_name,
        ),
    ] = None,
) -> None:
    """CI regression check: validate every table against schema and physics, re-plan the golden
    scenarios and compare with the committed expectations. Exits 8 when anything fails."""
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.resources import is_installed_copy
    from prfaas_plan.render.catalog import check_json, check_view
    from prfaas_plan.use_cases.check import check

    catalog = Catalog.open(data_dir)
    if update and is_installed_copy(catalog.data_dir):
        raise ConfigError(
            f"--update would rewrite the installed package's data ({catalog.data_dir}); "
            "pass the data directory of your checkout, e.g. prfaas-plan check data --update"
        )
    check_distinct_outputs(output, None, **{"junit-xml": junit_xml})
    report = check(catalog, scenario or None, update=update)
    # findings name the request's fields (`update`): shown with their flags, as an error is
    findings = tuple(dataclasses.replace(f, message=flagged(f.message)) for f in report.findings)
    report = dataclasses.replace(report, findings=findings)
    emit(check_view(report), check_json(report), fmt, output)
    if junit_xml is not None:
        from prfaas_plan.inputs.files import write_atomically, write_text
        from prfaas_plan.render.junit import check_junit_xml

        document = check_junit_xml(report)
        write_atomically(junit_xml, lambda tmp: write_text(tmp, document), "junit_xml")
    if not report.ok:
        raise typer.Exit(CHECK_FAILED_EXIT_CODE)
