"""The interface between the simulator's engine and a scheduler policy (reference
prfaas-model.md §8). Units: seconds, tokens, bytes, bytes/s.

A policy decides where each request is prefilled and, for some, how the PD instances are split
between prefill and decode over time. The engine (engine.py) validates the requests, packs them
into a `Job`, asks the policy for the `Schedule` (every request's event times, decode included)
and measures it (stats.py). Each policy is one class implementing `Policy`:

- `StaticThreshold` and `AdaptiveThreshold` (threshold.py): l > t goes to PrfaaS, with t fixed
  or moved with the link and queue load (the paper's short-timescale scheduler);
- `PrefixAwareThreshold` (prefix.py): t applied to the length not already in a cluster's
  prefix cache;
- `RoleRebalancing` (rebalance.py): PD instances also move between the PD-P and PD-D roles (the
  long-timescale scheduler), optionally with the adaptive threshold on top (dual timescale).

factory.py builds them by name.
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.sim.arrivals import PrefixBlocks
from prfaas_plan.sim.queues import BandwidthTrace

Progress = Callable[[float], None]


class Role(StrEnum):
    PD_PREFILL = "pd_prefill"
    PD_DECODE = "pd_decode"


@dataclass(frozen=True)
class RoleChange:
    """One PD instance converted to `to_role`."""

    decided_s: float
    to_role: Role
    left_s: float  # stops serving its old role (after the work it holds)
    joined_s: float  # starts serving the new one: left_s + conversion delay
    threshold_tokens: float  # the threshold chosen for the new split


@dataclass(frozen=True, eq=False)
class Job:
    """Validated requests (float arrays in arrival order) and the deployment serving them."""

    system: ServingSystem
    configuration: Configuration
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    bandwidth: BandwidthTrace
    link_latency_s: float
    prefix_blocks: PrefixBlocks | None

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    @property
    def decode_service_s(self) -> np.ndarray:
        """Time a request holds a decode slot: output_tokens · T_decode."""
        return self.output_tokens * self.system.decode.step_latency_s


@dataclass(frozen=True, eq=False)
class Schedule:
    """What a policy decides and the event times that follow (arrays in input order; nan where
    not applicable). `role_changes` is None when the policy never re-balances roles."""

    offloaded: np.ndarray  # bool: prefilled on PrfaaS
    threshold_tokens: np.ndarray  # the threshold in force at each arrival
    prefill_tokens: np.ndarray  # tokens prefilled (input minus a reused cached prefix)
    prefill_ready_s: np.ndarray  # joins its prefill queue (after any prefix move)
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    link_start_s: np.ndarray
    link_finish_s: np.ndarray  # last byte sent, fixed latency excluded
    decode_start_s: np.ndarray
    threshold_changes: int = 0
    role_changes: tuple[RoleChange, ...] | None = None


class Policy(Protocol):
    """A scheduler policy: a frozen dataclass of its parameters that can schedule a job."""

    def for_configuration(self, configuration: Configuration) -> "Policy":
        """The policy to run on `configuration`: itself, or a simpler one when a part of it
        cannot act there (a moving threshold with an empty prefill pool)."""
        ...

    def schedule(self, job: Job, progress: Progress | None) -> Schedule:
        """Every request's route and event times; `progress(fraction)` reports up to 0.95."""
        ...
