"""The package's layers are folders and imports point one way (down), checked statically over
every `import` in the package, lazy ones inside functions included; the model core stays pure
and light, and heavy or UI libraries stay at the edges (checked in a fresh interpreter)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "prfaas_plan"

# rank of each layer: a module may import only layers of a lower rank, or its own folder
LAYERS = {
    "base": 0,  # units, errors, choices, plausible: import only each other
    "analytic": 1,  # the model: distributions, profiles, capacity, TTFT, egress
    "solve": 2,  # optimisers, the only home of solver libraries
    "sim": 2,  # the discrete-event simulator (beside solve, neither imports the other)
    "symbolic": 2,  # sympy closed forms of the model (beside solve and sim)
    "inputs": 3,  # files, bundled resources, catalog, scenario, trace readers
    "use_cases": 4,  # one use-case per command
    "export": 5,  # a plan as a serving stack's manifests: runs use_cases (evaluate)
    "render": 5,  # views and plots
    "server": 6,  # the HTTP API and the page: calls use_cases/ and render/ (cli/serve.py starts it)
    "sweep": 6,  # sweeps over many scenarios: runs use_cases, flattens their JSON (render/)
    "shell": 7,  # cli/, __main__.py
}
BASE_MODULES = {"__init__", "units", "errors", "choices", "plausible"}
SHELL_MODULES = {"cli", "__main__"}
SOLVER_LIBRARIES = {"pulp", "cvxpy", "highspy"}  # and scipy.optimize
HEAVY_LIBRARIES = {"cvxpy", "sympy", "matplotlib", "dask", "fastapi", "uvicorn", "pulp"}
PURE_LAYERS = {"base", "analytic", "sim"}
NOT_IN_PURE = {"typer", "rich", "yaml", "pydantic", "scipy", *SOLVER_LIBRARIES, *HEAVY_LIBRARIES}


def layer_of(module: str) -> str:
    """'prfaas_plan.sim.engine' -> 'sim'; 'prfaas_plan.units' -> 'base'."""
    parts = module.split(".")[1:]
    if not parts or parts[0] in BASE_MODULES:
        return "base"
    if parts[0] in SHELL_MODULES:
        return "shell"
    assert parts[0] in LAYERS, f"{module}: a folder the layering test does not know"
    return parts[0]


def package_modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        if "_bundled" in relative.parts:
            continue
        name = ".".join(relative.parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = package_modules()
MODULE_NAMES = set(MODULES)


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module top level) for every import statement in a file."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if node.module == "prfaas_plan":  # `from prfaas_plan import units, __version__`
                names = [n if n in MODULE_NAMES else "prfaas_plan" for n in names]
                found += [(name, node.lineno, id(node) in top) for name in names]
            else:
                found.append((node.module, node.lineno, id(node) in top))
    return found


def test_every_module_sits_in_a_known_layer():
    for name in MODULES:
        assert layer_of(name) in LAYERS


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down_and_never_sideways(name):
    mine = layer_of(name)
    for imported, line, _ in imports_of(MODULES[name]):
        if not imported.startswith("prfaas_plan"):
            continue
        theirs = layer_of(imported)
        where = f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {imported}"
        assert theirs == mine or LAYERS[theirs] < LAYERS[mine], where


@pytest.mark.parametrize("name", sorted(MODULES))
def test_libraries_stay_in_their_layer(name):
    mine = layer_of(name)
    for imported, line, top_level in imports_of(MODULES[name]):
        root = imported.split(".")[0]
        where = f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {imported}"
        if root in SOLVER_LIBRARIES or imported.startswith("scipy.optimize"):
            assert mine == "solve", f"{where}: solver libraries belong to solve/"
        if mine in PURE_LAYERS:
            assert root not in NOT_IN_PURE, f"{where}: {mine}/ stays free of I/O, UI and solvers"
        # server/ is the web application: only `serve` imports it, inside the command
        # (test_cli_startup_does_not_import_numpy_or_solvers checks that the CLI does not)
        if root in HEAVY_LIBRARIES and mine != "server":
            assert not top_level, f"{where}: heavy libraries are imported inside the command"


def test_the_layering_test_sees_lazy_imports():
    """A guard on the guard: the CLI imports its commands inside functions; they are seen."""
    lazy = [m for m, _, top in imports_of(MODULES["prfaas_plan.cli.plan"]) if not top]
    assert any(m.startswith("prfaas_plan.use_cases") for m in lazy)


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in out.stdout.split()}


def test_model_and_simulator_load_no_io_ui_or_solver_library():
    pure = [m for m in MODULES if layer_of(m) in PURE_LAYERS]
    loaded = loaded_after("; ".join(f"import {m}" for m in pure))
    assert not loaded & NOT_IN_PURE


def test_cli_startup_does_not_import_numpy_or_solvers():
    loaded = loaded_after("from prfaas_plan.cli import app")  # every command's module
    assert not loaded & {
        "numpy", "scipy", "pulp", "cvxpy", "sympy", "matplotlib", "yaml", "fastapi", "uvicorn",
    }  # fmt: skip


def test_solvers_are_imported_only_when_sizing():
    loaded = loaded_after("import prfaas_plan.use_cases.plan, prfaas_plan.render.plan")
    assert not loaded & {"scipy", "pulp", "cvxpy"}
