"""numpy floating-point errors inside the model are errors, never warnings on stderr.

Every use case of use_cases/ runs under `model_numerics(name)`: an overflow or an invalid
operation (inf - inf, 0 · inf, a nan from a finite input) raises a one-line ConfigError naming
the command and the operation, instead of printing a RuntimeWarning and going on with inf or nan.
The places where the model means to compute inf or nan say so locally with
`np.errstate(divide="ignore", invalid="ignore")`, which takes precedence inside them. Division
by zero keeps numpy's default (the model's own guards handle it). plausible.py keeps valid inputs
far from overflow, so a valid run never meets this.
"""

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import numpy as np

from prfaas_plan.errors import ConfigError

P = ParamSpec("P")
R = TypeVar("R")


def model_numerics(command: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a use case: numpy overflow/invalid inside it raise ConfigError naming `command`."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                with np.errstate(over="raise", invalid="raise"):
                    return function(*args, **kwargs)
            except FloatingPointError as exc:
                raise ConfigError(
                    f"{command}: the model's arithmetic failed ({exc}); an input is too large or "
                    "too small to compute with (see plausible.py for the plausible ranges)"
                ) from None

        return wrapper

    return decorate
