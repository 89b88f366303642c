"""The analytic TTFT-under-load model (analytic/loaded_ttft.py) against closed forms, the simulator and
brute force.

Oracles: Erlang C by its textbook formula (and in log space for many servers); M/M/c and
M/D/1 mean waits in closed form; the unloaded TTFT of ttft.py as the load vanishes; the
discrete-event simulator (simulate.py) at 50%, 80% and 95% of the exact-mode Λ_max; an
exhaustive search with the public functions for the constrained optimiser. Tolerances are
stated, and derived from measurements, where they are used.
"""

import dataclasses
import math

import numpy as np
import pytest

from prfaas_plan.analytic.capacity import Bound, Configuration, evaluate
from prfaas_plan.analytic.distributions import Histogram, ObservedLengths
from prfaas_plan.analytic.loaded_ttft import loaded_ttft
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.queueing import erlang_c, mgc_mean_wait
from prfaas_plan.analytic.ttft import unloaded_ttft
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, InfeasibleError
from prfaas_plan.sim.arrivals import poisson_arrivals
from prfaas_plan.sim.engine import simulate
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.solve.ttft_target import optimize_with_ttft
from tests.project.test_layering import NOT_IN_PURE, loaded_after

# --- queueing formulas ----------------------------------------------------------------------


def erlang_c_textbook(c: int, a: float) -> float:
    """C(c, a) = [a^c / c! · c / (c − a)] / [sum_{k<c} a^k / k! + a^c / c! · c / (c − a)]."""
    tail = a**c / math.factorial(c) * c / (c - a)
    return tail / (sum(a**k / math.factorial(k) for k in range(c)) + tail)


def erlang_c_log_space(c: int, a: float) -> float:
    """The same formula with every term as exp(log term − log max term): no overflow."""
    logs = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)]
    log_tail = c * math.log(a) - math.lgamma(c + 1) + math.log(c / (c - a))
    top = max([*logs, log_tail])
    head = sum(math.exp(v - top) for v in logs)
    tail = math.exp(log_tail - top)
    return tail / (head + tail)


def test_erlang_c_known_values():
    # M/M/1: P(wait) = ρ; two servers at a = 1: (1/2 · 2) / (1 + 1 + 1) = 1/3 by hand
    assert erlang_c(1, 0.7) == pytest.approx(0.7, rel=1e-14)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3, rel=1e-14)
    # the classic call-centre table entry: 10 agents, 8 Erlangs -> 0.409
    assert erlang_c(10, 8.0) == pytest.approx(0.4092, abs=5e-5)
    for c, a in [(3, 2.4), (4, 3.9), (8, 7.2), (20, 1.0), (30, 29.5)]:
        assert erlang_c(c, a) == pytest.approx(erlang_c_textbook(c, a), rel=1e-12)


def test_erlang_c_is_stable_for_many_servers_and_vectorised():
    # 500 servers: a^c / c! overflows a float (490^500), the recursion does not
    for c, a in [(200, 150.0), (500, 490.0), (1000, 999.0)]:
        assert erlang_c(c, a) == pytest.approx(erlang_c_log_space(c, a), rel=1e-10)
    got = erlang_c(np.array([1, 2, 10, 3, 3, 0, 0]), np.array([0.7, 1.0, 8.0, 0.0, 3.0, 0.0, 1.0]))
    np.testing.assert_allclose(got, [0.7, 1 / 3, erlang_c(10, 8.0), 0.0, 1.0, 0.0, 1.0])
    with pytest.raises(ConfigError, match="whole numbers"):
        erlang_c(2.5, 1.0)


@pytest.mark.parametrize("servers, load", [(1, 0.5), (3, 0.8), (8, 0.95), (100, 0.9)])
def test_mmc_mean_wait_is_exact(servers, load):
    """Exponential service (C_s² = 1): Allen–Cunneen is the M/M/c formula Wq = C / (cμ − λ)."""
    mu = 1 / 2.5
    lam = load * servers * mu
    want = erlang_c_log_space(servers, lam / mu) / (servers * mu - lam)
    assert mgc_mean_wait(servers, lam, 1 / mu, 1.0) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("load", [0.1, 0.5, 0.9, 0.99])
def test_single_server_is_pollaczek_khinchine(load):
    """c = 1: Wq = λ E[S²] / (2 (1 − ρ)); deterministic service (M/D/1) is half the M/M/1 wait,
    and any C_s² follows through E[S²] = (1 + C_s²) E[S]²."""
    service_s = 1.8
    lam = load / service_s
    assert mgc_mean_wait(1, lam, service_s, 0.0) == pytest.approx(
        lam * service_s**2 / (2 * (1 - load)), rel=1e-12
    )
    for scv in (0.3, 2.0):
        second = (1 + scv) * service_s**2
        assert mgc_mean_wait(1, lam, service_s, scv) == pytest.approx(
            lam * second / (2 * (1 - load)), rel=1e-12
        )


def test_overloaded_and_idle_queues():
    assert mgc_mean_wait(3, 3 / 2.0, 2.0, 0.5) == math.inf  # ρ = 1
    assert mgc_mean_wait(3, 5.0, 2.0, 0.5) == math.inf
    assert mgc_mean_wait(3, 0.0, 2.0, 0.5) == 0.0
    assert mgc_mean_wait(0, 1.0, 2.0, 0.5) == math.inf  # requests but no server
    np.testing.assert_array_equal(
        mgc_mean_wait(np.array([1, 2]), np.array([0.0, 10.0]), 1.0, 1.0), [0.0, math.inf]
    )


# --- moments ----------------------------------------------------------------------------------


def test_higher_partial_moments_extend_the_default_orders():
    """Orders 0-2 of partial_moments(..., max_order=4) equal the default ones; orders 3-4 match direct integration: a
    fine quadrature in ln L for the log-normal, exact sums for observed lengths, the
    polynomial integral by hand for a one-bin histogram."""
    a = np.array([-np.inf, 128.0, 5000.0, 19_658.0, 200_000.0])
    b = np.array([np.inf, 19_658.0, 60_000.0, np.inf, np.inf])
    lognormal = TruncatedLogNormal(9.9, 1.0, 128.0, 131_072.0)
    observed = ObservedLengths(np.random.default_rng(0).integers(100, 100_000, 5000))
    histogram = Histogram((100.0, 1000.0, 8000.0, 60_000.0), (1.0, 3.0, 2.0))
    for d in (lognormal, observed, histogram):
        m = d.partial_moments(a, b, max_order=4)
        assert m.shape == (5, a.size)
        np.testing.assert_allclose(m[:3], d.partial_moments(a, b), rtol=1e-12, atol=1e-300)
    # log-normal: integrate x^k f(x) over ln x with a 400K-point trapezoid on [ln 5000, ln 6e4]
    y = np.linspace(math.log(5000.0), math.log(60_000.0), 400_001)
    density = np.exp(-0.5 * ((y - 9.9) / 1.0) ** 2) / math.sqrt(2 * math.pi)
    norm = lognormal.untruncated_mass
    m = lognormal.partial_moments(5000.0, 60_000.0, max_order=4)
    for k in (3, 4):
        assert m[k] == pytest.approx(np.trapezoid(np.exp(k * y) * density, y) / norm, rel=1e-9)
    x = observed.lengths_tokens
    inside = x[(x > 5000) & (x <= 60_000)]
    m = observed.partial_moments(5000.0, 60_000.0, max_order=4)
    assert m[4] == pytest.approx((inside**4).sum() / x.size, rel=1e-12)
    one_bin = Histogram((0.0, 10.0), (1.0,))
    assert one_bin.partial_moments(2.0, 4.0, max_order=4)[4] == pytest.approx(
        (4**5 - 2**5) / 5 / 10, rel=1e-14
    )


# --- the case study ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exact_plan(case_problem):
    space = SearchSpace(case_problem.prfaas_instances, case_problem.pd_instances)
    return optimize_fixed_hardware(case_problem.system, case_problem.workload, space, Mode.EXACT)


def test_zero_and_vanishing_load_give_the_unloaded_ttft(case_problem, exact_plan):
    s, w = case_problem.system, case_problem.workload
    c = exact_plan.configuration
    unloaded = unloaded_ttft(s, w, c.threshold_tokens)
    fields = ("mean_s", "p50_s", "p90_s", "p99_s", "local_mean_s", "offloaded_mean_s")
    at_zero = loaded_ttft(s, w, c, 0.0)
    for name in fields:
        assert getattr(at_zero, name) == pytest.approx(getattr(unloaded, name), rel=1e-9)
    assert at_zero.unloaded == unloaded
    # one request every ~3 days: waits of order ρ^c and a link slowdown of 1 + 1e-7
    tiny = loaded_ttft(s, w, c, 1e-6 * exact_plan.system_throughput_rps)
    for name in fields:
        assert getattr(tiny, name) == pytest.approx(getattr(unloaded, name), rel=1e-6)
    # TTFT only grows with load
    figures = [
        loaded_ttft(s, w, c, f * exact_plan.system_throughput_rps)
        for f in (0.0, 0.3, 0.6, 0.9, 0.99)
    ]
    for name in fields:
        values = [getattr(r, name) for r in figures]
        assert values == sorted(values)


def test_link_latency_adds_to_offloaded_requests_only(case_problem, exact_plan):
    s, w = case_problem.system, case_problem.workload
    rate = 0.8 * exact_plan.system_throughput_rps
    base = loaded_ttft(s, w, exact_plan.configuration, rate)
    late = loaded_ttft(s, w, exact_plan.configuration, rate, link_latency_s=0.05)
    assert late.offloaded_mean_s - base.offloaded_mean_s == pytest.approx(0.05, rel=1e-9)
    assert late.local_mean_s == base.local_mean_s
    assert late.mean_s - base.mean_s == pytest.approx(0.05 * base.offload_fraction, rel=1e-9)
    assert late.link.mean_transfer_s - base.link.mean_transfer_s == pytest.approx(0.05)


def test_utilisations_are_the_capacity_model(case_problem, exact_plan):
    """ρ of each part is λ over its exact-mode capacity term, so the binding pool reaches 1
    exactly at Λ_max; at and above it the result says unstable, with inf TTFT."""
    s, w = case_problem.system, case_problem.workload
    plan = exact_plan
    rate = 0.8 * plan.system_throughput_rps
    r = loaded_ttft(s, w, plan.configuration, rate)
    p = plan.offload_fraction
    assert r.stable and r.overloaded == ()
    assert r.prfaas_prefill.utilization == pytest.approx(rate * p / plan.throughput.prfaas_rps)
    assert r.pd_prefill.utilization == pytest.approx(
        rate * (1 - p) / plan.throughput.pd_prefill_rps
    )
    assert r.link.utilization == pytest.approx(rate * p / plan.throughput.prfaas_link_rps)
    assert r.pd_decode.utilization == pytest.approx(rate / plan.throughput.pd_decode_rps)
    assert r.prfaas_prefill.mean_service_s == pytest.approx(plan.prfaas_service_time_s)
    # at Λ_max the plan's binding terms (PrfaaS compute and PD-P, balanced) agree to rounding:
    # whichever is the lower by a last bit reaches ρ = 1; 20% above it, both are overloaded
    assert set(plan.bounds) == {Bound.PRFAAS_COMPUTE, Bound.PD_PREFILL}
    for load in (1.0, 1.2):
        over = loaded_ttft(s, w, plan.configuration, load * plan.system_throughput_rps)
        assert not over.stable
        assert over.overloaded and set(over.overloaded) <= set(plan.bounds)
        assert (over.mean_s, over.p90_s, over.p99_s) == (math.inf,) * 3
    assert set(over.overloaded) == set(plan.bounds)
    assert over.prfaas_prefill.mean_wait_s == math.inf
    # too few decode instances: decode is what overflows, and it is named
    few = dataclasses.replace(plan.configuration, pd_prefill_instances=6, pd_decode_instances=2)
    decode_bound = loaded_ttft(s, w, few, 0.9 * plan.system_throughput_rps)
    assert decode_bound.overloaded == (Bound.PD_DECODE,)
    assert decode_bound.p90_s == math.inf


def test_bad_arguments(case_problem, exact_plan):
    s, w = case_problem.system, case_problem.workload
    space = SearchSpace(case_problem.prfaas_instances, case_problem.pd_instances)
    with pytest.raises(ConfigError, match="arrival rate"):
        loaded_ttft(s, w, exact_plan.configuration, -1.0)
    with pytest.raises(ConfigError, match="link latency"):
        loaded_ttft(s, w, exact_plan.configuration, 1.0, link_latency_s=math.nan)
    with pytest.raises(ConfigError, match="one of 'mean', 50, 90, 99"):
        optimize_with_ttft(s, w, space, arrival_rate_rps=1.0, ttft_target_s=5, ttft_percentile=95)
    with pytest.raises(ConfigError, match="TTFT target"):
        optimize_with_ttft(s, w, space, arrival_rate_rps=1.0, ttft_target_s=0.0)


# --- against the simulator --------------------------------------------------------------------


def simulated(problem, plan, load, count, seed):
    """Poisson arrivals at `load` × Λ_max with stratified lengths (so the sample's service
    times match the model's, removing that noise), the first 5% of the time as warm-up."""
    rng = np.random.default_rng(seed)
    arrival = poisson_arrivals(load * plan.system_throughput_rps, rng=rng, count=count)
    lengths = problem.workload.sample(rng, count, stratified=True)
    return simulate(
        problem.system, plan.configuration, arrival, lengths, warmup_s=0.05 * arrival[-1]
    )


def window_ttft(result) -> np.ndarray:
    tl = result.timeline
    arrived = (tl.arrival_s >= result.warmup_s) & (tl.arrival_s <= result.horizon_s)
    return tl.ttft_s[arrived]


# Relative tolerances for (mean, P50, P90, P99) of analytic / simulated − 1, per load. Measured
# first, over 12 independent runs of 200K requests (seeds 100-111, not the seeds below):
#   load  analytic mean/P90   simulated mean/P90 (avg of 12)  bias mean/P90   sd of one run
#   0.50  2.391 / 3.916 s     2.405 / 3.943 s                 -0.6% / -0.7%   0.1% / 0.2%
#   0.80  3.410 / 6.238 s     3.447 / 6.255 s                 -1.1% / -0.3%   0.7% / 0.9%
#   0.95  9.028 / 18.96 s     9.219 / 19.38 s                 -2.1% / -2.2%   4.2% / 4.5%
# The model is slightly optimistic (Allen–Cunneen's waits are 5-10% low for these pools,
# whose service is less variable than exponential) and the simulated figure of one run
# scatters more as the load nears 1 (long busy periods). Each tolerance is about the bias plus
# three (at 50%: five) standard deviations of the simulated estimate used (at 95%, three
# runs pooled).
SIMULATOR_TOLERANCES = {
    0.5: (0.02, 0.02, 0.02, 0.03),
    0.8: (0.04, 0.05, 0.04, 0.08),
    0.95: (0.10, 0.10, 0.10, 0.20),
}


@pytest.mark.parametrize("load", sorted(SIMULATOR_TOLERANCES))
@pytest.mark.slow
def test_loaded_ttft_matches_the_simulator(case_problem, exact_plan, load):
    """The case-study plan (exact mode, t ≈ 19.66K, 4/3/5) at 50%, 80% and 95% of Λ_max:
    200K requests per run (one run, three at 95%)."""
    s, w = case_problem.system, case_problem.workload
    rate = load * exact_plan.system_throughput_rps
    model = loaded_ttft(s, w, exact_plan.configuration, rate)
    runs = [
        simulated(case_problem, exact_plan, load, 200_000, seed)
        for seed in range(1 + 2 * (load > 0.9))
    ]
    ttft = np.concatenate([window_ttft(r) for r in runs])
    sim = (ttft.mean(), *np.percentile(ttft, [50, 90, 99]))
    ours = (model.mean_s, model.p50_s, model.p90_s, model.p99_s)
    errors = [a / b - 1 for a, b in zip(ours, sim, strict=True)]
    print(
        f"load {load}: analytic {np.round(ours, 3)}, simulated {np.round(sim, 3)}, {np.round(errors, 4)}"
    )
    for error, tolerance in zip(errors, SIMULATOR_TOLERANCES[load], strict=True):
        assert abs(error) <= tolerance
    if load == 0.8:
        # per pool: Erlang C is the share of requests that wait (binomial sd ~0.002 here);
        # Allen–Cunneen's mean wait is 3-8% low on these pools (measured over 12 runs)
        r = runs[0]
        tl = r.timeline
        waited = tl.prefill_start_s > tl.prefill_ready_s
        for pool, ours_pool, route in (
            (r.prfaas_prefill, model.prfaas_prefill, tl.offloaded),
            (r.pd_prefill, model.pd_prefill, ~tl.offloaded),
        ):
            assert waited[route].mean() == pytest.approx(ours_pool.wait_probability, abs=0.01)
            assert pool.utilization == pytest.approx(ours_pool.utilization, rel=0.01)
            assert ours_pool.mean_wait_s == pytest.approx(pool.wait.mean_s, rel=0.12)


@pytest.mark.slow
def test_processor_sharing_link_is_conservative_when_busy(case_problem, exact_plan):
    """The case study's link runs at ρ <= 0.12, where sharing barely matters. With the link cut
    to 1.75 GB/s (ρ_link 0.44 at 50% load, 0.70 at 80%) M/G/1-PS overstates the mean transfer
    time: its arrivals are the departures of the 4-server PrfaaS pool, smoother than Poisson.
    Measured over 8 runs of 100K requests (seeds 20-27): transfer mean +7% at ρ_link 0.44,
    +45% at 0.70; TTFT mean +0.7% and +6%, P90 +0.5% and +7% (one run's sd: 0.3% at 50%,
    2% at 80%; range over the runs at 80%: +4% to +11%). So here the predicted TTFT is an
    upper bound, close while the link is not the busiest part. Tolerances: measured value
    plus about three sd, and at most 2% (50%) or 1% (80%) below the simulation."""
    s = dataclasses.replace(case_problem.system, link_bandwidth_bytes_per_s=1.75e9)
    narrow = dataclasses.replace(case_problem, system=s)
    for load, above, transfer in ((0.5, 0.02, (1.0, 1.15)), (0.8, 0.13, (1.3, 1.6))):
        rate = load * exact_plan.system_throughput_rps
        model = loaded_ttft(s, case_problem.workload, exact_plan.configuration, rate)
        r = simulated(narrow, exact_plan, load, 100_000, seed=7)
        ratio = model.link.mean_transfer_s / r.link.transfer.mean_s
        assert transfer[0] < ratio < transfer[1]
        assert model.link.utilization == pytest.approx(r.link.utilization, rel=0.02)
        below = 0.02 if load < 0.6 else 0.01
        for ours, simulated_s in ((model.mean_s, r.ttft.mean_s), (model.p90_s, r.ttft.p90_s)):
            assert simulated_s * (1 - below) <= ours <= simulated_s * (1 + above)


# --- the constrained optimiser ----------------------------------------------------------------


@pytest.mark.slow
def test_a_loose_target_gives_the_unconstrained_optimum(case_problem):
    s, w = case_problem.system, case_problem.workload
    space = SearchSpace(case_problem.prfaas_instances, case_problem.pd_instances)
    for mode in Mode:
        free = optimize_fixed_hardware(s, w, space, mode)
        rate = 0.5 * free.system_throughput_rps
        for metric in ("mean", 90):
            plan, ttft = optimize_with_ttft(
                s,
                w,
                space,
                arrival_rate_rps=rate,
                ttft_target_s=1e3,
                ttft_percentile=metric,
                mode=mode,
            )
            c, want = plan.configuration, free.configuration
            assert (c.pd_prefill_instances, c.pd_decode_instances) == (
                want.pd_prefill_instances,
                want.pd_decode_instances,
            )
            assert c.threshold_tokens == pytest.approx(want.threshold_tokens, rel=1e-8)
            assert plan.system_throughput_rps == pytest.approx(
                free.system_throughput_rps, rel=1e-10
            )
            assert plan.mode is mode
            assert ttft == loaded_ttft(s, w, c, rate)


@pytest.fixture(scope="module")
def small(case_problem):
    """2 PrfaaS + 5 PD instances on the case-study hardware, a 256-cell mesh (cheaper
    percentiles), at 80% of its unconstrained exact-mode Λ_max, and every plan of a
    300-point geometric threshold grid × 5 splits evaluated by the public functions."""
    s = case_problem.system
    w = dataclasses.replace(case_problem.workload, mesh_cells=256)
    space = SearchSpace(2, 5)
    rate = 0.8 * optimize_fixed_hardware(s, w, space, Mode.EXACT).system_throughput_rps
    plans = []
    for n_p in range(space.pd_instances):
        for t in np.geomspace(2000.0, 120_000.0, 300):
            configuration = Configuration(2, n_p, space.pd_instances - n_p, float(t))
            ttft = loaded_ttft(s, w, configuration, rate)
            capacity = evaluate(s, w, configuration, Mode.EXACT).system_throughput_rps
            plans.append((capacity, ttft.p90_s, ttft.mean_s, configuration))
    return s, w, space, rate, plans


@pytest.mark.parametrize(
    "metric, target_s",
    # P90 at the unconstrained plan is 9.51 s: above 9.51 it is the optimum; 9.3-9.5 keep its
    # split at a threshold below the peak (a feasible band ~1K tokens wide, narrower than the
    # optimiser's grid cell); below ~9.25 only a decode-bound split (Λ = 1.5625) qualifies
    [(90, 9.6), (90, 9.45), (90, 9.4), (90, 9.3), (90, 8.0), ("mean", 4.6), ("mean", 3.8)],
)
@pytest.mark.slow
def test_constrained_optimum_against_brute_force(small, metric, target_s):
    """The optimiser's plan meets the target and is at least as good as every feasible plan
    of the brute-force grid; it is better by at most the grid's resolution (0.5%: a
    threshold step of 1.4% moves Λ by less than that near the optimum)."""
    s, w, space, rate, plans = small
    column = 1 if metric == 90 else 2
    feasible = [p for p in plans if p[column] <= target_s]
    brute = max(p[0] for p in feasible)
    plan, ttft = optimize_with_ttft(
        s, w, space, arrival_rate_rps=rate, ttft_target_s=target_s, ttft_percentile=metric
    )
    assert ttft.metric(metric) <= target_s * (1 + 1e-9)
    assert plan.system_throughput_rps >= brute * (1 - 1e-12)
    assert plan.system_throughput_rps <= brute * 1.005


@pytest.mark.slow
def test_infeasible_targets_name_what_binds(small, case_problem):
    s, w, space, rate, plans = small
    lowest_p90 = min(p[1] for p in plans)  # 6.58 s on the brute-force grid
    # queueing binds: every plan's P90 is above 6 s at this load, mostly from waiting
    with pytest.raises(InfeasibleError, match=r"P90 TTFT <= 6 s at .*lowest found is (\S+) s") as e:
        optimize_with_ttft(s, w, space, arrival_rate_rps=rate, ttft_target_s=6.0)
    message = str(e.value)
    assert "bound by PrfaaS queueing" in message and "\n" not in message
    found = float(message.split("lowest found is ")[1].split(" s")[0])
    assert found == pytest.approx(lowest_p90, rel=0.01)
    # a target below the prefill time itself, whatever the load
    with pytest.raises(InfeasibleError, match="bound by prefill time itself"):
        optimize_with_ttft(s, w, space, arrival_rate_rps=rate, ttft_target_s=2.0)
    with pytest.raises(InfeasibleError, match=r"mean TTFT <= 1 s.*prefill time itself"):
        optimize_with_ttft(
            s, w, space, arrival_rate_rps=rate, ttft_target_s=1.0, ttft_percentile="mean"
        )
    # more traffic than any plan carries
    with pytest.raises(
        InfeasibleError, match=r"overloaded, the highest capacity is 1.71 req/s.*bound by .*prefill"
    ):
        optimize_with_ttft(s, w, space, arrival_rate_rps=3.0, ttft_target_s=100.0)


def test_other_search_spaces_and_distributions(case_problem):
    """A fixed threshold searches the split only; no PrfaaS instance means t = inf; observed
    lengths (piecewise-constant Λ) reach the same Λ_max as optimize_fixed_hardware, which
    tries every distinct length."""
    s, w = case_problem.system, case_problem.workload
    fixed = SearchSpace(4, 8, threshold_tokens=30_000.0)
    plan, _ = optimize_with_ttft(s, w, fixed, arrival_rate_rps=2.0, ttft_target_s=20.0)
    assert plan.configuration == optimize_fixed_hardware(s, w, fixed, Mode.EXACT).configuration
    homogeneous = SearchSpace(0, 12)
    plan, ttft = optimize_with_ttft(s, w, homogeneous, arrival_rate_rps=1.5, ttft_target_s=20.0)
    assert (
        plan.configuration == optimize_fixed_hardware(s, w, homogeneous, Mode.EXACT).configuration
    )
    assert ttft.offload_fraction == 0.0 and math.isnan(ttft.offloaded_mean_s)
    assert ttft.prfaas_prefill.utilization == 0.0 and ttft.link.utilization == 0.0
    observed = ObservedLengths(np.round(w.sample(np.random.default_rng(1), 3000)))
    space = SearchSpace(4, 8)
    for mode in Mode:
        free = optimize_fixed_hardware(s, observed, space, mode)
        plan, _ = optimize_with_ttft(
            s,
            observed,
            space,
            arrival_rate_rps=0.5 * free.system_throughput_rps,
            ttft_target_s=1e3,
            mode=mode,
        )
        assert plan.system_throughput_rps == pytest.approx(free.system_throughput_rps, rel=1e-12)
    at_zero = loaded_ttft(s, observed, free.configuration, 0.0)
    unloaded = unloaded_ttft(s, observed, free.configuration.threshold_tokens)
    for name in ("mean_s", "p50_s", "p90_s", "p99_s"):
        assert getattr(at_zero, name) == pytest.approx(getattr(unloaded, name), rel=1e-9)


def test_module_imports_no_solver_or_ui_library():
    loaded = loaded_after("import prfaas_plan.analytic.loaded_ttft")
    assert not loaded & NOT_IN_PURE


def test_case_study_target_that_binds(case_problem, exact_plan):
    """The full case study (8 splits × ~100 thresholds, refined), P90 target at 80% load.
    (Its speed is measured in benchmarks/bench_queueing.py, not asserted here.)"""
    s, w = case_problem.system, case_problem.workload
    space = SearchSpace(case_problem.prfaas_instances, case_problem.pd_instances)
    rate = 0.8 * exact_plan.system_throughput_rps
    plan, ttft = optimize_with_ttft(s, w, space, arrival_rate_rps=rate, ttft_target_s=6.0)
    assert ttft.p90_s <= 6.0 * (1 + 1e-9) and ttft.stable
    assert plan.system_throughput_rps < exact_plan.system_throughput_rps  # the target binds
