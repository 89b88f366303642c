"""JSON objects read member by member within a budget of values: a key repeated in one object
refused at every depth, and the big per-request lists of a benchmark result decoded straight
into float64 arrays. No units (the callers' field names carry them).

`json.loads` holds every number of a document as a Python object (a float and its list slot are
32 bytes: 1.6x the text of a 17-digit float, 8x that of `1.5,`), so a 256 MiB result took 2 GB
and a minute before anything was checked; and of two equal keys it keeps the last without a
word. Here the json module's own C decoder is driven one member at a time, and never decodes
an object or a nested list whole:
- a member the caller declares `Shape.NUMBERS` (`[1, 2.5, ...]`) or `Shape.NUMBER_LISTS`
  (`[[...], [...]]`) becomes float64 arrays (8 bytes a number). Each list of numbers is
  charged to the `Budget` by its commas before it is decoded, and decoded by chunks of
  _CHUNK_CHARS (so its Python floats never all exist at once); a string, object or list
  inside one is refused before it is decoded;
- a `Shape.TEXTS` member (a list of strings or nulls) is decoded one element at a time;
- a member named in `nested` that holds an object is read by the same rules, one level down;
- any other member is decoded when it is a scalar; a list of scalars is decoded by chunks and
  dropped, any other list or object walked one value at a time (nesting at most
  plausible.MAX_YAML_DEPTH deep) and dropped: the record holds an `Omitted` in its place.
Every member and element walked one at a time is charged to the budget too. So memory is the
text plus 8 bytes a number kept, and time is linear in the text and bounded by the budget.
"""

import json
import re
import sys
from array import array
from collections.abc import Callable, Collection, Mapping
from typing import cast

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.json_terms import Budget, NumberLists, Omitted, Shape

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SPACES = (" ", "\t", "\n", "\r")
_DECODER = json.JSONDecoder()
_KINDS = {"[": "a list", "{": "an object", '"': "text"}
# characters of a list of scalars decoded at once: ~0.5 million numbers, 16 MB as Python objects
_CHUNK_CHARS = 2**20


def skip_whitespace(text: str, i: int) -> int:
    """The index of the first character at or after `i` that is not JSON whitespace."""
    if not text.startswith(_SPACES, i):  # the usual cases first: none, or json.dump's one
        return i
    if not text.startswith(_SPACES, i + 1):
        return i + 1
    match = _WHITESPACE.match(text, i)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def read_object(
    text: str,
    where: str,
    what: str,
    shapes: Mapping[str, Shape],
    budget: Budget,
    *,
    nested: Collection[str] = (),
    start: int = 0,
) -> tuple[dict[str, object], int]:
    """The JSON object at `start` of `text` (after whitespace), its members read by `shapes`
    (module docstring), and the index just past it. `where` names the document in messages,
    `what` the kind of file expected (`a vLLM result JSON`)."""
    reader = _Reader(text, where, what, shapes, budget)
    i = reader.skip_whitespace(start)
    if not text.startswith("{", i):
        if i == len(text):
            raise ConfigError(f"{where}: no JSON object, expected {what}")
        if text[i] in '["-0123456789tfn':
            raise ConfigError(f"{where}: expected a JSON object, found {reader.describe(i)}")
        raise reader.malformed(i, "expecting '{'")
    return reader.record(i, 1, nested)


class _Reader:
    def __init__(
        self, text: str, where: str, what: str, shapes: Mapping[str, Shape], budget: Budget
    ) -> None:
        self.text, self.where, self.what = text, where, what
        self.shapes, self.budget = shapes, budget

    # --- positions and messages ---

    def skip_whitespace(self, i: int) -> int:
        return skip_whitespace(self.text, i)

    def malformed(self, i: int, problem: str) -> ConfigError:
        line = self.text.count("\n", 0, i) + 1
        column = i - (self.text.rfind("\n", 0, i) + 1) + 1
        return ConfigError(
            f"{self.where}: not JSON ({problem} at line {line} column {column}); is this "
            f"{self.what}?"
        )

    def describe(self, i: int) -> str:
        """The value at `i` for a message: its kind, or a short repr of a scalar."""
        kind = _KINDS.get(self.text[i : i + 1])
        if kind is not None and kind != "text":
            return kind
        value, _ = self.decode(i)
        return plausible.quoted(value)

    def decode(self, i: int) -> tuple[object, int]:
        """The value at `i` by the C decoder (only ever a scalar or a checked number list)."""
        try:
            return _DECODER.raw_decode(self.text, i)
        except json.JSONDecodeError as exc:
            raise self.malformed(exc.pos, exc.msg.lower()) from None
        except ValueError:  # int()'s 4,300-digit limit
            raise self.malformed(i, "an integer of more than 4,300 digits") from None

    # --- containers, walked ---

    def walk_object(self, i: int, depth: int, member: Callable[[str, int, int], int]) -> int:
        """member(key, value start, depth) -> value end for each member of the object at `i`;
        the index past the object. A key seen before in this object is refused."""
        self.check_depth(i, depth)
        text = self.text
        i = self.skip_whitespace(i + 1)
        if text.startswith("}", i):
            return i + 1
        seen: set[str] = set()
        while True:
            if not text.startswith('"', i):
                raise self.malformed(i, "expecting a key in double quotes")
            key_at = i
            key, i = self.decode(i)
            assert isinstance(key, str)
            if key in seen:
                line = text.count("\n", 0, key_at) + 1
                raise ConfigError(
                    f"{self.where}: duplicate key {plausible.quoted(key)} in one JSON object (line "
                    f"{line}); the last would silently replace the first: keep one"
                )
            seen.add(key)
            self.budget.charge_walked(self.where)
            i = self.skip_whitespace(i)
            if not text.startswith(":", i):
                raise self.malformed(i, "expecting ':'")
            i = self.skip_whitespace(member(key, self.skip_whitespace(i + 1), depth + 1))
            if text.startswith(",", i):
                i = self.skip_whitespace(i + 1)
            elif text.startswith("}", i):
                return i + 1
            else:
                raise self.malformed(i, "expecting ',' or '}'")

    def walk_list(self, i: int, depth: int, element: Callable[[int, int, int], int]) -> int:
        """element(index, start, depth) -> end for each element of the list at `i`; the index
        past the list."""
        self.check_depth(i, depth)
        text = self.text
        i = self.skip_whitespace(i + 1)
        if text.startswith("]", i):
            return i + 1
        n = 0
        while True:
            self.budget.charge_walked(self.where)
            i = self.skip_whitespace(element(n, i, depth + 1))
            n += 1
            if text.startswith(",", i):
                i = self.skip_whitespace(i + 1)
            elif text.startswith("]", i):
                return i + 1
            else:
                raise self.malformed(i, "expecting ',' or ']'")

    def check_depth(self, i: int, depth: int) -> None:
        if depth > plausible.MAX_YAML_DEPTH:
            raise self.malformed(i, f"nested deeper than {plausible.MAX_YAML_DEPTH} levels")

    def skip(self, i: int, depth: int) -> int:
        """Walk the value at `i` without keeping it; the index past it."""
        first = self.text[i : i + 1]
        if first == "{":
            return self.walk_object(i, depth, lambda _, start, d: self.skip(start, d))
        if first == "[":
            end, other = self.flat_end(i)
            if other < 0:  # only scalars: decoded at C speed and dropped
                self.budget.charge(self.text.count(",", i, end) + 1, self.where)
                if end - i > _CHUNK_CHARS:
                    self.decode_scalars(i, end, "", None)
                else:
                    self.decode(i)
                return end + 1
            return self.walk_list(i, depth, lambda _, start, d: self.skip(start, d))
        return self.decode(i)[1]  # charged by its list or object

    # --- members ---

    def record(self, i: int, depth: int, nested: Collection[str]) -> tuple[dict[str, object], int]:
        record: dict[str, object] = {}

        def member(key: str, start: int, d: int) -> int:
            shape = self.shapes.get(key)
            first = self.text[start : start + 1]
            value: object
            if shape is Shape.NUMBERS:
                value, end = self.numbers(start, key)
            elif shape is Shape.NUMBER_LISTS:
                value, end = self.number_lists(start, key, d)
            elif shape is Shape.TEXTS:
                value, end = self.texts(start, key, d)
            elif key in nested and first == "{":
                value, end = self.record(start, d, ())
            elif first in ("[", "{"):
                value, end = Omitted("list" if first == "[" else "object"), self.skip(start, d)
            else:
                value, end = self.decode(start)
            record[key] = value
            return end

        return record, self.walk_object(i, depth, member)

    def expect_list(self, i: int, field: str, shape: Shape) -> None:
        if not self.text.startswith("[", i):
            found = self.describe(i) if i < len(self.text) else "nothing"
            raise ConfigError(
                f"{self.where}: {field} must be {shape.value} (one entry per request), "
                f"found {found}"
            )

    def flat_end(self, i: int) -> tuple[int, int]:
        """(index of the `]` closing the list at `i`, index of the first string, object or
        list inside it or -1): a list of scalars ends at its first `]`."""
        text = self.text
        end = text.find("]", i)
        if end < 0:
            raise self.malformed(len(text), "a list that never ends")
        first = -1
        for c in '"[{':
            p = text.find(c, i + 1, end)
            if p >= 0 and (first < 0 or p < first):
                first = p
        return end, first

    def numbers_into(self, i: int, field: str, into: "array[float]") -> int:
        """Append the flat list of numbers at `i` to `into`, charged to the budget by its
        commas before it is decoded; the index past it."""
        self.expect_list(i, field, Shape.NUMBERS)
        end, other = self.flat_end(i)
        if other >= 0:  # the commas before it separate numbers: it is element k
            k = self.text.count(",", i, other)
            raise ConfigError(
                f"{self.where}: {field}[{k}] must be a number, found {_KINDS[self.text[other]]}"
            )
        self.budget.charge(self.text.count(",", i, end) + 1, self.where)
        self.decode_scalars(i, end, field, into)
        return end + 1

    def decode_scalars(self, i: int, end: int, field: str, into: "array[float] | None") -> None:
        """Decode the list text[i..end] of scalars a chunk of _CHUNK_CHARS at a time (as Python
        objects, 32 bytes a float, a whole 256 MiB list would take 1 GB): each number is
        appended to `into`, or, with None, dropped (a value of any type)."""
        text, start, done = self.text, i + 1, 0
        if end - start <= _CHUNK_CHARS:  # the usual list, decoded where it lies
            values, _ = self.decode(i)
            if into is not None:
                self.append_numbers(cast(list[object], values), field, 0, into)
            return
        while True:
            cut = end
            if end - start > _CHUNK_CHARS:
                cut = text.rfind(",", start, start + _CHUNK_CHARS)
                if cut < 0:  # one very long value: up to the comma after it
                    cut = text.find(",", start + _CHUNK_CHARS, end)
                    cut = end if cut < 0 else cut
            if start > i + 1 and skip_whitespace(text, start) == cut:
                raise self.malformed(start, "expecting value")  # `1,]` split at its comma
            try:
                values = _DECODER.decode(f"[{text[start:cut]}]")
            except json.JSONDecodeError as exc:
                raise self.malformed(start + exc.pos - 1, exc.msg.lower()) from None
            except ValueError:  # int()'s 4,300-digit limit
                raise self.malformed(start, "an integer of more than 4,300 digits") from None
            if into is not None:
                self.append_numbers(values, field, done, into)
            done += len(values)
            if cut == end:
                return
            start = cut + 1

    def append_numbers(
        self, values: list[object], field: str, offset: int, into: "array[float]"
    ) -> None:
        if not set(map(type, values)) <= {int, float}:  # a bool is neither
            k = next(n for n, v in enumerate(values) if type(v) not in (int, float))
            raise ConfigError(
                f"{self.where}: {field}[{offset + k}] must be a number, found "
                f"{plausible.quoted(values[k])}"
            )
        numbers = cast(list[float], values)
        try:
            into.fromlist(numbers)
        except OverflowError:  # an integer past the largest float, ~1.8e308
            k = next(n for n, v in enumerate(numbers) if abs(v) > sys.float_info.max)
            raise ConfigError(
                f"{self.where}: {field}[{offset + k}] must be finite, found an integer of "
                f"{len(str(numbers[k]))} digits"
            ) from None

    def numbers(self, i: int, field: str) -> tuple[np.ndarray, int]:
        into: array[float] = array("d")
        end = self.numbers_into(i, field, into)
        out = _float64(into)
        finite = np.isfinite(out)
        if not finite.all():
            k = int(np.flatnonzero(~finite)[0])
            raise ConfigError(f"{self.where}: {field}[{k}] must be finite, found {out[k]:g}")
        return out, end

    def number_lists(self, i: int, field: str, depth: int) -> tuple[NumberLists, int]:
        self.expect_list(i, field, Shape.NUMBER_LISTS)
        pooled: array[float] = array("d")
        counts: array[int] = array("q")

        def element(n: int, start: int, _: int) -> int:
            before = len(pooled)
            end = self.numbers_into(start, f"{field}[{n}]", pooled)
            counts.append(len(pooled) - before)
            return end

        end = self.walk_list(i, depth, element)
        lists = NumberLists(_float64(pooled), np.array(counts, dtype=np.int64))
        finite = np.isfinite(lists.values)
        if not finite.all():
            flat = int(np.flatnonzero(~finite)[0])
            ends = np.cumsum(lists.counts)
            n = int(np.searchsorted(ends, flat, side="right"))
            k = flat - int(ends[n] - lists.counts[n])
            raise ConfigError(
                f"{self.where}: {field}[{n}][{k}] must be finite, found {lists.values[flat]:g}"
            )
        return lists, end

    def texts(self, i: int, field: str, depth: int) -> tuple[list[str | None], int]:
        self.expect_list(i, field, Shape.TEXTS)
        out: list[str | None] = []

        def element(n: int, start: int, _: int) -> int:
            if self.text.startswith(("[", "{"), start):
                raise ConfigError(
                    f"{self.where}: {field}[{n}] must be text or null, found {self.describe(start)}"
                )
            value, end = self.decode(start)
            if value is not None and not isinstance(value, str):
                raise ConfigError(
                    f"{self.where}: {field}[{n}] must be text or null, found {plausible.quoted(value)}"
                )
            out.append(value)
            return end

        return out, self.walk_list(i, depth, element)


def _float64(values: "array[float]") -> np.ndarray:
    """The array's numbers as float64 without a copy (the array stays alive behind it)."""
    return np.frombuffer(values, dtype=np.float64) if len(values) else np.empty(0)
