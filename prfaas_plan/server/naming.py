"""How the server names files in its answers and messages: as the client named them, or by a
name relative to the server's own resources, never by a path of the server's machine.

The rule (README, "The what-if page and the HTTP API"):
- a request's scenario is `request`, an uploaded one `upload` (as the client sent them);
- the default scenario is `examples/case_study.yaml`, the name it has in the repository;
- a catalog file is `data/...` (relative to the data directory, whichever directory `serve
  --data-dir` names: `data/` means the server's data) and the models file `models.yaml`;
- anything else under the package's own directories is named relative to them.
The library names catalog files by their paths (`Catalog.shown`; an unknown name's message
gives the folder it looked in), which is right for the CLI's user, who owns them. The server
rewrites those paths in every answer and message it sends (`Naming.text`, `Naming.json`,
`Naming.error`), matched at path boundaries so that a name which merely contains a root's
characters is left alone. A catalog file's error quotes at most the value it refuses; the
catalog's values are what the API publishes anyway (prices and fitted profiles are in every
answer)."""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from prfaas_plan.inputs.resources import resource_root

CASE_STUDY_NAME = Path("examples/case_study.yaml")  # the default scenario, as the repo names it
_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # prfaas_plan/
_PATH_CHARACTER = r"[\w.~/-]"  # a character that continues a path (a root must not follow one)


@dataclass(frozen=True)
class Naming:
    """Absolute server paths and the names shown in their place, longest first."""

    roots: tuple[tuple[str, str], ...]  # (absolute path, name shown; "" for "relative to it")

    @classmethod
    def of(cls, data_dir: Path, models_file: Path) -> "Naming":
        return _naming(str(data_dir), str(models_file))

    def _pattern(self, escape: Callable[[str], str]) -> "re.Pattern[str]":
        alternatives = "|".join(re.escape(escape(root)) for root, _ in self.roots)
        # a root is a whole path or a path's leading directories: not preceded by a path
        # character, followed by "/" (consumed) or by a character that cannot continue a name
        return re.compile(rf"(?<!{_PATH_CHARACTER})({alternatives})(/|(?![\w.~-]))")

    def _rewrite(self, text: str, escape: Callable[[str], str]) -> str:
        if not any(escape(root) in text for root, _ in self.roots):  # the usual case: fast
            return text
        shown = {escape(root): name for root, name in self.roots}

        def replace(match: "re.Match[str]") -> str:
            name, below = shown[match.group(1)], match.group(2)
            if below:
                return f"{escape(name)}/" if name else ""
            return escape(name or ".")

        return _patterns(self, escape is _json_escaped).sub(replace, text)

    def text(self, text: str) -> str:
        """`text` (a message, Markdown) with every server path replaced by its name."""
        return self._rewrite(text, _plain)

    def json(self, text: str) -> str:
        """JSON text with every server path in its strings replaced: the paths as json.dumps
        escapes them (per character, so a match is always whole characters of one string)."""
        return self._rewrite(text, _json_escaped)

    def error(self, exc: BaseException) -> BaseException:
        """`exc` with its one-line message renamed (in place: its class and fields kept)."""
        if len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (self.text(exc.args[0]),)
        return exc


def _plain(text: str) -> str:
    return text


def _json_escaped(text: str) -> str:
    return json.dumps(text)[1:-1]


@cache
def _patterns(naming: Naming, escaped: bool) -> "re.Pattern[str]":
    return naming._pattern(_json_escaped if escaped else _plain)


@cache
def _naming(data_dir: str, models_file: str) -> Naming:
    """The roots a server on `data_dir` and `models_file` may reveal: each as given and
    resolved (a relative or linked directory appears both ways in messages)."""
    pairs: dict[str, str] = {}
    for path, name in [
        (Path(data_dir), "data"),
        (Path(models_file), "models.yaml"),
        (resource_root(), ""),
        (_PACKAGE_DIR, "prfaas_plan"),
    ]:
        for form in {path.absolute(), path.resolve()}:
            if len(form.parts) > 1:  # never "/" itself
                pairs.setdefault(str(form), name)
    return Naming(tuple(sorted(pairs.items(), key=lambda pair: -len(pair[0]))))
