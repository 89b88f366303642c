"""A JSON document as one row of a sweep's results: one level of dotted keys."""

import json
import math
from typing import Any


def flatten(document: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON document as one level of dotted keys; non-finite numbers become null."""
    out: dict[str, Any] = {}
    if isinstance(document, dict):
        for key, value in document.items():
            out.update(flatten(value, f"{prefix}{key}."))
        if not document and prefix:
            out[prefix[:-1]] = None
        return out
    name = prefix[:-1]
    if isinstance(document, list):
        strings = all(isinstance(v, str) for v in document)
        out[name] = ",".join(document) if strings else json.dumps(document)
    elif isinstance(document, float) and not math.isfinite(document):
        out[name] = None
    else:
        out[name] = document
    return out
