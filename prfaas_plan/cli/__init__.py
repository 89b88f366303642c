"""Command-line interface: the commands, each parsing its flags, calling one use-case
(use_cases/) and handing the result to a view (render/).

Data goes to stdout (or --output, written atomically), messages to stderr; how failures are shown
is cli/failures.py, the shared options cli/options.py, loading and writing cli/output.py. Heavy
modules are imported inside the commands so `--help` stays fast.
"""

import os
import sys
from importlib import import_module

from prfaas_plan.cli.app import app

# every command registers on `app` when its module is imported, in the order --help lists them
COMMAND_MODULES = ("plan", "catalog", "simulate", "check", "explain", "import_profile",
                   "procure", "sensitivity", "serve", "sweep", "export")  # fmt: skip
for _module in COMMAND_MODULES:
    import_module(f"prfaas_plan.cli.{_module}")

__all__ = ["app", "main"]


def main() -> None:
    """The console script `prfaas-plan`: the app, and an interrupt before it starts. pydantic
    plugins are off unless PYDANTIC_DISABLE_PLUGINS says otherwise: finding them scans every
    installed distribution's entry points at the first schema built (~28M instructions, 2% of
    an `optimize`), and none has a use on the command line's schemas."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
