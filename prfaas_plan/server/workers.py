"""Where the server's use-cases run: `Runner` hands each request's job (an endpoint of
server/endpoints.py, or the page's what-if, on a parsed body) to a pool and awaits it.

`prfaas-plan serve` runs one HTTP process and `processes` worker processes, each holding its
own catalog (read once, at its start). Requests wait in one first-come queue that every worker
takes from, so each core computes whichever connection a request came on. (With uvicorn's own
worker processes each keeps the connections it accepted: 20 clients' keep-alive connections
split 20/0 as often as 10/10, one core idle while the other's clients wait twice as long.)
With processes=0 the jobs run on threads of this process, on the caller's catalog: the
in-process application of the tests and of `bench_serve.py --server-cpu`.

Bounds: at most `max_concurrent` requests computing (never more than the workers) and
`max_queued` more waiting, beyond which a request is refused (503); a request over `timeout_s`
(waiting included) is answered 504 while its job finishes (numpy cannot be interrupted),
holding its slot. A worker process that dies (killed for memory, say) is replaced: the
requests it held are answered 503.
"""

import asyncio
import multiprocessing
import os
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from prfaas_plan.errors import ResourceLimitError
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.render.views import dumps, render_markdown
from prfaas_plan.server import endpoints
from prfaas_plan.server.bodies import PlanBody
from prfaas_plan.server.limits import Limits

WHATIF = "whatif"  # the page's job: /plan's JSON with its table, Markdown and balance curve
_catalog: Catalog | None = None  # a worker process's catalog, set when it starts


class ApiError(Exception):
    """A failure answered with `status` and one line (not a library error)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def start_worker(data_dir: str | None) -> None:
    """A worker process's start: its own catalog, read once, and a watch on the server that
    ends the worker if the server dies without stopping it (killed, say)."""
    global _catalog
    _catalog = CachedCatalog.open(None if data_dir is None else Path(data_dir))
    server = os.getppid()

    def watch() -> None:
        while os.getppid() == server:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="prfaas-plan-watch", daemon=True).start()


def job(name: str, body: Strict, format: str = "json", catalog: Catalog | None = None) -> str:
    """Endpoint `name` (or WHATIF) on `body`, on `catalog` (in a worker: its own): the answer's
    text, the JSON document or (`format` "markdown") the Markdown, written here, on the
    worker's core, not by the one HTTP process."""
    catalog = catalog if catalog is not None else _catalog
    assert catalog is not None, "a worker process runs start_worker first"
    if name == WHATIF:
        assert isinstance(body, PlanBody)
        return dumps(endpoints.whatif(body, catalog))
    answer = endpoints.ENDPOINTS[name].handler(body, catalog)
    return render_markdown(answer.view()) if format == "markdown" else dumps(answer.document())


def _ready() -> bool:
    return _catalog is not None


class Runner:
    """Runs jobs on `processes` worker processes (0: threads of this process, on `catalog`)
    within `limits` (see the module's docstring)."""

    def __init__(
        self, limits: Limits, catalog: Catalog, processes: int = 0, data_dir: Path | None = None
    ) -> None:
        self.limits, self.catalog, self.processes = limits, catalog, processes
        self.data_dir = None if data_dir is None else str(data_dir)
        self.busy = 0
        self.lock = threading.Lock()
        self.pool = self._new_pool()

    def _new_pool(self) -> Executor:
        if self.processes == 0:
            return ThreadPoolExecutor(self.limits.max_concurrent, thread_name_prefix="prfaas-plan")
        return ProcessPoolExecutor(
            self.processes,
            # spawn: a fresh interpreter, not a fork of this one (threads, an event loop)
            mp_context=multiprocessing.get_context("spawn"),
            initializer=start_worker,
            initargs=(self.data_dir,),
        )

    def start(self) -> None:
        """Start every worker process now and wait until each has read its catalog, so the
        first requests do not pay for it (no-op on threads)."""
        if self.processes:
            for future in [self.pool.submit(_ready) for _ in range(self.processes)]:
                future.result()

    def shutdown(self) -> None:
        """The server is stopping: waiting jobs cancelled, worker processes ended (a running
        job with them) and waited for, so none outlives the server."""
        pool = self.pool
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(5)

    def _release(self, _: "Future[Any] | None" = None) -> None:
        with self.lock:
            self.busy -= 1

    def _replace(self, broken: Executor) -> ApiError:
        """A worker process died: a new pool (once), and the 503 to answer."""
        with self.lock:
            if self.pool is broken:
                self.pool = self._new_pool()
        broken.shutdown(wait=False, cancel_futures=True)
        return ApiError(
            503, "WorkerLost",
            "a worker process ended while computing this request (out of memory?); it has "
            "been replaced: retry, or ask for less",
        )  # fmt: skip

    async def run(self, name: str, body: Strict, format: str = "json") -> str:
        """`job(name, body, format)`'s text; ApiError 503 when full, 504 past the timeout."""
        limits = self.limits
        with self.lock:
            if self.busy >= limits.max_concurrent + limits.max_queued:
                raise ApiError(
                    503, "Busy",
                    f"{limits.max_concurrent} requests are running and {limits.max_queued} "
                    "waiting; retry shortly",
                )  # fmt: skip
            self.busy += 1
        pool = self.pool
        try:
            catalog = None if self.processes else self.catalog
            future = pool.submit(job, name, body, format, catalog)
        except BrokenProcessPool:
            self._release()
            raise self._replace(pool) from None
        except BaseException:
            self._release()
            raise
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), limits.timeout_s)
        except TimeoutError:
            raise ApiError(
                504, "Timeout",
                f"the request took over {limits.timeout_s:g} s; ask for less (fewer "
                "simulated requests, no sizing) or use the CLI",
            ) from None  # fmt: skip
        except MemoryError:
            raise ResourceLimitError(
                "out of memory; ask for a smaller run (fewer requests, instances or lengths)"
            ) from None
        except BrokenProcessPool:
            raise self._replace(pool) from None
