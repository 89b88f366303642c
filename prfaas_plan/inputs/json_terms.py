"""The terms of a bounded JSON read (inputs/bounded_json.py): the `Shape` a caller declares for a
member, what a big member is held as (`NumberLists`, or `Omitted` when it was not asked for),
and the `Budget` of values the reads that share it may still spend. No units (the callers'
field names carry them).
"""

from dataclasses import dataclass
from enum import Enum

import numpy as np

from prfaas_plan.errors import ConfigError


class Shape(Enum):
    """What a declared member must hold (the value is what a message says was expected)."""

    NUMBERS = "a list of numbers"
    NUMBER_LISTS = "a list of lists of numbers"
    TEXTS = "a list of text or null"


@dataclass(frozen=True)
class NumberLists:
    """A list of number lists, flattened: list i is values[offsets[i]:offsets[i] + counts[i]]."""

    values: np.ndarray  # float64, list after list
    counts: np.ndarray  # int64, the length of each list


@dataclass(frozen=True)
class Omitted:
    """A list or object the caller did not ask for: walked (so the document is valid JSON with
    unique keys) and dropped."""

    kind: str  # "list" or "object"

    def __repr__(self) -> str:
        return f"<a {self.kind}, not read>"


class Budget:
    """How many more values the documents sharing it may hold, charged before they are
    decoded: numbers of lists of scalars (decoded at C speed, 8 bytes each when kept), and
    the members and elements walked one at a time (~1-4 us each; an object's keys are held
    while it is walked)."""

    def __init__(self, numbers: int, walked: int, scope: str) -> None:
        self.numbers_limit, self.numbers_left = numbers, numbers
        self.walked_limit, self.walked_left = walked, walked
        self.scope = scope  # what shares it, for the message: "the files of one import"

    def charge(self, count: int, where: str) -> None:
        """`count` elements of a list of scalars."""
        if count > self.numbers_left:
            self.refuse(self.numbers_limit, "numbers in lists", where)
        self.numbers_left -= count

    def charge_walked(self, where: str) -> None:
        """One member or element walked."""
        if not self.walked_left:
            self.refuse(self.walked_limit, "members and list elements read one by one", where)
        self.walked_left -= 1

    def refuse(self, limit: int, what: str, where: str) -> None:
        raise ConfigError(
            f"{where}: {self.scope} hold more than {limit:,} {what}; import fewer or shorter runs"
        )
