"""What a request's bytes become: JSON within the server's bounds, or an ApiError with its HTTP
status and one line. Used where the request is computed (a worker process), so the one HTTP
process never spends a large body's decoding time while other connections wait."""

import json
from typing import Any

from prfaas_plan import plausible


class ApiError(Exception):
    """A failure answered with `status` and one line (not a library error)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind

    def __reduce__(self) -> tuple[type["ApiError"], tuple[int, str, str]]:
        return ApiError, (self.status, self.kind, str(self))  # it crosses from a worker


def _depth(value: Any, limit: int) -> bool:
    """True when `value` nests no deeper than `limit` (iterative: no recursion to overflow)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return True


def _refuse_constant(name: str) -> None:
    raise ApiError(400, "MalformedBody", f"request: {name} is not a JSON number; send a finite one")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when a key repeats (json keeps the last value: a body saying
    `"target_rps": 4, "target_rps": 400` would be planned for 400 without a word)."""
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ApiError(
                    400, "MalformedBody",
                    f"request: duplicate key {plausible.quoted(key)} in a JSON object; send each "
                    "key once",
                )  # fmt: skip
            seen.add(key)
    return data


def decode_json(raw: bytes, max_depth: int) -> Any:
    """The body as JSON ({} when empty); ApiError 400 when it is not UTF-8 JSON of finite
    numbers nested at most `max_depth` deep, each object's keys distinct."""
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_object)
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "MalformedBody", f"request: body is not UTF-8 (byte {exc.start})"
        ) from None
    except json.JSONDecodeError as exc:
        raise ApiError(
            400,
            "MalformedBody",
            f"request: malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
        ) from None
    except (ValueError, RecursionError):  # int()'s 4,300-digit limit; nesting beyond Python's
        raise ApiError(
            400, "MalformedBody", "request: malformed JSON: a number or nesting beyond limits"
        ) from None
    if not _depth(data, max_depth):
        raise ApiError(400, "MalformedBody", f"request: JSON nested deeper than {max_depth} levels")
    return data
