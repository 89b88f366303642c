"""What each request field means, written once for every door: the requests' schemas
(use_cases/requests.py, and through them the HTTP API's OpenAPI document and a sweep's
parameters) and the CLI's option help (cli/) both read it here. A field named in backquotes
(`ttft_load`) is a request field; the CLI shows it as its flag (`--ttft-load`). A default the
request sets is stated as `(default: ...)` (tests/use_cases/test_field_docs.py checks it against
the request). Plain text and no import, so `prfaas-plan --help` reads it without the library.
"""

_MODE = (
    "Service time of a pool: paper, at the representative (mean) length of its requests, as "
    "the paper; exact, the conditional mean service time E[T(L)] (default: paper)."
)
_PRICES = (
    "USD per GPU-hour by GPU type ({h200: 2.0, h20: 1.0}; on the command line GPU=USD, once "
    "per GPU), over the GPU files and the scenario's cost block."
)

# a field's meaning in every request that has it
SHARED: dict[str, str] = {
    "mode": _MODE,
    "out_of_range": (
        "A length outside a profile table: extrapolate the fit (reported) or error "
        "(default: extrapolate)."
    ),
    "gpu_prices_usd_per_gpu_hour": _PRICES,
    "cost_model": "How GPU-hours are priced: on-demand or tco (default: on-demand).",
    "link_offering": (
        "Link offering of data/links/ to price the link with (default: the cheapest wide "
        "enough; owned: already paid for)."
    ),
    "utilization": ("Share of Λ_max the deployment is priced at, for $/token (default: 0.7)."),
    "ttft_target_s": (
        "TTFT target under load (s) at `ttft_percentile`: the best plan that meets it (M/G/c "
        "prefill pools and a processor-sharing link approximation)."
    ),
    "ttft_percentile": "The TTFT statistic the target bounds: mean, 50, 90 or 99 (default: 90).",
    "ttft_load": (
        "Load of the TTFT target, as a fraction of the unconstrained plan's exact-mode Λ_max."
    ),
    "ttft_load_rps": "Load of the TTFT target in req/s (instead of `ttft_load`).",
    "threshold_tokens": "Fix the routing threshold t (tokens); only the PD split is optimised.",
    "target_rps": ("Size the PrfaaS cluster: the fewest instances reaching this Λ_max (req/s)."),
    "max_prfaas_gpus": (
        "Size the PrfaaS cluster: at most this many GPUs (the best Λ_max under the cap, or the "
        "cap on a `target_rps` search)."
    ),
    "solver": "MILP solver of the sizing: highs or cbc (default: highs).",
    "pd_prefill_instances": "N_p, the PD instances that prefill; the others decode.",
    "prfaas_instances": "PrfaaS instances, instead of the scenario's prfaas_cluster.instances.",
    "bins": "Length bins of the routing LP, the resolution of its bound (default: 2000).",
    "max_instances_per_site": (
        "Instances each candidate site may get (default: the scenario's procurement block, "
        "else 32)."
    ),
    "budget_usd_per_hour": "The most to spend ($/hour): the highest Λ_max within it.",
    "load": (
        "Arrival rates as fractions of the plan's exact-mode Λ_max, a run each (default: 0.8; "
        "on the command line comma-separated)."
    ),
    "rate_rps": "Absolute arrival rate (req/s) instead of `load`.",
    "requests": "Requests per run (default: 100,000).",
    "duration_s": "Simulated arrival window (s) instead of `requests`.",
    "seed": "Random seed: the same seed gives the same result (default: 0).",
    "arrivals": (
        "Arrival process: poisson, gamma, sinusoidal or trace (default: poisson; with `trace`: "
        "trace)."
    ),
    "burst_cv": "gamma: coefficient of variation of the inter-arrival times (default: 3).",
    "period_s": "sinusoidal: period (s) (default: 600).",
    "amplitude": "sinusoidal: the rate's swing as a fraction of its mean (default: 0.5).",
    "trace": (
        "Replay a trace: Mooncake JSONL (timestamp, input_length, output_length, hash_ids), or "
        "an Azure LLM inference or BurstGPT CSV (told by its header); with `load` or "
        "`rate_rps` it is sped up to that rate."
    ),
    "policy": "Routing policy: static, adaptive, rebalance, dual or prefix (default: static).",
    "link_latency_s": "Extra latency of each KV transfer (s) (default: 0).",
    "dip_start_s": "Bandwidth dip: start (s).",
    "dip_duration_s": "Bandwidth dip: duration (s).",
    "dip_fraction": "Bandwidth dip: the share of the link left (default: 0.1).",
    "sustainable": (
        "Also find the highest rate the simulated deployment sustains and compare it with the "
        "exact- and paper-mode Λ_max (~10 runs)."
    ),
}

# where a request's field means something else than SHARED says
BY_REQUEST: dict[tuple[str, str], str] = {
    ("EvaluateRequest", "threshold_tokens"): "Routing threshold t (tokens).",
    ("SimulateRequest", "threshold_tokens"): (
        "Simulate this routing threshold t (tokens) instead of the planned one."
    ),
    ("ProcureRequest", "target_rps"): "The cheapest deployment reaching this Λ_max (req/s).",
    ("ProcureRequest", "ttft_load"): (
        "Load of the TTFT target, as a fraction of `target_rps` (default: 1)."
    ),
    ("ParetoRequest", "target_rps"): (
        "The Λ_max (req/s) every plan of the latency frontier reaches."
    ),
    ("ParetoRequest", "ttft_load_rps"): (
        "The latency frontier at this Poisson load (req/s; default: unloaded)."
    ),
    # the HTTP API's bodies (server/bodies.py): the server's own limits, and what it does not take
    ("ScenarioBody", "scenario"): (
        "The scenario, as a scenario file's mapping (default: the paper's case study)."
    ),
    ("ScenarioBody", "bandwidth_gbps"): (
        "Link bandwidth (Gbps), instead of the scenario's link.bandwidth_gbps."
    ),
    ("SimulateBody", "load"): (
        "Arrival rates as fractions of the plan's exact-mode Λ_max, a run each, at most 8 "
        "(default: 0.8)."
    ),
    ("SimulateBody", "requests"): (
        "Requests per run, at most 20,000 over every load of one request (default: 2,000)."
    ),
    ("SimulateBody", "duration_s"): ("Not taken by the server: a run is a number of `requests`."),
    ("SimulateBody", "trace"): "Not taken by the server: it reads no file a request names.",
    ("SimulateBody", "sustainable"): (
        "Not taken by the server: the sustainable-rate search is the CLI's (~10 runs)."
    ),
    ("SensitivityBody", "bins"): (
        "Length bins of the routing LP, the resolution of its bound, at most 5,000 (default: 2000)."
    ),
    ("ProcureBody", "max_instances_per_site"): (
        "Instances each candidate site may get, at most 64 (default: the scenario's "
        "procurement block, else 32)."
    ),
    ("ExportRequest", "target"): "The serving stack: llm-d, dynamo or kubernetes.",
    ("ExportRequest", "mode"): (
        "The plan's mode when it is planned from the scenario: paper or exact (default: paper; "
        "a plan JSON keeps its own)."
    ),
    ("ExportRequest", "name"): (
        "Object name prefix, a Kubernetes name (default: the scenario's name, sanitised)."
    ),
    ("ExportRequest", "namespace"): "Kubernetes namespace (default: none written).",
    ("ExportRequest", "image"): "Container image (default: the stack's own).",
    ("ExportRequest", "model_id"): "Model the engine loads (default: the scenario's).",
    ("ExportRequest", "prompt_chars_per_token"): (
        "llm-d only: prompt characters a token, to write the threshold in characters (default: 4)."
    ),
}


# a body whose fields mean what another's do
_AS = {"ParetoBody": "ProcureBody"}


def describe(request: str, field: str) -> str:
    """The meaning of `request`'s `field` (a KeyError for a field nobody described)."""
    return BY_REQUEST.get((_AS.get(request, request), field)) or SHARED[field]
