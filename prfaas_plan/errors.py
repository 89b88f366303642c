"""Exceptions a user can act on, each mapped to a distinct process exit code.

Exit codes: 0 ok, 1 unexpected bug, 2 command-line usage (typer/click: one `error:` line and a
usage hint), and the codes below: 3 ConfigError, 4 ProfileError, 5 RangeError, 6 InfeasibleError,
7 SolverError, 8 `check` failed, 9 ResourceLimitError, 130 interrupted.
Messages are one line: where, what was expected, what was found. The library speaks in its own
terms: a message names the file field (`scenario.yaml: link.bandwidth_gbps`) or the Python
parameter (`max_prfaas_gpus`), never a command-line flag; an error about a parameter carries
its name in `parameter`, and the CLI alone rewrites that name into its flag.
"""


class PlanError(Exception):
    """Base of all expected failures; never shown with a traceback."""

    exit_code = 1

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter  # the library parameter the message is about, if any


class ConfigError(PlanError):
    """A scenario, catalog or command-line value is malformed, unknown or impossible."""

    exit_code = 3


class ProfileError(PlanError):
    """A profile table (prefill latency, KV size, decode) breaks its contract."""

    exit_code = 4


class RangeError(PlanError):
    """A length falls outside a profiled range and the range policy forbids extrapolation."""

    exit_code = 5


class InfeasibleError(PlanError):
    """No plan meets the requested target; the message names the binding constraint."""

    exit_code = 6


class SolverError(PlanError):
    """An optimisation solver failed or returned an unexpected status."""

    exit_code = 7


class ResourceLimitError(PlanError):
    """The machine ran out of a resource during a run: memory (MemoryError) or space on the
    device an output is written to. A run that would need too much is refused up front instead,
    as a ConfigError naming the parameter to change."""

    exit_code = 9


# `prfaas-plan check` found a broken table or a golden plan that moved (its report says which)
CHECK_FAILED_EXIT_CODE = 8

EXIT_CODES = {
    **{
        cls.__name__: cls.exit_code
        for cls in (ConfigError, ProfileError, RangeError, InfeasibleError, SolverError)
    },
    "check failed": CHECK_FAILED_EXIT_CODE,
    ResourceLimitError.__name__: ResourceLimitError.exit_code,
}
