"""Hostile input to `sweep` and `sweep-report` (issues 26 and 27): sweep files, filters, results
directories, chunk and manifest files, scheduler addresses. One row per case: a builder (it
writes what the case needs under tmp_path and returns the command's arguments), the exit code
and the fragments of the one `error:` line. Every row also checks that no traceback is printed
and that nothing on disk changed, outside the results directory or (a refusal before any work)
inside it either. Rows that need the kernel to refuse a write (a read-only directory) run in a
real process without CAP_DAC_OVERRIDE when the suite runs as root, since root writes anywhere.

The next sweep feature is tried the same way: add its rows here."""

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.sweep import run as study_run
from prfaas_plan.sweep import sampling
from prfaas_plan.sweep.commands import parameter_names
from prfaas_plan.sweep.filters import Filter, kind_of_range, kind_of_values
from prfaas_plan.sweep.results import read_results
from prfaas_plan.sweep.spec import load_sweep
from tests.cli.test_cli import assert_clean_error, run

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "examples" / "case_study.yaml"

# 3 links x 4 PrfaaS sizes = 12 scenarios in 3 chunks of 4, on the fast path (milliseconds)
SWEEP = f"""
name: hostile
scenario: {CASE}
command: optimize
axes:
  link.bandwidth_gbps: {{values: [5, 50, 400]}}
  prfaas_cluster.instances: {{start: 0, stop: 6, step: 2, integer: true}}
chunk_size: 4
"""


def sweep_file(tmp_path: Path, text: str = SWEEP, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def edited(old: str, new: str) -> str:
    assert old in SWEEP, old
    return SWEEP.replace(old, new, 1)


def with_filter(expression: str) -> str:
    return SWEEP + f"filters: [{json.dumps(expression)}]\n"


Builder = Callable[[Path], list[str]]


def a_sweep(text: str = SWEEP, *extra: str) -> Builder:
    """`sweep SWEEP.yaml tmp/r --workers 1 EXTRA...` with the sweep file `text`."""
    return lambda tmp: ["sweep", sweep_file(tmp, text), tmp / "r", "--workers", "1", *extra]


def dask(address: str) -> Builder:
    """The small sweep sent to the Dask scheduler at `address`."""
    return lambda tmp: ["sweep", sweep_file(tmp), tmp / "r", "--dask-scheduler", address]


def into(results: Callable[[Path], Path | str], *extra: str) -> Builder:
    """The small sweep into the results directory `results(tmp)`."""
    return lambda tmp: ["sweep", sweep_file(tmp), results(tmp), "--workers", "1", *extra]


def finished(tmp: Path) -> Path:
    """The small sweep's results, run once: tmp/r with three chunks and its manifest."""
    result = run("sweep", sweep_file(tmp), tmp / "r", "--workers", "1")
    assert result.returncode == 0, result.stderr
    return tmp / "r"


def resumed(damage: Callable[[Path], None]) -> Builder:
    """The small sweep resumed after `damage(results)`."""

    def build(tmp: Path) -> list[str]:
        damage(finished(tmp))
        return ["sweep", tmp / "sweep.yaml", tmp / "r", "--resume", "--workers", "1"]

    return build


def reported(damage: Callable[[Path], None], *extra: str) -> Builder:
    """`sweep-report` of the small sweep's results after `damage(results)`."""

    def build(tmp: Path) -> list[str]:
        damage(finished(tmp))
        return ["sweep-report", tmp / "r", *extra]

    return build


def manifest(text: str) -> Callable[[Path], None]:
    return lambda results: (results / "_sweep.json").write_text(text)


def chunk(index: int, content: bytes | None = None, make: str = "file") -> Callable[[Path], None]:
    """Replace chunk `index` by `content`, a directory or a FIFO."""

    def damage(results: Path) -> None:
        path = results / f"chunk-{index:06d}.parquet"
        path.unlink()
        if make == "dir":
            path.mkdir()
        elif make == "fifo":
            os.mkfifo(path)
        else:
            path.write_bytes(content or b"")

    return damage


def truncated(index: int) -> Callable[[Path], None]:
    def damage(results: Path) -> None:
        path = results / f"chunk-{index:06d}.parquet"
        path.write_bytes(path.read_bytes()[:100])

    return damage


def not_a_chunk(results: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1, 2]}), results / "chunk-000001.parquet")


def sampled(samples: int) -> str:
    """A random sweep whose link axis takes one value per sample."""
    return edited("{values: [5, 50, 400]}", "{low: 5, high: 400}").replace(
        "chunk_size: 4", f"chunk_size: 400\nsampling: random\nsamples: {samples}"
    )


# 10^7 samples over 11 axes: 1.1e8 cells of a Latin hypercube's permutations, over 10^8
LHS_11_AXES = f"""
name: lhs
scenario: {CASE}
command: optimize
sampling: latin_hypercube
samples: 10000000
axes:
  link.bandwidth_gbps: {{low: 5, high: 400}}
  prfaas_cluster.instances: {{low: 0, high: 6, integer: true}}
  pd_cluster.instances: {{low: 1, high: 9, integer: true}}
  workload.input_tokens.mu_log: {{low: 8, high: 11}}
  workload.input_tokens.sigma_log: {{low: 0.5, high: 1.5}}
  mode: {{values: [paper, exact]}}
  threshold_tokens: {{low: 1000, high: 90000}}
  out_of_range: {{values: [extrapolate]}}
  ttft_percentile: {{low: 50, high: 99}}
  ttft_load: {{low: 0.1, high: 0.9}}
  max_prfaas_gpus: {{low: 8, high: 96, integer: true}}
"""


HUGE_STRING = "x" * 5000
BIG_INT = 10**30  # beyond 2^64: a Parquet int64 cannot hold it


class NotDask:
    """A TCP service on 127.0.0.1 that answers every connection with bytes that are not Dask's
    handshake (read as a frame length of ~1.8e19 bytes)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection:
                connection.sendall(b"\xff" * 64)


def refused_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


# (id, builder, exit code, fragments, what may change: "nothing" or "results" (the results
# directory may be created or written: the case fails after the run started))
CASES: list[tuple[str, Builder, int, list[str], str]] = [
    # --- the scheduler: an address, a service that is not Dask, one nobody answers at
    ("dask address not a URL", dask("notaurl"), 3,
     ["--dask-scheduler: expected a scheduler address tcp://HOST:PORT", "'notaurl'"], "nothing"),
    ("dask address empty", dask(""), 3,
     ["--dask-scheduler: expected a scheduler address"], "nothing"),
    ("dask address bad IPv6", dask("tcp://[::1"), 3,
     ["expected a scheduler address"], "nothing"),
    ("dask address port 99999", dask("tcp://127.0.0.1:99999"),
     3, ["port 1 to 65535"], "nothing"),
    ("dask address TLS", dask("tls://127.0.0.1:8786"), 3,
     ["expected a scheduler address tcp://HOST:PORT"], "nothing"),
    ("dask address in-process", dask("inproc://x"), 3,
     ["expected a scheduler address"], "nothing"),
    # --- where the results go
    ("results under /proc/self", into(lambda tmp: "/proc/self/prfaas-results"), 3,
     ["results: cannot create directory /proc/self/prfaas-results"], "nothing"),
    ("results a file", into(lambda tmp: sweep_file(tmp, "x", "file")), 3,
     ["results:", "exists and is not a directory"], "nothing"),
    ("results not empty, no --resume", lambda tmp: into(finished)(tmp), 3,
     ["is not empty; pass --resume to continue its study"], "nothing"),
    ("results a name too long", into(lambda tmp: tmp / ("d" * 300)), 3,
     ["results: cannot", "File name too long"], "nothing"),
    # --- resuming: the manifest
    ("manifest not JSON", resumed(manifest("{bad")), 3,
     ["_sweep.json is not a sweep manifest (not JSON)", "run the sweep into a new directory"],
     "nothing"),
    ("manifest a JSON list", resumed(manifest("[1]")), 3,
     ["_sweep.json is not a sweep manifest (a JSON list, expected an object)"], "nothing"),
    ("manifest without fingerprint", resumed(manifest('{"sweep": "x"}')), 3,
     ["not a sweep manifest (no fingerprint)"], "nothing"),
    ("manifest of another sweep", resumed(manifest('{"sweep": "other", "fingerprint": "0"}')),
     3, ["holds another sweep ('other', fingerprint '0')"], "nothing"),
    ("manifest over 1 MiB", resumed(manifest(" " * (2**20 + 1))), 3,
     ["sweep manifest file is", "over the limit of 1,048,576 bytes"], "nothing"),
    ("manifest a FIFO", resumed(lambda r: ((r / "_sweep.json").unlink(),
                                            os.mkfifo(r / "_sweep.json"))), 3,
     ["sweep manifest must be a regular file"], "nothing"),
    ("manifest missing", resumed(lambda r: (r / "_sweep.json").unlink()), 3,
     ["holds no _sweep.json; not a sweep's results"], "nothing"),
    ("a chunk beyond the study", resumed(lambda r: shutil.copy(r / "chunk-000000.parquet",
                                                               r / "chunk-000007.parquet")),
     3, ["holds chunk files this sweep does not write (it has 3 chunks): chunk-000007.parquet"],
     "results"),
    ("a chunk that is a directory", resumed(chunk(1, make="dir")), 3,
     ["results:", "chunk-000001.parquet is a directory"], "results"),
    # --- the sweep file
    ("parameter a list of text", a_sweep(edited("chunk_size: 4", "chunk_size: 4\nparameters: {gpu_prices_usd_per_gpu_hour: [abc]}")), 3,
     ["parameters.gpu_prices_usd_per_gpu_hour: expected a number, text, true/false, a list of "
      "numbers or a mapping of names to numbers, got ['abc']"], "nothing"),
    ("parameter a mapping to text", a_sweep(edited("chunk_size: 4", "chunk_size: 4\nparameters: {gpu_prices_usd_per_gpu_hour: {h200: abc}}")), 3,
     ["parameters.gpu_prices_usd_per_gpu_hour: expected a number, text, true/false"], "nothing"),
    ("seed -1", a_sweep(edited("chunk_size: 4", "chunk_size: 4\nseed: -1")), 3,
     ["seed: input should be greater than or equal to 0, got -1"], "nothing"),
    ("seed 2^64", a_sweep(edited("chunk_size: 4", f"chunk_size: 4\nseed: {2**64}")), 3,
     ["seed: input should be less than or equal to 9223372036854775807"], "nothing"),
    ("grid over 10^7 points", a_sweep(edited(
        "prfaas_cluster.instances: {start: 0, stop: 6, step: 2, integer: true}",
        "prfaas_cluster.instances: {start: 1, stop: 5000000, step: 1, integer: true}")), 3,
     ["axes: the grid has more than 10,000,000 points"], "nothing"),
    ("grid step of 1e-300", a_sweep(edited(
        "{values: [5, 50, 400]}", "{start: -1.0e+308, stop: 1.0e+308, step: 1.0e-300}")), 3,
     ["axes.link.bandwidth_gbps: start/stop/step give more than 10,000,000 values"], "nothing"),
    ("grid stop below start", a_sweep(edited("start: 0, stop: 6", "start: 6, stop: 0")), 3,
     ["axes.prfaas_cluster.instances: start/stop/step give no value"], "nothing"),
    ("Latin hypercube over the permutation bound", a_sweep(LHS_11_AXES), 3,
     ["samples: a Latin hypercube holds one permutation", "11 axes = 420 MiB",
      "over the 381 MiB bound", "sampling: random"], "nothing"),
    ("axis mixing numbers and strings", a_sweep(edited("[5, 50, 400]", '[5, "fast"]')), 3,
     ["axes.link.bandwidth_gbps: value error, values mixes numbers and strings"], "nothing"),
    ("axis integer beyond 64 bits", a_sweep(edited("[5, 50, 400]", f"[5, {BIG_INT}]")), 3,
     ["an integer value must fit in 64 bits"], "nothing"),
    ("base scenario with a NUL", lambda tmp: [
        "sweep", sweep_file(tmp, SWEEP.replace(str(CASE), str(sweep_file(
            tmp, CASE.read_text().replace("name:", "\x00name:", 1), "nul.yaml")))),
        tmp / "r"], 3, ["nul.yaml: malformed YAML: a control character at character"],
     "nothing"),
    # --- filters: parsed, typed and bounded before any point
    ("filter number < string", a_sweep(with_filter('link.bandwidth_gbps < "a"')), 3,
     ["filters[0]: 'link.bandwidth_gbps < \"a\"'",
      "< between link.bandwidth_gbps (a number) and 'a' (a string) is not defined"], "nothing"),
    ("filter negates a string", a_sweep(with_filter('-"abc" == 1')), 3,
     ["filters[0]", "- of 'abc' (a string) is not defined"], "nothing"),
    ("filter mapping < number", a_sweep(with_filter("link < 5")), 3,
     ["filters[0]: link is a mapping in the base scenario",
      "name one of its fields: link.bandwidth_gbps"], "nothing"),
    ("filter mapping == mapping", a_sweep(with_filter("workload == workload")), 3,
     ["filters[0]: workload is a mapping in the base scenario"], "nothing"),
    ("filter string * 10^8 (1.4 GB)", a_sweep(with_filter('("a" * 100000000) * 14 == "b"')), 3,
     ["filters[0]", "* may repeat a string of up to 1 character(s) up to 100,000,000 times",
      "at most 10,000 characters"], "nothing"),
    ("filter string joined past the bound", a_sweep(
        edited("{values: [5, 50, 400]}", "{values: [5, 50, 400]}\n  name: "
               f"{{values: [{HUGE_STRING}]}}") + 'filters: ["name + name + name == \\"a\\""]\n'),
     3, ["+ may build a string of up to 15,000 characters"], "nothing"),
    ("filter string * fractional", a_sweep(
        edited("[5, 50, 400]", "[5.5, 50, 400]") + "filters: ['\"a\" * link.bandwidth_gbps == \"aa\"']\n"),
     3, ["* of a string by link.bandwidth_gbps (a number, maybe fractional) is not defined"],
     "nothing"),
    ("filter string - string", a_sweep(with_filter('"a" - "b" == "c"')), 3,
     ["- of 'a' (a string) and 'b' (a string) is not defined"], "nothing"),
    ("filter integer past 2^1024", a_sweep(
        edited("[5, 50, 400]", f"[5, {2**62}]") + "filters: ['link.bandwidth_gbps * link."
        "bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps * "
        "link.bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps"
        " * link.bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps * link."
        "bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps * link.bandwidth_gbps * "
        "link.bandwidth_gbps > 0']\n"), 3,
     ["may make an integer beyond 2^1024", "at most 1,024 bits"], "nothing"),
    ("filter a call", a_sweep(with_filter("__import__('os').system('x') == 0")), 3,
     ["filters[0]", "uses Call; filters take names"], "nothing"),
    ("filter a NUL", a_sweep(with_filter("1 ==\x00 1")), 3, ["not a comparison"], "nothing"),
    ("filter names an unknown field", a_sweep(with_filter("link.latency_s > 1")), 3,
     ["filters[0]: 'link.latency_s' is neither an axis nor a field"], "nothing"),
    # --- sweep-report: damaged chunks, too many values to group or draw by
    ("report: a garbage chunk", reported(chunk(1, b"garbage\n")), 3,
     ["results:", "chunk-000001.parquet: not a readable Parquet chunk",
      "Parquet magic bytes not found in footer", "running the sweep again with --resume reruns it"], "nothing"),
    ("report: a truncated chunk", reported(truncated(2)), 3,
     ["chunk-000002.parquet: not a readable Parquet chunk"], "nothing"),
    ("report: an empty chunk", reported(chunk(0, b"")), 3,
     ["chunk-000000.parquet: not a readable Parquet chunk"], "nothing"),
    ("report: Parquet that is no chunk", reported(not_a_chunk), 3,
     ["chunk-000001.parquet: not a sweep chunk (no scenario_id)"], "nothing"),
    ("report: a chunk that is a directory", reported(chunk(1, make="dir")), 3,
     ["chunk-000001.parquet: not a regular file, expected a chunk"], "nothing"),
    ("report: a chunk that is a FIFO", reported(chunk(1, make="fifo")), 3,
     ["chunk-000001.parquet: not a regular file"], "nothing"),
    ("report: no chunks", lambda tmp: ["sweep-report", tmp], 3,
     ["holds no chunk-*.parquet files"], "nothing"),
    ("report: no directory", lambda tmp: ["sweep-report", tmp / "none"], 3,
     ["results: cannot read", "No such file or directory"], "nothing"),
    ("report: --group over a sampled axis", lambda tmp: [
        "sweep-report", finished_with(tmp, sampled(1200)), "--group",
        "link.bandwidth_gbps"], 3,
     ["--group: 'link.bandwidth_gbps' takes more than 1,000 values"], "nothing"),
    ("report: --plot over a sampled axis", lambda tmp: [
        "sweep-report", finished_with(tmp, sampled(1200)), "--plot",
        tmp / "f.png", "--x", "link.bandwidth_gbps", "--y", "prfaas_cluster.instances"], 3,
     ["--x: 'link.bandwidth_gbps' takes more than 1,000 values"], "nothing"),
]  # fmt: skip


def finished_with(tmp: Path, text: str) -> Path:
    result = run("sweep", sweep_file(tmp, text), tmp / "done", "--workers", "1")
    assert result.returncode == 0, result.stderr
    return tmp / "done"


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every path under `root`: its type and content hash (a file), target (a link), or mode."""
    out = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            out[str(path)] = ("link", os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            out[str(path)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            out[str(path)] = (oct(info.st_mode), "")
    return out


def outside(state: dict[str, tuple[str, str]], results: Path) -> dict[str, tuple[str, str]]:
    return {p: v for p, v in state.items() if not Path(p).is_relative_to(results)}


# rows that run a 1,200-scenario study first: .ci/run runs them
SLOW_CASES = {"report: --group over a sampled axis", "report: --plot over a sampled axis"}


@pytest.mark.parametrize(
    "build, code, fragments, changes",
    [pytest.param(*c[1:], id=c[0], marks=[pytest.mark.slow] if c[0] in SLOW_CASES else [])
     for c in CASES],
)  # fmt: skip
def test_hostile_sweep_input_is_one_line_and_changes_nothing(
    tmp_path, build, code, fragments, changes
):
    args = build(tmp_path)
    before = snapshot(tmp_path)
    result = run(*args)
    assert_clean_error(result, code, *fragments)
    after = snapshot(tmp_path)
    results = tmp_path / "r"
    if changes == "nothing":
        assert after == before
    else:
        assert outside(after, results) == outside(before, results)
    assert not any(".tmp" in p or "/.chunk-" in p for p in after)  # no temporary file left


@pytest.mark.slow
def test_the_report_draws_and_groups_over_an_axis_of_strings(tmp_path):
    """`mode` (paper, exact) as the figure's x axis and the group: labelled as text."""
    results = finished_with(
        tmp_path, edited("chunk_size: 4", "  mode: {values: [paper, exact]}\nchunk_size: 4")
    )
    result = run("sweep-report", results, "--group", "mode", "--plot", tmp_path / "f.png",
                 "--x", "mode", "--y", "link.bandwidth_gbps")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "f.png").stat().st_size > 0
    assert "best at mode = exact" in result.stdout and "axis.mode" not in result.stdout


# --- the kernel refuses: a read-only parent, a read-only results directory ------------------

ROOT_WRITES_ANYWHERE = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")


def run_unprivileged(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process that the kernel's permission checks apply to: as root, without the
    capabilities that bypass them (setpriv); as anyone else, as they are."""
    prefix = (
        [SETPRIV, "--bounding-set=-dac_override,-dac_read_search"] if ROOT_WRITES_ANYWHERE else []
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [*prefix, sys.executable, "-m", "prfaas_plan", *map(str, args)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


READ_ONLY = [
    ("a read-only parent", lambda tmp: tmp / "ro" / "r", ["results: cannot create directory",
                                                           "/ro/r: Permission denied"]),
    ("a read-only empty results directory", lambda tmp: tmp / "ro",
     ["results: cannot write", "/ro/_sweep.json: Permission denied"]),
    ("a missing parent in a read-only directory", lambda tmp: tmp / "ro" / "a" / "b",
     ["results: cannot create directory", "/ro/a: Permission denied"]),
]  # fmt: skip


@pytest.mark.skipif(ROOT_WRITES_ANYWHERE and SETPRIV is None, reason="root without setpriv")
@pytest.mark.parametrize(
    "results, fragments", [c[1:] for c in READ_ONLY], ids=[c[0] for c in READ_ONLY]
)
@pytest.mark.slow
def test_a_results_directory_the_kernel_refuses_is_one_line(tmp_path, results, fragments):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    path = sweep_file(tmp_path)
    read_only.chmod(0o555)
    try:
        if not ROOT_WRITES_ANYWHERE:  # the check the kernel makes (root: setpriv drops it)
            assert not os.access(read_only, os.W_OK)
        before = snapshot(tmp_path)
        ran = run_unprivileged("sweep", path, results(tmp_path), "--workers", "1")
        assert_clean_error(ran, 3, *fragments)
        assert snapshot(tmp_path) == before
    finally:
        read_only.chmod(0o755)


# --- the scheduler: bounded time, one line ---------------------------------------------------


@pytest.mark.slow
def test_an_unreachable_scheduler_fails_in_bounded_time(tmp_path, monkeypatch):
    """Nothing listens on the port: refused after the connect timeout (here 1 s, 10 s by
    default), one line, and the results directory is never created."""
    monkeypatch.setattr(study_run, "DASK_CONNECT_TIMEOUT_S", 1)
    address = f"tcp://127.0.0.1:{refused_port()}"
    result = run("sweep", sweep_file(tmp_path), tmp_path / "r", "--dask-scheduler", address)
    assert_clean_error(result, 3, f"--dask-scheduler: '{address}': cannot reach the Dask scheduler")
    assert not (tmp_path / "r").exists()


def test_a_service_that_is_not_dask_is_one_line(tmp_path, monkeypatch):
    """A TCP service that answers with something else (Dask read its first bytes as a frame of
    ~1.8e19 bytes and ran out of memory): one line saying so."""
    monkeypatch.setattr(study_run, "DASK_CONNECT_TIMEOUT_S", 2)
    service = NotDask()
    address = f"tcp://127.0.0.1:{service.port}"
    try:
        result = run("sweep", sweep_file(tmp_path), tmp_path / "r", "--dask-scheduler", address)
    finally:
        service.server.close()
    assert_clean_error(result, 3, f"--dask-scheduler: '{address}': did not answer as a Dask")
    assert not (tmp_path / "r").exists()


# --- resume checks every chunk it keeps --------------------------------------------------------

DAMAGES = [
    ("truncated", truncated(1), 1),
    ("garbage", chunk(2, b"PAR1 not parquet PAR1"), 1),
    ("empty", chunk(0, b""), 1),
    ("two damaged", lambda r: (truncated(0)(r), chunk(2, b"x")(r)), 2),
    ("another chunk's rows", lambda r: shutil.copy(r / "chunk-000000.parquet",
                                                   r / "chunk-000001.parquet"), 1),
    ("Parquet that is no chunk", not_a_chunk, 1),
    ("a chunk missing", lambda r: (r / "chunk-000001.parquet").unlink(), 0),
]  # fmt: skip


@pytest.mark.parametrize("damage, rerun", [d[1:] for d in DAMAGES], ids=[d[0] for d in DAMAGES])
@pytest.mark.slow
def test_resume_reruns_every_chunk_that_does_not_read_back(tmp_path, damage, rerun):
    """A chunk that is truncated, garbage, another chunk's or no chunk at all is rerun (and
    counted), never kept: the resumed study equals an undamaged one."""
    whole = read_results(finished(tmp_path)).to_pylist()
    damage(tmp_path / "r")
    result = run("sweep", tmp_path / "sweep.yaml", tmp_path / "r", "--resume", "--workers", "1",
                 "--format", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["chunks_rerun"] == rerun
    assert document["chunks"] == 3 and document["scenarios"] == 12
    assert read_results(tmp_path / "r").to_pylist() == whole
    manifest = json.loads((tmp_path / "r" / "_sweep.json").read_text())
    assert manifest["complete"] and manifest["chunks"] == 3 and manifest["scenarios"] == 12
    if rerun:
        table = run("sweep", tmp_path / "sweep.yaml", tmp_path / "r", "--resume", "--workers",
                    "1")  # fmt: skip
        assert table.returncode == 0 and "3 (3, 0)" in table.stdout  # all kept the second time


# --- what an error row of a study may quote --------------------------------------------------


def test_an_error_row_never_quotes_a_file_of_the_wrong_kind(tmp_path):
    """A scenario that names a file of the wrong kind as its lengths (a password file, a
    README, a CSV without a header): the row names the file and what was expected, never its
    first line; the user's own table in the expected format still has its cell quoted."""
    secret = "root:x:0:0:root:/root:/bin/bash"
    files = {
        "passwd": f"{secret}\nother\n",
        "notes.md": "# a secret heading\n",
        "secret.csv": "secret-token-value,1,2\n",
        "lengths.csv": "input_tokens\n100\nmany\n",  # the expected format: the cell is quoted
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    scenario = CASE.read_text()
    lognormal = scenario[
        scenario.index("    distribution: truncated") : scenario.index("  output_tokens")
    ]
    scenario = scenario.replace(
        lognormal, "    distribution: observed\n    file: lengths.csv\n    format: auto\n"
    )
    (tmp_path / "observed.yaml").write_text(scenario)
    names = ", ".join(json.dumps(str(tmp_path / n)) for n in files)
    text = (
        "name: files\nscenario: observed.yaml\ncommand: optimize\naxes:\n"
        f"  workload.input_tokens.file: {{values: [{names}]}}\n"
        "  workload.input_tokens.format: {values: [auto, mooncake, azure, burstgpt]}\n"
    )
    result = run("sweep", sweep_file(tmp_path, text), tmp_path / "r", "--workers", "1")
    assert result.returncode == 0, result.stderr
    rows = read_results(tmp_path / "r").to_pylist()
    assert len(rows) == 16 and all(r["error_class"] == "ConfigError" for r in rows)
    for row in rows:
        message = row["error_message"]
        file = Path(row["axis.workload.input_tokens.file"])
        assert str(file) in message
        for leaked in (secret, "secret heading", "secret-token-value", "root:x"):
            assert leaked not in message, message
        if file.name != "lengths.csv":
            assert "not quoted" in message or "expected a numeric" in message, message
    quoted = [r["error_message"] for r in rows if r["axis.workload.input_tokens.format"] == "auto"
              and r["axis.workload.input_tokens.file"].endswith("lengths.csv")]  # fmt: skip
    assert quoted == [f"{tmp_path / 'lengths.csv'}: data row 2, column input_tokens: expected a "
                      "number, found 'many'"]  # fmt: skip


# --- sampling: streamed, and the same points as all at once ------------------------------


@pytest.mark.parametrize("samples", [1, 7, 4096, 4097, 10_001])
@pytest.mark.parametrize("dimensions", [1, 3])
def test_the_streamed_latin_hypercube_is_scipys(monkeypatch, samples, dimensions):
    """Block by block (blocks of 4,096, and of 1,000 here), the points are exactly those of
    scipy's LatinHypercube(d, seed).random(n), the sampler used before streaming."""
    from scipy.stats import qmc

    class Unit:
        def at(self, u: np.ndarray) -> list[float]:
            return u.tolist()

    expected = qmc.LatinHypercube(d=dimensions, seed=11).random(samples)
    for block in (sampling.GENERATION_BLOCK, 1000):
        monkeypatch.setattr(sampling, "GENERATION_BLOCK", block)
        columns = [
            np.concatenate(parts)
            for parts in zip(
                *sampling.latin_hypercube_blocks([Unit()] * dimensions, samples, 11), strict=True
            )
        ]
        assert np.array_equal(np.column_stack(columns), expected)


def test_the_streamed_random_and_grid_points_are_those_generated_at_once(tmp_path, monkeypatch):
    """Random: the blocks are one generator's stream, as rng.random((n, d)) drew it; grid: the
    order and values of itertools.product over each axis's list (start + i * step)."""
    import itertools

    monkeypatch.setattr(sampling, "GENERATION_BLOCK", 7)
    text = SWEEP.replace("chunk_size: 4", "chunk_size: 4\nsampling: random\nsamples: 50\nseed: 3")
    sweep = load_sweep(sweep_file(tmp_path, text.replace("{values: [5, 50, 400]}",
                                                         "{low: 5, high: 400, log: true}")),
                       parameter_names)  # fmt: skip
    u = np.random.default_rng(3).random((50, 2))
    links = np.exp(np.log(5) + u[:, 0] * (np.log(400) - np.log(5)))
    counts = [round(float(v)) for v in 0 + u[:, 1] * 6]
    assert [p for _, p in sweep.points()] == [
        {"link.bandwidth_gbps": float(a), "prfaas_cluster.instances": b}
        for a, b in zip(links, counts, strict=True)
    ]
    grid = load_sweep(sweep_file(tmp_path, SWEEP.replace("step: 2", "step: 0.7")), parameter_names)
    product = itertools.product([5, 50, 400], [round(0 + i * 0.7) for i in range(9)])
    assert [tuple(p.values()) for _, p in grid.points()] == list(product)
    assert [i for i, _ in grid.points()] == list(range(27)) and grid.generated == 27


def test_filters_keep_the_ids_of_the_points_they_keep(tmp_path):
    sweep = load_sweep(
        sweep_file(tmp_path, with_filter("prfaas_cluster.instances <= 2 and link.bandwidth_gbps "
                                         "!= 50")), parameter_names)  # fmt: skip
    kept = list(sweep.points())
    assert [i for i, _ in kept] == [0, 1, 8, 9]
    assert sweep.generated == 12


# --- the filter language: Python's meaning where it is defined, refused elsewhere ----------

VALID = [
    "a + b * 2 - c / 4 > 1",
    "a / 0 > 1e300",  # a division by zero is infinite, as before
    "-a < b <= c",
    "not (a > b) or s == 'x'",
    "s + 'y' == 'xy' and s * 3 == 'xxx'",
    "2 * s != t",
    "a == s",  # a number equals no string
    "not s",
]


@pytest.mark.parametrize("text", VALID)
def test_a_valid_filter_means_what_python_means(text):
    kinds = {
        "a": kind_of_values([1, 2.5, -3]), "b": kind_of_range(0, 10, True),
        "c": kind_of_range(-1, 1, False), "s": kind_of_values(["x", ""]),
        "t": kind_of_values(["xx"]),
    }  # fmt: skip
    f = Filter.parse(text, "f.yaml: filters[0]")
    f.check(kinds)
    for values in (
        {"a": 1, "b": 3, "c": 0.5, "s": "x", "t": "xx"},
        {"a": -3, "b": 0, "c": -1.0, "s": "", "t": "xx"},
        {"a": 2.5, "b": 10, "c": 1.0, "s": "x", "t": "xx"},
    ):
        names = {k: v for k, v in values.items() if k in f.names}
        expected = bool(eval(text, {}, names)) if "/ 0" not in text else True
        assert f(names) == expected, (text, names)


def test_the_interpreter_refuses_what_the_check_would(tmp_path):
    """The evaluator checks each value again: a value of a kind the check did not see (a
    mapping), a string or an integer over its bound, is one ConfigError."""
    f = Filter.parse("s * n == 'x'", "f.yaml: filters[0]")
    with pytest.raises(ConfigError, match="would build a string of 20,000 characters"):
        f({"s": "ab", "n": 10_000})
    g = Filter.parse("n * n > 0", "f.yaml: filters[0]")
    with pytest.raises(ConfigError, match="integer of up to 1,200 bits"):
        g({"n": 2**600 - 1})
    h = Filter.parse("m < 1", "f.yaml: filters[0]")
    with pytest.raises(ConfigError, match="m is a mapping, expected a number or a string"):
        h({"m": {"x": 1}})
    assert plausible.MAX_FILTER_STRING_CHARS == 10_000


def test_report_flags_that_draw_need_a_plot_and_draw_only_numbers(tmp_path):
    """--x/--y/--kind/--value shape the figure: without --plot they would do nothing; a column
    of strings (error_message) has no colour to draw."""
    results = finished_with(tmp_path, SWEEP)
    for flags in (["--x", "link.bandwidth_gbps"], ["--kind", "line"], ["--value", "throughput"]):
        result = run("sweep-report", results, *flags)
        assert result.returncode == 3 and flags[0] in result.stderr, result.stderr
        assert "give --plot FILE with them" in result.stderr
    result = run("sweep-report", results, "--plot", tmp_path / "f.png",
                  "--x", "link.bandwidth_gbps", "--y", "prfaas_cluster.instances",
                  "--value", "error_message")  # fmt: skip
    assert result.returncode == 3, result.stderr
    # text (a chunk's error columns are text even where it has no error: one schema)
    assert "--value: 'error_message' holds string values, not numbers" in result.stderr
    result = run("sweep-report", results, "--plot", tmp_path / "f.png",
                  "--x", "link.bandwidth_gbps", "--y", "prfaas_cluster.instances",
                  "--value", "baselines.homogeneous_pd.long_mean_tokens")  # fmt: skip
    assert result.returncode == 3, result.stderr  # nothing is offloaded without PrfaaS
    assert "holds no value in any row, not numbers" in result.stderr
    assert not (tmp_path / "f.png").exists()


# --- a long study says so up front, and on a log its progress (attack run 3, judgement call c):
#     nothing is refused for its length (a sweep is a resumable batch job) ---

SIM_SWEEP = SWEEP.replace("command: optimize", "command: simulate")
# (sweep file, workers, the line announced before the study, or None)
ANNOUNCED = [
    ("the 12-scenario optimize study", SWEEP, 1, None),  # ~0.1 s: not announced
    ("simulate at its default 100,000 requests", SIM_SWEEP, 1, None),  # 12 x 0.25 s = 3 s
    ("run 3's case: simulate at 3,000,000 requests", SIM_SWEEP.replace(
        "chunk_size: 4", "chunk_size: 4\nparameters: {requests: 3000000}"), 1,
     "sweep: 12 scenarios of simulate, about 8 s each: about 90 s on 1 worker (an estimate); "
     "each chunk of 4 is written as it finishes, and --resume continues an interrupted study"),
    ("the same on 4 workers", SIM_SWEEP.replace(
        "chunk_size: 4", "chunk_size: 4\nparameters: {requests: 3000000}"), 4,
     "about 23 s on 4 workers (an estimate)"),
    ("requests an axis: its largest", SIM_SWEEP.replace(
        "prfaas_cluster.instances: {start: 0, stop: 6, step: 2, integer: true}",
        "requests: {values: [1000, 2000000]}"), 1, "6 scenarios of simulate, about 5 s each: about 30 s"),
    ("sensitivity by its measured seconds a scenario", SWEEP.replace(
        "command: optimize", "command: sensitivity").replace("[5, 50, 400]", "[5, 25, 50, 100, 400]"),
     1, "sweep: 20 scenarios of sensitivity, about 500 ms each: about 10 s on 1 worker"),
    ("a filter: up to", with_filter("link.bandwidth_gbps > 5").replace(
        "command: optimize", "command: simulate").replace(
        "chunk_size: 4", "chunk_size: 4\nparameters: {requests: 3000000}"), 1,
     "sweep: up to 12 scenarios of simulate"),
    ("optimize over the input lengths: a distribution a scenario", SWEEP.replace(
        "link.bandwidth_gbps: {values: [5, 50, 400]}",
        "workload.input_tokens.mu_log: {low: 9.0, high: 10.0}").replace(
        "chunk_size: 4", "chunk_size: 4000\nsampling: latin_hypercube\nsamples: 20000"), 1,
     "sweep: 20,000 scenarios of optimize, about 1 ms each: about 18 s on 1 worker"),
    ("a duration: the requests are not known", SIM_SWEEP.replace(
        "chunk_size: 4", "chunk_size: 4\nparameters: {duration_s: 100000}"), 1, None),
]  # fmt: skip


@pytest.mark.parametrize("case, text, workers, line", ANNOUNCED, ids=[r[0] for r in ANNOUNCED])
def test_a_long_study_is_announced_with_its_estimate(tmp_path, case, text, workers, line):
    from prfaas_plan.cli.sweep import _announcement

    said = _announcement(load_sweep(sweep_file(tmp_path, text), parameter_names), workers)
    assert said is None if line is None else line in said, said


def test_a_short_study_writes_nothing_on_stderr(tmp_path):
    result = run(*a_sweep()(tmp_path))
    assert result.returncode == 0 and result.stderr == ""


def test_an_announced_study_logs_its_progress_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    from prfaas_plan.cli import sweep as cli_sweep

    monkeypatch.setattr(cli_sweep, "LOG_EVERY_S", 0.0)
    clock = iter([0.0, 60.0, 90.0, 120.0])
    monkeypatch.setattr(cli_sweep.time, "perf_counter", lambda: next(clock))
    with cli_sweep._progress(100, logged=True) as step:
        step(25, 25)  # at 60 s
        step(50, 40)  # at 90 s: 75 of 100 points
        step(25, 25)  # at 120 s: done, nothing more to say
    assert capsys.readouterr().err.splitlines() == [
        "sweep: 25 of 100 points in 60 s, about 3 min left",
        "sweep: 75 of 100 points in 90 s, about 30 s left",
    ]
