"""A document's fields written once (render/fields.py) give each object's document and a block's
columns: the columns are exactly the flattened documents (sweep/flat.py), the same names in the
same order and the same values of the same types, or NotColumnarError where the documents
differ in shape; `optimize`'s reports of every kind give their plan's columns."""

import dataclasses
import gc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.render.fields import (
    Const,
    Leaf,
    Maybe,
    NotColumnarError,
    Present,
    at,
    columns,
    document,
)
from prfaas_plan.render.plan import PLAN, plan_columns, plan_to_json
from prfaas_plan.render.views import number
from prfaas_plan.sweep.flat import columns_of, flatten
from prfaas_plan.sweep.rows import _catalog
from prfaas_plan.use_cases import calls
from prfaas_plan.use_cases.requests import PlanRequest

ROOT = Path(__file__).resolve().parents[2]

VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e308, 1e308),  # large finite values: their sum overflows
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.lists(st.floats(allow_nan=True), max_size=3),
    st.lists(st.text(max_size=3), max_size=3),
    st.lists(st.dictionaries(st.text(max_size=2), st.integers()), max_size=2),
)
NUMBERS = st.one_of(  # a column of numbers alone (non-finite ones become null)
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e308, 1e308),
    st.integers(-(2**70), 2**70), st.booleans(), st.none(),
)  # fmt: skip
HUGE = st.integers(10**400, 10**401)  # beyond a float: a sum with floats overflows
POOL = [(1.0, 2.0), ("a",), (float("nan"),), (), ({"k": 1},)]  # objects some documents share
SHARED = [1.5, [0.25, float("nan")], ["a", "b"], None]  # one object in every document


def _convert(value: Any) -> Any:
    """A conversion as a document's: a new value from the one read."""
    return [value, value] if isinstance(value, float) else value


FIELDS: dict[str, Any] = {
    "a": Leaf("a"),
    "n": Leaf("n"),
    "big": Leaf("big"),
    "number": Leaf("n", number),  # an int becomes a float, a non-finite float null
    "b": Leaf("inner.b", _convert),
    "shared": Leaf("shared"),
    "pooled": Leaf("pool", list),
    "itself": Leaf("", lambda obj: obj.a == obj.a),
    "const": Const([1, "x"]),
    "nested": {"c": Leaf("inner.c"), "empty": {}, "d": Const(None)},
    "present": Present(("inner.p",), {"p": Leaf("inner.p"), "q": Leaf("a")}),
    "only_present": {"p": Present(("inner.p",), {"v": Leaf("inner.p")})},  # empty where absent
    "maybe": Maybe(("inner.m", "a"), at("inner", {"m": Leaf("m"), "deep": {"b": Leaf("b")}})),
}


@st.composite
def objects(draw: st.DrawFn) -> SimpleNamespace:
    shared = SHARED[draw(st.integers(0, len(SHARED) - 1))]
    inner = SimpleNamespace(
        b=draw(VALUES), c=draw(VALUES),
        p=draw(st.one_of(st.none(), VALUES)), m=draw(st.one_of(st.none(), VALUES)),
    )  # fmt: skip
    pool = POOL[draw(st.integers(0, len(POOL) - 1))]
    big = draw(st.one_of(NUMBERS, HUGE))
    return SimpleNamespace(
        a=draw(VALUES), n=draw(NUMBERS), big=big, inner=inner, shared=shared, pool=pool
    )


def _typed(cols: dict[str, list[Any]]) -> list[tuple[str, list[tuple[type, str]]]]:
    """Names, in order, and each value's type and repr (nan equals nan; 1 is not 1.0)."""
    return [(name, [(type(v), repr(v)) for v in values]) for name, values in cols.items()]


@settings(max_examples=300, deadline=None)
@given(st.lists(objects(), min_size=1, max_size=8), st.booleans())
def test_columns_are_the_flattened_documents_whatever_their_shapes(objs, same_shared):
    if same_shared:  # an object every document shares: converted once
        for obj in objs:
            obj.shared = objs[0].shared
    rows = [flatten(document(FIELDS, obj)) for obj in objs]
    assert _typed(columns(FIELDS, objs)) == _typed(columns_of(rows))


def test_a_block_of_other_shapes_inside_one_present_in_some_is_refused():
    fields = {"outer": Present(("p",), {"inner": Present(("q",), {"x": Leaf("q")})})}
    objs = [SimpleNamespace(p=1, q=None), SimpleNamespace(p=1, q=2), SimpleNamespace(p=None, q=2)]
    with pytest.raises(NotColumnarError):
        columns(fields, objs)
    assert _typed(columns(fields, objs[:1] + objs[2:])) == _typed(
        columns_of([flatten(document(fields, o)) for o in objs[:1] + objs[2:]])
    )


def test_a_leaf_that_is_an_object_is_refused():
    with pytest.raises(NotColumnarError):
        columns({"x": Leaf("a")}, [SimpleNamespace(a={"k": 1})])


def test_a_const_list_is_a_list_of_each_document():
    first, second = (document({"x": Const([1])}, None) for _ in range(2))
    first["x"].append(2)
    assert second == {"x": [1]}


def _reports() -> list[Any]:
    """`optimize`'s reports of each kind: plain, exact mode, a fixed threshold, sized, with a
    TTFT target, of a histogram workload, and unpriced."""
    catalog = _catalog(None)
    out = []
    for name, request in [
        ("case_study.yaml", PlanRequest()),
        ("case_study.yaml", PlanRequest(mode="exact", threshold_tokens=20000.0)),
        ("case_study.yaml", PlanRequest(target_rps=3.0)),
        ("case_study.yaml", PlanRequest(ttft_target_s=5.0, ttft_load=0.5)),
        ("histogram_workload.yaml", PlanRequest()),
        ("observed_lengths.yaml", PlanRequest(max_prfaas_gpus=16)),
    ]:
        path = ROOT / "examples" / name
        problem = build_problem(load_scenario(path), path, catalog)
        out.append(calls.optimize(problem, request, catalog))
    plain = out[0]
    unpriced = dataclasses.replace(
        plain, plan_cost=None,
        **{k: dataclasses.replace(getattr(plain, k), cost=None) for k in ("plan", "homogeneous", "naive")},
    )  # fmt: skip
    return [*out, unpriced]


REPORTS = _reports()


@pytest.mark.parametrize("report", REPORTS, ids=range(len(REPORTS)))
def test_a_plans_columns_are_its_flattened_document(report):
    expected = columns_of([flatten(plan_to_json(report))])
    assert _typed(plan_columns([report])) == _typed(expected)
    assert _typed(plan_columns([report] * 3)) == _typed(
        columns_of([flatten(plan_to_json(report))] * 3)
    )


def test_plans_of_other_shapes_in_one_block_are_their_flattened_documents():
    """A sweep's block where some scenarios are priced and some not (a link no offering
    carries), some sized: each shape written on its own, merged as rows are."""
    plain, sized, ttft, unpriced = REPORTS[0], REPORTS[2], REPORTS[3], REPORTS[-1]
    for block in ([unpriced, plain, unpriced], [plain, sized, unpriced, ttft, plain]):
        expected = columns_of([flatten(plan_to_json(r)) for r in block])
        assert _typed(columns(PLAN, block)) == _typed(expected)


@pytest.mark.parametrize("mixed", [False, True], ids=["one shape", "mixed shapes"])
def test_columns_leave_no_reference_cycle(mixed):
    """A block's objects are freed by reference counting when `columns` returns: a cycle (a
    recursive closure over the block once held them all) kept a sweep chunk's reports alive
    until the cyclic collector ran, which sweeps pause while a chunk runs."""
    plain, unpriced = REPORTS[0], REPORTS[-1]
    block = [plain, unpriced, plain] if mixed else [plain, plain]
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        columns(PLAN, block)
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
