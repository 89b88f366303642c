"""Benchmark: `prfaas-plan serve` under load, and the what-if page's response to a slider.

Run by hand (not a test):  python benchmarks/bench_serve.py [--requests 1000] [--clients 20]
Starts a real uvicorn (`prfaas-plan serve` on a free 127.0.0.1 port) and stops it when done.
1. /api/v1/plan latency: `--requests` POSTs (the case study at bandwidths varied per request,
   so no two are alike) from `--clients` concurrent clients (asyncio + httpx, one connection
   each); p50 / p99 / max and the throughput. A bounded load: it stops after `--requests`.
2. The page: in Debian's headless Chromium (playwright), the time from a key press on the
   bandwidth slider to the table showing the new plan (the debounce, 150 ms, included),
   `--slider-moves` times.
"""

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tests.browser import chromium_page, served


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(url: str, requests: int, clients: int) -> tuple[list[float], float, int]:
    latencies: list[float] = []
    failures = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)

    async def client() -> None:
        nonlocal failures
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            while not queue.empty():
                i = queue.get_nowait()
                body = {"bandwidth_gbps": 5 + (i % 196)}
                start = time.perf_counter()
                response = await http.post("/api/v1/plan", json=body)
                latencies.append(time.perf_counter() - start)
                failures += response.status_code != 200

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, time.perf_counter() - start, failures


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
    parser.add_argument("--slider-moves", type=int, default=20)
    args = parser.parse_args()
    with served() as url:
        asyncio.run(load(url, 40, 4))  # warm-up: imports, first-call caches
        latencies, wall_s, failures = asyncio.run(load(url, args.requests, args.clients))
        ms = [1000 * x for x in latencies]
        print(f"/api/v1/plan: {args.requests} requests from {args.clients} concurrent clients "
              f"in {wall_s:.1f} s ({args.requests / wall_s:.0f} req/s), {failures} not 200")  # fmt: skip
        print(f"  latency p50 {quantile(ms, 0.5):.1f} ms, p99 {quantile(ms, 0.99):.1f} ms, "
              f"max {max(ms):.1f} ms")  # fmt: skip
        asyncio.run(load(url, 200, 1))
        single, _, _ = asyncio.run(load(url, 200, 1))
        one = [1000 * x for x in single]
        print(
            f"  one client alone: p50 {quantile(one, 0.5):.1f} ms, p99 {quantile(one, 0.99):.1f} ms"
        )
        moves = slider_seconds(url, args.slider_moves)
        ms = [1000 * x for x in moves]
        print(f"page: slider key press -> updated table, {len(ms)} moves: median "
              f"{statistics.median(ms):.0f} ms, max {max(ms):.0f} ms (150 ms of it is the debounce)")  # fmt: skip


if __name__ == "__main__":
    main()
