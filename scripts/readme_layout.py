"""Generate the Layout section of docs/architecture.md from the package itself: one line per folder
and module, each with the first sentence of its docstring. tests/project/test_readme_layout.py fails when
the page's block differs, so the section cannot drift; refresh it with

    python scripts/readme_layout.py
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "prfaas_plan"
PAGE = ROOT / "docs" / "architecture.md"
START, END = "<!-- layout -->\n", "<!-- /layout -->"
NAME_WIDTH = 24


def summary(path: Path) -> str:
    """First sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=[a-z0-9)`'])\.\s+(?=[A-Z`(])", paragraph, maxsplit=1)[0].rstrip(".")


def layout() -> str:
    """The tree as a fenced block: folders (layers) after the base modules, in import order."""
    lines = ["prfaas_plan/"]

    def entry(depth: int, name: str, path: Path) -> None:
        label = "  " * depth + name
        lines.append(f"{label:<{NAME_WIDTH}}{summary(path)}".rstrip())

    modules = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    for path in modules:
        entry(1, path.name, path)
    for folder in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        entry(1, folder.name + "/", folder / "__init__.py")
        for path in sorted(folder.glob("*.py")):
            if path.name != "__init__.py":
                entry(2, path.name, path)
    return "```\n" + "\n".join(lines) + "\n```\n"


def main() -> None:
    text = PAGE.read_text()
    pattern = re.escape(START) + ".*?" + re.escape(END)
    PAGE.write_text(re.sub(pattern, lambda _: START + layout() + END, text, flags=re.S))


if __name__ == "__main__":
    main()
