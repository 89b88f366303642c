"""`explain`'s derivatives of Λ_max against central finite differences of the model, in every
regime (balance, link balance, PrfaaS only, PD prefill only, decode with and without a context
column, nothing and everything offloaded), on random scenarios built here.

The finite differences are independent of explain's formulas and of the project's optimiser:
- continuous inputs (B_out, μ, σ, L_out): the scenario is rebuilt with the input moved (so the
  decode point is re-derived from the table at the new mean decode context) and Λ re-maximised
  over t by `best_rps` below, the plan's split held (envelope theorem: for a unique optimal split
  the derivative of the max over splits is the derivative at that split);
- instance counts: the continuous relaxation, `rates` at fractional counts ± h, t re-maximised by
  `best_rps`.
`best_rps` maximises over t with a grid, a bisection on the sign of F − G (the balance, eq. 7)
and scipy's bounded scalar maximiser near the best grid point (a term that peaks inside).
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import minimize_scalar

from prfaas_plan.analytic.capacity import Bound, rates
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.resources import default_data_dir, default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, scenario_from_data
from prfaas_plan.render.explain import explain_view
from prfaas_plan.symbolic.terms import NAMES
from prfaas_plan.use_cases.explain import explain

# Relative step of the central differences. Λ is computed to ~1e-14 (bisection to the last
# bits of t, double arithmetic), so rounding costs ~1e-14 / 1e-5 = 1e-9 of a derivative and the
# truncation error h² Λ''' / (6 Λ') ~ 1e-10 for these smooth closed forms: a relative tolerance of
# 1e-5 is 4 orders above both, and below any modelling error worth reporting (the errors this
# test was written for were 1e-1 to 1e0). Elasticities near 0 are compared with abs 1e-7.
H = 1e-5
RTOL, ATOL = 1e-5, 1e-7
# a count at 0: forward differences at shrinking steps converge to the one-sided derivative
CORNER_STEPS = (1e-4, 1e-6, 1e-8, 1e-10)
CORNER_RTOL = 0.05
COUNTS = ("prfaas_instances", "pd_prefill_instances", "pd_decode_instances")
BASE = yaml.safe_load(default_scenario_file().read_text())
DECODE_TABLE = "profiles/internal-1t-hybrid/decode/h20-x8/decode_step.csv"


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory):
    """The shipped catalog, and a copy whose H20 decode table has no context column (its rows at
    32,768 tokens): BS_max then does not depend on the lengths."""
    import shutil

    root = tmp_path_factory.mktemp("flat") / "catalog"
    shutil.copytree(default_data_dir(), root / "data")
    shutil.copy(default_data_dir().parent / "models.yaml", root / "models.yaml")
    table = root / "data" / DECODE_TABLE
    lines = table.read_text().splitlines()
    rows = [line.split(",") for line in lines[1:] if line.startswith("32768,")]
    table.write_text(
        "batch_size,decode_step_latency_s\n" + "".join(f"{b},{s}\n" for _, b, s in rows)
    )
    return {"context": CachedCatalog.open(), "flat": CachedCatalog.open(root / "data")}


# --- random scenarios ---------------------------------------------------------------------------

# per family: (prfaas instances, pd instances, link Gbps, decode SLO tokens/s) ranges; each
# family aims at one regime, the random draws spread the scenarios inside it
FAMILIES = {
    "balance": ((2, 8), (6, 12), (200.0, 800.0), (30.0, 45.0)),
    "link": ((4, 12), (6, 12), (3.0, 15.0), (30.0, 45.0)),
    "prfaas_only": ((1, 1), (1, 1), (200.0, 800.0), (20.0, 30.0)),
    "link_only": ((6, 12), (1, 1), (0.5, 1.5), (20.0, 30.0)),
    "pd_only": ((0, 0), (3, 10), (100.0, 100.0), (25.0, 45.0)),
    "decode": ((5, 8), (5, 8), (100.0, 400.0), (50.0, 70.0)),
    "decode_all": ((8, 16), (1, 1), (400.0, 800.0), (40.0, 80.0)),
    "decode_flat": ((8, 16), (2, 6), (400.0, 800.0), (60.0, 100.0)),
    "decode_pd_only": ((0, 0), (4, 10), (100.0, 100.0), (60.0, 100.0)),
}


def random_scenario(rng, family):
    """A scenario document of `family` (FAMILIES) with random workload, output lengths, mode."""
    (f_lo, f_hi), (d_lo, d_hi), (g_lo, g_hi), (s_lo, s_hi) = FAMILIES[family]
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["name"] = f"random-{family}"
    doc["prfaas_cluster"]["instances"] = int(rng.integers(f_lo, f_hi + 1))
    doc["pd_cluster"]["instances"] = int(rng.integers(d_lo, d_hi + 1))
    doc["link"]["bandwidth_gbps"] = float(np.exp(rng.uniform(np.log(g_lo), np.log(g_hi))))
    doc["slo"]["decode_tokens_per_s"] = float(rng.uniform(s_lo, s_hi))
    doc["workload"]["input_tokens"] = {
        "distribution": "truncated_lognormal",
        "mu_log": float(rng.uniform(9.0, 10.4)),
        "sigma_log": float(rng.uniform(0.6, 1.3)),
        "min_tokens": float(rng.choice([128, 256, 512])),
        "max_tokens": float(rng.choice([65536, 131072])),
    }
    if family == "prfaas_only" or rng.random() < 0.6:
        doc["workload"]["output_tokens"] = float(rng.uniform(256, 2048))
    else:
        doc["workload"]["output_tokens"] = {
            "distribution": "truncated_lognormal",
            "mu_log": float(rng.uniform(5.5, 7.0)),
            "sigma_log": float(rng.uniform(0.3, 0.9)),
            "min_tokens": 16.0,
            "max_tokens": 8192.0,
        }
    mode = Mode.EXACT if rng.random() < 0.4 else Mode.PAPER
    return doc, mode


def build(doc, catalog):
    return build_problem(scenario_from_data(doc, "random.yaml"), Path("random.yaml"), catalog)


# --- the independent maximiser over t -----------------------------------------------------------


def _rps(problem, t, counts, mode):
    r = rates(problem.system, problem.workload, t, *counts, mode)
    return r.limits_rps


def best_rps(problem, counts, mode):
    """max over t of Λ(t) at (possibly fractional) instance counts, independently of
    solve/threshold.py: a geometric grid with both ends (everything and nothing offloaded), the
    sign changes of F − G bisected in log t to the last bits, and a bounded scalar maximiser
    around the best grid point."""
    w = problem.workload
    lo, hi = w.min_tokens, w.max_tokens
    grid = np.geomspace(lo, hi, 401)
    grid[0], grid[-1] = lo, hi
    limits = _rps(problem, grid, counts, mode)
    lam = limits.min(axis=0)
    gap = np.minimum(limits[0], limits[1]) - limits[2]
    best = float(lam.max())
    for i in np.flatnonzero((gap[:-1] < 0) & (gap[1:] >= 0)):
        a, b = math.log(grid[i]), math.log(grid[i + 1])
        for _ in range(200):
            mid = 0.5 * (a + b)
            if mid in (a, b):
                break
            f = _rps(problem, math.exp(mid), counts, mode)
            a, b = (mid, b) if min(f[0], f[1]) < f[2] else (a, mid)
        for end in (a, b):
            best = max(best, float(_rps(problem, math.exp(end), counts, mode).min()))
    k = int(lam.argmax())
    if 0 < k < grid.size - 1:
        found = minimize_scalar(
            lambda x: -float(_rps(problem, math.exp(x), counts, mode).min()),
            bounds=(math.log(grid[k - 1]), math.log(grid[k + 1])),
            method="bounded",
            options={"xatol": 1e-12},
        )
        best = max(best, -float(found.fun))
    return best


# --- moving one input ---------------------------------------------------------------------------


def moved(doc, name, factor):
    """The scenario document with continuous input `name` multiplied by `factor` (the output
    lengths scaled: a constant, or the log-normal's lengths and bounds)."""
    doc = yaml.safe_load(yaml.safe_dump(doc))
    if name == "link_bandwidth":
        doc["link"]["bandwidth_gbps"] *= factor
    elif name in ("mu_log", "sigma_log"):
        doc["workload"]["input_tokens"][name] *= factor
    else:
        out = doc["workload"]["output_tokens"]
        if isinstance(out, dict):
            out["mu_log"] += math.log(factor)
            out["min_tokens"] *= factor
            out["max_tokens"] *= factor
        else:
            doc["workload"]["output_tokens"] = out * factor
    return doc


@dataclasses.dataclass(frozen=True)
class Case:
    doc: dict
    mode: Mode
    catalog: str  # "context" or "flat"
    family: str


def decode_still(problem, other):
    """The decode point of `other` is on the same BS_max plateau and context bracket as
    `problem`'s (else a difference quotient straddles a step or a kink of the table)."""
    a, b = problem.system.decode, other.system.decode
    if a.batch_size != b.batch_size:
        return False
    if a.context_sides is None:
        return True
    bracket = (a.context_sides[1] or a.context_sides[0]).bracket_tokens
    return bracket[0] <= b.context_tokens <= bracket[1] and (
        a.context_sides[0] is None
        or a.context_sides[1] is None
        or a.context_sides[0].bracket_tokens == a.context_sides[1].bracket_tokens
    )


def plateau_ends_within(problem, *others):
    """explain's plateau (DecodeContextSide) ends between C and one of the others' contexts."""
    decode = problem.system.decode
    c = decode.context_tokens
    below, above = decode.context_sides
    for other in others:
        moved_c = other.system.decode.context_tokens
        side = above if moved_c > c else below
        if side is None or abs(side.plateau_end_tokens - c) <= abs(moved_c - c):
            return True
    return False


def check_case(case, catalogs):
    """Compare every derivative explain reports with finite differences; returns (regime
    label, {input: 'ok' | reason skipped})."""
    catalog = catalogs[case.catalog]
    problem = build(case.doc, catalog)
    report = explain(problem, case.mode)
    forms = report.closed_forms
    plan = report.plan
    lam = plan.system_throughput_rps
    c = plan.configuration
    counts = [
        float(c.prfaas_instances),
        float(c.pd_prefill_instances),
        float(c.pd_decode_instances),
    ]
    assert lam > 0
    assert forms.system_throughput_rps == pytest.approx(lam, rel=1e-9)
    flat = problem.system.decode.context_sides is None
    assert flat == (case.catalog == "flat")
    assert flat == any("no context column" in n for n in explain_view(report).notes)
    assert best_rps(problem, counts, case.mode) == pytest.approx(lam, rel=1e-9)
    outcome = {}
    bounds = set(plan.bounds)
    if (Bound.PD_DECODE in bounds and len(bounds) > 1) or {
        Bound.PRFAAS_COMPUTE,
        Bound.PRFAAS_LINK,
    } <= bounds:
        # two branches bind together (the model's own bounds say so): Λ has a kink, which
        # explain must report as one-sided values (checked against one-sided differences in
        # test_decode_and_the_link_binding_together_give_one_sided_derivatives)
        assert any(not forms.differentiable(n) for n in NAMES), forms.notes
        return label(report), dict.fromkeys(NAMES, "tie")
    for name in NAMES:
        if name in COUNTS:
            i = COUNTS.index(name)
            theta = counts[i]
            if theta == 0:
                outcome[name] = check_corner(problem, counts, i, case.mode, forms, name)
                continue

            def at(factor, i=i, theta=theta):
                moved_counts = list(counts)
                moved_counts[i] = theta * factor
                return best_rps(problem, moved_counts, case.mode)

            up, down = at(1 + H), at(1 - H)
        else:
            up_problem = build(moved(case.doc, name, 1 + H), catalog)
            down_problem = build(moved(case.doc, name, 1 - H), catalog)
            if not (decode_still(problem, up_problem) and decode_still(problem, down_problem)):
                # a BS_max step or a table kink within ±h of C: the difference quotient straddles
                # it. explain's plateau must end there too (it calls Λ not differentiable only
                # for a step right at C); skip the comparison
                assert plateau_ends_within(problem, up_problem, down_problem), name
                outcome[name] = "decode step within h"
                continue
            up = best_rps(up_problem, counts, case.mode)
            down = best_rps(down_problem, counts, case.mode)
        numeric = (up - down) / (2 * H * lam)
        assert forms.differentiable(name), (case.family, name, forms.notes)
        assert forms.elasticities[name] == pytest.approx(numeric, rel=RTOL, abs=ATOL), (
            case.family, name, forms.regime, case.mode,
        )  # fmt: skip
        outcome[name] = "ok"
    return label(report), outcome


def check_corner(problem, counts, i, mode, forms, name):
    """∂Λ/∂N at N = 0 (the idle side's first instance) is a limit: forward differences of the
    relaxation at N = h approach it as h shrinks, slowly where the end of the length range is
    far in the distribution's tail (the first requests taken are then rare, and longer than
    the end for any h that double arithmetic resolves). So: the differences at h = 1e-4, 1e-6,
    1e-8 and 1e-10 instances must each be closer to explain's value (up to their own noise,
    ~1e-15 Λ / h), the last within CORNER_RTOL; the elasticity of a count of 0 is 0."""
    base = best_rps(problem, counts, mode)
    expected = forms.derivatives_up[name]
    errors = []
    for h in CORNER_STEPS:
        moved_counts = list(counts)
        moved_counts[i] = h
        numeric = (best_rps(problem, moved_counts, mode) - base) / h
        errors.append(abs(numeric - expected) / max(abs(expected), base))
    noise = [1e-14 / h for h in CORNER_STEPS]
    for k in range(1, len(errors)):
        assert errors[k] <= errors[k - 1] + noise[k], (name, errors)
    assert errors[-1] <= CORNER_RTOL, (name, errors)
    assert forms.elasticities_up[name] == 0.0
    return "ok (corner)"


def label(report):
    """The regime, the PrfaaS term where it binds, and the offloaded share's end."""
    forms = report.closed_forms
    parts = [forms.regime]
    if forms.regime in ("balance", "prfaas_only"):
        parts.append(str(forms.prfaas_term))
    if forms.offloaded != "some":
        parts.append(f"{'everything' if forms.offloaded == 'all' else 'nothing'} offloaded")
    if report.problem.system.decode.context_sides is None:
        parts.append("no context column")
    return ", ".join(parts)


def cases(seed, per_family):
    rng = np.random.default_rng(seed)
    out = []
    for family in FAMILIES:
        for _ in range(per_family):
            doc, mode = random_scenario(rng, family)
            out.append(Case(doc, mode, "flat" if family == "decode_flat" else "context", family))
    return out


# the regime each family aims at, as `label` names it: every regime explain distinguishes
TARGETS = {
    "balance": "balance, prfaas_compute",
    "link": "balance, prfaas_link",
    "prfaas_only": "prfaas_only, prfaas_compute, everything offloaded",
    "link_only": "prfaas_only, prfaas_link, everything offloaded",
    "pd_only": "pd_prefill_only, nothing offloaded",
    "decode": "decode",
    "decode_all": "decode, everything offloaded",
    "decode_flat": "decode, everything offloaded, no context column",
    "decode_pd_only": "decode, nothing offloaded",
}
REGIMES = set(TARGETS.values())


def one_per_regime(seed, catalogs, tries=20):
    """Per family, the first random scenario that lands in the family's regime (explain's
    label, which the plan's own bounds and threshold decide): every regime, one each."""
    rng = np.random.default_rng(seed)
    out = []
    for family, target in TARGETS.items():
        catalog = "flat" if family == "decode_flat" else "context"
        for _ in range(tries):
            doc, mode = random_scenario(rng, family)
            if label(explain(build(doc, catalogs[catalog]), mode)) == target:
                out.append(Case(doc, mode, catalog, family))
                break
        else:
            raise AssertionError(f"no {family} scenario in {tries} draws lands in {target!r}")
    return out


def run_cases(selected, catalogs):
    seen, skipped, compared = set(), [], 0
    for case in selected:
        regime, outcome = check_case(case, catalogs)
        seen.add(regime)
        compared += sum(v.startswith("ok") for v in outcome.values())
        skipped += [(case.family, n, v) for n, v in outcome.items() if not v.startswith("ok")]
    return seen, skipped, compared


@pytest.mark.slow
def test_every_regime_on_one_scenario_each(catalogs):
    """The fast subset: one random scenario in each regime, every derivative compared."""
    seen, skipped, compared = run_cases(one_per_regime(seed=20, catalogs=catalogs), catalogs)
    assert seen == REGIMES
    assert not skipped
    assert compared == 7 * len(FAMILIES)


@pytest.mark.slow
def test_random_scenarios_in_every_regime(catalogs):
    """Seven random scenarios per family (63): every derivative compared, every regime hit."""
    seen, skipped, compared = run_cases(cases(seed=2026, per_family=7), catalogs)
    assert seen >= REGIMES, (REGIMES - seen, seen)
    # an input is skipped only where BS_max steps (or the table kinks) within ±h of C
    assert len(skipped) <= 0.02 * 7 * 7 * len(FAMILIES), skipped
    assert compared + len(skipped) == 7 * 7 * len(FAMILIES)


# --- where Λ_max is not differentiable: one-sided derivatives against one-sided differences ----

H_ONE_SIDED = 1e-6  # one-sided differences err by O(h): 1e-6 of Λ''/Λ', far below RTOL_ONE_SIDED
RTOL_ONE_SIDED = 1e-4


def one_sided(case_doc, problem, counts, mode, name, sign):
    """(Λ(θ (1 + sign h)) − Λ(θ)) / (sign h θ): the plan's split held, t re-maximised."""
    base = best_rps(problem, counts, mode)
    factor = 1 + sign * H_ONE_SIDED
    if name in COUNTS:
        i = COUNTS.index(name)
        theta = counts[i]
        moved_counts = list(counts)
        moved_counts[i] = theta * factor
        other = best_rps(problem, moved_counts, mode)
    else:
        other_problem = build(moved(case_doc, name, factor), CachedCatalog.open())
        other = best_rps(other_problem, counts, mode)
        theta = explain(problem, mode).closed_forms.input_values[name]
    return (other - base) / (sign * H_ONE_SIDED * theta)


def test_decode_and_the_link_binding_together_give_one_sided_derivatives():
    """Everything offloaded (one PD instance decodes), the link exactly as narrow as makes
    Λ = B_out / S_kv(E[L]) equal decode: Λ = min(link, decode) has a kink. θ up moves it by the
    lesser branch's derivative, θ down by the greater: B_out up buys nothing (decode binds), B_out
    down costs 1 / S_kv per byte/s; N_d the other way round; μ, σ, L_out move both branches."""
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["prfaas_cluster"]["instances"], doc["pd_cluster"]["instances"] = 12, 1
    doc["workload"]["input_tokens"]["mu_log"] = 9.7  # away from BS_max's step at the case's C
    probe = build(doc, CachedCatalog.open())
    report = explain(probe, Mode.PAPER)
    tie_bytes_per_s = report.plan.throughput.pd_decode_rps * report.kv_cache_long_bytes
    doc["link"]["bandwidth_gbps"] = tie_bytes_per_s / 1.25e8  # bytes/s -> Gbps
    problem = build(doc, CachedCatalog.open())
    report = explain(problem, Mode.PAPER)
    forms, c = report.closed_forms, report.plan.configuration
    assert forms.regime == "prfaas_only = decode" and forms.offloaded == "all"
    counts = [
        float(c.prfaas_instances),
        float(c.pd_prefill_instances),
        float(c.pd_decode_instances),
    ]
    one_sided_inputs = 0
    for name in NAMES:
        if name == "pd_prefill_instances":  # 0: the corner, from above only
            continue
        up = one_sided(doc, problem, counts, Mode.PAPER, name, +1)
        down = one_sided(doc, problem, counts, Mode.PAPER, name, -1)
        assert forms.derivatives_up[name] == pytest.approx(up, rel=RTOL_ONE_SIDED, abs=1e-12)
        assert forms.derivatives_down[name] == pytest.approx(down, rel=RTOL_ONE_SIDED, abs=1e-12)
        one_sided_inputs += not forms.differentiable(name)
        assert math.isnan(forms.elasticities[name]) != forms.differentiable(name)
    assert forms.derivatives_up["link_bandwidth"] == 0.0
    assert forms.derivatives_down["link_bandwidth"] == pytest.approx(1 / report.kv_cache_long_bytes)
    assert one_sided_inputs == 5  # B_out, N_d, μ, σ, L_out (N_prfaas moves neither branch)
    assert "bind together" in forms.notes[0]


def test_bs_max_stepping_right_at_the_decode_context_is_a_one_sided_jump():
    """The case study's decode table is calibrated so that BS_max = 20 holds exactly at its mean
    decode context: with decode binding (4 PrfaaS instances, one PD instance), a longer context
    drops a batch slot and Λ jumps down (by 0.07% only: T_decode falls with the batch too, so
    19 / T(19) is close to 20 / T(20)), a shorter one follows T_decode's slope."""
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["pd_cluster"]["instances"] = 1
    problem = build(doc, CachedCatalog.open())
    report = explain(problem, Mode.PAPER)
    forms, c = report.closed_forms, report.plan.configuration
    assert forms.regime == "decode" and problem.system.decode.batch_size == 20
    counts = [
        float(c.prfaas_instances),
        float(c.pd_prefill_instances),
        float(c.pd_decode_instances),
    ]
    lam = report.plan.system_throughput_rps
    for name in ("mu_log", "sigma_log", "output_tokens"):
        assert forms.derivatives_up[name] == -math.inf and math.isnan(forms.elasticities[name])
        down = one_sided(doc, problem, counts, Mode.PAPER, name, -1)
        assert forms.derivatives_down[name] == pytest.approx(down, rel=RTOL_ONE_SIDED)
        longer = build(moved(doc, name, 1 + H_ONE_SIDED), CachedCatalog.open())
        assert longer.system.decode.batch_size == 19
        # a jump: Λ falls by far more than the finite slope would over the step
        jump = lam - best_rps(longer, counts, Mode.PAPER)
        assert jump > 100 * abs(down) * H_ONE_SIDED * forms.input_values[name]
    assert any("BS_max steps right at the mean decode context" in n for n in forms.notes)
