"""A JSON document as one row of a sweep's results: one level of dotted keys; rows as columns.
(A block of `optimize` reports is written as columns straight from its fields:
render/fields.py, the same names and values.)"""

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
