"""The model core stays pure and light; heavy or UI libraries stay at the edges."""

import subprocess
import sys

CORE = [
    "units", "errors", "choices", "profiles", "workload", "capacity", "optimize", "ttft",
    "architecture", "egress", "arrivals", "sim_queues", "simulate", "sim_prefix", "queueing",
]  # fmt: skip
FORBIDDEN_IN_CORE = [
    "typer",
    "rich",
    "yaml",
    "pydantic",
    "scipy",
    "pulp",
    "cvxpy",
    "sympy",
    "matplotlib",
]


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in out.stdout.split()}


def test_core_imports_no_io_ui_or_solver_library():
    loaded = loaded_after("; ".join(f"import prfaas_plan.{m}" for m in CORE))
    assert not loaded & set(FORBIDDEN_IN_CORE)


def test_cli_startup_does_not_import_numpy_or_solvers():
    loaded = loaded_after("import prfaas_plan.cli")
    assert not loaded & {"numpy", "scipy", "pulp", "cvxpy", "sympy", "matplotlib", "yaml"}


def test_solvers_are_imported_only_when_sizing():
    loaded = loaded_after("import prfaas_plan.planner, prfaas_plan.report")
    assert not loaded & {"scipy", "pulp", "cvxpy"}
