"""Each request field's meaning is written once (use_cases/field_docs.py) and every door shows
that text: the request's schema (the API's OpenAPI document) and the CLI's --help. A default a
text states is the request's (or, for simulate, the simulator spec's), and the CLI leaves the
default to the request."""

import inspect
import re
import typing

import pytest

from prfaas_plan.cli import app
from prfaas_plan.cli.failures import flagged
from prfaas_plan.export.build import ExportRequest
from prfaas_plan.server import bodies
from prfaas_plan.use_cases import field_docs, procure_requests, requests, simulate_request
from prfaas_plan.use_cases.simulation_spec import (
    ArrivalSpec,
    LoadSpec,
    PolicySpec,
    SimulationRequest,
    StressSpec,
)

REQUESTS = {
    "optimize": requests.PlanRequest, "evaluate": requests.EvaluateRequest,
    "sensitivity": requests.SensitivityRequest, "explain": requests.ExplainRequest,
    "procure": procure_requests.ProcureRequest, "simulate": simulate_request.SimulateRequest,
    "export": ExportRequest,
}  # fmt: skip
# the HTTP API's bodies: a scenario and a command's request, with the server's own limits
BODIES = [
    bodies.PlanBody, bodies.EvaluateBody, bodies.SimulateBody, bodies.SensitivityBody,
    bodies.ExplainBody, bodies.ProcureBody, bodies.ParetoBody, bodies.ExportBody,
]  # fmt: skip
ALL = [*REQUESTS.values(), procure_requests.ParetoRequest, *BODIES]
TEXTS = {*field_docs.SHARED.values(), *field_docs.BY_REQUEST.values()}
# simulate's fields whose default the simulator's spec sets (the request's is None)
SPEC_DEFAULTS = {
    "requests": ArrivalSpec.requests, "burst_cv": ArrivalSpec.burst_cv,
    "period_s": ArrivalSpec.period_s, "amplitude": ArrivalSpec.amplitude,
    "dip_fraction": StressSpec.dip_fraction, "load": LoadSpec.fractions[0],
    "seed": ArrivalSpec.seed, "policy": PolicySpec.kind,
    "link_latency_s": SimulationRequest.link_latency_s,
}  # fmt: skip


def _shown(value: object) -> set[str]:
    """How a text may write a default."""
    value = getattr(value, "value", value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {str(value)}
    return {f"{value:g}", f"{value:,}", f"{value:,.0f}"}


def _options(command: str) -> dict[str, tuple[object, object]]:
    """The command's options by parameter name: (the typer option, its default)."""
    callback = next(c.callback for c in app.registered_commands
                    if (c.name or c.callback.__name__.replace("_", "-")) == command)  # fmt: skip
    hints = typing.get_type_hints(callback, include_extras=True)
    out = {}
    for name, parameter in inspect.signature(callback).parameters.items():
        option = next(
            (m for m in getattr(hints[name], "__metadata__", ()) if hasattr(m, "help")), None
        )
        out[name] = (option, parameter.default)
    return out


@pytest.mark.parametrize("request_class", ALL, ids=lambda r: r.__name__)
def test_every_field_has_its_written_meaning(request_class):
    for name, field in request_class.model_fields.items():
        assert field.description in TEXTS, (request_class.__name__, name)


@pytest.mark.parametrize("request_class", ALL, ids=lambda r: r.__name__)
def test_a_stated_default_is_the_requests(request_class):
    """The text of a field the request (or simulate's spec) gives a default states that default
    (a default resolved further on, such as the on-demand cost model, is stated as written)."""
    for name, field in request_class.model_fields.items():
        default = field.default if field.default not in (None, False) else None
        if request_class is simulate_request.SimulateRequest and name in SPEC_DEFAULTS:
            default = SPEC_DEFAULTS[name]
        if default is not None and not field.is_required():
            text = field.description or ""
            assert any(f"default: {shown}" in text for shown in _shown(default)), (name, text)


@pytest.mark.parametrize("command", REQUESTS)
def test_the_cli_shows_the_fields_meaning_and_leaves_its_default_to_the_request(command):
    request_class = REQUESTS[command]
    options = _options(command)
    shared = set(options) & set(request_class.model_fields)
    assert shared, command
    for name in shared:
        option, default = options[name]
        assert option is not None and option.help == request_class.model_fields[name].description, (
            name
        )
        flag_default = False if request_class.model_fields[name].default is False else None
        assert default in (flag_default, inspect.Parameter.empty), (name, default)


def test_help_names_other_options_as_flags():
    assert (
        flagged(field_docs.SHARED["ttft_load_rps"])
        == "Load of the TTFT target in req/s (instead of --ttft-load)."
    )


@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__)
def test_a_limit_a_body_states_is_the_bodys(body):
    """A body field whose text says "at most N" (the server's own limits: server/bodies.py) has
    that bound, as `le` or as a list's `max_length`."""
    for name, field in body.model_fields.items():
        stated = re.search(r"at most ([\d,]+)", field.description or "")
        if stated is None:
            continue
        bounds = {getattr(m, "le", None) for m in _metadata(field)}
        bounds |= {getattr(m, "max_length", None) for m in _metadata(field)}
        assert int(stated.group(1).replace(",", "")) in bounds, (name, field.description)


def _metadata(field: typing.Any) -> list[object]:
    """A field's constraints, also those inside an Optional's Annotated member."""
    found = list(field.metadata)
    for member in typing.get_args(field.annotation):
        found += list(getattr(member, "__metadata__", ()))
    return found + [m for info in found for m in getattr(info, "metadata", ())]
