"""`prfaas-plan serve`: the what-if page and the HTTP API (server/) on uvicorn, on localhost
unless told otherwise."""

import os
import sys
from typing import Annotated

import typer

from prfaas_plan.cli.application import app
from prfaas_plan.cli.failures import CliCommand
from prfaas_plan.cli.options import DataDirOpt
from prfaas_plan.errors import ConfigError
from prfaas_plan.server.limits import Limits

GRACE_S = 5  # what a stopping server gives the requests still computing


@app.command("serve", cls=CliCommand)
def serve(
    host: Annotated[
        str,
        typer.Option("--host", help="Address to listen on (any other than 127.0.0.1 exposes it)."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    max_concurrent: Annotated[
        int,
        typer.Option(
            "--max-concurrent",
            help="Most requests computing at once: --workers is at most this (default: one "
            "worker per core up to it).",
        ),
    ] = Limits.max_concurrent,
    max_queued: Annotated[
        int, typer.Option("--max-queued", help="Requests waiting for them; more get 503.")
    ] = Limits.max_queued,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Worker processes computing requests (default: one per core, at most "
            "--max-concurrent), all taking from one queue.",
        ),
    ] = None,
    timeout_s: Annotated[
        float,
        typer.Option(
            "--timeout-s",
            help="Time a request may wait in the queue (then 503) and, once "
            "started, compute (then 504) (s).",
        ),
    ] = Limits.timeout_s,
    data_dir: DataDirOpt = None,
) -> None:
    """The what-if page at / and the JSON API at /api/v1 (OpenAPI at /docs)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be in [0, 65535], got {port}")
    if not 1 <= max_concurrent <= 64:
        raise ConfigError(f"--max-concurrent must be in [1, 64], got {max_concurrent}")
    if not 0 <= max_queued <= 10_000:
        raise ConfigError(f"--max-queued must be in [0, 10000], got {max_queued}")
    if not 0 < timeout_s <= 3600:
        raise ConfigError(f"--timeout-s must be in (0, 3600], got {timeout_s:g}")
    try:
        import uvicorn

        from prfaas_plan.server.app import create_app
        from prfaas_plan.server.http import bounded_protocol
    except ImportError as exc:
        raise ConfigError(
            f"serve needs fastapi and uvicorn: pip install prfaas-plan ({exc})"
        ) from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    processes = min(cores or 1, max_concurrent) if workers is None else workers
    if not 1 <= processes <= max_concurrent:
        raise ConfigError(
            f"--workers must be in [1, --max-concurrent={max_concurrent}] (each process computes "
            f"one request at a time), got {processes}"
        )
    limits = Limits(max_concurrent=processes, max_queued=max_queued, timeout_s=timeout_s)
    # the catalog's errors here, before the banner; then every worker reads its own
    application = create_app(limits, data_dir, processes=processes)
    runner = application.state.runner
    try:
        runner.start()
        exposed = (
            "" if host in ("127.0.0.1", "localhost", "::1") else " (reachable from other machines)"
        )
        sys.stderr.write(
            f"prfaas-plan serve: listening on http://{host}:{port}/{exposed}; API docs at /docs; "
            f"{processes} worker process{'es' if processes > 1 else ''}, one request at a time "
            f"each, {max_queued} more waiting at most\n"
        )
        sys.stderr.flush()
        # on SIGTERM or Ctrl-C, requests still computing after GRACE_S are dropped
        # heads bounded as limits says (431 beyond), which uvicorn's own protocols do not
        uvicorn.run(
            application, host=host, port=port, log_level="warning",
            timeout_graceful_shutdown=GRACE_S, http=bounded_protocol(limits),
        )  # fmt: skip
    finally:
        runner.shutdown()
