"""A non-editable install must carry its data: data/, models.yaml and examples/ are bundled."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_installed_package_finds_its_data(tmp_path):
    code = (
        "import prfaas_plan.inputs.resources as r; print(r.resource_root()); "
        "print(r.default_scenario_file().is_file())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    ).stdout.split()
    root = Path(out[0])
    assert out[1] == "True"
    installed = Path(
        subprocess.run(
            [sys.executable, "-c", "import prfaas_plan; print(prfaas_plan.__file__)"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=True,
        ).stdout.strip()
    ).parent
    if installed.parent != ROOT:
        # a real (non-editable) install: the data must be the bundled copy inside the package
        assert root == installed / "_bundled"
        for relative in ("models.yaml", "data/gpus/h200.yaml", "examples/case_study.yaml"):
            assert (root / relative).is_file()
