"""The commands a sweep can run: name -> its request, use-case and JSON renderer, so a sweep's
row is the document `--format json` prints and the HTTP API answers, flattened.

Adding a command is one `SWEEPABLE` entry; its parameters are its request's fields.
"""

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.scenario import Problem

Document = dict[str, Any]
Parameters = dict[str, Any]


@dataclass(frozen=True)
class Sweepable:
    """A command a sweep runs: its request (module of use_cases/, class), its use-case (a
    function of use_cases/calls.py) and its JSON renderer (module of render/, function) —
    exactly what the CLI's `--format json` and the HTTP API run."""

    request: tuple[str, str]
    use_case: str
    document: tuple[str, str]
    # `optimize` without sizing or a TTFT target: a whole chunk in a few array operations
    vectorised: Callable[[Parameters], bool] = lambda _: False

    def request_type(self) -> type[Strict]:
        module, name = self.request
        request: type[Strict] = getattr(import_module(f"prfaas_plan.use_cases.{module}"), name)
        return request

    @property
    def parameters(self) -> frozenset[str]:
        """What a sweep file may set or sweep: the request's fields."""
        return frozenset(self.request_type().model_fields)

    def run(self, problem: Problem, parameters: Parameters, catalog: Catalog) -> Document:
        """The command's document for one scenario (`catalog`: the problem's)."""
        from prfaas_plan.use_cases import calls, requests

        request = requests.build(self.request_type(), **parameters)
        report = getattr(calls, self.use_case)(problem, request, catalog)
        render = import_module(f"prfaas_plan.render.{self.document[0]}")
        document: Document = getattr(render, self.document[1])(report)
        return document


def _optimize_vectorised(p: Parameters) -> bool:
    sizing = ("target_rps", "max_prfaas_gpus", "ttft_target_s")
    return all(p.get(name) is None for name in sizing)


SWEEPABLE: dict[str, Sweepable] = {
    "optimize": Sweepable(
        ("requests", "PlanRequest"), "optimize", ("plan", "plan_to_json"), _optimize_vectorised
    ),
    "evaluate": Sweepable(
        ("requests", "EvaluateRequest"), "evaluate", ("plan", "evaluation_to_json")
    ),
    "simulate": Sweepable(
        ("simulate_request", "SimulateRequest"), "simulate", ("simulation", "simulation_json")
    ),
    "sensitivity": Sweepable(
        ("requests", "SensitivityRequest"), "sensitivity", ("sensitivity", "sensitivity_to_json")
    ),
    "procure": Sweepable(
        ("procure_requests", "ProcureRequest"), "procure", ("procure", "procure_to_json")
    ),
}


def command(name: str) -> Sweepable:
    if name not in SWEEPABLE:
        raise ConfigError(
            f"command: {name!r} cannot be swept; sweepable: {', '.join(sorted(SWEEPABLE))}"
        )
    return SWEEPABLE[name]


def parameter_names(name: str) -> frozenset[str]:
    return command(name).parameters
