"""What the browser test and the serve benchmark share: a real `prfaas-plan serve` on a free
localhost port (a subprocess, stopped when done), and Debian's headless Chromium driven by
playwright (never a browser playwright downloads)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("PRFAAS_PLAN_CHROMIUM", "/usr/bin/chromium")
# the flags this machine needs (its closed network refuses Chromium's own connections)
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(*extra: str) -> Iterator[str]:
    """`prfaas-plan serve` on 127.0.0.1 and a free port; yields its base URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    server = subprocess.Popen(
        [sys.executable, "-m", "prfaas_plan", "serve", "--port", str(port), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(url + "/api/v1/catalog", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"serve did not start: {server.stderr.read() if server.stderr else ''}"
                    ) from None
                time.sleep(0.1)
        banner = server.stderr.readline() if server.stderr else ""
        if f"listening on {url}/" not in banner:  # it says where, and that it is localhost
            raise RuntimeError(f"serve did not say where it listens: {banner!r}")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stderr:
            server.stderr.close()


@contextmanager
def chromium_page(width: int = 1280, height: int = 1000) -> Iterator[object]:
    """A playwright page in Debian's headless Chromium with a fresh profile."""
    from playwright.sync_api import sync_playwright

    if shutil.which(CHROMIUM) is None:
        raise FileNotFoundError(f"{CHROMIUM} not found: apt-get install chromium")
    with (
        sync_playwright() as p,
        tempfile.TemporaryDirectory(prefix="prfaas-plan-chromium-") as profile,
    ):
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": width, "height": height},
        )  # fmt: skip
        try:
            yield context.new_page()
        finally:
            context.close()
