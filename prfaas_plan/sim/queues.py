"""Queue primitives of the simulator: FIFO multi-server queues and a processor-sharing link.

Units: seconds for times, bytes for transfer sizes, bytes/s for bandwidth.

All are exact sample-path computations, not approximations:

- `fifo_start_times`: c identical servers, jobs served in the order given (first come, first
  served). Keeping the c server-free times in a heap, job i starts at
  max(arrival_i, earliest free time) and that server is next free at start_i + service_i: one
  heap replacement per job, O(n log c).
- `ElasticFifo`: the same queue with servers added and removed over time (the long-timescale
  re-balancing of PD instances between prefill and decode), simulated in resumable epochs.
- `SharedLink`: transfers share a link's bandwidth B(t) equally (egalitarian processor sharing).
  With n transfers in flight every one of them progresses at B(t) / n bytes/s, so a "virtual
  byte clock" V with dV/dt = B(t) / n(t) makes each transfer's completion a fixed point on V:
  a transfer of S bytes starting at V0 finishes when V = V0 + S. Active transfers sit in a heap
  keyed by that value; events are transfer starts, the smallest finish and bandwidth changes
  (B is piecewise constant), two heap operations per transfer, O(n log n).
"""

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from prfaas_plan.errors import ConfigError

PROGRESS_CHUNK = 1 << 16  # jobs between two progress callbacks


def _check_times(values: np.ndarray, name: str) -> None:
    if values.ndim != 1:
        raise ConfigError(f"{name} must be a one-dimensional array, got shape {values.shape}")
    if values.size and not np.all(np.isfinite(values)):
        raise ConfigError(f"{name} must be finite, found {values[~np.isfinite(values)][0]:g}")


def fifo_start_times(
    arrival_s: ArrayLike,
    service_s: ArrayLike,
    servers: int,
    progress: Callable[[float], None] | None = None,
) -> np.ndarray:
    """Start of service of each job in a FIFO queue with `servers` identical servers.

    Jobs are served in index order; `arrival_s` must be non-decreasing. Waiting time of job i is
    start_i - arrival_i, its departure start_i + service_i. `progress(fraction)` is called every
    PROGRESS_CHUNK jobs.
    """
    arrival_s = np.asarray(arrival_s, dtype=float)
    service_s = np.asarray(service_s, dtype=float)
    _check_times(arrival_s, "arrival_s")
    _check_times(service_s, "service_s")
    if arrival_s.shape != service_s.shape:
        raise ConfigError(
            f"arrival_s and service_s must have the same length, got {arrival_s.size} and "
            f"{service_s.size}"
        )
    if np.any(np.diff(arrival_s) < 0):
        raise ConfigError("arrival_s must be non-decreasing (jobs are served in index order)")
    if np.any(service_s < 0):
        raise ConfigError(f"service_s must be >= 0, found {service_s.min():g}")
    if servers < 1:
        raise ConfigError(f"a FIFO queue needs at least 1 server, got {servers}")
    n = arrival_s.size
    free = [-math.inf] * servers  # a list of equal values is a valid heap
    replace = heapq.heapreplace
    starts: list[float] = []
    record = starts.append
    for begin in range(0, n, PROGRESS_CHUNK):
        end = min(begin + PROGRESS_CHUNK, n)
        for a, s in zip(arrival_s[begin:end].tolist(), service_s[begin:end].tolist(), strict=True):
            earliest = free[0]
            start = a if a >= earliest else earliest
            replace(free, start + s)
            record(start)
        if progress is not None:
            progress(end / n)
    return np.asarray(starts, dtype=float)


class ElasticFifo:
    """A FIFO queue whose number of servers changes over time, simulated in epochs.

    The same recursion as `fifo_start_times` (job i starts at max(ready_i, earliest free
    server)), but resumable: `run_until(h)` starts the queued jobs whose start is before h and
    leaves the others queued, so servers can be added or removed at h before they are placed.
    `add_servers(k, at_s)` adds k servers free from `at_s`; `remove_servers(k, at_s)` removes
    the k servers that free up first (each finishes the job it holds) and returns when the last
    of them is free. Both must come after `run_until(at_s)`. With no change of servers the
    start times equal `fifo_start_times`, bit for bit, however the time is cut into epochs.
    A mutable helper of the simulator's event loop, not a result.
    """

    def __init__(self, servers: int, jobs: int):
        if servers < 1:
            raise ConfigError(f"a FIFO queue needs at least 1 server, got {servers}")
        self.servers = servers
        self.start_s: list[float] = [math.nan] * jobs  # by job index
        self.queued_work_s = 0.0  # service time of the jobs queued (not started)
        self._free = [-math.inf] * servers  # heap of the times the servers become free
        self._queue: deque[tuple[float, float, int]] = deque()  # (ready, service, index)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, ready_s: float, service_s: float, index: int) -> None:
        """Queue job `index`; jobs must be submitted in non-decreasing `ready_s`."""
        self._queue.append((ready_s, service_s, index))
        self.queued_work_s += service_s

    def run_until(self, horizon_s: float, ends: list[tuple[float, int]] | None = None) -> None:
        """Start every queued job that starts before `horizon_s`, appending (end, index) of
        each to `ends` if given."""
        queue, free, starts = self._queue, self._free, self.start_s
        replace = heapq.heapreplace
        while queue:
            ready, service, index = queue[0]
            earliest = free[0]
            start = ready if ready >= earliest else earliest
            if start >= horizon_s:
                return
            queue.popleft()
            end = start + service
            replace(free, end)
            starts[index] = start
            self.queued_work_s -= service
            if ends is not None:
                ends.append((end, index))
        self.queued_work_s = 0.0  # no rounding residue once the queue is empty

    def add_servers(self, count: int, at_s: float) -> None:
        for _ in range(count):
            heapq.heappush(self._free, at_s)
        self.servers += count

    def remove_servers(self, count: int, at_s: float) -> float:
        if not 0 <= count < self.servers:
            raise ValueError(f"cannot remove {count} of {self.servers} servers")
        last = at_s
        for _ in range(count):
            last = max(last, heapq.heappop(self._free))
        self.servers -= count
        return last


@dataclass(frozen=True, eq=False)
class BandwidthTrace:
    """Link bandwidth over time, piecewise constant: `bandwidth_bytes_per_s[i]` from
    `start_s[i]` until `start_s[i + 1]`; the last value holds forever. `start_s[0]` must be 0.
    Zero bandwidth (an outage) is allowed except in the last segment."""

    start_s: np.ndarray
    bandwidth_bytes_per_s: np.ndarray

    def __post_init__(self) -> None:
        start = np.atleast_1d(np.asarray(self.start_s, dtype=float))
        bandwidth = np.atleast_1d(np.asarray(self.bandwidth_bytes_per_s, dtype=float))
        if start.ndim != 1 or start.shape != bandwidth.shape or start.size == 0:
            raise ConfigError(
                "bandwidth trace: start_s and bandwidth_bytes_per_s must be non-empty and of the "
                f"same length, got {start.size} and {bandwidth.size}"
            )
        if start[0] != 0.0 or np.any(np.diff(start) <= 0) or not np.all(np.isfinite(start)):
            raise ConfigError(
                "bandwidth trace: start_s must begin at 0 and be finite and strictly increasing, "
                f"got {start[:4].tolist()}..."
            )
        if not np.all(np.isfinite(bandwidth)) or np.any(bandwidth < 0) or bandwidth[-1] <= 0:
            raise ConfigError(
                "bandwidth trace: bandwidth_bytes_per_s must be finite and >= 0, and > 0 in the "
                f"last segment (transfers must eventually finish), got {bandwidth.tolist()[:4]}..."
            )
        object.__setattr__(self, "start_s", start)
        object.__setattr__(self, "bandwidth_bytes_per_s", bandwidth)

    @classmethod
    def constant(cls, bandwidth_bytes_per_s: float) -> "BandwidthTrace":
        return cls(np.array([0.0]), np.array([float(bandwidth_bytes_per_s)]))

    @classmethod
    def dip(
        cls,
        bandwidth_bytes_per_s: float,
        dip_start_s: float,
        dip_duration_s: float,
        dip_fraction: float,
    ) -> "BandwidthTrace":
        """Nominal bandwidth, except `dip_fraction` of it during [dip_start_s, + duration)."""
        if not (dip_start_s > 0 and dip_duration_s > 0 and dip_fraction >= 0):
            raise ConfigError(
                "bandwidth dip: start and duration must be > 0 s and the fraction >= 0, got "
                f"{dip_start_s:g} s, {dip_duration_s:g} s, {dip_fraction:g}"
            )
        b = float(bandwidth_bytes_per_s)
        return cls(
            np.array([0.0, dip_start_s, dip_start_s + dip_duration_s]),
            np.array([b, b * dip_fraction, b]),
        )

    def transferable_bytes(self, from_s: ArrayLike, to_s: ArrayLike) -> np.ndarray:
        """Integral of B(t) over [from_s, to_s] (vectorised): what the link could move."""
        start, rate = self.start_s, self.bandwidth_bytes_per_s
        cumulative = np.concatenate([[0.0], np.cumsum(rate[:-1] * np.diff(start))])

        def integral(t: ArrayLike) -> np.ndarray:
            at = np.maximum(np.asarray(t, dtype=float), 0.0)
            i = np.searchsorted(start, at, side="right") - 1
            return cast(np.ndarray, cumulative[i] + rate[i] * (at - start[i]))

        return cast(np.ndarray, integral(to_s) - integral(from_s))


class SharedLink:
    """Exact egalitarian processor sharing of one link (see the module docstring).

    `add(start_s, size_bytes, index)` announces a transfer (in any order, but never one that
    starts before the time already simulated); `advance(until_s)` simulates up to `until_s`
    (math.inf: until every announced transfer is done). `finish_s[index]` is the time its last
    byte arrives; `moved_bytes` counts the bytes moved so far. Advancing in steps gives the same
    finish times, bit for bit, as one advance. A mutable helper of the simulator's event loop,
    not a result.
    """

    def __init__(self, bandwidth: BandwidthTrace, transfers: int, *, record_finished: bool = False):
        self.finish_s = np.full(transfers, math.nan)
        self.moved_bytes = 0.0  # up to now_s
        self.now_s = 0.0  # the time simulated up to (the last `advance`)
        # indices of finished transfers in order of finish, if asked for (the caller empties it)
        self.finished: list[int] | None = [] if record_finished else None
        self._pending: list[tuple[float, int, float]] = []  # heap (start, index, size)
        self._active: list[tuple[float, int]] = []  # heap (virtual finish, index)
        # the exact state as of the last event processed (_event_s); advancing to a time
        # between events only observes it, so advancing in steps computes the same schedule,
        # bit for bit, as one advance to the end
        self._event_s = 0.0
        self._event_moved_bytes = 0.0
        self._virtual_bytes = 0.0
        self._change_s = bandwidth.start_s[1:].tolist()
        self._rates = bandwidth.bandwidth_bytes_per_s.tolist()
        self._segment = 0

    def add(self, start_s: float, size_bytes: float, index: int) -> None:
        if start_s < self.now_s:
            raise ValueError(f"transfer starts at {start_s} s, before the link's {self.now_s} s")
        heapq.heappush(self._pending, (start_s, index, size_bytes))

    def add_sorted(self, start_s: np.ndarray, size_bytes: np.ndarray) -> None:
        """Announce many transfers at once (indices 0..n-1); fastest before any `advance`."""
        order = np.argsort(start_s, kind="stable")
        batch = list(
            zip(start_s[order].tolist(), order.tolist(), size_bytes[order].tolist(), strict=True)
        )
        if self._pending:
            for item in batch:
                heapq.heappush(self._pending, item)
        else:
            self._pending = batch  # sorted, hence already a heap

    @property
    def in_flight(self) -> int:
        return len(self._active)

    def advance(self, until_s: float, progress: Callable[[float], None] | None = None) -> None:
        pending, active = self._pending, self._active
        finish, finished = self.finish_s, self.finished
        changes, rates = self._change_s, self._rates
        segment = self._segment
        rate = rates[segment]
        next_change = changes[segment] if segment < len(changes) else math.inf
        now, virtual, moved = self._event_s, self._virtual_bytes, self._event_moved_bytes
        pop, push, inf = heapq.heappop, heapq.heappush, math.inf
        total = len(pending) + len(active)
        done = 0
        while True:
            n = len(active)
            next_start = pending[0][0] if pending else inf
            if n and rate > 0.0:
                next_finish = now + (active[0][0] - virtual) * n / rate
                next_finish = max(next_finish, now)
            else:
                next_finish = inf
            t = min(next_start, next_finish, next_change)
            if t > until_s or t == inf:
                break
            if n:
                moved += (t - now) * rate
            if next_finish <= next_start and next_finish <= next_change:
                virtual, index = pop(active)
                finish[index] = t
                if finished is not None:
                    finished.append(index)
                if not active:
                    virtual = 0.0  # idle: restart the clock, keeps it small and exact
                done += 1
                if progress is not None and done % PROGRESS_CHUNK == 0:
                    progress(done / total)
            else:
                if n:
                    virtual += (t - now) * rate / n
                if next_start <= next_change:
                    _, index, size = pop(pending)
                    push(active, (virtual + size, index))
                else:
                    segment += 1
                    rate = rates[segment]
                    next_change = changes[segment] if segment < len(changes) else inf
            now = t
        self._event_s, self._virtual_bytes, self._event_moved_bytes = now, virtual, moved
        self._segment = segment
        # no event in (now, until_s]: the transfers in flight moved at `rate` all along
        observed = max(self.now_s, until_s if until_s < inf else now)
        self.now_s = observed
        self.moved_bytes = moved + (observed - now) * rate if active and observed > now else moved
        if progress is not None:
            progress(1.0)


def processor_sharing_finish_times(
    start_s: ArrayLike, size_bytes: ArrayLike, bandwidth: BandwidthTrace | float
) -> np.ndarray:
    """Finish time of each transfer when all in flight share the link equally."""
    start_s = np.asarray(start_s, dtype=float)
    size_bytes = np.asarray(size_bytes, dtype=float)
    _check_times(start_s, "start_s")
    _check_times(size_bytes, "size_bytes")
    if start_s.shape != size_bytes.shape:
        raise ConfigError("start_s and size_bytes must have the same length")
    if np.any(start_s < 0) or np.any(size_bytes < 0):
        raise ConfigError("transfer start times and sizes must be >= 0")
    if not isinstance(bandwidth, BandwidthTrace):
        bandwidth = BandwidthTrace.constant(bandwidth)
    link = SharedLink(bandwidth, start_s.size)
    link.add_sorted(start_s, size_bytes)
    link.advance(math.inf)
    return link.finish_s
