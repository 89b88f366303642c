"""Generate the Layout section of docs/architecture.md from the package itself: one line per folder
and module, each with the first sentence of its docstring; and the README's Layout section, one
entry per folder (its docstring's first paragraph), lowest layer first.
tests/project/test_readme_layout.py fails when either block differs, so neither can drift;
refresh them with

    python scripts/readme_layout.py
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "prfaas_plan"
PAGE = ROOT / "docs" / "architecture.md"
START, END = "<!-- layout -->\n", "<!-- /layout -->"
README = ROOT / "README.md"
FOLDERS_START, FOLDERS_END = "<!-- folders -->\n", "<!-- /folders -->"
# the folders in the order of their layers (tests/project/test_layering.py ranks them)
LAYER_ORDER = ("analytic", "solve", "sim", "symbolic", "inputs", "use_cases", "render", "export",
               "server", "sweep", "cli")  # fmt: skip
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


def folders() -> str:
    """One entry per folder, lowest layer first: its docstring's first paragraph."""
    found = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    missing = sorted(set(found) - set(LAYER_ORDER))
    if missing:
        raise SystemExit(f"scripts/readme_layout.py: LAYER_ORDER lacks {missing}")
    base = ", ".join(f"`{p.name}`" for p in sorted(PACKAGE.glob("*.py")) if p.name[0] != "_")
    lines = [f"- {base}: units, errors, choices and plausibility bounds, imported by every layer."]
    for name in LAYER_ORDER:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        lines.append(f"- `{name}/`: " + " ".join(doc.split("\n\n")[0].split()))
    return "\n".join(lines) + "\n"


def _replace(path: Path, start: str, end: str, block: str) -> None:
    pattern = re.escape(start) + ".*?" + re.escape(end)
    path.write_text(re.sub(pattern, lambda _: start + block + end, path.read_text(), flags=re.S))


def main() -> None:
    _replace(PAGE, START, END, layout())
    _replace(README, FOLDERS_START, FOLDERS_END, folders())


if __name__ == "__main__":
    main()
