"""Every `--help` reads as prose: each command's help is rendered (typer's rich panels, in
process) and searched for the marks of text that went missing, such as a space before a full
stop where rich took a bracketed default for a markup tag and dropped it ("...to price the link
with ." for "...with [cheapest wide enough]."). One row per command."""

import re

import pytest
import typer
from typer.testing import CliRunner

from prfaas_plan.cli import app

COMMAND = typer.main.get_command(app)
NAMES = sorted(COMMAND.commands)  # type: ignore[attr-defined]
STRAY = [
    (re.compile(r"\s[.,;:!?](?!\w)"), "a space before punctuation"),
    (re.compile(r"\(\s*\)|\[\s*\]"), "empty brackets"),
    (re.compile(r"\(\s|\s\)"), "a space inside brackets"),
    (re.compile(r"[,;:][.,;:]|\.[,;:]|,\s+\."), "doubled punctuation"),
]
# what rich reads as a markup tag (and drops) in help text: [ followed by a lowercase letter,
# #, / or @ (rich's own rule), e.g. "[on-demand]"
MARKUP_TAG = re.compile(r"(?<!\\)\[[a-z#/@][^\]\[]*\]")


def rendered_help(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "2000", "NO_COLOR": "1", "TERM": "dumb"}).invoke(
        app, [*args, "--help"]
    )
    assert result.exit_code == 0, result.output
    return result.output


def help_lines(text: str) -> list[str]:
    """The prose of a rendered help: box-drawing borders stripped, columns of the option table
    split apart (two or more spaces separate them)."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip().strip("│╭╮╰╯─ ").strip()
        lines += [cell for cell in re.split(r"\s{2,}", line) if cell]
    return lines


@pytest.mark.parametrize("name", ["(prfaas-plan)", *NAMES])
def test_help_reads_as_prose(name):
    text = rendered_help(*([] if name == "(prfaas-plan)" else [name]))
    problems = [
        f"{why}: {cell!r}"
        for cell in help_lines(text)
        for pattern, why in STRAY
        if pattern.search(cell)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", NAMES)
def test_no_help_text_holds_what_rich_takes_for_markup(name):
    """A help string rich would cut (checked on the declared text, so also for options whose
    rendered cell happens to read well without the cut part)."""
    command = COMMAND.commands[name]  # type: ignore[attr-defined]
    texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
    assert not [t for t in texts if MARKUP_TAG.search(t)]


def test_the_two_cuts_the_issue_found_now_read_whole():
    optimize = " ".join(help_lines(rendered_help("optimize")))
    assert (
        "to price the link with (default: the cheapest wide enough; owned: already paid for)."
        in optimize
    )
    assert "on-demand or tco (default: on-demand)." in optimize
