"""What a worker computes (`job`): a request's raw body in, the answer's text out, decoded,
checked and computed here, files named as server/naming.py says. `serve_jobs` is a worker
process's loop (server/workers.py starts it, spawned); with no worker processes the server
calls `job` on its threads.

A worker process imports this module, not workers.py: no asyncio, no FastAPI, no solver or
symbolic library until a request needs one (each endpoint imports its command inside its
function), so an idle worker holds only the catalog, numpy and the schemas (README: the idle
footprint)."""

import base64
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from prfaas_plan.errors import ConfigError, PrfaasPlanError
from prfaas_plan.export.manifest import zip_archive
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.reading import parse
from prfaas_plan.inputs.scenario import scenario_from_data
from prfaas_plan.inputs.strict_yaml import parse_yaml_text
from prfaas_plan.render.views import dumps, render_markdown
from prfaas_plan.server import endpoints
from prfaas_plan.server.bodies import PlanBody
from prfaas_plan.server.decoding import ApiError, decode_json
from prfaas_plan.server.naming import Naming

WHATIF = "whatif"  # the page's job: /plan's JSON with its table, Markdown and balance curve
SCENARIO = "scenario"  # an uploaded scenario YAML, read by the strict loader, as JSON
PING = "ping"  # answered by a worker that has started (serve waits for every one)
_catalog: Catalog | None = None  # a worker process's catalog, set when it starts


class WorkerBugError(Exception):
    """A bug (an exception no client causes) in a worker process, brought back to the server
    as its class name and traceback text (a pickled exception loses its traceback): the server
    logs the traceback and answers a 500 naming the class only."""

    def __init__(self, kind: str, details: str) -> None:
        super().__init__(kind, details)
        self.kind, self.details = kind, details

    def __str__(self) -> str:
        return self.kind


def start_worker(data_dir: str | None) -> None:
    """A worker process's start: its own catalog, read once; Ctrl-C left to the server (a
    terminal sends it to the whole process group); and a watch on the server that ends the
    worker if the server dies without stopping it (killed, say)."""
    global _catalog
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _catalog = CachedCatalog.open(None if data_dir is None else Path(data_dir))
    server = os.getppid()

    def watch() -> None:
        while os.getppid() == server:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="prfaas-plan-watch", daemon=True).start()


def job(
    name: str, raw: bytes, format: str, max_json_depth: int, catalog: Catalog | None = None
) -> str:
    """Job `name` on a request's raw body, on `catalog` (in a worker: its own): the answer's
    text, the JSON document (compact) or (`format` "markdown") the Markdown; server paths in
    it, and in a failure's message, renamed (server/naming.py)."""
    catalog = catalog if catalog is not None else _catalog
    assert catalog is not None, "a worker process runs start_worker first"
    naming = Naming.of(catalog.data_dir, catalog.models_file)
    try:
        text = _compute(name, raw, format, max_json_depth, catalog, naming)
    except (PrfaasPlanError, ApiError) as exc:
        raise naming.error(exc) from None
    if format == endpoints.ZIP:  # its files were renamed one by one before archiving
        return text
    return naming.text(text) if format == "markdown" else naming.json(text)


def zip_text(archive: endpoints.Archive, naming: Naming) -> str:
    """An archive as the text a job answers (a worker answers text): the zip's file name, a
    newline, the zip archive in base64; each file's server paths renamed before archiving."""
    files = {path: naming.text(text) for path, text in archive.files.items()}
    data = zip_archive(files, archive.name)
    return f"{archive.name}.zip\n" + base64.b64encode(data).decode("ascii")


def zip_of(text: str) -> tuple[str, bytes]:
    """The file name and the bytes of a zip answered by `zip_text`."""
    filename, _, encoded = text.partition("\n")
    return filename, base64.b64decode(encoded)


def _compute(
    name: str, raw: bytes, format: str, max_json_depth: int, catalog: Catalog, naming: Naming
) -> str:
    if name == PING:
        return PING
    if name == SCENARIO:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"upload: scenario file is not UTF-8 text (byte {exc.start})"
            ) from None
        return dumps(
            scenario_from_data(parse_yaml_text(text, "upload"), "upload").model_dump(mode="json"),
            compact=True,
        )
    spec = endpoints.ENDPOINTS["plan" if name == WHATIF else name]
    body = parse(spec.body, decode_json(raw, max_json_depth), "request")
    if name == WHATIF:
        assert isinstance(body, PlanBody)
        return dumps(endpoints.whatif(body, catalog), compact=True)
    answer = spec.handler(body, catalog)
    if format == endpoints.ZIP:
        assert answer.archive is not None, f"{name} offers zip without an archive"
        return zip_text(answer.archive(), naming)
    if format == "markdown":
        return render_markdown(answer.view())
    return dumps(answer.document(), compact=True)


def outcome(arguments: tuple[object, ...]) -> tuple[str, object]:
    """What a worker sends back for `job(*arguments)`: ("ok", text), or ("error", the
    exception) for a client's error (PrfaasPlanError, ApiError) or running out of memory, or
    ("error", WorkerBugError) for anything else."""
    try:
        return "ok", job(*arguments)  # type: ignore[arg-type]
    except (PrfaasPlanError, ApiError, MemoryError) as exc:
        return "error", exc
    except BaseException as exc:  # a bug: its traceback goes to the server's log
        return "error", WorkerBugError(type(exc).__name__, "".join(traceback.format_exception(exc)))


def serve_jobs(connection: Connection, data_dir: str | None) -> None:
    """A worker process: jobs in (the pickled arguments of `job`; an empty message: stop),
    each answered with its `outcome` on the same pipe."""
    try:
        start_worker(data_dir)
    except PrfaasPlanError as exc:  # its one line, then the server says a worker did not start
        sys.stderr.write(f"prfaas-plan serve: worker process: {exc}\n")
        sys.exit(1)
    while True:
        try:
            message = connection.recv_bytes()
        except EOFError:  # the server is gone (killed): nothing to answer
            return
        if not message:
            return
        answer = outcome(pickle.loads(message))
        try:
            payload = pickle.dumps(answer)
        except Exception:  # an exception that does not pickle: its type
            kind = type(answer[1]).__name__
            payload = pickle.dumps(("error", WorkerBugError(kind, f"{kind} (did not pickle)")))
        connection.send_bytes(payload)
