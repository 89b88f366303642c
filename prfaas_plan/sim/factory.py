"""The scheduler policies by name (the names of `choices.RoutingPolicy`): the one place that
builds a policy object from a name, with its defaults or a caller's own object for it."""

from collections.abc import Callable, Mapping

from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.policies import Policy
from prfaas_plan.sim.prefix import PrefixAwareThreshold
from prfaas_plan.sim.rebalance import RoleRebalancing
from prfaas_plan.sim.threshold_policies import AdaptiveThreshold, StaticThreshold

_DEFAULTS: dict[str, Callable[[], Policy]] = {
    "static": StaticThreshold,
    "adaptive": AdaptiveThreshold,
    "rebalance": RoleRebalancing,
    "dual": lambda: RoleRebalancing(adaptive=AdaptiveThreshold()),  # both timescales
    "prefix": PrefixAwareThreshold,
}
POLICIES = tuple(_DEFAULTS)
# the policies that take parameters, and the class an object given for each must be
OPTION_TYPES: dict[str, type] = {
    "adaptive": AdaptiveThreshold,
    "rebalance": RoleRebalancing,
    "dual": RoleRebalancing,
    "prefix": PrefixAwareThreshold,
}


def check_policy_options(options: Mapping[str, object]) -> None:
    """Raise ConfigError unless every entry maps a policy with parameters to its class."""
    for name, policy in options.items():
        kind = OPTION_TYPES.get(name)
        if kind is None:
            raise ConfigError(
                f"policy_options: no options for {name!r}; give them for one of "
                f"{', '.join(OPTION_TYPES)}",
                parameter="policy_options",
            )
        if not isinstance(policy, kind):
            raise ConfigError(
                f"policy_options[{name!r}] must be a {kind.__name__}, got {type(policy).__name__}",
                parameter="policy_options",
            )


def make_policy(name: str, options: Mapping[str, Policy] | None = None) -> Policy:
    """The policy called `name`: `options[name]` if given (see `check_policy_options`), else
    the policy with its defaults ("dual" is re-balancing with the adaptive threshold on top)."""
    if name not in _DEFAULTS:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
    if options and name in options:
        return options[name]
    return _DEFAULTS[name]()
