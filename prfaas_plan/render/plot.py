"""Plots (matplotlib, optional extra `plot`): the threshold-balance picture of a plan, the
KV throughput of catalog models against length, and the sensitivity curves.

Left: for the chosen PD split, the system throughput each term allows as t varies:
Θ_prfaas/p (rises), Θ_pd-p/(1 − p) (falls), Θ_pd-d (flat); Λ_max is their minimum and the plan
sits where the prefill terms cross. Right: Λ_max(t) for every split N_p/N_d.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.capacity import Evaluation, rates
from prfaas_plan.analytic.threshold_balance import threshold_balance
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.files import write_atomically
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.use_cases.kv import KvReport
from prfaas_plan.use_cases.plan import PlanReport

if TYPE_CHECKING:
    from prfaas_plan.use_cases.sensitivity import Curve

PLOT_POINTS = 400
FORMATS = (".png", ".svg", ".pdf")


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "plot needs matplotlib: pip install 'prfaas-plan[plot]'", parameter="plot"
        ) from None
    return plt


def _check_suffix(plot_path: Path) -> None:
    if plot_path.suffix.lower() not in FORMATS:
        raise ConfigError(
            f"plot: file must end in {', '.join(FORMATS)}, got {plot_path.name!r}",
            parameter="plot",
        )


def _draw_balance(left: Any, problem: Problem, plan: Evaluation, mode: Mode) -> None:
    """The system throughput each term allows against t for the plan's split, and Λ_max."""
    c = plan.configuration
    curve = threshold_balance(problem.system, problem.workload, c, mode, PLOT_POINTS)
    k_tokens = units.tokens_to_ktokens(curve.thresholds_tokens)
    left.plot(k_tokens, curve.prfaas_rps, label="Θ_prfaas / p")
    left.plot(k_tokens, curve.pd_prefill_rps, label="Θ_pd-p / (1 − p)")
    left.plot(k_tokens, curve.pd_decode_rps, label="Θ_pd-d", linestyle="--")
    left.plot(k_tokens, curve.system_rps, color="black", linewidth=2.5, alpha=0.35, label="Λ_max")
    left.axvline(units.tokens_to_ktokens(c.threshold_tokens), color="grey", linestyle=":")
    left.plot([units.tokens_to_ktokens(c.threshold_tokens)], [plan.system_throughput_rps], "ko")
    left.set(
        xscale="log", xlabel="threshold t (K tokens)", ylabel="system throughput allowed (req/s)",
        ylim=(0, 2.5 * plan.system_throughput_rps),
        title=f"split {c.pd_prefill_instances}/{c.pd_decode_instances}, {c.prfaas_instances} PrfaaS "
        f"instances: t = {units.tokens_to_ktokens(c.threshold_tokens):.2f}K, "
        f"Λ_max = {plan.system_throughput_rps:.3f} req/s",
    )  # fmt: skip
    left.legend()


def plot_threshold_balance(report: PlanReport, plot_path: Path) -> None:
    """Write the figure to `plot_path` (format from its suffix), atomically."""
    _check_suffix(plot_path)
    plt = _pyplot()

    problem, plan = report.problem, report.plan.evaluation
    c = plan.configuration
    w = problem.workload
    t = np.geomspace(w.min_tokens, w.max_tokens, PLOT_POINTS)
    k_tokens = units.tokens_to_ktokens(t)

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    _draw_balance(left, problem, plan, report.mode)

    n_pd = c.pd_instances
    n_p = np.arange(n_pd)[:, None]
    all_splits = rates(
        problem.system, w, t[None, :], c.prfaas_instances, n_p, n_pd - n_p, report.mode
    )
    for i in range(n_pd):
        right.plot(k_tokens, all_splits.system_rps[i], label=f"{i}/{n_pd - i}",
                   linewidth=2.5 if i == c.pd_prefill_instances else 1)  # fmt: skip
    right.set(
        xscale="log", xlabel="threshold t (K tokens)", ylabel="Λ_max (req/s)",
        title=f"Λ_max for each PD split N_p/N_d (mode {report.mode})",
    )  # fmt: skip
    right.legend(title="N_p/N_d", fontsize="small", ncol=2)
    fig.suptitle(f"{problem.scenario.name}: threshold balance")

    try:
        write_atomically(plot_path, lambda tmp: fig.savefig(tmp, dpi=120), "plot")
    finally:
        plt.close(fig)


def plot_kv_throughput(report: KvReport, plot_path: Path) -> None:
    """Φ_kv = S_kv / T_prefill against input length for every model with a prefill profile on
    the report's GPU (the paper's Figure 2 / Table 3 picture), log-log."""
    _check_suffix(plot_path)
    plt = _pyplot()
    lengths = np.geomspace(report.lengths_tokens.min(), report.lengths_tokens.max(), PLOT_POINTS)
    fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
    drawn = 0
    for m in report.models:
        points = m.kv_throughput_bytes_per_s  # None exactly when there is no prefill profile
        if m.prefill_latency is None or points is None:
            continue
        phi = m.footprint.size_bytes(lengths) / m.prefill_latency(lengths)
        (line,) = ax.plot(
            units.tokens_to_ktokens(lengths), units.bytes_per_s_to_gbps(phi), label=m.name
        )
        ax.plot(units.tokens_to_ktokens(report.lengths_tokens),
                units.bytes_per_s_to_gbps(points), "o", color=line.get_color())  # fmt: skip
        drawn += 1
    if drawn == 0:
        plt.close(fig)
        raise ConfigError(
            f"plot: no chosen model has a {report.gpu}-x{report.gpus_per_instance} prefill profile",
            parameter="plot",
        )
    ax.set(
        xscale="log", yscale="log", xlabel="input length (K tokens)",
        ylabel=f"Φ_kv per {report.gpus_per_instance}×{report.gpu.upper()} instance (Gbps)",
        title=f"KV throughput S_kv / T_prefill ({report.kv_dtype} KV, {report.state_dtype} state)",
    )  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    try:
        write_atomically(plot_path, lambda tmp: fig.savefig(tmp, dpi=120), "plot")
    finally:
        plt.close(fig)


CURVE_TITLES = {
    "bandwidth": ("link bandwidth (Gbps)", "the bandwidth wall"),
    "prfaas_cluster": ("PrfaaS instances", "PrfaaS cluster size"),
    "mean_input_length": ("mean input length (K tokens)", "mean input length (μ shifted)"),
}


def plot_sensitivity_curves(
    problem: Problem, plan: Evaluation, curves: tuple["Curve", ...], plot_path: Path
) -> None:
    """Λ_max and t* against each curve's input (one panel each, t* on a second axis), and the
    threshold balance of the plan's split (the `optimize --plot` left panel)."""
    _check_suffix(plot_path)
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), constrained_layout=True)
    panels = list(axes.flat)
    for ax, c in zip(panels, curves, strict=False):
        x_label, title = CURVE_TITLES[c.name]
        x = np.asarray(c.x, float)
        if c.name == "mean_input_length":
            x = units.tokens_to_ktokens(x)
        lam = [p.system_throughput_rps for p in c.plans]
        t_k = [units.tokens_to_ktokens(p.configuration.threshold_tokens) for p in c.plans]
        ax.plot(x, lam, "o-", label="Λ_max (req/s)")
        ax.set(xlabel=x_label, ylabel="Λ_max (req/s)", title=title, ylim=(0, None))
        if c.name == "bandwidth":
            ax.set_xscale("log")
        twin = ax.twinx()
        twin.plot(x, [v if np.isfinite(v) else np.nan for v in t_k], "s--", color="tab:orange")
        twin.set_ylabel("t* (K tokens)", color="tab:orange")
    _draw_balance(panels[3], problem, plan, plan.mode)
    fig.suptitle(f"{problem.scenario.name}: sensitivity curves ({plan.mode} mode)")
    try:
        write_atomically(plot_path, lambda tmp: fig.savefig(tmp, dpi=120), "plot")
    finally:
        plt.close(fig)


def _tick(value: Any) -> str:
    """An axis value as a tick label: a number in %g, anything else (a mode) as text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)[:40]


def plot_over_two_axes(
    x_values: list[Any],
    y_values: list[Any],
    cells: list[list[float]],
    labels: tuple[str, str, str],
    plot_path: Path,
    kind: str = "heatmap",
) -> None:
    """A sweep output over two axes (`sweep-report --plot`): a heat map with the values written
    in its cells, or one line per y value against x. `labels` = (x, y, value)."""
    _check_suffix(plot_path)
    plt = _pyplot()
    values = np.array(cells, dtype=float)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    try:
        if kind == "lines":
            for row, y in zip(values, y_values, strict=True):
                ax.plot(x_values, row, marker="o", label=f"{labels[1]} = {y}")
            ax.set_ylabel(labels[2])
            ax.legend(fontsize="small")
        else:
            image = ax.imshow(values, origin="lower", aspect="auto", cmap="viridis")
            ax.set_xticks(range(len(x_values)), [_tick(v) for v in x_values])
            ax.set_yticks(range(len(y_values)), [_tick(v) for v in y_values])
            fig.colorbar(image, ax=ax, label=labels[2])
            if values.size <= 400:
                for (i, j), v in np.ndenumerate(values):
                    if np.isfinite(v):
                        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
            ax.set_ylabel(labels[1])
        ax.set_xlabel(labels[0])
        ax.set_title(f"{labels[2]} (mean over the other axes)", fontsize="medium")
        fig.tight_layout()
        write_atomically(plot_path, lambda tmp: fig.savefig(tmp, dpi=120), "plot")
    finally:
        plt.close(fig)
