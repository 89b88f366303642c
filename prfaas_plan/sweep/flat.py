"""A JSON document as one row of a sweep's results: one level of dotted keys; a block of
documents of one shape as columns, by a reader compiled from that shape."""

from functools import lru_cache
from types import CodeType
from typing import Any

from prfaas_plan.render.fields import flat_leaf as _leaf


def flatten(document: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON document as one level of dotted keys; non-finite numbers become null, an empty
    object null, a list of strings one comma-separated string, any other list its JSON."""
    out: dict[str, Any] = {}
    if isinstance(document, dict):
        if document:
            _into(out, document, prefix)
        elif prefix:
            out[prefix[:-1]] = None
    else:
        out[prefix[:-1]] = _leaf(document)
    return out


def _into(out: dict[str, Any], document: dict[Any, Any], prefix: str) -> None:
    """`document`'s members into `out` under `prefix` (one pass, no intermediate dicts: a sweep
    flattens a few hundred keys per scenario; the common leaf types tested first, by type)."""
    for key, value in document.items():
        name = f"{prefix}{key}"
        kind = type(value)
        if kind is float:
            out[name] = value if value - value == 0 else None  # inf - inf and nan: nan
        elif kind in _PLAIN:
            out[name] = value
        elif kind is dict:
            if value:
                _into(out, value, name + ".")
            else:
                out[name] = None
        else:
            out[name] = _leaf(value)


_PLAIN = frozenset({int, str, bool, type(None)})


def documents_as_columns(documents: list[Any]) -> dict[str, list[Any]]:
    """`columns_of([flatten(d) for d in documents])`, the same columns (names in the same
    order, the same values), faster where the documents share one shape, as a sweep's block
    of one command's documents does: the first non-empty object's shape is compiled into a
    function reading each leaf by its keys (`_compiled`: about half the time of walking each
    document); a document of another shape is flattened on its own, and so is every document
    where the first's shape is not one the reader takes."""
    first = next((d for d in documents if type(d) is dict and d), None)
    compiled = None if first is None else _compiled(first)
    if compiled is None:
        return columns_of([flatten(d) for d in documents])
    names, read = compiled
    values: list[tuple[Any, ...]] = []
    others: dict[int, dict[str, Any]] = {}  # position -> its own flattening
    for i, document in enumerate(documents):
        try:
            values.append(read(document))
        except (_OtherShapeError, KeyError):  # a key of the shape missing
            others[i] = flatten(document)
    if not others:
        columns = zip(*values, strict=True) if values else (() for _ in names)
        return dict(zip(names, map(list, columns), strict=True))
    shaped = iter(values)
    return columns_of([
        others[i] if i in others else dict(zip(names, next(shaped), strict=True))
        for i in range(len(documents))
    ])  # fmt: skip


class _OtherShapeError(Exception):
    """A document whose shape is not the compiled one."""


# a shape with more leaves is flattened document by document: compiling its reader costs
# ~45 µs a leaf (once per shape), which a block of a few hundred documents repays
MAX_COMPILED_LEAVES = 4096


def _compiled(first: dict[Any, Any]) -> tuple[list[str], Any] | None:
    """The flattened names of `first` and a function of a document that, for one of the same
    shape (the same objects, each with the same keys in any order, where `first` has a
    non-empty object), returns the flattened values in the same order, converting each leaf
    as `_into` does; it raises _OtherShapeError, or KeyError for a missing key, for any other
    (an object where `first` has a leaf or the reverse, a top level that is not an object).
    None where `first`'s shape is not one to compile: a key that is not a str (1, 1.0 and
    True find each other's members but name different columns), two members whose names
    meet (`{"a.b": 1, "a": {"b": 2}}`: flattening keeps whichever a document writes last), or
    more than MAX_COMPILED_LEAVES leaves. (A JSON document's keys are str; so are this
    package's documents'.)"""
    names: list[str] = []
    keys: list[Any] = []
    lines = [
        "def read(n0):",
        f"    if type(n0) is not _dict or len(n0) != {len(first)}: raise _OtherShapeError",
    ]
    leaves: list[str] = []
    counter = [0]

    def walk(node: dict[Any, Any], var: str, prefix: str) -> None:
        for key, value in node.items():
            if type(key) is not str:
                raise _OtherShapeError
            keys.append(key)
            at = f"{var}[_K[{len(keys) - 1}]]"
            if type(value) is dict and value:
                counter[0] += 1
                child = f"n{counter[0]}"
                lines.append(f"    {child} = {at}")
                lines.append(
                    f"    if type({child}) is not _dict or len({child}) != {len(value)}:"
                    " raise _OtherShapeError"
                )
                walk(value, child, f"{prefix}{key}.")
                continue
            leaf = f"v{len(leaves)}"
            leaves.append(leaf)
            names.append(f"{prefix}{key}")
            lines.append(f"    {leaf} = {at}")
            lines.append(f"    if type({leaf}) is _float:")
            lines.append(f"        if {leaf} - {leaf} != 0: {leaf} = None")  # inf, nan
            lines.append(f"    elif type({leaf}) not in _PLAIN: {leaf} = _other({leaf})")

    try:
        walk(first, "n0", "")
    except _OtherShapeError:
        return None
    if len(names) > MAX_COMPILED_LEAVES or len(set(names)) < len(names):
        return None
    lines.append(f"    return ({', '.join(leaves)},)")
    scope: dict[str, Any] = {
        "_dict": dict, "_float": float, "_PLAIN": _PLAIN, "_K": tuple(keys),
        "_OtherShapeError": _OtherShapeError, "_other": _other_leaf,
    }  # fmt: skip
    exec(_code("\n".join(lines)), scope)
    return names, scope["read"]


@lru_cache(maxsize=64)
def _code(source: str) -> CodeType:
    """`source` compiled, once per process: a sweep's blocks share a shape (~10 ms a shape)."""
    return compile(source, "<flattened shape>", "exec")


def _other_leaf(value: Any) -> Any:
    """A leaf of another type than float and _PLAIN's, as `_into` writes it: an empty object
    null; a non-empty one is not a leaf (another shape)."""
    if type(value) is dict:
        if value:
            raise _OtherShapeError
        return None
    return _leaf(value)


def columns_of(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Flattened rows as columns, every name of any row, None where a row lacks it (rows of
    one document type usually share their names, in the same order: then one transpose)."""
    if not rows:
        return {}
    names = tuple(rows[0])
    if all(tuple(row) == names for row in rows):
        columns = zip(*(row.values() for row in rows), strict=True)
        return dict(zip(names, map(list, columns), strict=True))
    every = dict.fromkeys(name for row in rows for name in row)
    return {name: [row.get(name) for row in rows] for name in every}
