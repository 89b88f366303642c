"""A JSON document's shape written once, as fields read from one object (a report), and drawn
either as that object's document or, for many objects at once, as the columns of their
flattened documents (a sweep's rows: sweep/flat.py `flatten`'s names and values, written
column by column, without a document per object).

A field is a `Leaf` (a dotted attribute path of the object, then a conversion), a `Const`, a
nested mapping of fields (an object in the document, read from the same object), or a
`Present` / `Maybe` block (an object read only where a path is not None: absent, or null,
where it is None). Paths are read with `operator.attrgetter`, so a column is one C loop over
the objects where a leaf has no conversion.
"""

import json
import math
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

from prfaas_plan.render.views import Document, number

Fields = Mapping[str, "Field"]
Columns = dict[str, list[Any]]


def _itself(obj: Any) -> Any:
    return obj


# plain classes, not dataclasses: a dataclass is ~0.5 ms to define, and the plan's document is
# on every `optimize` start-up


class Leaf:
    """The value at `path` of the object ("" the object itself), through `convert` (a
    function of that value alone: a block's columns convert a value its objects share once)."""

    __slots__ = ("convert", "path", "read")

    def __init__(self, path: str, convert: Callable[[Any], Any] | None = None) -> None:
        self.path = path
        self.convert = convert
        self.read: Callable[[Any], Any] = attrgetter(path) if path else _itself

    def value(self, obj: Any) -> Any:
        found = self.read(obj)
        return found if self.convert is None else self.convert(found)


class Const:
    """The same value in every document (a list: a copy in each)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Present:
    """`fields` where none of the object's `when` paths is None; the key is absent where one
    is."""

    __slots__ = ("fields", "when")

    def __init__(self, when: tuple[str, ...], fields: Fields) -> None:
        self.when = when
        self.fields = fields


class Maybe:
    """`fields` where none of the object's `when` paths is None; null where one is."""

    __slots__ = ("fields", "when")

    def __init__(self, when: tuple[str, ...], fields: Fields) -> None:
        self.when = when
        self.fields = fields


def _held(when: tuple[str, ...], obj: Any) -> bool:
    return all(attrgetter(path)(obj) is not None for path in when)


Field = Leaf | Const | Present | Maybe | Fields


def at(prefix: str, fields: Fields) -> dict[str, Field]:
    """`fields` of the object at `prefix` (a dotted path), read from its owner: each path
    prefixed, so a block's columns still read each leaf in one `attrgetter`."""

    def moved(path: str) -> str:
        return f"{prefix}.{path}" if path else prefix

    out: dict[str, Field] = {}
    for key, f in fields.items():
        if isinstance(f, Leaf):
            out[key] = Leaf(moved(f.path), f.convert)
        elif isinstance(f, Present | Maybe):
            out[key] = type(f)(tuple(map(moved, f.when)), at(prefix, f.fields))
        elif isinstance(f, Const):
            out[key] = f
        else:
            out[key] = at(prefix, f)
    return out


def document(fields: Fields, obj: Any) -> Document:
    """The object's document: its fields in their order."""
    out: Document = {}
    for key, f in fields.items():
        if isinstance(f, Leaf):
            out[key] = f.value(obj)
        elif isinstance(f, Const):
            out[key] = list(f.value) if type(f.value) is list else f.value  # a list of its own
        elif isinstance(f, Present):
            if _held(f.when, obj):
                out[key] = document(f.fields, obj)
        elif isinstance(f, Maybe):
            out[key] = document(f.fields, obj) if _held(f.when, obj) else None
        else:
            out[key] = document(f, obj)
    return out


class NotColumnarError(Exception):
    """Objects whose documents differ in shape inside a block that is itself present in some
    and absent in others, or a leaf that is itself an object: their columns come from their
    documents."""


def columns(fields: Fields, objs: list[Any]) -> Columns:
    """`sweep/flat.py` `columns_of([flatten(document(fields, o)) for o in objs])`, the same
    names in the same order and the same values, one column at a time. Objects whose
    documents differ in shape (a `Present` or `Maybe` block held by some and not others: a
    sweep's block where some scenarios have prices and some do not) are written a shape at a
    time and merged as `columns_of` merges rows: every name in the order the rows first show
    it, None where a row lacks it. NotColumnarError where such a block lies inside another
    (not in this package's documents) or a leaf is an object. `objs` is not empty."""
    gathered = _Gathered(objs)
    shapes = _shapes(fields, gathered)
    if shapes is None:  # one shape
        out: Columns = {}
        _into(out, fields, gathered, "")
        return out
    by_shape: dict[tuple[bool, ...], list[int]] = {}  # in the order the rows first show each
    for i, shape in enumerate(shapes):
        by_shape.setdefault(shape, []).append(i)
    merged: Columns = {}  # each shape's names after those of the shapes seen before it
    for rows in by_shape.values():  # one shape's columns at a time, merged and dropped
        for name, values in columns(fields, [objs[i] for i in rows]).items():
            column = merged.get(name)
            if column is None:
                column = merged[name] = [None] * len(objs)
            for i, value in zip(rows, values, strict=True):
                column[i] = value
    return merged


def _shapes(fields: Fields, gathered: "_Gathered") -> list[tuple[bool, ...]] | None:
    """Each object's shape (whether it holds each `Present` or `Maybe` block outside any
    other), or None where every object holds the same ones."""
    held: list[list[bool]] = []
    _held_blocks(fields, gathered, held)
    if all(all(mask) or not any(mask) for mask in held):
        return None
    return list(zip(*held, strict=True))


def _held_blocks(node: Fields, gathered: "_Gathered", held: list[list[bool]]) -> None:
    """Append to `held`, for each `Present` or `Maybe` block of `node` outside any other,
    whether each object holds it. (A function of the module, not a closure: a recursive
    closure is a reference cycle, which kept a block's objects alive until the cyclic
    garbage collector ran.)"""
    for f in node.values():
        if isinstance(f, Present | Maybe):
            whens = zip(*(gathered[path] for path in f.when), strict=True)
            held.append([all(v is not None for v in values) for values in whens])
        elif not isinstance(f, Leaf | Const):
            _held_blocks(f, gathered, held)


class _Gathered(dict[str, list[Any]]):
    """The objects' values at each path read so far: a path is read from its parent's values
    (one attribute a value), so leaves that share a parent do not each walk to it."""

    def __init__(self, objs: list[Any]) -> None:
        super().__init__({"": objs})

    def __missing__(self, path: str) -> list[Any]:
        parent, _, name = path.rpartition(".")
        values = self[path] = list(map(attrgetter(name), self[parent]))
        return values


def _into(out: Columns, fields: Fields, gathered: _Gathered, prefix: str) -> None:
    objs = gathered[""]
    for key, f in fields.items():
        name = prefix + key
        if isinstance(f, Leaf):
            values = gathered[f.path]
            first = values[0]
            if values[-1] is first and all(v is first for v in values):
                # one object throughout (a block's shared profile tables or link offerings):
                # converted once (a conversion is a function of its value alone)
                value = first if f.convert is None else f.convert(first)
                out[name] = _as_flattened([value]) * len(objs)
                continue
            if f.convert is number and set(map(type, values)) <= _FLOAT_OR_NONE:
                pass  # `number` of a float or None is what flattening writes anyway
            elif f.convert is not None and type(f.convert(first)) is list:
                out[name] = _lists(f.convert, values)
                continue
            elif f.convert is not None:
                values = list(map(f.convert, values))
            out[name] = _as_flattened(values)
        elif isinstance(f, Const):
            out[name] = _as_flattened([f.value]) * len(objs)
        elif isinstance(f, Present | Maybe):
            whens = zip(*(gathered[path] for path in f.when), strict=True)
            missing = sum(any(v is None for v in values) for values in whens)
            if 0 < missing < len(objs):
                raise NotColumnarError(name)
            if not missing:
                _block(out, f.fields, gathered, name)
            elif isinstance(f, Maybe):
                out[name] = [None] * len(objs)
        else:
            _block(out, f, gathered, name)


def _lists(convert: Callable[[Any], Any], values: list[Any]) -> list[Any]:
    """The flattened lists `convert` makes of `values`, each object converted and flattened
    once (a list's JSON is a leaf's dearest conversion; objects recur in a block: a plan's
    binding terms, the link offerings a pricing keeps)."""
    done: dict[int, Any] = {}
    out = []
    for value in values:
        key = id(value)  # `values` holds every object: no id is reused while it runs
        if key not in done:
            done[key] = _as_flattened([convert(value)])[0]
        out.append(done[key])
    return out


def _block(out: Columns, fields: Fields, gathered: _Gathered, name: str) -> None:
    """A nested object: its leaves under `name.`, or, where it has none (no field, or only
    absent `Present` blocks), null, as an empty object flattens."""
    before = len(out)
    _into(out, fields, gathered, name + ".")
    if len(out) == before:
        out[name] = [None] * len(gathered[""])


_PLAIN = frozenset({int, str, bool, type(None)})
_NUMBERS = frozenset({int, float, bool, type(None)})
_FLOAT_OR_NONE = frozenset({float, type(None)})


def _as_flattened(values: list[Any]) -> list[Any]:
    """A column's values as `flatten` writes leaves: a non-finite float null, a list of
    strings joined by commas, any other list its JSON; an object is not a leaf."""
    kinds = set(map(type, values))
    if kinds <= _PLAIN:
        return values
    if kinds <= _NUMBERS and _finite_sum(values):
        return values
    if kinds <= _PLAIN | {float}:
        return [v if type(v) is not float or v - v == 0 else None for v in values]
    if dict in kinds:
        raise NotColumnarError("an object where a leaf was expected")
    return [v if type(v) in _PLAIN else flat_leaf(v) for v in values]


def _finite_sum(values: list[Any]) -> bool:
    """Whether the numbers' sum (None left out) is finite: only if every term is (a false
    answer may also be an overflow; the caller then looks at each)."""
    try:
        return math.isfinite(sum(filter(None, values)))
    except OverflowError:  # an int beyond a float's range beside a float
        return False


def flat_leaf(value: Any) -> Any:
    """A leaf of a flattened document (sweep/flat.py): a non-finite float null, a list of
    strings one comma-separated string, any other list its JSON, anything else itself."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        strings = all(isinstance(v, str) for v in value)
        return ",".join(value) if strings else json.dumps(value)
    return value
