"""The Layout sections of docs/architecture.md and README.md are generated from the package, so
they cannot drift."""

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


def test_the_readmes_layout_lists_every_folder_as_its_docstring_says():
    gen = _generator()
    readme = gen.README.read_text()
    block = readme.split(gen.FOLDERS_START, 1)[1].split(gen.FOLDERS_END, 1)[0]
    assert block == gen.folders(), "README.md Layout is stale: run python scripts/readme_layout.py"


def test_every_module_and_folder_says_what_it_owns():
    gen = _generator()
    for path in sorted((ROOT / "prfaas_plan").rglob("*.py")):
        if "_bundled" in path.parts or (
            path.name == "__init__.py" and path.parent.name == "prfaas_plan"
        ):
            continue
        assert gen.summary(path), f"{path.relative_to(ROOT)} has no docstring"
