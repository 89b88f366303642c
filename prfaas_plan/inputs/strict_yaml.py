"""The strict YAML loader: duplicate keys (named, with the line), aliases (`*name`: the only way
a small YAML document grows large when loaded) and nesting deeper than plausible.MAX_YAML_DEPTH
refused, and numbers read as YAML 1.2 reads them (a form only YAML 1.1 reads as a number refused).

PyYAML's SafeLoader with a stricter composer and constructor, over libyaml's parser when PyYAML
was built with it (the pure-Python one otherwise: the same refusals either way). Text in, data
out: `parse_yaml_text` loads text (an upload); a file is read bounded, then loaded here, by
inputs/reading.py `read_yaml`.
"""

import re
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError, PrfaasPlanError

# PyYAML's pure-Python reader compiles this pattern (every character YAML forbids) as PyYAML
# is imported: 57M instructions, 4% of an `optimize`, spent in re's charset optimiser on 63,000
# code points. libyaml's reader, which `optimize` uses, never needs it, so PyYAML is imported
# with it compiled at its first use instead (by the pure-Python reader, when libyaml is absent
# or a test asks for that reader). tests/inputs/test_hostile_files.py checks it is the pattern
# PyYAML compiles and that it refuses what the compiled one refuses.
_NON_PRINTABLE = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


class _CompiledWhenUsed:
    """A regular expression compiled at its first use: its attributes (search, match, ...)
    are those of the compiled pattern (re.compile's own cache keeps the one compilation).
    Not an re.Pattern: `re.search(it, text)` is refused; PyYAML only calls its methods."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __getattr__(self, name: str) -> Any:  # only for attributes not yet copied here
        if name.startswith("__") or "pattern" not in vars(self):  # copy, pickle: the object's
            raise AttributeError(name)
        attribute = getattr(_compile_now(self.pattern), name)
        setattr(self, name, attribute)
        return attribute


_compile_now = re.compile


@contextmanager
def _non_printable_compiled_when_used() -> Iterator[None]:
    """While importing PyYAML: re.compile of _NON_PRINTABLE (only) gives a _CompiledWhenUsed."""

    def compile_later(pattern: Any, flags: int = 0) -> Any:
        if pattern == _NON_PRINTABLE and flags == 0:
            return _CompiledWhenUsed(pattern)
        return _compile_now(pattern, flags)

    re.compile = compile_later
    try:
        yield
    finally:
        re.compile = _compile_now


with _non_printable_compiled_when_used():
    import yaml


class _YamlRefusedError(Exception):
    """A structural problem the strict loader refuses; carries the line."""

    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.line = mark.line + 1 if mark is not None else None


class _StrictComposer(yaml.composer.Composer):
    """The composer (events -> nodes, in Python) without aliases or deep nesting, and the
    constructor without duplicate keys: whichever parser produces the events."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
            event = self.peek_event()  # type: ignore[attr-defined]
            raise _YamlRefusedError(
                "aliases (*name) are not allowed in prfaas-plan files; write the value out",
                event.start_mark,
            )
        self._depth += 1
        if self._depth > plausible.MAX_YAML_DEPTH:
            raise _YamlRefusedError(
                f"nested deeper than {plausible.MAX_YAML_DEPTH} levels",
                self.peek_event().start_mark,  # type: ignore[attr-defined]
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            if isinstance(key, Hashable) and key in seen:
                raise _YamlRefusedError(
                    f"duplicate key {plausible.quoted(key)} in one mapping", key_node.start_mark
                )
            if isinstance(key, Hashable):
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        return mapping


# libyaml's scanner and parser (C) when PyYAML was built with it: they were most of a
# command's start-up (15 catalog files read by the pure-Python scanner). Its events go through
# the same Python composer and constructor, so every refusal above holds with either parser;
# tests/inputs/test_hostile_files.py runs both.
_CParser: Any = getattr(getattr(yaml, "cyaml", None), "CParser", None)


class _PureStrictLoader(
    _StrictComposer,
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """SafeLoader's pure-Python parts, strict."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)  # refuses a control character (NUL) here
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _StrictComposer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


if _CParser is not None:

    class _CStrictLoader(
        _StrictComposer,
        _CParser,  # type: ignore[misc]  # Any to mypy: a C extension type
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    ):
        """libyaml's scanner and parser; the composer and constructor are _StrictComposer's
        (before CParser in the method order: its own composer in C would allow aliases)."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _StrictComposer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _LOADERS: tuple[type[Any], ...] = (_CStrictLoader, _PureStrictLoader)
else:  # pragma: no cover - PyYAML built without libyaml
    _LOADERS = (_PureStrictLoader,)
_StrictLoader = _LOADERS[0]


# YAML 1.1 (PyYAML) reads `1.0e12` as a string, since its exponent has no sign; YAML 1.2 and
# every reader reads a number. Lax parsing hid this by coercing the string; strict schemas need
# the number, so the loader resolves floats as YAML 1.2 does (quoted "1e12" stays a string).
_FLOAT_TAG = "tag:yaml.org,2002:float"
_FLOAT_1_2 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_RESOLVERS_1_2 = {  # a deep copy: SafeLoader's own lists stay as they are
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _first in "-+0123456789.":
    _RESOLVERS_1_2.setdefault(_first, []).append((_FLOAT_TAG, _FLOAT_1_2))


# YAML 1.1 (PyYAML) also reads `010` as octal 8, `1:40` as base-60 100, `0b100` as 4 and `1_000`
# as 1000, where YAML 1.2 (which the README promises) reads a decimal 10 or a string. Rather than
# guess which the author meant, the loader refuses those forms; decimals and 0x hex (the same in
# both) are read as usual.
_INT_1_2 = re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$")
_FLOAT_1_1_ONLY = re.compile(r"[_:]")


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    value = str(node.value)
    if not _INT_1_2.match(value):
        digits = value.replace("_", "").lstrip("+-")
        sign = "-" if value.startswith("-") else ""
        hint = f"write {sign}{int(digits)}, not {value}" if digits.isdigit() else "write a decimal"
        raise _YamlRefusedError(
            f"integer {plausible.quoted(value)} has a YAML 1.1 form (leading zero, base 60, "
            f"underscores or 0b) whose meaning differs in YAML 1.2; {hint}",
            node.start_mark,
        )
    return loader.construct_yaml_int(node)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    value = str(node.value)
    if _FLOAT_1_1_ONLY.search(value):
        raise _YamlRefusedError(
            f"number {plausible.quoted(value)} has a YAML 1.1 form (base 60 or underscores) that "
            "YAML 1.2 reads as a string; write a plain decimal",
            node.start_mark,
        )
    return loader.construct_yaml_float(node)


for _loader in _LOADERS:
    _loader.yaml_implicit_resolvers = _RESOLVERS_1_2
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    _loader.add_constructor(_FLOAT_TAG, _construct_float)


def parse_yaml_text(
    text: str,
    where: str,
    error: type[PrfaasPlanError] = ConfigError,
    loader: type[Any] | None = None,
) -> Any:
    """The YAML document in `text` (strict loader; `where` names it in messages, as a path
    does), or one line saying why not. For text that did not come from a file (an upload).
    `loader`: the pure-Python one, for tests (default: libyaml's parser when available)."""
    path = where
    try:
        reader = (loader or _StrictLoader)(text)  # the pure reader refuses a NUL here
    except yaml.YAMLError as exc:
        raise error(_control_character(path, exc)) from None
    try:
        return reader.get_single_data()
    except _YamlRefusedError as exc:
        line = f" line {exc.line}" if exc.line is not None else ""
        raise error(f"{path}:{line}: {exc}") from None
    except yaml.reader.ReaderError as exc:  # libyaml's reader refuses it while parsing
        raise error(_control_character(path, exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        if "maximum nesting depth" in problem:  # libyaml's own limit (1,000) met first
            raise error(
                f"{path}:{line}: nested deeper than {plausible.MAX_YAML_DEPTH} levels"
            ) from None
        raise error(f"{path}:{line}: malformed YAML: {problem}") from None
    except ValueError:  # the only one PyYAML lets through: int()'s 4,300-digit limit
        raise error(f"{path}: malformed YAML: an integer of more than 4,300 digits") from None
    finally:
        if "reader" in locals():
            reader.dispose()


def _control_character(path: str, exc: yaml.YAMLError) -> str:
    position = getattr(exc, "position", None)
    at = f" at character {position:,}" if isinstance(position, int) else ""
    return f"{path}: malformed YAML: a control character{at} (not YAML text)"
