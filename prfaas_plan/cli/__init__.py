"""Command-line interface: the commands, each parsing its flags, calling one use-case
(use_cases/) and handing the result to a view (render/).

Data goes to stdout (or --output, written atomically), messages to stderr; how failures are shown
is cli/failures.py, the shared options cli/options.py, loading and writing cli/output.py. Heavy
modules are imported inside the commands so `--help` stays fast.
"""

import os
import sys
from importlib import import_module
from types import ModuleType

from prfaas_plan.cli.app import app, command_line

# every command registers on `app` when its module is imported, in the order --help lists them
COMMAND_MODULES = ("plan", "catalog", "simulate", "check", "explain", "import_profile",
                   "procure", "sensitivity", "serve", "sweep", "export")  # fmt: skip
for _module in COMMAND_MODULES:
    import_module(f"prfaas_plan.cli.{_module}")

__all__ = ["app", "main"]


# the values of PYDANTIC_DISABLE_PLUGINS for which pydantic's loader finds no plugin at all
_ALL_PLUGINS_OFF = ("__all__", "1", "true")


def main() -> None:
    """The console script `prfaas-plan`: the app, and an interrupt before it starts. pydantic
    plugins are off unless PYDANTIC_DISABLE_PLUGINS says otherwise: finding them scans every
    installed distribution's entry points at the first schema built (~28M instructions, 2% of
    an `optimize`), and none has a use on the command line's schemas."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_loader()
    try:
        command_line(sys.argv[1:])()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)


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
