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
`max_queued` more waiting, beyond which a request is refused (503). A request over `timeout_s`
(waiting included) is answered 504 and its computation stopped: its worker process is ended
and replaced (on threads it cannot be: there it runs on, holding its slot). A worker process
that dies (killed for memory, say) costs the request it was computing a 503 and is replaced;
the other workers and requests are not touched. Worker processes ignore Ctrl-C (the server
stops them) and end by themselves if the server dies.
"""

import asyncio
import multiprocessing
import os
import pickle
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.context import SpawnContext
from pathlib import Path

from prfaas_plan.errors import ConfigError, ResourceLimitError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.server.decoding import ApiError
from prfaas_plan.server.jobs import PING, job, serve_jobs
from prfaas_plan.server.limits import Limits

START_TIMEOUT_S = 120.0


class WorkerLostError(Exception):
    """The worker process computing a job ended (killed, out of memory)."""


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

    async def call(self, arguments: tuple[object, ...]) -> str:
        if self.idle:
            worker = self.idle.popleft()
        else:
            ready = asyncio.get_running_loop().create_future()
            self.waiting.append(ready)
            try:
                worker = await ready  # handed over by a finishing job: first come, first served
            except asyncio.CancelledError:  # timed out while waiting: nothing to stop
                if ready.done() and not ready.cancelled():
                    self._hand_over(ready.result())
                raise
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

    async def run(self, name: str, raw: bytes, format: str = "json") -> str:
        """`job`'s text for a request; ApiError 503 when full, 504 past the timeout."""
        limits = self.limits
        with self.lock:
            if self.busy >= limits.max_concurrent + limits.max_queued:
                raise ApiError(
                    503, "Busy",
                    f"{limits.max_concurrent} requests are running and {limits.max_queued} "
                    "waiting; retry shortly",
                )  # fmt: skip
            self.busy += 1
        arguments = (name, raw, format, limits.max_json_depth)
        work: asyncio.Future[str]
        try:
            if self.processes:
                work = asyncio.ensure_future(self.processes.call(arguments))
                work.add_done_callback(self._release)  # done, failed or stopped (timeout)
            else:
                thread = self.threads.submit(job, *arguments, self.catalog)
                thread.add_done_callback(self._release)  # when the thread ends (no loop needed)
                work = asyncio.wrap_future(thread)
        except BaseException:
            self._release()
            raise
        try:
            return await asyncio.wait_for(work, limits.timeout_s)
        except TimeoutError:
            stopped = (
                "it was stopped" if self.processes else "it runs on, holding its slot until done"
            )
            raise ApiError(
                504, "Timeout",
                f"the request took over {limits.timeout_s:g} s and {stopped}; ask for less "
                "(fewer simulated requests, no sizing) or use the CLI",
            ) from None  # fmt: skip
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
