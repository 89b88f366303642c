"""Sweep filters: a small expression language over the axes (names, numbers, strings, + - * /,
comparisons, and/or/not), parsed with `ast` and evaluated by a small interpreter, never `eval`.

The language is typed before a point is generated (`Filter.check`): every name's kinds (number
or string) and bounds come from its axis or the base scenario, and an operation that is not
defined for the kinds it may meet (`<` between a number and a string, `-` of a string, a
mapping anywhere) or that could build a string over plausible.MAX_FILTER_STRING_CHARS (`"a" * n`)
is refused in one line naming the filter, the operation and the kinds. The interpreter checks
the same again on each value, and refuses an integer over plausible.MAX_FILTER_INT_BITS bits before
computing it, so no filter spends unbounded memory or time on one point.
"""

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError

_ORDER: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip
_EQUALITY: dict[type, Callable[[Any, Any], Any]] = {ast.Eq: operator.eq, ast.NotEq: operator.ne}
_COMPARE = {**_ORDER, **_EQUALITY}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_SYMBOL = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Lt: "<", ast.LtE: "<=",
    ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
}  # fmt: skip

NUMBER, STRING = "a number", "a string"


@dataclass(frozen=True)
class Kind:
    """What an expression may be: its kinds (NUMBER, STRING), an upper bound on the magnitude
    of its numbers and on the length of its strings, and whether its numbers are all integers
    (a string repeats only an integer number of times)."""

    kinds: frozenset[str]
    max_abs: float = 0.0
    max_chars: int = 0
    integer: bool = True


def kind_of_values(values: list[Any]) -> Kind:
    """The kind of a name that takes `values` (an axis's values, or a base scenario field)."""
    numbers = [v for v in values if isinstance(v, int | float)]
    strings = [v for v in values if isinstance(v, str)]
    return Kind(
        frozenset(([NUMBER] if numbers else []) + ([STRING] if strings else [])),
        max((_magnitude(v) for v in numbers), default=0.0),
        max((len(s) for s in strings), default=0),
        all(isinstance(v, int) for v in numbers),
    )


def kind_of_range(low: float, high: float, integer: bool) -> Kind:
    """The kind of an axis over the interval [low, high] (rounded when `integer`)."""
    return Kind(frozenset([NUMBER]), max(abs(low), abs(high)) + (1 if integer else 0), 0, integer)


def _magnitude(value: float) -> float:
    try:
        return abs(float(value))
    except OverflowError:  # an integer beyond a float's range
        return math.inf


def _bits(magnitude: float) -> float:
    """The bits an integer of at most `magnitude` takes (inf for an unbounded one)."""
    return (
        math.log2(magnitude) + 1
        if 0 < magnitude < math.inf
        else (0 if magnitude == 0 else math.inf)
    )


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _dotted(node.value)
        return None if parent is None else f"{parent}.{node.attr}"
    return None


def _kind_name(value: Any) -> str:
    if isinstance(value, int | float):
        return NUMBER
    if isinstance(value, str):
        return STRING
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else type(value).__name__


@dataclass(frozen=True)
class Filter:
    """A parsed filter expression; `names` are the dotted names it reads; `where` names it in
    messages (`sweep.yaml: filters[0]`)."""

    text: str
    where: str
    tree: ast.Expression
    names: frozenset[str]

    @classmethod
    def parse(cls, text: str, where: str) -> "Filter":
        if len(text) > plausible.MAX_FILTER_CHARS:
            raise ConfigError(
                f"{where}: a filter must be at most {plausible.MAX_FILTER_CHARS} characters, "
                f"got {len(text)}"
            )
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL
            raise ConfigError(f"{where}: not a comparison: {plausible.quoted(text)}") from None
        names: set[str] = set()
        filter_ = cls(text, where, tree, frozenset())
        filter_._syntax(tree.body, names)
        return cls(text, where, tree, frozenset(names))

    def _refuse(self, what: str) -> ConfigError:
        return ConfigError(f"{self.where}: {plausible.quoted(self.text)}: {what}")

    def _syntax(self, node: ast.expr, names: set[str]) -> None:
        dotted = _dotted(node)
        if dotted is not None:
            names.add(dotted)
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return
        children: list[ast.expr]
        if isinstance(node, ast.BoolOp):
            children = list(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
            children = [node.operand]
        elif isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
            children = [node.left, node.right]
        else:
            raise self._refuse(
                f"uses {type(node).__name__}; filters take names, numbers, strings, + - * /, "
                "comparisons and and/or/not"
            )
        for child in children:
            self._syntax(child, names)

    # ---- types, before any point is generated ---------------------------------------------

    def check(self, kinds: Mapping[str, Kind]) -> None:
        """Refuse, in one line, an operation the filter may apply to kinds it is not defined
        for, or a string it could build over plausible.MAX_FILTER_STRING_CHARS (`kinds`: each
        name's, from its axis or the base scenario)."""
        self._kind(self.tree.body, kinds)

    def _operand(self, node: ast.expr, kind: str) -> str:
        text = ast.unparse(node)
        if len(text) > plausible.MAX_QUOTED_CHARS:
            text = text[: plausible.MAX_QUOTED_CHARS - 3] + "..."
        return f"{text} ({kind})"

    def _kind(self, node: ast.expr, kinds: Mapping[str, Kind]) -> Kind:
        dotted = _dotted(node)
        if dotted is not None:
            return kinds[dotted]
        if isinstance(node, ast.Constant):
            return kind_of_values([node.value])
        if isinstance(node, ast.BoolOp):
            for value in node.values:
                self._kind(value, kinds)
            return Kind(frozenset([NUMBER]), 1.0)
        if isinstance(node, ast.UnaryOp):
            inner = self._kind(node.operand, kinds)
            if isinstance(node.op, ast.Not):
                return Kind(frozenset([NUMBER]), 1.0)
            if STRING in inner.kinds:
                raise self._refuse(
                    f"- of {self._operand(node.operand, STRING)} is not defined; "
                    "negate numbers only"
                )
            return inner
        if isinstance(node, ast.Compare):
            left_node, left = node.left, self._kind(node.left, kinds)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self._kind(right_node, kinds)
                if type(op) in _ORDER:
                    for a in left.kinds:
                        for b in right.kinds:
                            if a != b:
                                raise self._refuse(
                                    f"{_SYMBOL[type(op)]} between "
                                    f"{self._operand(left_node, a)} and "
                                    f"{self._operand(right_node, b)} is not defined; compare "
                                    "numbers with numbers and strings with strings"
                                )
                left_node, left = right_node, right
            return Kind(frozenset([NUMBER]), 1.0)
        assert isinstance(node, ast.BinOp)  # _syntax admits nothing else
        return self._binary_kind(node, self._kind(node.left, kinds), self._kind(node.right, kinds))

    def _binary_kind(self, node: ast.BinOp, left: Kind, right: Kind) -> Kind:
        op = type(node.op)
        out: set[str] = set()
        max_abs, max_chars, integer = 0.0, 0, op is not ast.Div
        for a in left.kinds:
            for b in right.kinds:
                if a == b == NUMBER:
                    out.add(NUMBER)
                    if op is ast.Mult:
                        max_abs = max(max_abs, left.max_abs * right.max_abs)
                    elif op is not ast.Div:  # a quotient's bound is a float's (inf)
                        max_abs = max(max_abs, left.max_abs + right.max_abs)
                    else:
                        max_abs = math.inf
                    integer = integer and left.integer and right.integer
                elif a == b == STRING and op is ast.Add:
                    out.add(STRING)
                    max_chars = max(max_chars, left.max_chars + right.max_chars)
                elif op is ast.Mult and {a, b} == {NUMBER, STRING}:
                    count = right if a == STRING else left
                    text = left if a == STRING else right
                    count_node = node.right if a == STRING else node.left
                    if not count.integer:
                        fractional = self._operand(count_node, "a number, maybe fractional")
                        raise self._refuse(
                            f"* of a string by {fractional} is not defined; a string repeats "
                            "a whole number of times"
                        )
                    chars = text.max_chars * count.max_abs if text.max_chars else 0.0
                    if chars > plausible.MAX_FILTER_STRING_CHARS:
                        raise self._refuse(
                            f"* may repeat a string of up to {text.max_chars:,} character(s) "
                            f"up to {count.max_abs:,.0f} times; a filter's strings are at most "
                            f"{plausible.MAX_FILTER_STRING_CHARS:,} characters"
                        )
                    out.add(STRING)
                    max_chars = max(max_chars, int(chars))
                else:
                    raise self._refuse(
                        f"{_SYMBOL[op]} of {self._operand(node.left, a)} and "
                        f"{self._operand(node.right, b)} is not defined; filters add, subtract, "
                        "multiply and divide numbers, join strings with + and repeat a string "
                        "with * a whole number"
                    )
        if max_chars > plausible.MAX_FILTER_STRING_CHARS:
            raise self._refuse(
                f"{_SYMBOL[op]} may build a string of up to {max_chars:,} characters; a "
                f"filter's strings are at most {plausible.MAX_FILTER_STRING_CHARS:,} characters"
            )
        if NUMBER in out and integer and _bits(max_abs) > plausible.MAX_FILTER_INT_BITS:
            raise self._refuse(
                f"{_SYMBOL[op]} may make an integer beyond 2^{plausible.MAX_FILTER_INT_BITS} (its "
                f"operands reach {plausible.quoted(left.max_abs)} and {plausible.quoted(right.max_abs)}); "
                f"a filter's integers are at most {plausible.MAX_FILTER_INT_BITS:,} bits"
            )
        return Kind(frozenset(out), max_abs, max_chars, integer)

    # ---- evaluation, one point at a time ---------------------------------------------------

    def __call__(self, values: Mapping[str, Any]) -> bool:
        return bool(self._value(self.tree.body, values))

    def _value(self, node: ast.expr, values: Mapping[str, Any]) -> Any:
        dotted = _dotted(node)
        if dotted is not None:
            value = values[dotted]
            if not isinstance(value, int | float | str):
                raise self._refuse(
                    f"{dotted} is {_kind_name(value)}, expected a number or a string"
                )
            return value
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BoolOp):
            parts = (self._value(v, values) for v in node.values)
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        if isinstance(node, ast.UnaryOp):
            inner = self._value(node.operand, values)
            if isinstance(node.op, ast.Not):
                return not inner
            if not isinstance(inner, int | float):
                raise self._refuse(f"- of {_kind_name(inner)} is not defined")
            return -inner
        if isinstance(node, ast.BinOp):
            return self._arithmetic(
                type(node.op), self._value(node.left, values), self._value(node.right, values)
            )
        assert isinstance(node, ast.Compare)  # _syntax admits nothing else
        left = self._value(node.left, values)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._value(comparator, values)
            if type(op) in _ORDER and isinstance(left, str) != isinstance(right, str):
                raise self._refuse(
                    f"{_SYMBOL[type(op)]} between {_kind_name(left)} and {_kind_name(right)} "
                    "is not defined"
                )
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _arithmetic(self, op: type[ast.operator], left: Any, right: Any) -> Any:
        numbers = isinstance(left, int | float) and isinstance(right, int | float)
        if isinstance(left, str) and isinstance(right, str) and op is ast.Add:
            self._check_chars(len(left) + len(right), op)
            return left + right
        if op is ast.Mult and isinstance(left, str) != isinstance(right, str):
            text, count = (left, right) if isinstance(left, str) else (right, left)
            if not isinstance(count, int):
                raise self._refuse(f"* of a string by {_kind_name(count)} {count!r} is not defined")
            self._check_chars(len(text) * max(count, 0), op)
            return text * count
        if not numbers:
            raise self._refuse(
                f"{_SYMBOL[op]} of {_kind_name(left)} and {_kind_name(right)} is not defined"
            )
        if isinstance(left, int) and isinstance(right, int):
            size = max(left.bit_length(), right.bit_length()) + 1
            if op is ast.Mult:
                size = left.bit_length() + right.bit_length()
            if size > plausible.MAX_FILTER_INT_BITS:
                raise self._refuse(
                    f"{_SYMBOL[op]} would make an integer of up to {size:,} bits; a filter's "
                    f"integers are at most {plausible.MAX_FILTER_INT_BITS:,} bits"
                )
        try:
            if op is ast.Div:
                return left / right if right != 0 else math.inf
            return {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}[op](
                left, right
            )
        except OverflowError:  # an integer too large for a float
            raise self._refuse(
                f"{_SYMBOL[op]} of numbers beyond a float's range ({plausible.quoted(left)}, "
                f"{plausible.quoted(right)})"
            ) from None

    def _check_chars(self, chars: int, op: type[ast.operator]) -> None:
        if chars > plausible.MAX_FILTER_STRING_CHARS:
            raise self._refuse(
                f"{_SYMBOL[op]} would build a string of {chars:,} characters; a filter's "
                f"strings are at most {plausible.MAX_FILTER_STRING_CHARS:,} characters"
            )
