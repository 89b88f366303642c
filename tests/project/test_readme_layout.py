"""The Layout section of docs/architecture.md is generated from the package, so it cannot drift."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "readme_layout", ROOT / "scripts" / "readme_layout.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layout_section_matches_the_package():
    gen = _generator()
    page = gen.PAGE.read_text()
    block = page.split(gen.START, 1)[1].split(gen.END, 1)[0]
    assert block == gen.layout(), (
        "docs/architecture.md Layout is stale: run python scripts/readme_layout.py"
    )


def test_every_module_and_folder_says_what_it_owns():
    gen = _generator()
    for path in sorted((ROOT / "prfaas_plan").rglob("*.py")):
        if "_bundled" in path.parts or (
            path.name == "__init__.py" and path.parent.name == "prfaas_plan"
        ):
            continue
        assert gen.summary(path), f"{path.relative_to(ROOT)} has no docstring"
