"""How the command line reports a failure: the library's parameters written as this CLI's flags
(`parameter_flags`, derived from the options the commands declare; `error_message`), every expected failure as one `error:` line on stderr with
the exit code of its class (`EXIT_CODES` below), a usage error (exit 2) as one `error:` line and one usage
line, and any option given twice refused; under the console script and typer's CliRunner alike."""

import inspect
import re
import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import typer
from typer._click.exceptions import UsageError  # typer vendors click: no public name for it
from typer.core import TyperCommand, TyperGroup, TyperOption

from prfaas_plan.errors import (
    ConfigError,
    InfeasibleError,
    PrfaasPlanError,
    ProfileError,
    RangeError,
    ResourceLimitError,
    SolverError,
)

if TYPE_CHECKING:
    pass


# Exit codes: 0 ok, 1 unexpected bug, 2 command-line usage (one `error:` line and a usage hint),
# the library's failures by class below, 8 `check` found a broken table or a moved golden plan,
# 130 interrupted. Documented in docs/errors.md (a test checks its table against these).
EXIT_CODES: dict[type[PrfaasPlanError], int] = {
    ConfigError: 3,
    ProfileError: 4,
    RangeError: 5,
    InfeasibleError: 6,
    SolverError: 7,
    ResourceLimitError: 9,
}
CHECK_FAILED_EXIT_CODE = 8


def exit_code(exc: PrfaasPlanError) -> int:
    """The process exit code of a library failure: its class's (or its nearest base's)."""
    return next((code for cls, code in EXIT_CODES.items() if isinstance(exc, cls)), 1)


def _flag(info: Any) -> str | None:
    """The long flag a typer Option declares (`typer.Option("--target-rps", "-t")`)."""
    declared = [info.default, *(info.param_decls or ())]
    return next((d for d in declared if isinstance(d, str) and d.startswith("--")), None)


def option_flags(callback: Callable[..., Any]) -> dict[str, str]:
    """A command's options as {library name: flag}: each option's parameter name (the request
    field it fills) and the names its `Sets` marker adds (cli/options.py)."""
    from typer.models import OptionInfo

    from prfaas_plan.cli.options import Sets

    table: dict[str, str] = {}
    for name, param in inspect.signature(callback).parameters.items():
        metadata = getattr(param.annotation, "__metadata__", ())
        info = next((m for m in metadata if isinstance(m, OptionInfo)), None)
        flag = _flag(info) if info is not None else None
        if flag is None:
            continue
        names = [name, *(n for m in metadata if isinstance(m, Sets) for n in m.names)]
        table.update(dict.fromkeys(names, flag))
    return table


@cache
def parameter_flags() -> dict[str, str]:
    """Every command's options as {library name: flag} (`option_flags`), derived from the
    declared options, never written by hand; a name two commands set with different flags is
    a bug the tests catch (`flag_conflicts`)."""
    from prfaas_plan.cli.application import whole_app

    table: dict[str, str] = {}
    for command in whole_app().registered_commands:
        if command.callback is not None:
            for name, flag in option_flags(command.callback).items():
                table.setdefault(name, flag)
    return table


def flag_conflicts() -> list[tuple[str, str, str]]:
    """(name, flag, other flag) for a library name that two commands map to different flags."""
    from prfaas_plan.cli.application import whole_app

    seen: dict[str, str] = {}
    conflicts = []
    for command in whole_app().registered_commands:
        if command.callback is not None:
            for name, flag in option_flags(command.callback).items():
                if seen.setdefault(name, flag) != flag:
                    conflicts.append((name, seen[name], flag))
    return conflicts


def _name_pattern(name: str, field_guard: bool = True) -> re.Pattern[str]:
    """`name` as a whole identifier: not part of a file field (`link.bandwidth_gbps`), a file
    name (`trace.jsonl`) or a flag; with `field_guard`, not a `field:` prefix either
    (`scenario.yaml: kv_dtype: ...`)."""
    tail = r"(?![\w:]|\.\w)" if field_guard else r"(?!\w|\.\w)"
    return re.compile(r"(?<![\w.\-])" + re.escape(name) + tail)


# identifier-like names (`target_rps`, `arrivals.requests`) are translated wherever they appear,
# longest first; a plain word (`scenario`, `output`) only when the error is about it, or written
# as code (`resume`), as the same word is also English
@cache
def _identifiers() -> list[tuple[re.Pattern[str], str]]:
    return [
        (_name_pattern(name), flag)
        for name, flag in sorted(parameter_flags().items(), key=lambda kv: -len(kv[0]))
        if "_" in name or "." in name
    ]


_CODE = re.compile(r"`([\w.]+)`")
# `<file>: ...` or `<file>:<line>: ...`: a message about a file, whose words are its fields
_ABOUT_A_FILE = re.compile(r"^\S*(/|\.(yaml|yml|csv|jsonl|json))\S*?(:\d+)?: ")


def flagged(text: str) -> str:
    """`text` with the request fields it names as code (`ttft_load`) written as their flags
    (--ttft-load): a library message, or an option's help (use_cases/field_docs.py)."""
    flags = parameter_flags()
    return _CODE.sub(lambda m: flags.get(m.group(1), m.group(0)), text)


def error_message(exc: PrfaasPlanError) -> str:
    """The one-line message for the terminal: the library's, with the parameters it names
    written as their flags. A message about a file that is not about a parameter is left as it
    is: its words are the file's fields (`meta.yaml: gpus_per_instance must be 8`)."""
    flags = parameter_flags()
    text = flagged(str(exc))
    if exc.parameter in flags and f"`{exc.parameter}`" not in str(exc):  # else named as code
        own = _name_pattern(exc.parameter, field_guard=False)
        # a plain word (`output`) is the flag where the message names it first, English after
        # (`--output: cannot write x: Input/output error`)
        plain = "_" not in exc.parameter and "." not in exc.parameter
        text = own.sub(flags[exc.parameter], text, count=1 if plain else 0)
    elif _ABOUT_A_FILE.match(text):
        return text
    for pattern, flag in _identifiers():
        text = pattern.sub(flag, text)
    return text


def _fail(message: str, code: int) -> typer.Exit:
    sys.stderr.write(f"error: {message}\n")
    return typer.Exit(code)


def _usage_error(exc: UsageError) -> typer.Exit:
    """click's usage error as one `error:` line and one usage line (not rich's boxed panel)."""
    message = " ".join(exc.format_message().split())
    sys.stderr.write(f"error: {message}\n")
    if exc.ctx is not None:
        sys.stderr.write(f"{exc.ctx.get_usage()}  (see {exc.ctx.command_path} --help)\n")
    return typer.Exit(exc.exit_code)


def _is_help(exc: UsageError) -> bool:
    """`no_args_is_help`: click shows the help through this exception; it stays as it is."""
    return type(exc).__name__ == "NoArgsIsHelpError"


class CliCommand(TyperCommand):
    """A command that refuses any option given more than once, unless it is declared a list
    (`multiple`, like `check --scenario`): click would keep only the last, so
    `--bandwidth-gbps 100 --bandwidth-gbps 1` would plan for 1 Gbps without a word, and
    `--load 0.5 --load 0.8` read as a sweep would run 0.8 alone."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """--help, each option's help naming the other options as flags (cli/failures.py
        `flagged`): the help is the request field's meaning, written in field names."""
        for param in self.params:
            if getattr(param, "help", None):
                param.help = flagged(param.help)  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from prfaas_plan.cli.output import INPUTS

        INPUTS.clear()  # a new command: none of its inputs read yet
        if not ctx.resilient_parsing:
            try:
                _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            except UsageError:
                order = []  # super() reports it
            seen: set[str] = set()
            for p in order:
                if not isinstance(p, TyperOption) or p.multiple:
                    continue
                flag = max(p.opts, key=len)
                if flag in seen:
                    sweep = (
                        ", a sweep as one list: --load 0.5,0.8"
                        if self.name == "simulate" and flag == "--load"
                        else ""
                    )
                    raise ConfigError(
                        f"{flag} given more than once (only the last would count); "
                        f"give it once{sweep}"
                    )
                seen.add(flag)
        try:
            return super().parse_args(ctx, args)
        except UsageError as exc:
            exc.ctx = (
                exc.ctx or ctx
            )  # click leaves it out of some (a missing value): the usage line
            raise


class CliGroup(TyperGroup):
    """Every command's expected failure becomes one stderr line and its exit code, also under
    typer's CliRunner (which calls `app`, not `main`); so does a usage error."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            if _is_help(exc):
                raise
            raise _usage_error(exc) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            if _is_help(exc):
                raise
            raise _usage_error(exc) from None
        except PrfaasPlanError as exc:
            raise _fail(error_message(exc), exit_code(exc)) from None
        except MemoryError:
            raise _fail(
                "out of memory; ask for a smaller run (fewer requests, instances or lengths)",
                EXIT_CODES[ResourceLimitError],
            ) from None
        except KeyboardInterrupt:
            sys.stderr.write("interrupted\n")
            raise typer.Exit(130) from None
