"""Plausibility bounds on every quantity a user can give, in one place, each with its reason.

A value outside its bound is refused with a one-line ConfigError naming the field or parameter,
the bound and the value found, so that no input reaches floating-point overflow, an absurd
allocation or a confident nonsense plan. The bounds are wide on purpose: they only exclude values
no real deployment has. Units as in the names (SI inside the package).
"""

import math
import reprlib

from prfaas_plan import units
from prfaas_plan.errors import ConfigError

# lengths (tokens): no model has a context near 10^9 tokens, and E[L^4] of 10^9 is 1e36, far
# from overflow; a request has at least one token
MIN_TOKENS = 1.0
MAX_TOKENS = 1e9
# instances of one role / GPUs of one cluster: 10^5 instances of 8 GPUs is larger than any fleet
MAX_INSTANCES = 100_000
MAX_GPUS = 1_000_000
# arrival rates (req/s): below 10^-6 (one request in 11 days) a run measures nothing
MIN_RATE_RPS = 1e-6
MAX_RATE_RPS = 1e6
# link bandwidth (bytes/s): 1 kbit/s .. 1 Pbit/s
MIN_BANDWIDTH_BYTES_PER_S = 125.0
MAX_BANDWIDTH_BYTES_PER_S = 1.25e14
# durations and latencies (s): up to a year
MAX_SECONDS = 3.2e7
# random seeds: numpy takes any non-negative integer; we keep them to 64 bits
MAX_SEED = 2**63 - 1
# files we read: sizes, YAML nesting; what an error message may quote of a value
MAX_SCENARIO_BYTES = 4 * 2**20  # a scenario or catalog YAML file
MAX_TRACE_BYTES = 1 * 2**30  # a trace or observed-lengths file, read as a stream
MAX_YAML_DEPTH = 64
MAX_QUOTED_CHARS = 60


_SHORT = reprlib.Repr()  # Python 3.11 takes no keyword arguments here
_SHORT.maxlevel = 2
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = MAX_QUOTED_CHARS


def quoted(value: object) -> str:
    """A short repr of `value` (reprlib: at most a few items and MAX_QUOTED_CHARS characters), so
    an error message never echoes, nor spends time and memory building, a huge value."""
    return _SHORT.repr(value)


def check_text(name: str, text: str, max_chars: int = 200) -> str:
    """`text` if it is printable (no control character: it would break a one-line message or a
    YAML file; no lone surrogate: not encodable in UTF-8) and at most `max_chars` long, else a
    ConfigError naming `name` (a parameter)."""
    bad = next((c for c in text if not c.isprintable() and c != " "), None)
    if bad is not None:
        raise ConfigError(
            f"{name} must be printable text, found the character U+{ord(bad):04X}", parameter=name
        )
    if len(text) > max_chars:
        raise ConfigError(
            f"{name} must be at most {max_chars} characters, got {len(text):,}", parameter=name
        )
    return text


def exact(value: float) -> str:
    """`value` as short as %g where that is exact, else in full: a value just past a bound
    (1000001 past 10^6) must not read as the bound itself."""
    short = f"{value:g}"
    try:
        same = float(short) == value
    except (ValueError, OverflowError):
        same = False
    return short if same else repr(value)


def check_in_range(
    name: str, value: float, low: float, high: float, unit: str = "", *, parameter: bool = True
) -> float:
    """`value` if it is a finite number in [low, high], else ConfigError naming `name` (a
    parameter, carried in `parameter`, or with parameter=False a file field)."""
    if not (isinstance(value, int | float) and not isinstance(value, bool)):
        raise ConfigError(
            f"{name} must be a number, got {quoted(value)}", parameter=name if parameter else None
        )
    if not (math.isfinite(value) and low <= value <= high):
        unit_text = f" {unit}" if unit else ""
        raise ConfigError(
            f"{name} must be in [{exact(low)}, {exact(high)}]{unit_text}, got {exact(value)}",
            parameter=name if parameter else None,
        )
    return value


# the sizing MILP: one binary per candidate threshold. The observed-lengths grid (2,002 points)
# solves in ~3 s with HiGHS; branch and bound grows faster than linearly beyond, so a model
# larger than this is refused before it is built rather than left to run for minutes
MAX_SIZING_MILP_BINARIES = 5_000
# a line of a trace or CSV file: a Mooncake line with the hash ids of a 10^9-token prompt
# (2 million 512-token blocks) fits; a file without newlines (/dev/zero, a binary) does not
MAX_LINE_CHARS = 16 * 2**20
# GPUs in one instance (one scale-up domain): the largest NVLink domain announced is 576 GPUs
MAX_GPUS_PER_INSTANCE = 1024
# a decode SLO (tokens/s per request): below one token in 1000 s no one is waiting; above 10^6
# tokens/s no accelerator decodes
MIN_DECODE_TOKENS_PER_S = 1e-3
MAX_DECODE_TOKENS_PER_S = 1e6
# mu_log of a log-normal length (mean of ln(tokens)): e^50 tokens is far beyond MAX_TOKENS, and
# the probability-mass check refuses any mu_log that misses [min_tokens, max_tokens] anyway
MAX_ABS_MU_LOG = 50.0
# sigma_log of a log-normal length (standard deviation of ln(tokens)): below 10^-3 the lengths
# vary by under 0.1% around e^mu_log, a fixed length in all but name (a one-bin histogram says
# so), and below ~10^-307 a length's standardised distance (ln L - mu_log) / sigma_log overflows
# a double; above 10 its moments overflow
MIN_SIGMA_LOG = 1e-3
MAX_SIGMA_LOG = 10.0
# a histogram weight is relative; 10^100 each keeps the sum of a million weights finite
MAX_HISTOGRAM_WEIGHT = 1e100
# bins of a histogram workload: a bin a token wide over a 10^4-token range, or ~200 bins a
# decade; its TTFT mesh (a few cells a bin, distributions.Histogram.mesh) stays ~40K cells
MAX_HISTOGRAM_BINS = 10_000
# the model catalog: the deepest published models have ~200 layers and ~2·10^12 parameters;
# head counts, head and latent dimensions stay far below 2^20
MAX_LAYERS = 10_000
MAX_LAYER_DIMENSION = 2**20
MAX_PARAMS = 1e15
# profile tables: a decode batch of 10^6 requests and a KV cache of 2^30 MiB (1 PiB) for one
# request are beyond any GPU
MAX_BATCH_SIZE = 1e6
MAX_KV_CACHE_MIB = 2.0**30
# a GPU, model or dtype name is a file or folder name in data/: short, no path separators
MAX_NAME_CHARS = 64
# free text (a scenario's name, its description): a title or a paragraph, not a file
MAX_LABEL_CHARS = 2_000
# a trace read into memory (the public Mooncake traces have ~2·10^4 requests): measured with
# /usr/bin/time -v, `simulate --trace` peaks at 334 MB RSS for 10^6 requests without hash ids
# (~275 bytes a request over a ~60 MB base) and at 180 MB for 10^5 requests with 10^7 hash_ids
# (~9 bytes an id; `compare-policies`, whose cache-aware policy keeps them, ~21). 2·10^6 requests
# and 2·10^7 prefix-block ids (10^10 tokens in 512-token blocks) keep a run within ~1 GB; 4·10^6
# requests reached 1.16 GB, and a file of short lines or of one long hash_ids list would reach
# several GB below MAX_TRACE_BYTES
MAX_TRACE_REQUESTS = 2_000_000
MAX_TRACE_HASH_IDS = 20_000_000
# a trace a plan reads (`distribution: observed`, Azure or BurstGPT CSV): streamed in blocks and
# kept as distinct lengths with counts (inputs/trace_stream.py), so memory does not grow with the
# rows; time does. The largest public traces: Azure LLM inference 2024, 27,303,999 rows (code,
# ~1.2 GB) and 16,803,695 (conversation); BurstGPT 2 and 3, 3.86M and 5.34M rows (~0.6 GB).
# benchmarks/bench_traces.py: a generated 27.3M-row (1.13 GB) Azure-format file plans in 15 s at 660 MB
# peak RSS on 2 cores. 4 GiB and 6.4·10^7 rows (~2.3 times the largest) bound a plan's read at a
# few minutes; a device, pipe or /dev/zero is refused before any read (inputs/reading.py)
MAX_STREAMED_TRACE_BYTES = 4 * 2**30
MAX_STREAMED_TRACE_REQUESTS = 64_000_000
# distinct input (or output) lengths of a streamed trace: ~8 bytes each a moment order in the
# plan's cumulative sums; real traces hold ~10^4 (lengths are integers under a context window).
# As MAX_OBSERVED_LENGTHS: more distinct values than that pin no quantile better
MAX_TRACE_DISTINCT_LENGTHS = 5_000_000
# workload.input_tokens.sample.requests: the sample is kept (3 numbers a request) while the
# trace streams; as MAX_OBSERVED_LENGTHS
MAX_TRACE_SAMPLE_REQUESTS = 5_000_000
# a Prometheus /metrics snapshot (workload `distribution: metrics`): a vLLM or SGLang server's
# is ~10^4-10^6 bytes (a few hundred series a model); 64 MiB holds hundreds of models
MAX_METRICS_BYTES = 64 * 2**20
# --- command-line quantities (simulate, compare-policies, optimize, egress) ---
# load as a fraction of a deployment's Λ_max: past 100 times its capacity a queue only grows
# without bound, and a rate of 100 Λ_max stays far from MAX_RATE_RPS
MAX_LOAD_FRACTION = 100.0
# below 0.1% of Λ_max a deployment idles: a run measures only the unloaded TTFT (the model gives
# it directly), and its span requests / rate, ticked by the policies, grows without need
MIN_LOAD_FRACTION = 1e-3
# the span a simulated run may cover (requests / rate, or its duration): a year, as MAX_SECONDS
MAX_SIMULATED_SPAN_S = MAX_SECONDS
# observed input lengths read from a CSV: `optimize` on 5·10^6 rows peaks at 445 MB RSS (6.5 s;
# measured with /usr/bin/time -v: ~75 bytes a row for the parsed column, the distribution's
# sorted copies and the optimiser's use of them); 2·10^7 rows, well under MAX_TRACE_BYTES,
# reached 1.6 GB. A sample of 5·10^6 lengths pins any quantile the planner uses
MAX_OBSERVED_LENGTHS = 5_000_000
# link bandwidth in the files' and requests' unit (10^9 bit/s), for link.bandwidth_gbps, its
# bandwidth_gbps override and egress' link_gbps: the same 1 kbit/s .. 1 Pbit/s as in bytes/s
MIN_BANDWIDTH_GBPS = units.bytes_per_s_to_gbps(MIN_BANDWIDTH_BYTES_PER_S)
MAX_BANDWIDTH_GBPS = units.bytes_per_s_to_gbps(MAX_BANDWIDTH_BYTES_PER_S)
# gamma burst CV: below 0.01 the gaps are regular to 1% (a deterministic stream, and the shape
# 1/CV^2 reaches 10^4); above 100 the shape 1/CV^2 is below 10^-4, so nearly every gap is 0 and
# a run of 10^5 requests arrives in a handful of bursts whose span rounds to nothing
MIN_BURST_CV = 0.01
MAX_BURST_CV = 100.0
# a simulation's memory and time, estimated before anything is allocated (use_cases/simulate.py):
# at most this much memory (the issue's ~1 GB), and ~30 s of run time on a 2-core machine (the
# largest legal input within ~1 GB and ~30 s, issue 27): ~920,000 requests with --sustainable,
# ~860,000 in compare-policies, a single run bounded by memory first (~3.9 million, ~9 s)
MAX_SIMULATION_BYTES = units.gib_to_bytes(1)
MAX_SIMULATION_S = 30.0
# --- benchmark result files (import-profile, inputs/benchmarks.py) ---
# a detailed vLLM or SGLang result: the tools write 17-digit floats (~20 bytes an ITL), so 256
# MiB holds ~1.3·10^7 ITLs, e.g. 13,000 requests of 1,000 output tokens. It is read as text and
# its per-request lists decoded list by list into float64 arrays (inputs/bounded_json.py)
MAX_BENCHMARK_BYTES = 256 * 2**20
# the files of one import, charged before they are decoded (inputs/bounded_json.py): numbers of
# the lists of scalars, decoded at C speed (~0.35 us each here) and kept as 8-byte floats plus a
# copy while the table is made; and members and elements walked one at a time (1-3 us each, an
# object's keys held while it is walked): three per request (itls, errors, generated_texts),
# so 1.6·10^6 requests. Measured by benchmarks/bench_import.py (2026-12-04, this 2-core VM,
# peak RSS): 1.2·10^7 ITLs as vLLM writes them (258 MB) 5.7 s and 553 MB (json.loads: 13 s and
# 984 MB), 2.8·10^7 ITLs of 4 decimals (222 MB) 8.2 s and 573 MB (json.loads: 21 s, 1.86 GB);
# at the walked bound, 5·10^6 keys of one object 12.5 s (771 MB with 256 MiB of text), 5·10^6
# empty lists 9.8 s
MAX_BENCHMARK_NUMBERS = 30_000_000
MAX_BENCHMARK_WALKED_VALUES = 5_000_000
# a Dynamo raw_data.npz is a few kB (an uncompressed zip of 3 or 5 arrays of at most a few
# thousand points: DECODE_MAX_CONCURRENCY is 2000); its zip directory is read whole, ~400 bytes
# an entry, so the file size bounds that too
MAX_DYNAMO_BYTES = 8 * 2**20
# rows of an imported table (points of one Dynamo array): the catalog reads a profile table back
# within MAX_SCENARIO_BYTES (4 MiB, ~30 bytes a row: ~1.4·10^5 rows)
MAX_PROFILE_POINTS = 100_000
# --- sweeps (sweep/) ---
# scenarios one sweep file may generate: 10^7 rows of ~60 columns is a few GB of Parquet (the
# points are generated a block at a time, so memory does not grow with it: sweep/sampling.py)
MAX_SWEEP_SCENARIOS = 10_000_000
# scenarios per task: below 1 nothing runs; above 10^5 a chunk's rows (and its lost work when a
# study is killed) grow without making the per-task overhead any smaller
MAX_SWEEP_CHUNK = 100_000
# a Latin hypercube's permutations are held whole (an int32 per sample and axis): 10^8 cells,
# 400 MB, is 10^7 samples over 10 axes and keeps the largest study within ~1 GB
MAX_LATIN_HYPERCUBE_CELLS = 100_000_000
# a filter expression: a line or two, never a program; a string it builds (`"a" * n`) compares
# with an axis value, a few words: 10^4 characters; an integer it computes stays within a
# float's range (2^1024), so no product of large integers spends time or memory
MAX_FILTER_CHARS = 500
MAX_FILTER_STRING_CHARS = 10_000
MAX_FILTER_INT_BITS = 1024
# a results directory's _sweep.json: a few hundred bytes; more is not a manifest
MAX_SWEEP_MANIFEST_BYTES = 2**20
# sweep-report: the best plan per value of the group axis, and a figure's cells per axis; a
# sampled axis has one value per scenario (10^7), which is a table or figure nobody reads
MAX_REPORT_AXIS_VALUES = 1_000
# ---- prices and link offerings (inputs/catalog.py, use_cases/cost.py): unit slips, not market
# limits. A GPU-hour above $1,000 or a GPU above $10^6 is a cents/dollars or per-server slip; a
# board power above 5 kW is a server, not a GPU; PUE lies in [1, 3] for any real data centre;
# electricity above $2/kWh is a cents slip; a link price above $10^7 a month or $10/GB, or an RTT
# above 1 s (a geostationary hop is ~0.6 s) is a unit slip
MAX_USD_PER_GPU_HOUR = 1_000.0
MAX_USD_PER_GPU = 1e6
MAX_DEPRECIATION_YEARS = 20.0
MAX_BOARD_POWER_W = 5_000.0
MAX_PUE = 3.0
MAX_USD_PER_KWH = 2.0
MAX_LINK_USD_PER_MONTH = 1e7
MAX_LINK_USD_PER_GB = 10.0
MAX_RTT_MS = 1_000.0
# the share of Λ_max a deployment is run at when pricing its tokens: (0, 1]
MIN_UTILIZATION = 0.01
# procure's candidate space: sites and instances per site (the MILP has sites x thresholds
# continuous variables; 64 sites x 131 thresholds stays well under a second of HiGHS), and the
# brute-force cross-check refuses more than this many points
MAX_PROCURE_SITES = 64
MAX_PROCURE_INSTANCES_PER_SITE = 1_000
MAX_BRUTE_FORCE_POINTS = 2_000_000
# a budget (procure --budget-usd-per-hour): a cent an hour buys nothing; above 10^8 $/h (~$876
# billion a year, more than any fleet; the largest candidate space, 64 sites x 1,000 instances x
# 8 GPUs at MAX_USD_PER_GPU_HOUR, costs ~5 x 10^8) it is a unit slip or "no budget", which is
# target_rps's question, not this one's
MIN_BUDGET_USD_PER_HOUR = 0.01
MAX_BUDGET_USD_PER_HOUR = 1e8
# procure --pareto enumerates thresholds x site instance counts x PD counts block by block
# (memory holds only the frontiers) at ~10^7 candidates a second on one core: above this bound
# (~15 s) the space is refused before anything is computed; the PD splits it compares, N^2/2 per
# threshold, count too
MAX_PARETO_CANDIDATES = 150_000_000

# --- output lengths, decode context and prefix caching (issue 11, part B) ---
# a prefix-cache hit-rate above 99% leaves under 1% of a prompt to prefill: the closed form's
# "same share of every request" assumption says nothing useful there
MAX_PREFIX_CACHE_HIT_RATE = 0.99
# bands of a per-length prefix-cache hit-rate: each costs one evaluation of the input
# distribution's moments wherever the closed form needs the uncached lengths'
MAX_PREFIX_CACHE_BANDS = 64
