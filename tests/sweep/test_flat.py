"""A block of documents as columns (sweep/flat.py `documents_as_columns`, the compiled reader
of a shape) is exactly the flattening of each document, then `columns_of`: the same names in
the same order and the same values of the same types, for documents of one shape (keys in any
order), of several, and for anything else a JSON document can hold."""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.sweep.flat import (
    MAX_COMPILED_LEAVES,
    columns_of,
    documents_as_columns,
    flatten,
)

KEYS = st.sampled_from(["a", "b", "c", "mean_s", "p99_s", "x.y", "x", "y", ""])
LEAVES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.floats(allow_nan=True), max_size=3),
    st.lists(st.text(max_size=3), max_size=3),
    st.lists(st.one_of(st.integers(), st.none(), st.dictionaries(KEYS, st.integers())), max_size=3),
    st.just({}),
)
DOCUMENTS = st.recursive(
    LEAVES, lambda inner: st.dictionaries(KEYS, inner, max_size=4), max_leaves=12
)


def refilled(data: st.DataObject, document: Any) -> Any:
    """`document` with every leaf drawn afresh: the same shape, keys sometimes reordered;
    now and then an object with a member more, or one less (another shape)."""
    if type(document) is dict and document:
        items = [(k, refilled(data, v)) for k, v in document.items()]
        if data.draw(st.booleans()):
            items.reverse()
        change = data.draw(st.sampled_from(["none"] * 8 + ["more", "fewer"]))
        if change == "more":
            items.append((data.draw(st.text(min_size=1, max_size=3)), data.draw(LEAVES)))
        elif change == "fewer":
            items.pop()
        return dict(items)
    return data.draw(LEAVES)


def same(a: dict[str, list[Any]], b: dict[str, list[Any]]) -> bool:
    """Equal names in equal order, and equal values of equal types (1, 1.0 and True differ)."""
    return repr(list(a.items())) == repr(list(b.items()))


@given(st.data(), st.dictionaries(KEYS, DOCUMENTS, min_size=1, max_size=5))
@settings(max_examples=100, deadline=None)
def test_documents_of_one_shape_and_others_are_their_flattenings(
    data: st.DataObject, template: dict[str, Any]
) -> None:
    documents = data.draw(
        st.lists(st.one_of(st.builds(lambda: None).map(lambda _: refilled(data, template)),
                           DOCUMENTS), max_size=8)
    )  # fmt: skip
    expected = columns_of([flatten(d) for d in documents])
    assert same(documents_as_columns(documents), expected)


def test_a_leaf_that_becomes_an_object_and_back_is_another_shape() -> None:
    documents: list[Any] = [
        {"sizing": None, "plan": {"p50_s": 1.0, "bounds": ["pd_decode"]}},
        {"sizing": {"gpus": 3}, "plan": {"p50_s": float("nan"), "bounds": []}},
        {"sizing": {}, "plan": {"bounds": ["a", "b"], "p50_s": 2}},
        {"sizing": None, "plan": {}},
        {"sizing": None, "plan": {"p50_s": 1.0, "bounds": [1.5, None]}},
        {"sizing": None, "plan": {"p50_s": 1.0, "bounds": [], "p99_s": 4.0}},
        [1, 2],
        {},
    ]
    got = documents_as_columns(documents)
    assert same(got, columns_of([flatten(d) for d in documents]))
    assert got["plan.p50_s"] == [1.0, None, 2, None, 1.0, 1.0, None, None]
    assert got["plan.p99_s"] == [None, None, None, None, None, 4.0, None, None]
    assert got["sizing.gpus"] == [None, 3, None, None, None, None, None, None]


def test_documents_of_one_shape_read_by_the_compiled_reader() -> None:
    """Infinite and nan numbers null, lists of strings joined, other lists as JSON, empty
    objects null: as `flatten` writes them."""
    documents = [
        {"t": {"mean_s": x, "notes": ["a", "b"], "c": [1.0, 2.0], "e": {}}, "k": 1}
        for x in (1.5, float("inf"), float("nan"), -0.0)
    ]
    got = documents_as_columns(documents)
    assert same(got, columns_of([flatten(d) for d in documents]))
    assert got == {
        "t.mean_s": [1.5, None, None, -0.0],
        "t.notes": ["a,b"] * 4,
        "t.c": ["[1.0, 2.0]"] * 4,
        "t.e": [None] * 4,
        "k": [1] * 4,
    }


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6)
    | st.lists(st.floats() | st.integers() | st.booleans(), min_size=1, max_size=6)
)
@settings(max_examples=300, deadline=None)
def test_a_list_of_numbers_is_its_json_text(value: list[Any]) -> None:
    """A list of numbers (-0.0, subnormals, the largest, nan, inf, ints, bools) is its JSON
    text, as the per-scenario path writes it."""
    assert flatten({"x": value}) == {"x": json.dumps(value)}


@pytest.mark.parametrize(
    "documents",
    [
        [{1: "x"}, {True: "y"}],  # equal keys that name different columns
        [{1: "x"}, {1.0: "y"}],
        [{"a": {1: 2}}, {"a": {1.0: 3}}],
        [{"a.b": 1, "a": {"b": 2}}, {"a": {"b": 7}, "a.b": 5}],  # names that meet
        [{f"k{i}": float(i) for i in range(MAX_COMPILED_LEAVES + 1)}] * 2,
    ],
)
def test_shapes_the_reader_does_not_take_are_flattened_one_by_one(documents: list[Any]) -> None:
    """Found by review: keys that are not str (1, 1.0 and True find each other's members),
    names two members meet at (a document keeps the one it writes last), and shapes too large
    to be worth compiling go document by document."""
    assert same(documents_as_columns(documents), columns_of([flatten(d) for d in documents]))
