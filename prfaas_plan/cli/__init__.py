"""Command-line interface: the commands, each parsing its flags, calling one use-case
(use_cases/) and handing the result to a view (render/).

Data goes to stdout (or --output, written atomically), messages to stderr; how failures are shown
is cli/failures.py, the shared options cli/options.py, loading and writing cli/output.py. Heavy
modules are imported inside the commands so `--help` stays fast.
"""

import atexit
import gc
import os
import sys
from types import ModuleType

import typer

from prfaas_plan.cli.application import command_line, whole_app

__all__ = ["app", "main"]


def __getattr__(name: str) -> typer.Typer:
    """`app`: the application with every command (the console script imports only the one
    it runs: `main`)."""
    if name == "app":
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the values of PYDANTIC_DISABLE_PLUGINS for which pydantic's loader finds no plugin at all
_ALL_PLUGINS_OFF = ("__all__", "1", "true")


def main() -> None:
    """The console script `prfaas-plan`: the app, and an interrupt before it starts. pydantic
    plugins are off unless PYDANTIC_DISABLE_PLUGINS says otherwise: finding them scans every
    installed distribution's entry points at the first schema built (~28M instructions, 2% of
    an `optimize`), and none has a use on the command line's schemas."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_loader()
    atexit.unregister(_no_final_collection)  # once, however often main runs in one process
    atexit.register(_no_final_collection)
    try:
        command_line(sys.argv[1:])()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


def _no_final_collection() -> None:
    """At exit, before the interpreter's teardown (atexit: after the handlers registered since
    `main` began, before those registered earlier): every object moved out of the cyclic
    collector's reach (`gc.freeze`). The teardown still frees each module and what only it
    holds, by reference counting; what it no longer does is pass the collector over every
    object still alive, ~23 ms of an `optimize`'s ~250 ms here (31 -> 8 ms from the last line
    to the end of the process; benchmarks/RESULTS.md, startup). Nothing a command does waits on
    it: output is written and closed before the command returns, and Python does not promise
    to finalise objects still alive at exit."""
    gc.freeze()


def _no_plugin_loader() -> None:
    """With every plugin off, pydantic's plugin loader answers "no plugins" (its
    `get_plugins()` returns `()`), but importing it imports `importlib.metadata`, and with it
    `email`, `zipfile`, `csv`, `socket` and `tempfile`: ~51M instructions, 3% of an `optimize`.
    So the loader is a module that gives the same answer without those imports. Any other value
    (plugins named one by one) leaves pydantic's own loader."""
    name = "pydantic.plugin._loader"
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in _ALL_PLUGINS_OFF or name in sys.modules:
        return
    loader = ModuleType(name, "pydantic's plugin loader with every plugin off (prfaas_plan.cli)")
    loader.get_plugins = tuple  # type: ignore[attr-defined]  # get_plugins() == (), no plugin
    sys.modules[name] = loader
