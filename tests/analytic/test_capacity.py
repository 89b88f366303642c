import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.capacity import (
    BOUND_ORDER,
    BOUND_TIE_RTOL,
    BOUND_TOLERANCE,
    Bound,
    Configuration,
    binding_terms,
    evaluate,
    evaluate_many,
    rates,
    row_modes,
)
from prfaas_plan.analytic.distributions import Histogram, ObservedLengths
from prfaas_plan.choices import Mode
from prfaas_plan.solve.threshold import SearchSpace, best_configurations
from tests.conftest import toy_system


def test_hand_computed_two_point_workload():
    """Two request lengths, 1,000 and 10,000 tokens, equally likely; t = 5,000."""
    system = toy_system(
        prfaas=(1.0, 1e-4),
        pd=(0.5, 2e-4),
        kv=(0.0, 1e4),
        batch=10,
        step_s=0.02,
        output_tokens=500,
        bandwidth_gbps=8.0,
    )
    workload = ObservedLengths(np.array([1000.0, 10000.0]))
    e = evaluate(system, workload, Configuration(2, 1, 3, 5000.0), Mode.PAPER)
    # p = 0.5, l_long = 10,000, l_short = 1,000
    assert e.offload_fraction == 0.5
    assert e.long_mean_tokens == 10000 and e.short_mean_tokens == 1000
    t_prfaas = 1.0 + 1e-4 * 10000  # 2 s
    t_pd = 0.5 + 2e-4 * 1000  # 0.7 s
    link = 1e9 / (1e4 * 10000)  # 8 Gbps = 1e9 B/s over 1e8 B -> 10 req/s
    decode = 3 * 10 / (0.02 * 500)  # 3 req/s
    assert e.throughput.prfaas_rps == pytest.approx(min(2 / t_prfaas, link))
    assert e.throughput.pd_prefill_rps == pytest.approx(1 / t_pd)
    assert e.throughput.pd_decode_rps == pytest.approx(decode)
    want = min(2 / t_prfaas / 0.5, (1 / t_pd) / 0.5, decode)
    assert e.system_throughput_rps == pytest.approx(want)
    assert e.bounds[0] is Bound.PRFAAS_COMPUTE
    assert e.kv_egress_bytes_per_s == pytest.approx(want * 0.5 * 1e8)
    assert e.link_utilization == pytest.approx(want * 0.5 * 1e8 / 1e9)


def test_link_bound_binds_when_link_is_narrow():
    system = toy_system(kv=(0.0, 1e5), bandwidth_gbps=0.1)
    workload = ObservedLengths(np.array([1000.0, 50000.0]))
    e = evaluate(system, workload, Configuration(10, 5, 5, 2000.0), Mode.PAPER)
    assert e.bounds[0] is Bound.PRFAAS_LINK
    assert e.link_utilization == pytest.approx(1.0)


def test_exact_equals_paper_for_affine_latency():
    """E[a + bL] = a + b E[L]: with affine curves the two modes must agree."""
    system = toy_system(prfaas=(0.5, 1e-5), pd=(0.6, 3e-5))
    workload = Histogram((100.0, 2000.0, 30000.0, 100000.0), (3.0, 2.0, 1.0))
    c = Configuration(2, 2, 4, 12000.0)
    paper, exact = (evaluate(system, workload, c, m) for m in Mode)
    assert exact.system_throughput_rps == pytest.approx(paper.system_throughput_rps, rel=1e-12)


def test_exact_service_time_is_longer_for_convex_latency(case_problem):
    """Jensen: E[T(L)] >= T(E[L]) for convex T, so exact mode never sees more capacity."""
    c = Configuration(4, 3, 5, 19400.0)
    paper = evaluate(case_problem.system, case_problem.workload, c, Mode.PAPER)
    exact = evaluate(case_problem.system, case_problem.workload, c, Mode.EXACT)
    assert exact.prfaas_service_time_s > paper.prfaas_service_time_s
    assert exact.pd_prefill_service_time_s > paper.pd_prefill_service_time_s
    # the link term is identical: S_kv is affine
    assert exact.throughput.prfaas_link_rps == pytest.approx(paper.throughput.prfaas_link_rps)


def test_edge_thresholds(case_problem):
    s, w = case_problem.system, case_problem.workload
    none = evaluate(s, w, Configuration(4, 3, 5, np.inf))
    assert none.offload_fraction == 0 and np.isnan(none.throughput.prfaas_rps)
    assert none.kv_egress_bytes_per_s == 0
    everything = evaluate(s, w, Configuration(4, 0, 8, 0.0))
    assert everything.offload_fraction == 1 and np.isnan(everything.throughput.pd_prefill_rps)
    nobody_prefills = evaluate(s, w, Configuration(0, 0, 8, 20000.0))
    assert nobody_prefills.system_throughput_rps == 0


counts = st.integers(0, 12)


@given(
    counts,
    counts,
    st.integers(1, 12),
    st.floats(0, 140000),
    st.sampled_from(list(Mode)),
    st.sampled_from(["prfaas", "pd_p", "pd_d"]),
)
@settings(max_examples=150, deadline=None)
def test_more_instances_never_lower_capacity(case_problem, n_pf, n_p, n_d, t, mode, role):
    s, w = case_problem.system, case_problem.workload
    base = Configuration(n_pf, n_p, n_d, t)
    more = Configuration(
        n_pf + (role == "prfaas"), n_p + (role == "pd_p"), n_d + (role == "pd_d"), t
    )
    assert (
        evaluate(s, w, more, mode).system_throughput_rps
        >= evaluate(s, w, base, mode).system_throughput_rps
    )


def test_binding_terms_tightest_first_and_last_bit_ties_in_bound_order():
    """Terms a rounding error apart are listed in BOUND_ORDER whichever comes out lower (it
    differs between machines), terms further apart than BOUND_TIE_RTOL tightest first, and
    terms beyond BOUND_TOLERANCE not at all."""
    lam = 3.013905378969247
    ulp_above = np.nextafter(np.nextafter(lam, np.inf), np.inf)
    # link a rounding error above PD-P, then below it: the same order both times
    for link, pd_prefill in ((ulp_above, lam), (lam, ulp_above)):
        limits = np.array([3.7, link, pd_prefill, 3.125])
        assert binding_terms(limits, float(limits.min())) == (
            Bound.PRFAAS_LINK,
            Bound.PD_PREFILL,
        )
    # 1e-7 apart (within BOUND_TOLERANCE, beyond BOUND_TIE_RTOL): the tighter first
    limits = np.array([3.7, lam * (1 + 1e-7), lam, 3.125])
    assert binding_terms(limits, lam) == (Bound.PD_PREFILL, Bound.PRFAAS_LINK)
    assert BOUND_TIE_RTOL < 1e-7 < BOUND_TOLERANCE
    # beyond BOUND_TOLERANCE: only the tightest binds; Λ_max inf: every term is inf
    assert binding_terms(np.array([3.7, lam * 1.01, lam, 3.125]), lam) == (Bound.PD_PREFILL,)
    assert binding_terms(np.full(4, np.inf), np.inf) == BOUND_ORDER


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6), st.integers(0, 6), st.integers(0, 6),
            st.one_of(st.floats(0.0, 2e5), st.just(np.inf)),
            st.sampled_from([1e6, 1e8, 1.25e10, 1e13]), st.booleans(),
        ),
        min_size=1, max_size=12,
    )
)  # fmt: skip
def test_evaluations_bind_the_terms_binding_terms_names(case_problem, deployments):
    """Each evaluation's binding terms are `binding_terms` of its four terms (evaluate_many
    finds a single binding term for all configurations at once: the same answer), on the
    balance points' near-ties and where terms are nan or inf (no PrfaaS, no PD prefill)."""
    system, workload = case_problem.system, case_problem.workload
    configurations = [Configuration(a, b, c, t) for a, b, c, t, _, _ in deployments]
    modes = [Mode.EXACT if exact else Mode.PAPER for *_, exact in deployments]
    links = [link for *_, link, _ in deployments]
    for mode in Mode:  # optima: two terms within BOUND_TOLERANCE at the balance point
        configurations += best_configurations(system, workload, SearchSpace(4, 8), (mode,))
        modes.append(mode)
        links.append(system.link_bandwidth_bytes_per_s)
    got = evaluate_many(system, workload, configurations, modes, links)
    r = rates(
        system, workload, np.array([c.threshold_tokens for c in configurations]),
        np.array([c.prfaas_instances for c in configurations], float),
        np.array([c.pd_prefill_instances for c in configurations], float),
        np.array([c.pd_decode_instances for c in configurations], float),
        row_modes(np.array([m is Mode.EXACT for m in modes])), np.array(links),
    )  # fmt: skip
    limits = np.broadcast_to(r.limits_rps, (4, len(configurations))).T
    for evaluation, terms in zip(got, limits, strict=True):
        assert evaluation.bounds == binding_terms(terms.tolist(), float(terms.min()))
