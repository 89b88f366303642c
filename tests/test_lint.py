"""ruff is part of the test extras; the tree stays lint- and format-clean."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.skip("ruff not installed")


def test_ruff_check_is_clean():
    result = subprocess.run([*ruff(), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_ruff_format_is_clean():
    result = subprocess.run(
        [*ruff(), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
