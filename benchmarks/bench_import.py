"""Benchmark: `import-profile` on the largest inputs its bounds let through (plausible.py), each
run as its own process under /usr/bin/time (elapsed, CPU, peak RSS).

Run by hand (not a test):  python benchmarks/bench_import.py [--keep DIR]
Writes, in a temporary folder (about 1.3 GB), a vLLM decode result of 1.2·10^7 ITLs as vLLM
writes them (17-digit floats, 255 MB), one of 2.8·10^7 ITLs rounded to 4 decimals (222 MB,
the most numbers a file under the size bound holds within MAX_BENCHMARK_NUMBERS), two results
at MAX_BENCHMARK_WALKED_VALUES (5·10^6 keys of one object, 5·10^6 empty lists: refused when the
budget runs out) and a Dynamo archive of the most zip entries MAX_DYNAMO_BYTES holds (refused).
Prints one line per file: exit code, elapsed s, CPU s (user + system), peak RSS MB.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--model", "internal-1t-hybrid", "--gpu", "h20", "--gpus-per-instance", "8"]


def vllm_decode(path: Path, requests: int, itls: int, decimals: int | None) -> None:
    rng = np.random.default_rng(0)
    step = rng.lognormal(np.log(0.031), 0.03, (requests, itls))
    if decimals is not None:
        step = np.round(step, decimals)
    settings = {"date": "20261202-120000", "backend": "vllm", "model_id": "internal-1t-hybrid",
                "tokenizer_id": "internal-1t-hybrid", "num_prompts": requests,
                "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 32,
                "duration": float((0.08 + step.sum(1)).sum() / 32)}  # fmt: skip
    with path.open("w") as out:
        out.write(json.dumps(settings)[:-1])
        for name, value in (("input_lens", 1024), ("output_lens", itls + 1), ("ttfts", 0.08)):
            out.write(f', "{name}": ' + json.dumps([value] * requests))
        out.write(', "latencies": ' + json.dumps((0.08 + step.sum(1)).tolist()))
        out.write(', "itls": [' + ", ".join(json.dumps(row) for row in step.tolist()) + "]")
        out.write(', "errors": ' + json.dumps([""] * requests) + "}")


def walked(path: Path, kind: str, count: int) -> None:
    with path.open("w") as out:
        out.write('{"date": "x", "model_id": "m", "input_lens": [1000], "ttfts": [0.5], "foo": ')
        if kind == "keys":
            out.write("{" + ",".join(f'"k{i}": 0' for i in range(count)) + "}}")
        else:
            out.write("[" + ",".join(["[]"] * count) + "]}")


def many_entries(path: Path, limit_bytes: int) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(limit_bytes // 85):  # ~85 bytes an empty entry with its directory record
            archive.writestr(f"{i:x}", b"")


def measure(fmt: str, path: Path, data: Path, *extra: str) -> str:
    command = ["/usr/bin/time", "-f", "%e %U %S %M", sys.executable, "-m", "prfaas_plan",
               "import-profile", fmt, str(path), *FLAGS, *extra, "--data-dir", str(data),
               "--force", "-f", "json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    elapsed, user, system, rss_kb = done.stderr.strip().splitlines()[-1].split()
    message = next((x for x in done.stderr.splitlines() if x.startswith("error:")), "")
    return (
        f"{path.name:<22} {path.stat().st_size / 1e6:8.0f} MB  exit {done.returncode}  "
        f"{float(elapsed):6.1f} s  {float(user) + float(system):6.1f} s CPU  "
        f"{int(rss_kb) / 1e3:6.0f} MB RSS  {message[:90]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-import-"))
    folder.mkdir(parents=True, exist_ok=True)
    from prfaas_plan import plausible

    files = [
        ("vllm", folder / "itls_17_digits.json",
         lambda p: vllm_decode(p, 12_000, 1_000, None), ["--kind", "decode"]),
        ("vllm", folder / "itls_4_decimals.json",
         lambda p: vllm_decode(p, 28_000, 1_000, 4), ["--kind", "decode"]),
        ("vllm", folder / "walked_keys.json",
         lambda p: walked(p, "keys", plausible.MAX_BENCHMARK_WALKED_VALUES + 1), []),
        ("vllm", folder / "walked_lists.json",
         lambda p: walked(p, "lists", plausible.MAX_BENCHMARK_WALKED_VALUES + 1), []),
        ("dynamo", folder / "many_entries.npz",
         lambda p: many_entries(p, plausible.MAX_DYNAMO_BYTES), []),
    ]  # fmt: skip
    print(f"# {os.uname().nodename}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for fmt, path, write, extra in files:
        if not path.exists():
            write(path)
        print(measure(fmt, path, folder / "data", *extra), flush=True)
        if args.keep is None:
            path.unlink()
    if args.keep is None:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
