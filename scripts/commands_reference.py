"""Generate docs/commands.md's reference block (`<!-- commands -->` ... `<!-- /commands -->`) from
the CLI itself: each command's usage, its help and a table of its arguments and options with
their help text, as `--help` shows them. tests/project/test_docs.py fails when the block differs, so
the page cannot drift; refresh it with

    python scripts/commands_reference.py
"""

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "commands.md"
START, END = "<!-- commands -->\n", "<!-- /commands -->"
# the page each command's topic is explained on
TOPIC = {
    "optimize": "plan.md", "evaluate": "plan.md", "kv": "catalog.md", "egress": "catalog.md",
    "simulate": "simulation.md", "compare-policies": "simulation.md", "check": "ci.md",
    "explain": "sensitivity.md", "sensitivity": "sensitivity.md", "import-profile": "import.md",
    "procure": "procurement.md", "serve": "serve.md", "sweep": "sweeps.md",
    "sweep-report": "sweeps.md", "export": "export.md",
}  # fmt: skip


TITLE = {
    "plan.md": "planning", "catalog.md": "the catalog and the bandwidth wall",
    "simulation.md": "simulation", "ci.md": "CI regression checks",
    "sensitivity.md": "sensitivity and explain", "import.md": "importing your own data",
    "procurement.md": "procurement and prices", "serve.md": "the page and the HTTP API",
    "sweeps.md": "sweeps", "export.md": "export",
}  # fmt: skip


def _cell(text: str) -> str:
    """Help text as one Markdown table cell (pipes and angle brackets escaped)."""
    text = " ".join(text.split()).replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _values(param: Any, ctx: Any) -> str:
    """What a parameter takes, as --help shows it (`paper|exact`, `float`, a flag)."""
    if getattr(param, "is_flag", False):
        return "flag"
    shown = str(param.display_type(ctx)).strip("<>")
    return " \\| ".join(f"`{value}`" for value in shown.split("|")) if shown else ""


def reference() -> str:
    """The block: one section per command, in --help order."""
    import typer

    from prfaas_plan.cli import app
    from prfaas_plan.cli.failures import flagged

    group = typer.main.get_command(app)
    out: list[str] = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        ctx = command.make_context(name, [], resilient_parsing=True)
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        usage = " ".join(
            [f"prfaas-plan {name}", "[OPTIONS]"]
            + [
                (a.name or "").upper() + ("..." if a.nargs == -1 else "")
                if a.required
                else f"[{(a.name or '').upper()}{'...' if a.nargs == -1 else ''}]"
                for a in arguments
            ]
        )
        out += [f"## {name}", "", f"`{usage}`", ""]
        out += [_cell(command.help or ""), ""]
        topic = TOPIC.get(name)
        if topic:
            out += [f"Explained in [{TITLE[topic]}]({topic}).", ""]
        out += ["| argument or option | values | what it does |", "|---|---|---|"]
        for param in command.params:
            if param.param_type_name == "argument":
                label = (param.name or "").upper()
            else:
                label = ", ".join(param.opts + list(param.secondary_opts))
            required = " (required)" if param.required and param.param_type_name == "option" else ""
            out.append(
                f"| `{label}`{required} | {_values(param, ctx)} | {_cell(flagged(getattr(param, 'help', None) or ''))} |"
            )
        out.append("")
    return "\n".join(out)


def main() -> None:
    text = PAGE.read_text()
    pattern = re.escape(START) + ".*?" + re.escape(END)
    PAGE.write_text(re.sub(pattern, lambda _: START + reference() + END, text, flags=re.S))


if __name__ == "__main__":
    main()
