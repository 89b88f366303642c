"""Benchmark: `prfaas-plan serve` under load, and the what-if page's response to a slider.

Run by hand (not a test):  python benchmarks/bench_serve.py [--requests 1000] [--clients 20]
    [--bodies bandwidth|varied|both] [--serve-args '--workers 1'] [--slider-moves 20]
    [--client stream|httpx] [--server-cpu] [--footprint]
Starts a real uvicorn (`prfaas-plan serve` on a free 127.0.0.1 port) and stops it when done.
1. /api/v1/plan latency: `--requests` POSTs from `--clients` concurrent clients, one
   keep-alive HTTP/1.1 connection each; p50 / p99 / max and the throughput. A bounded load: it
   stops after `--requests`. The clients share this machine's cores with the server, so the load
   generator must cost little: by default each is a bare asyncio stream writing the request and
   reading the status line, headers and Content-Length bytes (~0.3 ms of CPU a request);
   `--client httpx` uses httpx.AsyncClient instead (~2.7 ms a request, measured: on 2 cores that
   alone takes the place of a third of the server's plans). Two sets of bodies:
   - `bandwidth`: the case study at bandwidths varied per request (196 values): the slider case;
     the length distribution is the case study's, so its mesh is computed once per process;
   - `varied`: every body a whole scenario with random bandwidth, instance counts and length
     distribution (mu_log, sigma_log), so no two requests share anything the server memoises.
   The server answers no request from a cache of responses. Beside the latencies: the CPU the
   server's processes used per request (read from /proc) and the clients' own.
2. The page: in Debian's headless Chromium (playwright), the time from a key press on the
   bandwidth slider to the table showing the new plan (the debounce, 150 ms, included),
   `--slider-moves` times.
3. `--server-cpu`: instead, what one /plan request costs the server: the ASGI application
   driven in this process (FastAPI included; no client, no socket), CPU time per request,
   the least of 3 batches of 150, for each set of bodies.
4. `--footprint`: instead, the resident memory of serve's process tree (read from /proc): idle
   after start-up, after each endpoint has run on every worker, and its peak during the largest
   /procure/pareto the server allows (64 sites x 64 instances).
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tests.browser import chromium_page, served


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bodies(url: str | None, kind: str, count: int) -> list[dict[str, object]]:
    """`count` request bodies of the set `kind` (see the module's docstring); the default
    scenario from the server at `url`, or read here (url None)."""
    if kind == "bandwidth":
        return [{"bandwidth_gbps": 5 + (i % 196)} for i in range(count)]
    if url is None:
        from prfaas_plan.inputs.resources import default_scenario_file
        from prfaas_plan.inputs.scenario import load_scenario

        default = load_scenario(default_scenario_file()).model_dump(mode="json")
    else:
        default = httpx.get(url + "/api/v1/scenario/default").json()
    rng = random.Random(13)
    out: list[dict[str, object]] = []
    for _ in range(count):
        scenario = {**default, "workload": {**default["workload"]}}
        scenario["prfaas_cluster"] = {**default["prfaas_cluster"], "instances": rng.randint(1, 8)}
        scenario["pd_cluster"] = {**default["pd_cluster"], "instances": rng.randint(4, 16)}
        scenario["workload"]["input_tokens"] = {
            **default["workload"]["input_tokens"],
            "mu_log": round(rng.uniform(9.4, 10.4), 6),
            "sigma_log": round(rng.uniform(0.8, 1.2), 6),
        }
        out.append({"scenario": scenario, "bandwidth_gbps": round(rng.uniform(5, 200), 3)})
    return out


async def load_httpx(
    url: str, requests: list[dict[str, object]], clients: int
) -> tuple[list[float], float, int]:
    latencies: list[float] = []
    failures = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(requests)):
        queue.put_nowait(i)

    async def client() -> None:
        nonlocal failures
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            while not queue.empty():
                i = queue.get_nowait()
                body = requests[i]
                start = time.perf_counter()
                response = await http.post("/api/v1/plan", json=body)
                latencies.append(time.perf_counter() - start)
                failures += response.status_code != 200

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, time.perf_counter() - start, failures


async def load_stream(
    url: str, requests: list[dict[str, object]], clients: int
) -> tuple[list[float], float, int]:
    """As load_httpx, each client a bare keep-alive HTTP/1.1 stream (see the docstring)."""
    host, port = url.removeprefix("http://").split(":")
    raw = [json.dumps(body).encode() for body in requests]  # encoded before the clock starts
    latencies: list[float] = []
    failures = 0
    pending = list(range(len(requests)))[::-1]

    async def client() -> None:
        nonlocal failures
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while pending:
                body = raw[pending.pop()]
                head = (
                    f"POST /api/v1/plan HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                start = time.perf_counter()
                writer.write(head + body)
                status = await reader.readline()
                length, closing = None, False
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                    closing |= line.lower().startswith(b"connection: close")
                if length is None:
                    raise RuntimeError(f"no Content-Length in the answer ({status!r})")
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - start)
                failures += not status.startswith(b"HTTP/1.1 200 ")
                if closing:  # the server ends the connection (after an error, say): a new one
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, int(port))
        finally:
            writer.close()
            await writer.wait_closed()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, time.perf_counter() - start, failures


def serve_processes(url: str) -> tuple[int, set[int], dict[int, list[str]]]:
    """The `prfaas-plan serve` listening at `url`: its pid, the pids of its process tree (it,
    the resource tracker, the worker processes) and every process's /proc/<pid>/stat fields
    after the command name (Linux /proc: the process whose command line has its port, and
    descendants; a worker that ended, replaced after a timeout say, no longer counts)."""
    port = url.rsplit(":", 1)[1]
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    root = None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid], stats[pid] = int(fields[1]), fields
        if b"serve" in argv and port.encode() in argv:
            root = pid
    if root is None:
        raise RuntimeError(f"no serve process on port {port}")
    tree, grew = {root}, True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= children
        grew = bool(children)
    return root, tree, stats


def server_cpu_s(url: str) -> tuple[float, float]:
    """CPU seconds used so far by the `serve` at `url`: its HTTP process, and its worker
    processes together."""
    root, tree, stats = serve_processes(url)
    tick = os.sysconf("SC_CLK_TCK")
    cpu = {pid: (int(stats[pid][11]) + int(stats[pid][12])) / tick for pid in tree}
    return cpu[root], sum(cpu[pid] for pid in tree - {root})


def rss_mib(url: str) -> dict[int, float]:
    """Resident memory of each process of the `serve` at `url` (MiB, /proc/<pid>/status)."""
    _, tree, _ = serve_processes(url)
    out = {}
    for pid in sorted(tree):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        out[pid] = kib / 1024
    return out


# one request per endpoint for --footprint: what each brings into a worker
FOOTPRINT_BODIES = {
    "plan": {}, "evaluate": {"threshold_tokens": 19400, "pd_prefill_instances": 3}, "kv": {},
    "egress": {}, "simulate": {"requests": 2000}, "procure": {"target_rps": 4},
    "procure/pareto": {"target_rps": 4}, "explain": {}, "sensitivity": {"bins": 2000},
}  # fmt: skip


def sixty_four_sites(url: str) -> dict[str, object]:
    """/procure/pareto at the server's largest candidate space: 64 sites of 64 instances and
    64 PD instances (the unloaded frontiers)."""
    case = httpx.get(url + "/api/v1/scenario/default").json()
    links = ["aws-dx-100g", "aws-dx-10g", "aws-internet-egress"]
    sites = [{"name": f"s{i}", "gpu": ["h20", "h200"][i % 2], "link_offering": links[i % 3],
              "max_instances": 64} for i in range(64)]  # fmt: skip
    return {
        "target_rps": 4,
        "scenario": {**case, "procurement": {"sites": sites, "max_pd_instances": 64}},
    }


def footprint(url: str) -> None:
    """The memory of `serve`'s process tree: idle after start-up, after each endpoint has run
    on every worker (requests go to the workers in turn), and its peak during the largest
    /procure/pareto the server allows."""

    def show(label: str) -> float:
        rss = rss_mib(url)
        each = ", ".join(f"{mib:.0f}" for mib in rss.values())
        print(f"{label}: {sum(rss.values()):.0f} MiB ({each} MiB: HTTP process, resource "
              "tracker, workers)")  # fmt: skip
        return sum(rss.values())

    show("idle after start-up")
    workers = len(rss_mib(url)) - 2
    for name, body in FOOTPRINT_BODIES.items():
        for _ in range(workers):
            response = httpx.post(f"{url}/api/v1/{name}", json=body, timeout=120)
            if response.status_code != 200:
                raise RuntimeError(f"/{name} answered {response.status_code}: {response.text}")
        show(f"after /{name} on each worker")
    peak, done = 0.0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(rss_mib(url).values()))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    response = httpx.post(f"{url}/api/v1/procure/pareto", json=sixty_four_sites(url), timeout=120)
    done.set()
    sampler.join()
    print(f"/procure/pareto over 64 sites x 64 instances: {response.status_code} in "
          f"{time.perf_counter() - start:.1f} s, peak {peak:.0f} MiB for the process tree")  # fmt: skip


LOADS = {"stream": load_stream, "httpx": load_httpx}


async def server_cpu_ms(kind: str, batches: int = 3, size: int = 150) -> float:
    """CPU ms per /plan request of the app itself, driven as uvicorn drives it (ASGI calls)."""
    from prfaas_plan.server.app import create_app

    app = create_app()

    async def call(body: dict[str, object]) -> None:
        raw = json.dumps(body).encode()
        messages = [{"type": "http.request", "body": raw, "more_body": False}]
        status: list[int] = []

        async def receive() -> dict[str, object]:
            if messages:
                return messages.pop()
            await asyncio.sleep(3600)  # the app never waits for a disconnect here
            return {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                status.append(int(str(message["status"])))

        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/api/v1/plan", "raw_path": b"/api/v1/plan",
            "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 1),
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(raw)).encode())],
        }  # fmt: skip
        await app(scope, receive, send)
        if status != [200]:
            raise RuntimeError(f"/plan answered {status} to {body}")

    work = bodies(None, kind, 50 + batches * size)
    for body in work[:50]:  # warm-up: imports, first calls
        await call(body)
    costs = []
    for b in range(batches):
        start = time.process_time()
        for body in work[50 + b * size : 50 + (b + 1) * size]:
            await call(body)
        costs.append((time.process_time() - start) / size * 1000)
    return min(costs)


def slider_seconds(url: str, moves: int) -> list[float]:
    times = []
    with chromium_page() as page:
        page.goto(url + "/")
        page.wait_for_selector("#plan-table[data-renders='1']")
        page.get_by_label("Link bandwidth (Gbps)").focus()
        for i in range(moves):
            renders = int(page.get_attribute("#plan-table", "data-renders"))
            start = time.perf_counter()
            page.keyboard.press("ArrowLeft" if i % 2 else "ArrowRight")
            page.wait_for_selector(f"#plan-table[data-renders='{renders + 1}']")
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--slider-moves", type=int, default=20, help="0: no page timing")
    parser.add_argument("--bodies", choices=["bandwidth", "varied", "both"], default="both")
    parser.add_argument("--serve-args", default="", help="e.g. '--workers 1'")
    parser.add_argument("--server-cpu", action="store_true", help="only the server's CPU/request")
    parser.add_argument("--client", choices=sorted(LOADS), default="stream", help="load generator")
    parser.add_argument(
        "--footprint", action="store_true", help="only the memory of serve's process tree"
    )
    args = parser.parse_args()
    if args.footprint:
        with served(*args.serve_args.split()) as url:
            print(f"serve {args.serve_args or '(defaults)'}")
            footprint(url)
        return
    kinds = ["bandwidth", "varied"] if args.bodies == "both" else [args.bodies]
    if args.server_cpu:
        for kind in kinds:
            ms = asyncio.run(server_cpu_ms(kind))
            print(f"/api/v1/plan, {kind} bodies: server CPU {ms:.2f} ms per request (in-process)")
        return
    with served(*args.serve_args.split()) as url:
        print(f"serve {args.serve_args or '(defaults)'}; {args.client} clients")
        load = LOADS[args.client]
        for kind in kinds:
            work = bodies(url, kind, args.requests)
            asyncio.run(load(url, bodies(url, kind, 40), 4))  # warm-up: imports, first calls
            client_cpu_s, (http_cpu_s, workers_cpu_s) = time.process_time(), server_cpu_s(url)
            latencies, wall_s, failures = asyncio.run(load(url, work, args.clients))
            client_cpu_s = time.process_time() - client_cpu_s
            http_after_s, workers_after_s = server_cpu_s(url)
            http_cpu_s, workers_cpu_s = http_after_s - http_cpu_s, workers_after_s - workers_cpu_s
            serve_cpu_s = http_cpu_s + workers_cpu_s
            ms = [1000 * x for x in latencies]
            print(f"/api/v1/plan, {kind} bodies: {args.requests} requests from {args.clients} "
                  f"concurrent clients in {wall_s:.1f} s ({args.requests / wall_s:.0f} req/s), "
                  f"{failures} not 200")  # fmt: skip
            print(f"  latency p50 {quantile(ms, 0.5):.1f} ms, p99 {quantile(ms, 0.99):.1f} ms, "
                  f"max {max(ms):.1f} ms; CPU a request: the server's "
                  f"{1000 * serve_cpu_s / args.requests:.2f} ms (HTTP process "
                  f"{1000 * http_cpu_s / args.requests:.2f}, workers "
                  f"{1000 * workers_cpu_s / args.requests:.2f}), the clients' "
                  f"{1000 * client_cpu_s / args.requests:.2f} ms")  # fmt: skip
            single, _, _ = asyncio.run(load(url, work[:200], 1))
            one = [1000 * x for x in single]
            print(f"  one client alone (200 requests): p50 {quantile(one, 0.5):.1f} ms, "
                  f"p99 {quantile(one, 0.99):.1f} ms")  # fmt: skip
        if args.slider_moves:
            moves = slider_seconds(url, args.slider_moves)
            ms = [1000 * x for x in moves]
            print(f"page: slider key press -> updated table, {len(ms)} moves: median "
                  f"{statistics.median(ms):.0f} ms, max {max(ms):.0f} ms (150 ms of it is the debounce)")  # fmt: skip


if __name__ == "__main__":
    main()
