"""Exceptions a user can act on, one class per kind of failure (the CLI maps each to its exit
code in cli/failures.py, the HTTP API to its status in server/app.py; neither is the library's).
Messages are one line: where, what was expected, what was found. The library speaks in its own
terms: a message names the file field (`scenario.yaml: link.bandwidth_gbps`) or the Python
parameter (`max_prfaas_gpus`), never a command-line flag; an error about a parameter carries
its name in `parameter`, and the CLI alone rewrites that name into its flag.
"""


class PrfaasPlanError(Exception):
    """Base of all expected failures; never shown with a traceback."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter  # the library parameter the message is about, if any


class ConfigError(PrfaasPlanError):
    """A scenario, catalog or command-line value is malformed, unknown or impossible."""


class ProfileError(PrfaasPlanError):
    """A profile table (prefill latency, KV size, decode) breaks its contract."""


class RangeError(PrfaasPlanError):
    """A length falls outside a profiled range and the range policy forbids extrapolation."""


class InfeasibleError(PrfaasPlanError):
    """No plan meets the requested target; the message names the binding constraint."""


class SolverError(PrfaasPlanError):
    """An optimisation solver failed or returned an unexpected status."""


class ResourceLimitError(PrfaasPlanError):
    """The machine ran out of a resource during a run: memory (MemoryError) or space on the
    device an output is written to. A run that would need too much is refused up front instead,
    as a ConfigError naming the parameter to change."""
