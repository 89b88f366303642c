"""Random requests of every command the three doors share, through each door (issue 21): the
CLI's flags, the HTTP API's body and a one-scenario sweep's `parameters` give one document.
The flags are written from the request's fields by the CLI's own table (cli/failures.py
`parameter_flags`, derived from the declared options), so a field the CLI spells differently
or drops shows here. The default suite draws a few requests per command; `pytest -m slow`
draws many."""

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prfaas_plan import errors
from prfaas_plan.cli.failures import error_message, exit_code, parameter_flags
from tests.cli.test_cli import run
from tests.use_cases.test_doors import cli, client, same_document, sweep_row

__all__ = ["client"]  # the fixture, shared with test_doors.py

PRICE = st.floats(0.25, 8.0).map(lambda usd: round(usd, 3))
PRICES = st.one_of(st.none(), st.fixed_dictionaries({"h200": PRICE, "h20": PRICE}))
MODE = st.sampled_from(["paper", "exact"])
OFFERING = st.sampled_from([None, "owned", "metro-wave-100g", "aws-dx-100g"])


def _some(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A request of these fields, a None one left out (the door's default)."""
    return st.fixed_dictionaries(fields).map(
        lambda d: {k: v for k, v in d.items() if v is not None}
    )


# command -> (API endpoint, a strategy of its request's fields), on the case study
COMMANDS: dict[str, tuple[str, st.SearchStrategy[dict[str, Any]]]] = {
    "optimize": ("plan", _some(
        mode=MODE, threshold_tokens=st.one_of(st.none(), st.floats(0.0, 131072.0)),
        target_rps=st.one_of(st.none(), st.none(), st.floats(1.0, 3.2)),
        utilization=st.one_of(st.none(), st.floats(0.05, 1.0)), link_offering=OFFERING,
        gpu_prices_usd_per_gpu_hour=PRICES,
        cost_model=st.sampled_from([None, "on-demand", "tco"]),
    )),
    "evaluate": ("evaluate", _some(
        threshold_tokens=st.floats(0.0, 131072.0), pd_prefill_instances=st.integers(0, 7),
        prfaas_instances=st.one_of(st.none(), st.integers(0, 8)), mode=MODE,
        link_offering=OFFERING, gpu_prices_usd_per_gpu_hour=PRICES,
    )),
    "sensitivity": ("sensitivity", _some(
        mode=MODE, bins=st.integers(50, 300), gpu_prices_usd_per_gpu_hour=PRICES,
    )),
    "simulate": ("simulate", _some(
        requests=st.integers(100, 400), load=st.floats(0.2, 0.95).map(lambda x: round(x, 3)),
        seed=st.integers(0, 1000), mode=MODE,
        policy=st.sampled_from(["static", "adaptive", "rebalance", "dual"]),
        arrivals=st.sampled_from([None, "poisson", "gamma", "sinusoidal"]),
    )),
    "procure": ("procure", _some(
        target_rps=st.floats(0.5, 4.0), max_instances_per_site=st.integers(2, 8), mode=MODE,
        gpu_prices_usd_per_gpu_hour=PRICES,
    )),
}  # fmt: skip


def flags_of(fields: dict[str, Any]) -> list[str]:
    """The request as the CLI's flags, spelled by the CLI's own table."""
    table, flags = parameter_flags(), []
    for name, value in fields.items():
        if isinstance(value, dict):  # --gpu-price GPU=USD, once per GPU
            for gpu, usd in value.items():
                flags += [table[name], f"{gpu}={usd!r}"]
        else:
            flags += [table[name], repr(value) if isinstance(value, float) else str(value)]
    return flags


_SWEEPS = itertools.count()  # a results directory per sweep


def through_every_door(tmp_path, client, command: str, fields: dict[str, Any]) -> None:
    """One document from the three doors or, for a request the library refuses, one error:
    the API's and the sweep row's in the library's words, the CLI's the same with its flags
    (cli/failures.py error_message) and the class's exit code."""
    endpoint = COMMANDS[command][0]
    body = {**fields, "load": [fields["load"]]} if "load" in fields else fields
    response = client.post(f"/api/v1/{endpoint}", json=body)
    if response.status_code == 200:
        row = sweep_row(tmp_path / str(next(_SWEEPS)), command, fields, fast_path=True)
        same_document(cli(command, flags_of(fields)), response.json(), row)
        return
    refused = response.json()["error"]
    row = sweep_row(tmp_path / str(next(_SWEEPS)), command, fields, True, refused=True)
    assert (row["error_class"], row["error_message"]) == (refused["type"], refused["message"])
    exc = getattr(errors, refused["type"])(refused["message"], parameter=refused.get("parameter"))
    ran = run(command, *flags_of(fields), "--format", "json")
    assert (ran.returncode, ran.stderr) == (exit_code(exc), f"error: {error_message(exc)}\n")


def random_requests(tmp_path, client, command: str, count: int) -> None:
    """`count` random requests of `command`, each through every door."""

    @settings(
        max_examples=count, deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )  # fmt: skip
    @given(fields=COMMANDS[command][1])
    def check(fields: dict[str, Any]) -> None:
        through_every_door(tmp_path, client, command, fields)

    check()


@pytest.mark.parametrize("command", COMMANDS)
def test_random_requests_give_one_document_through_every_door(tmp_path, client, command):
    random_requests(tmp_path, client, command, 2)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_many_random_requests_give_one_document_through_every_door(tmp_path, client, command):
    random_requests(tmp_path, client, command, 25)
