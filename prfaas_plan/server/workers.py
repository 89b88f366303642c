"""Where the server's requests are computed: `Runner` hands each request's job (an endpoint of
server/endpoints.py, the page's what-if, or reading an uploaded scenario, on the request's raw
body) to a worker and awaits its text.

`prfaas-plan serve` runs one HTTP process and `processes` worker processes, each holding its
own catalog (read once, at its start). Requests wait in one first-come queue that every worker
takes from, so each core computes whichever connection a request came on. (With uvicorn's own
worker processes each keeps the connections it accepted: 20 clients' keep-alive connections
split 20/0 as often as 10/10, one core idle while the other's clients wait twice as long.)
The HTTP process only moves bytes: a body is decoded, checked against its schema and computed
in the worker, and the answer written there (server/jobs.py, the one module of the server a
worker process imports). With processes=0 the jobs run on threads of this
process, on the caller's catalog: the in-process application of the tests and of
`bench_serve.py --server-cpu`.

Bounds: at most `max_concurrent` requests computing (never more than the workers) and
`max_queued` more waiting, beyond which a request is refused (503). A request waits at most
`timeout_s` in the queue (then 503: the server is busy) and computes at most `timeout_s` once
it has started (then 504, and its computation is stopped: its worker process is ended and
replaced; on threads it cannot be: there it runs on, holding its slot), so each message says
which it was. A worker process that dies (killed for memory, say) costs the request it was
computing a 503 and is replaced; the other workers and requests are not touched. Worker
processes ignore Ctrl-C (the server stops them) and end by themselves if the server dies.

A client that hangs up is no longer waited for (ClientGoneError): its job is taken out of the
queue, or, if it has not reached a worker yet, never sent; a job already computing is left to
finish within `timeout_s` (ending its worker would cost a new one's start for the core the job
holds anyway), and its answer is dropped. Abandoned requests thus cost the live ones behind
them at most the jobs already computing, never a queue of work nobody waits for.
"""

import asyncio
import multiprocessing
import os
import pickle
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.context import SpawnContext
from pathlib import Path
from typing import Any

from prfaas_plan.errors import ConfigError, ResourceLimitError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.server.decoding import ApiError
from prfaas_plan.server.jobs import PING, job, serve_jobs
from prfaas_plan.server.limits import Limits

START_TIMEOUT_S = 120.0
Arguments = tuple[str, bytes, str, int]  # job's: endpoint, raw body, format, max JSON depth


class WorkerLostError(Exception):
    """The worker process computing a job ended (killed, out of memory)."""


class ClientGoneError(Exception):
    """The request's client hung up before its answer: nobody to answer."""


class _Worker:
    """One worker process and the server's end of its pipe."""

    def __init__(self, context: SpawnContext, data_dir: str | None) -> None:
        self.connection, child = context.Pipe()
        # spawn: a fresh interpreter, not a fork of this one (threads, an event loop)
        self.process = context.Process(
            target=serve_jobs, args=(child, data_dir), name="prfaas-plan-worker", daemon=True
        )
        self.process.start()
        child.close()

    async def call(self, arguments: tuple[object, ...]) -> str:
        """`job(*arguments)` on this worker; WorkerLostError if the worker ends meanwhile."""
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        descriptor = self.connection.fileno()

        def wake() -> None:
            if not readable.done():
                readable.set_result(None)

        try:
            # whole messages, read and written blocking: an event loop may have made the
            # descriptor non-blocking (uvloop does), and a large answer arrives in parts
            os.set_blocking(descriptor, True)
            self.connection.send_bytes(pickle.dumps(arguments))
            loop.add_reader(descriptor, wake)
            try:
                await readable
            finally:
                loop.remove_reader(descriptor)
            os.set_blocking(descriptor, True)
            kind, value = pickle.loads(self.connection.recv_bytes())
        except (EOFError, OSError):
            raise WorkerLostError from None
        if kind == "error":
            assert isinstance(value, BaseException)
            raise value
        assert isinstance(value, str)
        return value

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(5)
        self.connection.close()


class _Processes:
    """Worker processes and one first-come queue of jobs for them, kept in the server's event
    loop (no thread of its own)."""

    def __init__(self, count: int, data_dir: str | None) -> None:
        self.context = multiprocessing.get_context("spawn")
        self.data_dir = data_dir
        self.workers = [_Worker(self.context, data_dir) for _ in range(count)]
        self.idle: deque[_Worker] = deque(self.workers)
        self.waiting: deque[asyncio.Future[_Worker]] = deque()

    def start(self) -> None:
        """Wait until every worker has read its catalog (a ping each)."""
        try:
            for worker in self.workers:
                worker.connection.send_bytes(pickle.dumps((PING, b"", "json", 0)))
        except OSError:
            raise ConfigError(
                "serve: a worker process ended as it started (its error is above)"
            ) from None
        for worker in self.workers:
            try:
                if not worker.connection.poll(START_TIMEOUT_S):
                    raise ResourceLimitError(
                        f"serve: a worker process did not start in {START_TIMEOUT_S:g} s"
                    )
                worker.connection.recv_bytes()
            except (EOFError, OSError):
                raise ConfigError(
                    "serve: a worker process ended as it started (its error is above)"
                ) from None

    def _replace(self, worker: _Worker) -> _Worker:
        """`worker` ended (or is ended now): a new process in its place, starting in the
        background (a job sent to it waits in its pipe until it is ready)."""
        worker.stop()
        fresh = _Worker(self.context, self.data_dir)
        self.workers[self.workers.index(worker)] = fresh
        return fresh

    async def call(self, arguments: Arguments, started: list[float], gone: threading.Event) -> str:
        """`job(*arguments)` on the first free worker, the time it started appended to
        `started`; ClientGoneError, and no worker used, if `gone` is set by then."""
        if self.idle:
            worker = self.idle.popleft()
        else:
            ready = asyncio.get_running_loop().create_future()
            self.waiting.append(ready)
            try:
                worker = await ready  # handed over by a finishing job: first come, first served
            except asyncio.CancelledError:  # out of the queue (timed out, hung up): nothing to stop
                if ready.done() and not ready.cancelled():
                    self._hand_over(ready.result())
                raise
        if gone.is_set():  # its client hung up while it waited: the worker goes to the next
            self._hand_over(worker)
            raise ClientGoneError
        started.append(time.monotonic())
        try:
            return await worker.call(arguments)
        except WorkerLostError:
            worker = self._replace(worker)
            raise
        except asyncio.CancelledError:  # timed out while computing: stop it
            worker = self._replace(worker)
            raise
        finally:
            self._hand_over(worker)

    def _hand_over(self, worker: _Worker) -> None:
        while self.waiting:
            ready = self.waiting.popleft()
            if not ready.done():
                ready.set_result(worker)
                return
        self.idle.append(worker)

    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers if w.process.pid is not None]

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


class Runner:
    """Runs jobs on `processes` worker processes (0: threads of this process, on `catalog`)
    within `limits` (see the module's docstring)."""

    def __init__(
        self, limits: Limits, catalog: Catalog, processes: int = 0, data_dir: Path | None = None
    ) -> None:
        self.limits, self.catalog = limits, catalog
        self.busy = 0
        self.lock = threading.Lock()
        self.threads = ThreadPoolExecutor(limits.max_concurrent, thread_name_prefix="prfaas-plan")
        data = None if data_dir is None else str(data_dir)
        self.processes = _Processes(processes, data) if processes else None

    def start(self) -> None:
        """Start every worker process now and wait until each has read its catalog, so the
        first requests do not pay for it (no-op on threads)."""
        if self.processes:
            self.processes.start()

    def worker_pids(self) -> list[int]:
        return self.processes.pids() if self.processes else []

    def shutdown(self) -> None:
        """The server is stopping: worker processes ended (a running job with them) and
        waited for, so none outlives the server."""
        self.threads.shutdown(wait=False, cancel_futures=True)
        if self.processes:
            self.processes.stop()

    def _release(self, _: object = None) -> None:
        with self.lock:
            self.busy -= 1

    def _on_thread(self, arguments: Arguments, started: list[float], gone: threading.Event) -> str:
        if gone.is_set():  # its client hung up while it waited
            raise ClientGoneError
        started.append(time.monotonic())
        return job(*arguments, self.catalog)

    async def run(
        self,
        name: str,
        raw: bytes,
        format: str = "json",
        hung_up: Callable[[], Awaitable[object]] | None = None,
    ) -> str:
        """`job`'s text for a request; ApiError 503 when full or past `timeout_s` in the queue,
        504 past `timeout_s` computing; ClientGoneError once `hung_up()` returns (the client
        hung up: see the module's docstring)."""
        limits = self.limits
        with self.lock:
            if self.busy >= limits.max_concurrent + limits.max_queued:
                raise ApiError(
                    503, "Busy",
                    f"{limits.max_concurrent} requests are running and {limits.max_queued} "
                    "waiting; retry shortly",
                )  # fmt: skip
            self.busy += 1
        arguments: Arguments = (name, raw, format, limits.max_json_depth)
        started: list[float] = []  # when the job reached a worker (or a thread)
        gone = threading.Event()  # its client hung up: a job not started is not started
        watch = None if hung_up is None else asyncio.ensure_future(_set_when(hung_up, gone))
        work: asyncio.Future[str]
        thread = None
        try:
            await asyncio.sleep(0)  # the watch's first step: a hang-up already there is seen
            if gone.is_set():
                raise ClientGoneError
            if self.processes:
                work = asyncio.ensure_future(self.processes.call(arguments, started, gone))
                work.add_done_callback(self._release)  # done, failed or stopped (timeout)
            else:
                thread = self.threads.submit(self._on_thread, arguments, started, gone)
                thread.add_done_callback(self._release)  # when the thread ends (no loop needed)
                work = asyncio.wrap_future(thread)
        except BaseException:
            self._release()
            if watch is not None:
                watch.cancel()
            raise

        def unqueue() -> bool:
            """Take the job out of the queue, if it has not started (False: it has)."""
            if thread is not None:
                return thread.cancel()
            if started:
                return False
            work.cancel()  # it waits for a worker, or has not run yet: nothing to stop
            return True

        queued = time.monotonic()
        try:
            while True:
                deadline = (started[0] if started else queued) + limits.timeout_s
                waits: set[asyncio.Future[Any]] = {work} if watch is None else {work, watch}
                await asyncio.wait(
                    waits, timeout=max(0.0, deadline - time.monotonic()),
                    return_when=asyncio.FIRST_COMPLETED,
                )  # fmt: skip
                if work.done():
                    return work.result()
                if gone.is_set():
                    self._abandon(work, started, unqueue)
                    raise ClientGoneError
                if time.monotonic() < deadline:
                    continue
                if started:
                    work.cancel()  # on a worker process: ended and replaced
                    stopped = (
                        "it was stopped"
                        if self.processes
                        else "it runs on, holding its slot until done"
                    )
                    raise ApiError(
                        504, "Timeout",
                        f"the request computed for over {limits.timeout_s:g} s and {stopped}; "
                        "ask for less (fewer simulated requests, no sizing) or use the CLI",
                    )  # fmt: skip
                if unqueue():
                    raise ApiError(
                        503, "Busy",
                        f"the request waited {limits.timeout_s:g} s in the queue behind other "
                        "requests without starting; retry shortly",
                    )  # fmt: skip
                # it started meanwhile (on a thread): its own timeout from now on
        except asyncio.CancelledError:  # the server is stopping this request
            self._abandon(work, started, unqueue)
            raise
        except MemoryError:
            raise ResourceLimitError(
                "out of memory; ask for a smaller run (fewer requests, instances or lengths)"
            ) from None
        except WorkerLostError:
            raise ApiError(
                503, "WorkerLost",
                "the worker process computing this request ended (out of memory?); it has "
                "been replaced: retry, or ask for less",
            ) from None  # fmt: skip
        finally:
            if watch is not None:
                watch.cancel()

    def _abandon(
        self, work: "asyncio.Future[str]", started: list[float], unqueue: Callable[[], bool]
    ) -> None:
        """Nobody waits for `work` any more: out of the queue if it has not started, else left
        to finish, stopped at its timeout like any other (on worker processes)."""
        work.add_done_callback(_ignore_outcome)
        if unqueue() or not self.processes:
            return
        left_s = started[0] + self.limits.timeout_s - time.monotonic()
        asyncio.get_running_loop().call_later(max(0.0, left_s), work.cancel)


async def _set_when(hung_up: Callable[[], Awaitable[object]], gone: threading.Event) -> None:
    """Set `gone` as soon as `hung_up()` returns (in the same step: a job about to start
    checks it)."""
    await hung_up()
    gone.set()


def _ignore_outcome(work: "asyncio.Future[str]") -> None:
    """An abandoned job's answer or failure, read so that asyncio does not log it."""
    if not work.cancelled():
        work.exception()
