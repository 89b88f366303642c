"""A document as a row (sweep/flat.py `flatten`): dotted names, non-finite numbers null, empty
objects null, lists of strings joined, other lists their JSON; rows as columns (`columns_of`):
every name of any row, in the order first met, None where a row lacks it."""

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.sweep.flat import columns_of, flatten


def test_a_document_flattens_to_dotted_names_and_leaves() -> None:
    documents = [
        {"t": {"mean_s": x, "notes": ["a", "b"], "c": [1.0, 2.0], "e": {}}, "k": 1}
        for x in (1.5, float("inf"), float("nan"), -0.0)
    ]
    got = columns_of([flatten(d) for d in documents])
    assert repr(got) == repr({
        "t.mean_s": [1.5, None, None, -0.0],
        "t.notes": ["a,b"] * 4,
        "t.c": ["[1.0, 2.0]"] * 4,
        "t.e": [None] * 4,
        "k": [1] * 4,
    })  # fmt: skip


def test_rows_of_other_names_are_columns_of_every_name() -> None:
    documents: list[Any] = [
        {"sizing": None, "plan": {"p50_s": 1.0, "bounds": ["pd_decode"]}},
        {"sizing": {"gpus": 3}, "plan": {"p50_s": float("nan"), "bounds": []}},
        {"sizing": {}, "plan": {"bounds": ["a", "b"], "p50_s": 2}},
        {"sizing": None, "plan": {}},
        {"sizing": None, "plan": {"p50_s": 1.0, "bounds": [1.5, None], "p99_s": 4.0}},
        [1, 2],
        {},
    ]
    got = columns_of([flatten(d) for d in documents])
    assert list(got) == [
        "sizing",
        "plan.p50_s",
        "plan.bounds",
        "sizing.gpus",
        "plan",
        "plan.p99_s",
        "",
    ]
    assert got["plan.p50_s"] == [1.0, None, 2, None, 1.0, None, None]
    assert got["plan.bounds"] == ["pd_decode", "", "a,b", None, "[1.5, null]", None, None]
    assert got["plan.p99_s"] == [None, None, None, None, 4.0, None, None]
    assert got["sizing.gpus"] == [None, 3, None, None, None, None, None]
    assert got[""] == [None, None, None, None, None, "[1, 2]", None]


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6)
    | st.lists(st.floats() | st.integers() | st.booleans(), min_size=1, max_size=6)
)
@settings(max_examples=300, deadline=None)
def test_a_list_of_numbers_is_its_json_text(value: list[Any]) -> None:
    """A list of numbers (-0.0, subnormals, the largest, nan, inf, ints, bools) is its JSON
    text, as the per-scenario path writes it."""
    assert flatten({"x": value}) == {"x": json.dumps(value)}
