"""Where the shipped data lives.

In a source checkout `data/`, `models.yaml` and `examples/` sit at the repository top; in an
installed wheel they are bundled as `prfaas_plan/_bundled/` (pyproject force-include). Both
layouts are looked up here and nowhere else.
"""

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # prfaas_plan/
_CANDIDATE_ROOTS = (_PACKAGE_DIR / "_bundled", _PACKAGE_DIR.parent)


def resource_root() -> Path:
    """Directory holding `data/`, `models.yaml` and `examples/`."""
    for root in _CANDIDATE_ROOTS:
        if (root / "models.yaml").is_file() and (root / "data").is_dir():
            return root
    raise FileNotFoundError(  # a broken install, not a user error
        f"prfaas-plan data not found in any of {[str(r) for r in _CANDIDATE_ROOTS]}"
    )


def is_installed_copy(path: Path) -> bool:
    """True for the data bundled inside an installed wheel (never edit that)."""
    return (_PACKAGE_DIR / "_bundled") in Path(path).resolve().parents


def default_data_dir() -> Path:
    return resource_root() / "data"


def default_models_file() -> Path:
    return resource_root() / "models.yaml"


def default_scenario_file() -> Path:
    """The paper's case study, the embedded default scenario."""
    return resource_root() / "examples" / "case_study.yaml"
