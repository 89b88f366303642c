"""Which role each benchmark run of an import plays: prefill (TTFT of requests that did not
queue) or decode (a closed-loop sweep by concurrency). Units: tokens.

A file may hold several runs (SGLang appends one line per run; vLLM's `--append-result` one
object per run), and a team's usual benchmark puts a prefill run and a decode sweep into one
file. Each run is its own run, its role decided on its own, and runs of different settings are
never pooled:

- the runs are grouped by their settings: SGLang's dataset settings where both runs write
  them (`dataset_name`, `random_input_len`, `random_output_len`, `random_range_ratio`), and
  the mean input and output lengths of their requests within SETTINGS_TOLERANCE (vLLM writes
  no length settings; its per-request lengths say them);
- a group of runs with a `max_concurrency` that spans several concurrencies is a decode sweep:
  its run at concurrency 1 is the sweep's batch 1;
- every other run is a prefill run (inputs/profile_import.py then keeps the requests that ran
  alone and refuses, naming the run, one dominated by queueing).

So a prefill run of 8K prompts at concurrency 1 followed by a 1K/1K decode sweep gives a
prefill table from the first and a decode table from the sweep: the prefill run's inter-token
latencies are never pooled into the sweep's batch 1. Two decode sweeps at different settings
are refused (one decode table holds one setting). With an explicit --kind the runs of the other
role are set aside with a note.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.choices import ProfileKind
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.benchmark_run import BenchmarkRun

# two runs' mean input (or output) lengths within this share of the larger are one setting:
# runs of random lengths around one setting differ by a few percent; a prefill run and a decode
# sweep differ by far more (8K vs 1K prompts, 1 vs 1K outputs)
SETTINGS_TOLERANCE = 0.25


@dataclass(frozen=True)
class Roles:
    prefill: tuple[BenchmarkRun, ...]
    decode: tuple[BenchmarkRun, ...]
    notes: tuple[str, ...]  # runs set aside, and why


def mean_lengths(run: BenchmarkRun) -> tuple[float, float]:
    """The mean input and output tokens of the run's successful requests (0 if none)."""
    if not run.input_tokens.size:
        return 0.0, 0.0
    return float(np.mean(run.input_tokens)), float(np.mean(run.output_tokens))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= SETTINGS_TOLERANCE * max(a, b)


def same_settings(a: BenchmarkRun, b: BenchmarkRun) -> bool:
    """Whether two runs measured one setting (module docstring)."""
    sa, sb = dict(a.settings), dict(b.settings)
    if any(sa[k] != sb[k] for k in sa.keys() & sb.keys()):
        return False
    (ia, oa), (ib, ob) = mean_lengths(a), mean_lengths(b)
    return _close(ia, ib) and _close(oa, ob)


def settings_groups(runs: Sequence[BenchmarkRun]) -> list[list[BenchmarkRun]]:
    """The runs grouped by setting, in first-seen order (each run joins the first group whose
    first run it matches)."""
    groups: list[list[BenchmarkRun]] = []
    for run in runs:
        for group in groups:
            if same_settings(group[0], run):
                group.append(run)
                break
        else:
            groups.append([run])
    return groups


def describe(group: Sequence[BenchmarkRun]) -> str:
    """A group for a message: its runs and its setting."""
    inputs, outputs = mean_lengths(group[0])
    named = ", ".join(r.source for r in group[:3]) + (
        f" and {len(group) - 3} more" if len(group) > 3 else ""
    )
    return f"{named} (mean input {inputs:,.0f}, output {outputs:,.0f} tokens)"


def _concurrencies(group: Sequence[BenchmarkRun]) -> list[int]:
    return sorted({r.max_concurrency for r in group if r.max_concurrency is not None})


def assign(runs: Sequence[BenchmarkRun], kind: ProfileKind) -> Roles:
    """Each run's role (module docstring); a ConfigError naming the runs when the files hold two
    decode sweeps, or no run of an asked-for `kind`."""
    with_concurrency = [r for r in runs if r.max_concurrency is not None]
    sweeps = [g for g in settings_groups(with_concurrency) if len(_concurrencies(g)) > 1]
    if len(sweeps) > 1:
        raise ConfigError(
            f"{sweeps[1][0].source}: two decode sweeps at different settings: "
            f"{describe(sweeps[0])} and {describe(sweeps[1])}; runs of different settings are "
            "never pooled into one table: import each sweep on its own"
        )
    decode = tuple(sweeps[0]) if sweeps else ()
    prefill = tuple(r for r in runs if not any(r is d for d in decode))
    if kind is ProfileKind.AUTO:
        return Roles(prefill, decode, ())
    if kind is ProfileKind.PREFILL:
        if not prefill:
            raise ConfigError(
                f"{runs[0].source}: no prefill run among the files: {describe(decode)} are a "
                f"decode sweep by concurrency ({', '.join(map(str, _concurrencies(decode)))}); "
                "measure prefill with --max-concurrency 1 over several input lengths"
            )
        return Roles(prefill, (), _set_aside(decode, "a decode sweep", "prefill"))
    if decode:
        return Roles((), decode, _set_aside(prefill, "not in the decode sweep", "decode"))
    groups = settings_groups(runs)  # no sweep: every run is decode, of one setting
    if len(groups) > 1:
        raise ConfigError(
            f"{groups[1][0].source}: decode runs at different settings: {describe(groups[0])} "
            f"and {describe(groups[1])}; runs of different settings are never pooled"
        )
    return Roles((), tuple(runs), ())


def _set_aside(runs: Sequence[BenchmarkRun], why: str, kind: str) -> tuple[str, ...]:
    return tuple(f"{r.source}: not used ({why}; only {kind} runs asked for)" for r in runs)
