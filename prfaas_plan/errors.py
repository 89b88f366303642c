"""Exceptions a user can act on, each mapped to a distinct process exit code.

Exit codes: 0 ok, 1 unexpected bug, 2 command-line usage (typer/click), and the codes below.
Messages are one line: where (file:field or --flag), what was expected, what was found.
"""


class PlanError(Exception):
    """Base of all expected failures; never shown with a traceback."""

    exit_code = 1


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


# `prfaas-plan check` found a broken table or a golden plan that moved (its report says which)
CHECK_FAILED_EXIT_CODE = 8

EXIT_CODES = {
    **{
        cls.__name__: cls.exit_code
        for cls in (ConfigError, ProfileError, RangeError, InfeasibleError, SolverError)
    },
    "check failed": CHECK_FAILED_EXIT_CODE,
}
