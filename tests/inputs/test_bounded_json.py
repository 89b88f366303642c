"""The bounded JSON reader (inputs/bounded_json.py) against `json.loads`, the reference: the
same values for any valid document, lists of numbers decoded the same by chunks as whole, and
what json.loads accepts silently (a key twice) refused."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs import bounded_json
from prfaas_plan.inputs.bounded_json import read_object
from prfaas_plan.inputs.json_terms import Budget, NumberLists, Omitted, Shape

SHAPES = {"n": Shape.NUMBERS, "ll": Shape.NUMBER_LISTS, "t": Shape.TEXTS}


def budget() -> Budget:
    return Budget(10**9, 10**9, "the test")


def read(text: str, **kwargs) -> dict:
    record, end = read_object(text, "doc", "a test document", SHAPES, budget(), **kwargs)
    assert bounded_json.skip_whitespace(text, end) == len(text)
    return record


numbers = st.one_of(
    st.integers(-(10**20), 10**20), st.floats(allow_nan=False, allow_infinity=False)
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)
documents = st.fixed_dictionaries(
    {
        "n": st.lists(numbers, max_size=30),
        "ll": st.lists(st.lists(numbers, max_size=6), max_size=6),
        "t": st.lists(st.one_of(st.none(), st.text(max_size=10)), max_size=5),
    },
    optional={"other": values, "x": values, "nested": st.dictionaries(st.text(max_size=3), values)},
)


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from([None, 2, (", ", ": ")]), st.sampled_from([3, 2**20]))
@pytest.mark.slow
def test_the_same_values_as_json_loads(document, layout, chunk):
    """Any document: declared lists as arrays, scalars as they are, other containers
    Omitted; pretty-printed or not, and with lists decoded by chunks of 3 characters."""
    indent = layout if isinstance(layout, int) else None
    separators = layout if isinstance(layout, tuple) else None
    text = json.dumps(document, indent=indent, separators=separators)
    original, bounded_json._CHUNK_CHARS = bounded_json._CHUNK_CHARS, chunk
    try:
        record = read(text)
    finally:
        bounded_json._CHUNK_CHARS = original
    expected = json.loads(text)
    assert set(record) == set(expected)
    np.testing.assert_array_equal(record["n"], np.array(expected["n"], dtype=float))
    lists = record["ll"]
    assert isinstance(lists, NumberLists)
    assert lists.counts.tolist() == [len(x) for x in expected["ll"]]
    flat = [float(v) for x in expected["ll"] for v in x]
    np.testing.assert_array_equal(lists.values, np.array(flat, dtype=float))
    assert record["t"] == expected["t"]
    for key in set(expected) - set(SHAPES):
        value = expected[key]
        if isinstance(value, list | dict):
            assert record[key] == Omitted("list" if isinstance(value, list) else "object")
        else:
            assert record[key] == value or (value != value and record[key] != record[key])


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('{"n": [1, 2,]}', "expecting value"),
        ('{"n": [1, 2 3]}', "expecting ',' delimiter"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"x": [{"b": 1, "b": 1}]}', "duplicate key 'b'"),
        ('{"nested": {"n": [1], "n": [2]}}', "duplicate key 'n'"),
        ('{"n": [1, "2"]}', "n[1] must be a number, found text"),
        ('{"ll": [[1], [2, [3]]]}', "ll[1][1] must be a number, found a list"),
        ('{"n": [1e999]}', "n[0] must be finite, found inf"),
        ('{"ll": [[1], [NaN]]}', "ll[1][0] must be finite, found nan"),
        ('{"t": ["a", 1]}', "t[1] must be text or null, found 1"),
        ('{"n": 5}', "n must be a list of numbers (one entry per request), found 5"),
        ('{"a": 1', "not JSON (expecting ',' or '}'"),
        ("[1]", "expected a JSON object, found a list"),
        ('{"a": tru}', "not JSON (expecting value at line 1 column 7)"),
    ],
)
def test_malformed_documents_are_one_line(text, fragment):
    with pytest.raises(ConfigError, match=None) as refused:
        read(text, nested=("nested",))
    assert fragment in str(refused.value), str(refused.value)


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_a_trailing_comma_is_refused_at_any_chunk_boundary(monkeypatch, chunk):
    monkeypatch.setattr(bounded_json, "_CHUNK_CHARS", chunk)
    assert read('{"n": [1.5, 22, 333]}')["n"].tolist() == [1.5, 22, 333]
    with pytest.raises(ConfigError, match="expecting value"):
        read('{"n": [1.5, 22, 333,]}')
    with pytest.raises(ConfigError, match="expecting value"):
        read('{"n": [1.5, 22, ,333]}')


def test_the_budget_is_charged_before_decoding():
    """A list's length is read from its commas: over the budget it is refused undecoded."""
    tight = Budget(3, 10, "these files")
    with pytest.raises(ConfigError, match="these files hold more than 3 numbers in lists"):
        read_object('{"n": [1, 2, 3, 4]}', "doc", "x", SHAPES, tight)
    walked = Budget(100, 3, "these files")
    with pytest.raises(ConfigError, match="more than 3 members and list elements"):
        read_object('{"x": {"a": {}, "b": {}, "c": {}}}', "doc", "x", SHAPES, walked)
    assert math.isinf(read('{"i": Infinity}')["i"])  # a scalar nobody reads: as json.loads
