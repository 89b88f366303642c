"""A workload from a vLLM or SGLang /metrics snapshot (or two): length histograms, arrival rate.

For a team with no trace: the prompt- and generation-length
histograms a vLLM or SGLang server exports on /metrics (Prometheus text exposition, a `curl
/metrics` file), read from one snapshot (everything since the server started) or from the
difference of two (a window), become histogram length distributions; the requests they count,
over the seconds between the snapshots, the arrival rate. Units: tokens, seconds.

Families (the writers' names: vLLM `vllm/v1/metrics/loggers.py`, SGLang
`python/sglang/srt/metrics/collector.py`, which exports them with --collect-tokens-histogram):
- vLLM: `vllm:request_prompt_tokens`, `vllm:request_generation_tokens` (buckets 1-2-5 up to
  max_model_len; labels model_name, engine);
- SGLang: `sglang:prompt_tokens_histogram`, `sglang:generation_tokens_histogram` (label
  model_name).
Series of one model are summed (engines, data-parallel ranks); several models must be told apart.

What the buckets lose: each bucket (a, b] is taken as uniform on it, so the shape inside a bucket
(a 1-2-5 bucket spans a factor of 2 to 2.5) and every quantile within it are approximations; the
exact mean (_sum / _count) is stated beside the buckets' mean. Lengths at or below 1 token
share the first bucket above it. The open bucket above the last finite boundary (vLLM's last
1-2-5 boundary lies below max_model_len) is taken up to the boundaries' last ratio continued
(20000 -> 40000 after 10000, 20000): the longest lengths are a guess, said in the description.
(Matching the exact mean instead puts every bucket's error on the open one: with 1% of requests
there, a 1% error in the other buckets' means moves its edge by the whole mean.) Input and output lengths are two marginals: their correlation,
which the decode context uses, is lost (taken as independent).
"""

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from prfaas_plan import plausible
from prfaas_plan.analytic.distributions import Histogram
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import read_text

FAMILIES = {
    "vllm": ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"),
    "sglang": ("sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram"),
}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass(frozen=True)
class _Family:
    """One histogram family of one model: cumulative bucket counts by `le`, _sum, _count."""

    buckets: dict[float, float]
    total: float
    count: float


@dataclass(frozen=True)
class MetricsWorkload:
    inputs: Histogram
    outputs: Histogram
    requests: float
    arrival_rate_rps: float | None  # None: no interval_s given
    source: str


def _labels(text: str, where: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    position = 0
    while position < len(text):
        match = _LABEL.match(text, position)
        if match is None or match.end() == position:
            raise ConfigError(f"{where}: malformed labels {plausible.quoted(text)}")
        labels[match.group(1)] = match.group(2)
        position = match.end()
    return labels


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: expected a number, found {plausible.quoted(text)}") from None
    return value


def _read_snapshot(path: Path, model_name: str | None) -> tuple[str, dict[str, _Family]]:
    """(engine, family name -> its summed series) of a /metrics snapshot."""
    text = read_text(path, "metrics", limit_bytes=plausible.MAX_METRICS_BYTES)
    wanted = {name for names in FAMILIES.values() for name in names}
    series: dict[tuple[str, str], dict[str, object]] = {}  # (family, model) -> parts
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        match = _SAMPLE.match(line)
        if match is None:
            if any(line.startswith(name) for name in wanted):
                raise ConfigError(f"{where}: not a Prometheus sample line: {line[:60]!r}")
            continue
        name, label_text, value_text = match.groups()
        family, _, part = name.rpartition("_")
        if family not in wanted or part not in ("bucket", "sum", "count"):
            continue
        labels = _labels(label_text or "", where)
        value = _number(value_text, where)
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"{where}: {name} must be a finite count >= 0, found {value_text}")
        parts = series.setdefault((family, labels.get("model_name", "")), {})
        if part == "bucket":
            if "le" not in labels:
                raise ConfigError(f"{where}: {name} has no le label")
            buckets: dict[float, float] = parts.setdefault("buckets", {})  # type: ignore[assignment]
            le = _number(labels["le"], where)
            buckets[le] = buckets.get(le, 0.0) + value
        else:
            parts[part] = float(parts.get(part, 0.0)) + value  # type: ignore[arg-type]
    engines = sorted({e for e, names in FAMILIES.items() for (f, _) in series if f in names})
    if not engines:
        raise ConfigError(
            f"{path}: no request-length histogram found; expected "
            + " or ".join(" and ".join(n) for n in FAMILIES.values())
            + " (SGLang exports them with --collect-tokens-histogram)"
        )
    if len(engines) > 1:
        raise ConfigError(
            f"{path}: holds both vLLM and SGLang length histograms; give one server's"
        )
    engine = engines[0]
    models = sorted({m for (f, m) in series if f in FAMILIES[engine]})
    if model_name is None and len(models) > 1:
        raise ConfigError(
            f"{path}: histograms of several models ({', '.join(map(repr, models[:5]))}); "
            "name one with model_name"
        )
    chosen = model_name if model_name is not None else models[0]
    if chosen not in models:
        raise ConfigError(
            f"{path}: no histogram with model_name {chosen!r}; found {', '.join(map(repr, models[:5]))}"
        )
    families: dict[str, _Family] = {}
    for family in FAMILIES[engine]:
        found = series.get((family, chosen))
        if found is None or any(k not in found for k in ("buckets", "count", "sum")):
            raise ConfigError(f"{path}: {family}: expected its _bucket, _sum and _count series")
        families[family] = _Family(
            dict(found["buckets"]),  # type: ignore[call-overload]
            float(found["sum"]),  # type: ignore[arg-type]
            float(found["count"]),  # type: ignore[arg-type]
        )
    return engine, families


def _difference(after: _Family, before: _Family, family: str, where: str) -> _Family:
    if set(after.buckets) != set(before.buckets):
        raise ConfigError(f"{where}: {family}: the two snapshots have different bucket boundaries")
    buckets = {le: after.buckets[le] - before.buckets[le] for le in after.buckets}
    if min(buckets.values()) < 0 or after.count < before.count or after.total < before.total:
        raise ConfigError(
            f"{where}: {family}: counts fell between the snapshots (the server restarted?); "
            "give baseline_file taken before file, of the same server run"
        )
    return _Family(buckets, after.total - before.total, after.count - before.count)


def histogram_of(family: _Family, name: str, where: str) -> tuple[Histogram, str]:
    """The family as a Histogram (module docstring: what the buckets lose) and a note."""
    inf = family.buckets.get(math.inf)
    finite = sorted(le for le in family.buckets if math.isfinite(le))
    if inf is None or not finite:
        raise ConfigError(f'{where}: {name}: expected finite buckets and le="+Inf"')
    cumulative = [family.buckets[le] for le in finite] + [inf]
    if any(b < a for a, b in itertools.pairwise(cumulative)):
        raise ConfigError(f"{where}: {name}: bucket counts must not decrease as le grows")
    if not family.count > 0:
        raise ConfigError(f"{where}: {name}: counts no request (_count is 0)")
    if abs(inf - family.count) > 1e-9 * family.count + 0.5:
        raise ConfigError(f'{where}: {name}: le="+Inf" counts {inf:g}, _count {family.count:g}')
    exact_mean = family.total / family.count
    if not plausible.MIN_TOKENS <= exact_mean <= plausible.MAX_TOKENS:
        raise ConfigError(f"{where}: {name}: mean length (_sum/_count) {exact_mean:g} tokens")
    # bins (e_{j-1}, e_j]: the first from 1 token, lengths at or below 1 token folded into it
    edges = [plausible.MIN_TOKENS] + [le for le in finite if le > plausible.MIN_TOKENS]
    tops = [c for le, c in zip(finite, cumulative, strict=False) if le > plausible.MIN_TOKENS]
    if not tops:
        raise ConfigError(f"{where}: {name}: expected a bucket boundary above 1 token")
    weights = [tops[0]] + [b - a for a, b in itertools.pairwise(tops)]
    open_count = inf - tops[-1]
    note = ""
    if open_count > 0:  # the open bucket: the boundaries' last ratio continued
        low = edges[-1]
        ratio = low / edges[-2] if len(edges) > 2 else 2.0
        high = min(low * ratio, plausible.MAX_TOKENS)
        edges.append(high)
        weights.append(open_count)
        note = f"; {open_count / inf:.1%} above le={low:g}, taken up to {high:,.0f} tokens"
    first = next(j for j, w in enumerate(weights) if w > 0)
    last = max(j for j, w in enumerate(weights) if w > 0)
    histogram = Histogram(tuple(edges[first : last + 2]), tuple(weights[first : last + 1]))
    if len(histogram.weights) > plausible.MAX_HISTOGRAM_BINS:
        raise ConfigError(f"{where}: {name}: more than {plausible.MAX_HISTOGRAM_BINS:,} buckets")
    note = f"mean {exact_mean:,.0f} tokens exact (_sum/_count), {histogram.mean_tokens:,.0f} from the buckets{note}"
    return histogram, note


def read_metrics_workload(
    path: Path, baseline: Path | None, interval_s: float | None, model_name: str | None
) -> MetricsWorkload:
    """Input and output length histograms (and the arrival rate with `interval_s`) from the
    snapshot `path`, minus the snapshot `baseline` if given (module docstring)."""
    engine, after = _read_snapshot(path, model_name)
    families = after
    if baseline is not None:
        engine_before, before = _read_snapshot(baseline, model_name)
        if engine_before != engine:
            raise ConfigError(f"{baseline}: a {engine_before} snapshot, {path} a {engine} one")
        families = {f: _difference(after[f], before[f], f, str(path)) for f in after}
    prompt, generation = FAMILIES[engine]
    inputs, input_note = histogram_of(families[prompt], prompt, str(path))
    outputs, output_note = histogram_of(families[generation], generation, str(path))
    requests = families[prompt].count
    rate = requests / interval_s if interval_s is not None else None
    span = f"{baseline} to {path}" if baseline is not None else f"{path} (since the server started)"
    rate_text = f", {rate:.4g} req/s over {interval_s:g} s" if rate is not None else ""
    source = f"{engine} metrics {span}: {requests:,.0f} requests{rate_text}"
    return MetricsWorkload(
        Histogram(inputs.bin_edges_tokens, inputs.weights, f"{source}; {input_note}"),
        Histogram(outputs.bin_edges_tokens, outputs.weights, f"{generation}; {output_note}"),
        requests,
        rate,
        source,
    )
