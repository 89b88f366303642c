"""Options a user chooses, shared by the model and the CLI (kept free of heavy imports so the
CLI can offer them without loading numpy)."""

from enum import StrEnum


class Mode(StrEnum):
    """How a pool's service time is computed (see capacity.py)."""

    PAPER = "paper"  # T at the representative length E[L | ...], as the paper
    EXACT = "exact"  # the conditional mean service time E[T(L) | ...]


class RangePolicy(StrEnum):
    """What to do with lengths outside a profile table's [min, max] input tokens."""

    EXTRAPOLATE = "extrapolate"  # evaluate the physical fit, report the mass outside
    ERROR = "error"  # refuse


class Solver(StrEnum):
    """MILP back-end for sizing."""

    HIGHS = "highs"  # scipy.optimize.milp
    CBC = "cbc"  # pulp's bundled CBC


class ArrivalProcess(StrEnum):
    """How `simulate` generates arrival times."""

    POISSON = "poisson"
    GAMMA = "gamma"  # renewal process with a chosen coefficient of variation (bursty if > 1)
    SINUSOIDAL = "sinusoidal"  # diurnal-like periodic rate
    TRACE = "trace"  # replay of a Mooncake JSONL trace


class RoutingPolicy(StrEnum):
    """Scheduler policy in `simulate` (reference §8)."""

    STATIC = "static"
    ADAPTIVE = "adaptive"  # short-term bandwidth- and queue-aware threshold
    REBALANCE = "rebalance"  # long-term conversion of PD instances between prefill and decode
    DUAL = "dual"  # both timescales: rebalance + adaptive threshold
    PREFIX = "prefix"  # prefix-cache-aware routing (needs a trace with hash_ids)


class ProfileFormat(StrEnum):
    """Benchmark result formats `import-profile` reads (inputs/benchmarks.py)."""

    VLLM = "vllm"  # vllm bench serve --save-result --save-detailed (JSON)
    SGLANG = "sglang"  # python -m sglang.bench_serving --output-file --output-details (JSONL)
    DYNAMO = "dynamo"  # the Dynamo profiler's raw_data.npz


class ProfileKind(StrEnum):
    """Which table `import-profile` makes."""

    AUTO = "auto"  # dynamo: by the arrays; vllm/sglang: decode if the runs span concurrencies
    PREFILL = "prefill"
    DECODE = "decode"


class TraceFormat(StrEnum):
    """Request trace formats (inputs/traces.py)."""

    AUTO = "auto"  # by the file's header or first line
    MOONCAKE = "mooncake"  # JSONL: timestamp (ms), input_length, output_length, hash_ids
    AZURE = "azure"  # CSV: TIMESTAMP, ContextTokens, GeneratedTokens
    BURSTGPT = "burstgpt"  # CSV: Timestamp, Model, Request tokens, Response tokens, ...


class CostModel(StrEnum):
    """How a GPU-hour is priced (analytic/cost.py)."""

    ON_DEMAND = "on-demand"  # the on-demand rental price per GPU-hour
    TCO = "tco"  # owned: purchase / depreciation hours + board power x PUE x electricity
