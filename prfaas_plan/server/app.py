"""The ASGI application of `prfaas-plan serve` (FastAPI): POST /api/v1/<endpoint> for every
endpoint of server/endpoints.py, the what-if page's own calls, the page itself at `/`, OpenAPI at
/docs and /openapi.json.

A response is the CLI's JSON document, written compact (`?format=markdown` gives the CLI's
Markdown); /export's is its files, {path: text}, or with `?format=zip` (or `Accept:
application/zip`) a zip archive of them (built in the worker, bounded). A failure is `{"error": {"type", "message", "parameter"}}` with the
library's one-line message (request fields named as the library names them, `threshold_tokens`,
where the CLI writes `--threshold-tokens`) and an HTTP status by class:

    400 malformed body (not UTF-8, not JSON, NaN/Infinity, a key twice in an object, nested
        deeper than max_json_depth)
    404 / 405 unknown path or method
    408 a body not received within body_timeout_s
    409 InfeasibleError (no plan meets the target; the message names what binds)
    413 body over max_body_bytes
    431 a head (request line and headers) over max_head_bytes or max_headers lines
    422 ConfigError, ProfileError, RangeError (and a body that breaks the schema: a ConfigError)
    503 SolverError, ResourceLimitError (out of memory), max_concurrent requests running and
        max_queued more waiting, a request that waited timeout_s in the queue without starting,
        bodies being received over max_buffered_body_bytes in all, or a worker process that
        ended while computing the request
    504 a request that computed for over timeout_s (on worker processes it is stopped)

A request whose client hangs up is not computed if it has not started (workers.py).

Requests are decoded, checked and computed on worker processes (server/workers.py); this
process only moves bytes, and the computing POSTs bypass FastAPI's layers (`Front`).

Nothing a client sends produces a 500: any other exception is a bug, answered 500 with one line
and no traceback (the traceback goes to the server's log, a worker process's included). No
answer names a path of the server's machine (server/naming.py).
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import State
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from prfaas_plan import __version__
from prfaas_plan.errors import (
    ConfigError,
    InfeasibleError,
    PrfaasPlanError,
    ProfileError,
    RangeError,
    ResourceLimitError,
    SolverError,
)
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import load_scenario
from prfaas_plan.render.views import Document
from prfaas_plan.server.decoding import ApiError
from prfaas_plan.server.endpoints import ENDPOINTS, ZIP
from prfaas_plan.server.jobs import SCENARIO, WHATIF, WorkerBugError, zip_of
from prfaas_plan.server.limits import Limits, head_refusal
from prfaas_plan.server.workers import ClientGoneError, Runner

STATIC = Path(__file__).resolve().parent / "static"
API = "/api/v1"
STATUS = {
    ConfigError: 422,
    ProfileError: 422,
    RangeError: 422,
    InfeasibleError: 409,
    SolverError: 503,
    ResourceLimitError: 503,
}


def error_response(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status)


def format_parameter(formats: tuple[str, ...]) -> dict[str, Any]:
    """The OpenAPI description of `?format=` for an endpoint answering in `formats`."""
    return {
        "name": "format", "in": "query", "required": False,
        "schema": {"type": "string", "enum": list(formats), "default": "json"},
    }  # fmt: skip


def _either(names: tuple[str, ...]) -> str:
    return " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"


def accepts_zip(accept: str | None) -> bool:
    """True when an Accept header names application/zip (a media range's parameters aside)."""
    return accept is not None and any(
        part.split(";", 1)[0].strip().lower() == "application/zip" for part in accept.split(",")
    )


ZIP_RESPONSE = {"200": {"description": "The files of the export: {path: text} as JSON, or "
    "(`?format=zip`, or `Accept: application/zip`) a zip archive", "content": {
    "application/json": {"schema": {"type": "object",
                                    "additionalProperties": {"type": "string"}}},
    "application/zip": {"schema": {"type": "string", "format": "binary"}}}}}  # fmt: skip
LOG = logging.getLogger("uvicorn.error")  # where uvicorn writes its own errors


def failure_response(exc: Exception) -> JSONResponse:
    """A failure's answer: an ApiError's or a PrfaasPlanError's status by class and its one line; any
    other exception is a bug, a 500 with one line and no traceback."""
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.kind, str(exc))
    if isinstance(exc, PrfaasPlanError):
        status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 422)
        return error_response(status, type(exc).__name__, str(exc), parameter=exc.parameter)
    kind = exc.kind if isinstance(exc, WorkerBugError) else type(exc).__name__
    return error_response(500, "InternalError", f"internal error ({kind}); please report it")


class BodyBudget:
    """The bytes of the bodies being received at once, against Limits.max_buffered_body_bytes
    (one event loop reads them all: no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0


async def read_body(request: Request, limits: Limits, budget: BodyBudget) -> bytes:
    """At most `limits.max_body_bytes` of body, or 413 (a declared length is checked before
    reading); all of it within `limits.body_timeout_s`, or 408; 503 when the bodies being
    received at once would hold more than the budget."""
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    too_large = ApiError(413, "BodyTooLarge", f"request: body is over the limit of {limit:,} bytes")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            async for chunk in request.stream():
                if budget.held + len(chunk) > budget.limit:
                    raise ApiError(503, "Busy", "request: the server is receiving too many "
                                   "bodies at once; try again shortly")  # fmt: skip
                budget.held += len(chunk)
                size += len(chunk)
                chunks.append(chunk)
                if size > limit:
                    raise too_large
    except TimeoutError:
        raise ApiError(
            408, "RequestTimeout",
            f"request: the body did not arrive within {limits.body_timeout_s:g} s; send it whole",
        ) from None  # fmt: skip
    finally:
        budget.held -= size
    return b"".join(chunks)


def create_app(
    limits: Limits | None = None, data_dir: Path | None = None, processes: int = 0
) -> "Front":
    """The application: one catalog (the shipped data unless `data_dir`, read once), one Runner
    computing on `processes` worker processes (0: on threads of this process; see workers.py),
    kept as `app.state.runner`."""
    limits = limits or Limits()
    # absolute, so that every message names it by one path, which server/naming.py renames
    data_dir = None if data_dir is None else Path(data_dir).absolute()
    catalog = CachedCatalog.open(data_dir)
    runner = Runner(limits, catalog, processes, data_dir)
    budget = BodyBudget(limits.max_buffered_body_bytes)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        runner.shutdown()  # uvicorn's graceful stop: the worker processes end with the server

    app = FastAPI(
        title="prfaas-plan", version=__version__, lifespan=lifespan,
        description="Capacity planner for Prefill-as-a-Service (PrfaaS) deployments: the CLI's "
        "commands over HTTP. Bodies: a scenario (the scenario file's schema) and the command's "
        "parameters; responses: the CLI's JSON (compact).",
    )  # fmt: skip

    async def _failure(_: Request, exc: Exception) -> JSONResponse:
        return failure_response(exc)

    for failure in (ApiError, PrfaasPlanError, Exception):
        app.add_exception_handler(failure, _failure)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, "HTTPError", str(exc.detail))

    async def compute(name: str, request: Request) -> Response:
        """The answer to a computing POST (`name`: an endpoint, WHATIF or SCENARIO), its
        failures answered here too (the front calls this without FastAPI's handlers)."""
        try:
            spec = ENDPOINTS.get(name)
            offered = spec.formats if spec is not None else ("json",)
            formats = request.query_params.getlist("format") if spec is not None else []
            if len(formats) > 1:  # as a JSON key given twice: which one was meant?
                raise ApiError(422, "ConfigError", "format is given more than once; give it once")
            format = formats[0] if formats else "json"
            if not formats and ZIP in offered and accepts_zip(request.headers.get("accept")):
                format = ZIP
            if format not in offered:
                raise ApiError(
                    422, "ConfigError", f"format must be {_either(offered)}, got {format[:40]!r}"
                )
            raw = await read_body(request, limits, budget)

            async def hung_up() -> None:  # the body is read: the next message is the hang-up
                while (await request.receive())["type"] != "http.disconnect":
                    pass

            text = await runner.run(name, raw, format, hung_up)  # decoded and checked there
        except (ClientDisconnect, ClientGoneError):  # nobody to answer, nothing to report
            return Response(status_code=400)
        except Exception as exc:
            if isinstance(exc, WorkerBugError):  # a bug in a worker process: its traceback there
                LOG.error("%s %s failed in a worker process\n%s", request.method,
                          request.url.path, exc.details.rstrip())  # fmt: skip
            elif not isinstance(exc, ApiError | PrfaasPlanError):  # a bug: its traceback in the log
                LOG.error("%s %s failed", request.method, request.url.path, exc_info=exc)
            return failure_response(exc)
        if format == "markdown":
            return PlainTextResponse(text, media_type="text/markdown")
        if format == ZIP:
            filename, data = zip_of(text)  # a DNS-1123 label and ".zip": nothing to quote
            disposition = f'attachment; filename="{filename}"'
            return Response(data, media_type="application/zip",
                            headers={"content-disposition": disposition})  # fmt: skip
        return Response(text, media_type="application/json")

    # the computing routes, as FastAPI routes for the OpenAPI description; the front (below)
    # sends their requests to `compute` directly
    def add(
        name: str, summary: str, body: dict[str, Any] | None, formats: tuple[str, ...] = ()
    ) -> None:
        async def route(request: Request) -> Response:
            return await compute(name, request)

        documented: dict[str, Any] = {}
        if body is not None:
            documented["requestBody"] = {"required": False, "content": {
                "application/json": {"schema": body}}}  # fmt: skip
        if formats:
            documented["parameters"] = [format_parameter(formats)]
        if ZIP in formats:
            documented["responses"] = ZIP_RESPONSE
        app.add_api_route(
            f"{API}/{name}", route, methods=["POST"], summary=summary, name=name,
            response_class=Response, openapi_extra=documented or None,
        )  # fmt: skip

    for spec in ENDPOINTS.values():
        add(spec.name, spec.summary, spec.body.model_json_schema(), spec.formats)
    add(WHATIF, "The page's call: /plan's JSON, its table and Markdown, and the threshold-"
        "balance curve", ENDPOINTS["plan"].body.model_json_schema())  # fmt: skip
    add(SCENARIO, "A scenario YAML (the body, as text) read with the strict loader and schema, "
        "returned as JSON", None)  # fmt: skip

    @app.get(f"{API}/scenario/default", summary="The case-study scenario (the CLI's default)")
    async def _default() -> Document:
        return load_scenario(default_scenario_file()).model_dump(mode="json")

    @app.get(f"{API}/catalog", summary="Names of the catalog's models and GPUs")
    async def _catalog() -> Document:
        gpus = sorted(p.stem for p in (catalog.data_dir / "gpus").glob("*.yaml"))
        return {"models": sorted(catalog.models()), "gpus": gpus}

    @app.get("/", include_in_schema=False)
    async def _page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.state.runner = runner
    paths = {f"{API}/{name}": name for name in [*ENDPOINTS, WHATIF, SCENARIO]}
    return Front(app, compute, paths, limits)


class Front:
    """The ASGI application: a computing POST goes to `compute` directly, everything else
    (the page, docs, GETs, unknown paths and methods) to the FastAPI app. FastAPI's routing,
    dependency and middleware layers took a third of the one HTTP process's CPU a /plan
    request (0.35-0.39 -> 0.25-0.28 ms, 4 alternated runs of bench_serve.py); the computing
    routes need none of them (a raw body in, text out). Middleware added to the FastAPI app
    does not see them."""

    def __init__(
        self,
        api: FastAPI,
        compute: Callable[[str, Request], Awaitable[Response]],
        paths: dict[str, str],
        limits: Limits,
    ) -> None:
        self.api, self.compute, self.paths, self.limits = api, compute, paths, limits

    @property
    def state(self) -> State:
        return self.api.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = None
        response: Response
        if scope["type"] == "http":
            # serve's protocol (server/http.py) refuses a large head before reading it all;
            # this is the same bound under any other ASGI server (and the in-process client)
            headers = scope["headers"]
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            size += sum(len(key) + len(value) + 4 for key, value in headers)
            refusal = head_refusal(self.limits, size, len(headers))
            if refusal is not None:
                response = error_response(431, "HeadersTooLarge", refusal)
                response.headers["connection"] = "close"
                await response(scope, receive, send)
                return
            if scope["method"] == "POST":
                name = self.paths.get(scope["path"])
        if name is None:
            await self.api(scope, receive, send)
            return
        response = await self.compute(name, Request(scope, receive))
        await response(scope, receive, send)
