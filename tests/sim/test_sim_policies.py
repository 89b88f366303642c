"""Scheduler policies of the simulator: long-timescale role re-balancing (sim/rebalance.py), the
queue machinery it needs (servers added and removed over time, the link advanced in steps), and
the policy comparison (sim/compare.py) and the policy factory (sim/factory.py).

Oracles: the static policy (re-balancing that never converts must reproduce it bit for bit);
hand-computed schedules on a deterministic toy deployment (constant service times, one
request a second); invariants of a FIFO pool whose servers change (never more jobs in service
than servers, a waiting job starts exactly when a server frees or joins); request
conservation under random parameters.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.analytic.capacity import Configuration
from prfaas_plan.choices import Mode, RoutingPolicy
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace, poisson_arrivals
from prfaas_plan.sim.compare import POLICIES, SCENARIOS, compare_policies
from prfaas_plan.sim.engine import simulate
from prfaas_plan.sim.factory import POLICIES as FACTORY_POLICIES
from prfaas_plan.sim.factory import make_policy
from prfaas_plan.sim.queues import (
    BandwidthTrace,
    ElasticFifo,
    SharedLink,
    fifo_start_times,
    processor_sharing_finish_times,
)
from prfaas_plan.sim.rebalance import Role, RoleChange, RoleRebalancing, evaluate_splits
from prfaas_plan.sim.threshold_policies import AdaptiveThreshold, StaticThreshold
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from tests.conftest import toy_system

TIMELINE = (
    "offloaded",
    "threshold_tokens",
    "prefill_start_s",
    "prefill_end_s",
    "link_start_s",
    "link_finish_s",
    "transfer_end_s",
    "decode_start_s",
    "decode_end_s",
)


@pytest.fixture(scope="module")
def plan(case_problem):
    space = SearchSpace(case_problem.prfaas_instances, case_problem.pd_instances)
    return optimize_fixed_hardware(case_problem.system, case_problem.workload, space, Mode.EXACT)


def case_requests(problem, rate_rps, count, seed):
    rng = np.random.default_rng(seed)
    arrival = poisson_arrivals(rate_rps, rng=rng, count=count)
    return arrival, problem.workload.sample(rng, count)


def assert_same_schedule(a, b):
    for name in TIMELINE:
        np.testing.assert_array_equal(getattr(a.timeline, name), getattr(b.timeline, name), name)


def in_service(start_s, end_s, at_s) -> np.ndarray:
    """Jobs in service at each time of `at_s`."""
    start_s, end_s = start_s[:, None], end_s[:, None]
    return np.count_nonzero((start_s <= at_s) & (end_s > at_s), axis=0)


# --- queue machinery --------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(0, 10_000), st.floats(0.5, 50.0))
def test_elastic_fifo_without_changes_is_fifo_in_any_epochs(servers, seed, epoch_s):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0, 300))
    service = rng.exponential(servers * 0.9, 300)
    pool = ElasticFifo(servers, arrival.size)
    horizon, i = epoch_s, 0
    while i < arrival.size:
        while i < arrival.size and arrival[i] < horizon:
            pool.submit(arrival[i], service[i], i)
            i += 1
        pool.run_until(horizon)
        horizon += epoch_s
    pool.run_until(math.inf)
    assert pool.start_s == fifo_start_times(arrival, service, servers).tolist()
    assert pool.queued == 0 and pool.queued_work_s == 0.0


def test_elastic_fifo_servers_join_and_leave_by_hand():
    """One server, jobs of 2 s at t = 0, 0, 0, 0. At t = 1 a second server is added free from
    t = 3: job 0 runs [0, 2), job 1 [2, 4) on the first server, job 2 starts at 3 on the new
    one, job 3 at 4. Removing a server at t = 4.5 takes the one that frees first (job 2's, at
    5): it leaves at 5, after its job; the last job ends on the other at 6."""
    pool = ElasticFifo(1, 5)
    for i in range(4):
        pool.submit(0.0, 2.0, i)
    pool.run_until(1.0)  # job 1 would start at 2: it waits, a server may still be added
    assert pool.start_s[0] == 0.0 and math.isnan(pool.start_s[1]) and pool.queued == 3
    pool.add_servers(1, 3.0)
    pool.run_until(4.5)
    assert pool.start_s[:4] == [0.0, 2.0, 3.0, 4.0]
    pool.submit(4.5, 1.0, 4)
    assert pool.remove_servers(1, 4.5) == 5.0
    pool.run_until(math.inf)
    assert pool.start_s[4] == 6.0
    with pytest.raises(ValueError):
        pool.remove_servers(1, 7.0)  # the last server


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 30.0))
def test_link_advanced_in_steps_is_bit_for_bit_one_advance(seed, step_s):
    """The decision loop advances the link epoch by epoch; the schedule must not depend on
    where the epochs end (a bandwidth dip included)."""
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.exponential(1.0, 200))
    size = rng.exponential(1.5, 200)
    bandwidth = BandwidthTrace.dip(1.0, 40.0, 60.0, 0.2)
    whole = processor_sharing_finish_times(start, size, bandwidth)
    link = SharedLink(bandwidth, start.size, record_finished=True)
    horizon, i = step_s, 0
    while i < start.size:
        while i < start.size and start[i] < horizon:
            link.add(start[i], size[i], i)
            i += 1
        link.advance(horizon)
        assert link.moved_bytes <= bandwidth.transferable_bytes(0.0, horizon) + 1e-9
        horizon += step_s
    link.advance(math.inf)
    np.testing.assert_array_equal(link.finish_s, whole)
    assert sorted(link.finished) == list(range(start.size))
    assert link.moved_bytes == pytest.approx(size.sum(), rel=1e-9)


# --- the decision rule ------------------------------------------------------------------------


# lengths, PrfaaS work, PD-P work, KV bytes per request, total decode slot-work; then the pools
HAND_CASE_ARGS = ([3000.0, 1000.0, 4000.0, 2000.0], [1.0] * 4, [2.0] * 4, [10.0] * 4, 8.0)
HAND_CASE_KWARGS = dict(
    queued_prfaas_s=0.0, queued_pd_prefill_s=0.0, queued_decode_slot_s=0.0, period_s=10.0,
    link_capacity_bytes=100.0, prfaas_instances=1, pd_instances=4, decode_slots_per_instance=1,
    prefill_instances=[1, 2, 3], current_prefill_instances=1, current_threshold_tokens=3500.0,
)  # fmt: skip


def test_split_evaluation_by_hand():
    """Period 10 s, 4 requests of 1, 2, 3, 4 K tokens; PrfaaS work 1 s each (1 instance), PD
    work 2 s each, KV 10 bytes each on a link that could move 100; decode work 8 slot-s in
    all, 1 slot per instance, 4 PD instances. Keeping the k shortest local:
    ρ_prfaas = (4 − k) / 10, ρ_link = 10 (4 − k) / 100, ρ_pd(N_p) = 2k / (10 N_p).
    N_p = 1: k = 1 gives max(0.3, 0.3, 0.2) = 0.3 (k = 2: 0.4), t = 1.5K (the midpoint);
    decode 8 / (10 · 3) = 0.267. N_p = 2: k = 2 gives max(0.2, 0.2, 0.2) = 0.2, t = 2.5K;
    decode 8 / 20 = 0.4 binds. N_p = 3: k = 2 and k = 3 both give 0.2, the first (fewest
    local) is taken, t = 2.5K; decode 8 / 10 = 0.8."""
    choice = evaluate_splits(*HAND_CASE_ARGS, **HAND_CASE_KWARGS)
    np.testing.assert_allclose(choice.producer_utilization, [0.3, 0.2, 0.2])
    np.testing.assert_allclose(choice.decode_utilization, [8 / 30, 0.4, 0.8])
    np.testing.assert_allclose(choice.utilization, [0.3, 0.4, 0.8])
    assert choice.threshold_tokens.tolist() == [1500.0, 2500.0, 2500.0]
    # in force: N_p = 1 at t = 3.5K (k = 3): max(0.1, 0.1, 0.6) = 0.6
    assert choice.current_utilization == pytest.approx(0.6)
    # every split at k = 3: ρ_pd = 6 / (10 N_p)
    fixed = evaluate_splits(*HAND_CASE_ARGS, **HAND_CASE_KWARGS, reoptimize_threshold=False)
    np.testing.assert_allclose(fixed.producer_utilization, [0.6, 0.3, 0.2])
    assert fixed.threshold_tokens.tolist() == [3500.0] * 3
    # 2 requests of 1 s of work on either side. Queued work counts in the utilisation (6 s
    # waiting at PD-P: k = 0 gives max(0.2, 0.6), k = 1 max(0.1, 0.7)), not in the threshold,
    # which balances the arrivals: k = 1 (max(0.1, 0.1)), t = 1.5K
    busy = evaluate_splits(
        [1000.0, 2000.0],
        [1.0, 1.0],
        [1.0, 1.0],
        [1.0, 1.0],
        0.0,
        queued_prfaas_s=0.0,
        queued_pd_prefill_s=6.0,
        queued_decode_slot_s=0.0,
        period_s=10.0,
        link_capacity_bytes=100.0,
        prfaas_instances=1,
        pd_instances=2,
        decode_slots_per_instance=1,
        prefill_instances=[1],
        current_prefill_instances=1,
        current_threshold_tokens=1500.0,
    )
    assert busy.threshold_tokens.tolist() == [1500.0]
    np.testing.assert_allclose(busy.producer_utilization, [0.6])
    assert busy.current_utilization == pytest.approx(0.7)  # k = 1 in force


# --- re-balancing in the simulator -------------------------------------------------------------


def test_rebalancing_without_drift_is_the_static_policy(case_problem, plan):
    """The planned split at 90% of Λ_max, stationary Poisson traffic: the default policy never
    finds a split that lowers the bottleneck utilisation by 15%, never converts, and the run is
    the static run bit for bit. A policy that cannot trigger reproduces the static run with a
    bandwidth dip and a link latency too (the epoch machinery alone is exact)."""
    s, c = case_problem.system, plan.configuration
    arrival, lengths = case_requests(case_problem, 0.9 * plan.system_throughput_rps, 30_000, 21)
    static = simulate(s, c, arrival, lengths)
    rebalanced = simulate(s, c, arrival, lengths, policy=RoleRebalancing())
    assert rebalanced.roles.conversions == 0 and rebalanced.threshold_changes == 0
    assert rebalanced.roles.pd_prefill_instances_mean == c.pd_prefill_instances
    assert rebalanced.roles.pd_decode_instances_mean == c.pd_decode_instances
    assert_same_schedule(rebalanced, static)
    assert rebalanced.ttft == static.ttft and rebalanced.pd_decode == static.pd_decode
    dip = BandwidthTrace.dip(s.link_bandwidth_bytes_per_s, 1000.0, 2000.0, 0.08)
    options = {"bandwidth": dip, "link_latency_s": 0.05}
    never = RoleRebalancing(trigger_utilization=math.inf, period_s=7.0)
    assert_same_schedule(
        simulate(s, c, arrival, lengths, policy=never, **options),
        simulate(s, c, arrival, lengths, **options),
    )


def decode_bound_toy():
    """No PrfaaS (t = inf), 3 PD-P + 1 PD-D; prefill 0.5 s, decode 100 tokens x 25 ms = 2.5 s
    on BS_max = 1 slot per instance; one request a second from t = 1 s to t = 1000 s. Prefill
    needs half an instance, decode 2.5 instances: decode is the bottleneck."""
    system = toy_system(
        prfaas=(1.0,), pd=(0.5,), kv=(1e6,), batch=1, step_s=0.025, output_tokens=100
    )
    arrival = np.arange(1.0, 1001.0)
    return system, Configuration(0, 3, 1, math.inf), arrival, np.full(arrival.size, 5000.0)


def test_decode_bottleneck_converts_prefill_to_decode_by_hand():
    """Period 100 s, delay 20 s. At t = 100 the last 99 requests need 99 · 2.5 s of decode,
    59 more wait (395 slot-s on 1 slot: ρ_d = 3.95) while PD-P is 16.5% busy: one PD-P
    instance converts (it is idle: it leaves at 100) and decodes from 120. At 200 the same
    again (decode joins at 220); at 300 N_p = 1 is the floor. Decode slots in service: 1
    before 120, 2 before 220, 3 after, each new slot starting the waiting backlog at once.
    Static decodes 399 requests by t = 1000 (one every 2.5 s from t = 1.5); re-balanced, the
    backlog is gone long before t = 1000 and every request that can end by then does: 997."""
    system, c, arrival, lengths = decode_bound_toy()
    policy = RoleRebalancing(period_s=100.0, conversion_delay_s=20.0)
    r = simulate(system, c, arrival, lengths, policy=policy)
    static = simulate(system, c, arrival, lengths)
    assert r.roles.changes == (
        RoleChange(100.0, Role.PD_DECODE, 100.0, 120.0, math.inf),
        RoleChange(200.0, Role.PD_DECODE, 200.0, 220.0, math.inf),
    )
    assert (r.roles.conversions, r.roles.to_decode, r.roles.to_prefill) == (2, 2, 0)
    tl = r.timeline
    probes = np.arange(0.0, 1000.0, 0.25)
    busy = in_service(tl.decode_start_s, tl.decode_end_s, probes)
    assert busy[probes < 120].max() == 1
    assert busy[(probes >= 120) & (probes < 220)].max() == 2
    assert busy[probes >= 220].max() == 3
    assert {120.0, 220.0} <= set(tl.decode_start_s.tolist())
    # time-weighted instances over [0, 1000]: N_d 1 for 120 s, 2 for 100 s, 3 for 780 s
    assert r.roles.pd_decode_instances_mean == pytest.approx((120 + 200 + 3 * 780) / 1000)
    assert r.roles.pd_prefill_instances_mean == pytest.approx((300 + 200 + 800) / 1000)
    assert r.roles.converting_instances_mean == pytest.approx(40 / 1000)
    assert static.counts.completed == 399 and r.counts.completed == 997
    assert static.throughput_rps == pytest.approx(0.399) and r.throughput_rps == pytest.approx(
        0.997
    )
    # prefill only: TTFT is the 0.5 s prefill for everyone in both runs (PD-P never queues)
    assert r.ttft.max_s == static.ttft.max_s == 0.5


def test_conversion_delay_leaves_a_gap_in_capacity():
    """Prefill-bound toy (1 PD-P, 3 PD-D; prefill 1.5 s for one request a second, decode
    0.1 s): at t = 100 a decode instance converts. It is idle, so it leaves decode at 100 and
    prefills from 100 + delay: never two prefills at once before then, two at once right then
    (a backlog is waiting). Prefills done by t = 150: 66 on the first instance by t = 100
    (one every 1.5 s from t = 1), then 33 more on it, plus (150 − joined) / 1.5 on the
    converted one: 132, 119 and 99 for delays of 0, 20 and 90 s."""
    system = toy_system(prfaas=(1.0,), pd=(1.5,), kv=(1e6,), batch=1, step_s=0.001)
    arrival = np.arange(1.0, 401.0)
    c = Configuration(0, 1, 3, math.inf)
    done = []
    for delay_s in (0.0, 20.0, 90.0):
        policy = RoleRebalancing(period_s=100.0, conversion_delay_s=delay_s)
        r = simulate(system, c, arrival, np.full(arrival.size, 5000.0), policy=policy)
        first = r.roles.changes[0]
        assert first == RoleChange(100.0, Role.PD_PREFILL, 100.0, 100.0 + delay_s, math.inf)
        tl = r.timeline
        probes = np.arange(0.0, 400.0, 0.125)
        busy = in_service(tl.prefill_start_s, tl.prefill_end_s, probes)
        assert busy[probes < first.joined_s].max() == 1
        assert first.joined_s in tl.prefill_start_s.tolist()
        assert busy[(probes >= first.joined_s) & (probes < first.joined_s + 1)].min() == 2
        assert r.roles.converting_instances_mean == pytest.approx(
            sum(ch.joined_s - ch.left_s for ch in r.roles.changes) / 400.0
        )
        done.append(int(np.count_nonzero(tl.prefill_end_s <= 150.0)))
    assert done == [132, 119, 99]


def test_threshold_moves_when_converted_prefill_capacity_exists(case_problem, plan):
    """Case-study hardware split 1 PD-P / 7 PD-D at the planned t: PD-P is overloaded, decode
    idle. The first decision converts a decode instance to PD-P and re-optimises t downward
    (PD-P can take more); requests arriving before the instance joins PD-P keep the old t,
    those after get the new one. Throughput then beats the static split."""
    s, t = case_problem.system, plan.configuration.threshold_tokens
    c = Configuration(4, 1, 7, t)
    arrival, lengths = case_requests(case_problem, 2.0, 12_000, 22)
    policy = RoleRebalancing(conversion_delay_s=60.0)
    r = simulate(s, c, arrival, lengths, policy=policy)
    static = simulate(s, c, arrival, lengths)
    first = r.roles.changes[0]
    assert first.to_role is Role.PD_PREFILL and first.decided_s == 300.0
    assert first.joined_s == first.left_s + 60.0
    assert first.threshold_tokens < t
    thresholds = r.timeline.threshold_tokens
    before = (arrival >= first.decided_s) & (arrival < first.joined_s)
    assert before.any() and np.all(thresholds[before] == t)
    after = np.flatnonzero(arrival >= first.joined_s)[0]
    assert thresholds[after] == first.threshold_tokens
    assert r.roles.to_prefill >= 2 and r.roles.pd_prefill_instances_mean > 2
    assert r.throughput_rps > 1.3 * static.throughput_rps
    assert r.ttft.p90_s < static.ttft.p90_s


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 300),
    st.floats(0.2, 20.0),
    st.floats(0, 60_000),
    st.integers(0, 3),
    st.integers(1, 4),
    st.integers(1, 4),
    st.floats(0.5, 30.0),
    st.floats(0.0, 30.0),
    st.integers(1, 3),
    st.booleans(),
    st.integers(0, 10_000),
)
def test_rebalancing_conserves_requests_and_capacity(
    n, rate, threshold, n_prfaas, n_pd, n_decode, period, delay, step, adaptive, seed
):
    """Any rate, threshold, split and policy parameters (toy system, short periods so that
    conversions happen): every request is accounted for and completes with ordered event
    times; a pool never has more jobs in service than instances of its role at that moment;
    a job that waits starts exactly when a server frees or joins (FIFO, work-conserving);
    instance counts stay within the floors. (Periods are short against the runs, so about
    40% of the examples convert at least once.)"""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    lengths = rng.uniform(100, 50_000, n)
    output = rng.integers(1, 2000, n).astype(float)
    c = Configuration(n_prfaas, n_pd, n_decode, threshold)
    system = toy_system(batch=2)
    policy = RoleRebalancing(
        period_s=period,
        conversion_delay_s=delay,
        trigger_utilization=0.2,
        min_gain=0.05,
        max_conversions=step,
        adaptive=AdaptiveThreshold(period_s=period / 3) if adaptive else None,
    )
    if not n_prfaas and np.any(lengths > threshold):
        with pytest.raises(ConfigError, match="no PrfaaS"):
            simulate(system, c, arrival, lengths, output, policy=policy)
        return
    horizon = float(arrival[-1]) + 1.0
    r = simulate(system, c, arrival, lengths, output, policy=policy, horizon_s=horizon)
    counts = r.counts
    assert counts.not_arrived + counts.in_system + counts.completed == n
    tl = r.timeline
    assert np.all(tl.prefill_start_s >= tl.arrival_s)
    assert np.all(tl.prefill_end_s > tl.prefill_start_s)
    assert np.all(tl.first_token_s >= tl.prefill_end_s)
    assert np.all(tl.decode_start_s >= tl.first_token_s)
    assert np.all(np.isfinite(tl.decode_end_s))
    assert np.array_equal(tl.offloaded, lengths > tl.threshold_tokens)
    assert r.prfaas_prefill.requests + r.pd_prefill.requests == n
    changes = r.roles.changes
    assert r.roles.conversions == len(changes)
    n_p, n_d = n_pd, n_decode
    for ch in changes:
        assert ch.left_s >= ch.decided_s and ch.joined_s == ch.left_s + delay
        n_p += 1 if ch.to_role is Role.PD_PREFILL else -1
        n_d += 1 if ch.to_role is Role.PD_DECODE else -1
        assert n_p >= 1 and n_d >= 1
    assert n_p + n_d == n_pd + n_decode

    def instances(role: Role, initial: int, at_s: np.ndarray) -> np.ndarray:
        count = np.full(at_s.shape, initial)
        for ch in changes:
            count += np.where((ch.to_role is role) & (at_s >= ch.joined_s), 1, 0)
            count -= np.where((ch.to_role is not role) & (at_s >= ch.left_s), 1, 0)
        return count

    local = ~tl.offloaded
    pools = (
        (tl.prefill_start_s[local], tl.prefill_end_s[local], tl.arrival_s[local], Role.PD_PREFILL),
        (tl.decode_start_s, tl.decode_end_s, tl.first_token_s, Role.PD_DECODE),
    )
    for start, end, ready, role in pools:
        initial = n_pd if role is Role.PD_PREFILL else n_decode
        per_instance = 1 if role is Role.PD_PREFILL else system.decode.batch_size
        capacity = instances(role, initial, start) * per_instance
        assert np.all(in_service(start, end, start) <= capacity)
        waited = start > ready
        joins = [ch.joined_s for ch in changes if ch.to_role is role]
        freed = set(end.tolist()) | set(joins)
        assert all(s in freed for s in start[waited].tolist())


# --- comparison -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def comparison(case_problem, plan):
    return compare_policies(case_problem.system, case_problem.workload, plan.configuration)


@pytest.mark.slow
def test_compare_policies_returns_every_row_reproducibly(case_problem, plan, comparison):
    assert [(r.scenario, r.policy) for r in comparison.rows] == [
        (s, p) for s in SCENARIOS for p in POLICIES
    ]
    assert comparison.offered_rate_rps == pytest.approx(0.8 * plan.system_throughput_rps)
    for row in comparison.rows:
        if row.policy == "prefix":
            assert not row.ran and "no prefix blocks" in row.note and math.isnan(row.ttft_p90_s)
            continue
        assert row.ran and row.requests > 1000
        assert row.offered_rps == pytest.approx(comparison.offered_rate_rps, rel=0.1)
        assert 0 < row.link_utilization <= 1 and row.ttft_p90_s > 0
    # the same requests for every policy: re-balancing that does not convert equals static
    for scenario in ("burst", "bandwidth_dip"):
        static, rebalance = (
            comparison.row(scenario, "static"),
            comparison.row(scenario, "rebalance"),
        )
        assert rebalance.conversions == 0
        assert (rebalance.ttft_p90_s, rebalance.throughput_rps) == (
            static.ttft_p90_s,
            static.throughput_rps,
        )
    seen = []
    again = compare_policies(
        case_problem.system,
        case_problem.workload,
        plan.configuration,
        scenarios=("bandwidth_dip",),
        policies=("static", "adaptive"),
        progress=seen.append,
    )
    assert again.rows == (
        comparison.row("bandwidth_dip", "static"),
        comparison.row("bandwidth_dip", "adaptive"),
    )
    assert seen[-1] == 1.0 and all(b >= a for a, b in itertools.pairwise(seen))
    other = compare_policies(
        case_problem.system,
        case_problem.workload,
        plan.configuration,
        seed=1,
        scenarios=("bandwidth_dip",),
        policies=("static",),
    )
    assert other.rows[0] != comparison.row("bandwidth_dip", "static")


@pytest.mark.slow
def test_adaptive_threshold_relieves_the_dip_and_rebalancing_the_drift(comparison):
    """Measured at the defaults (case-study plan at 80% of Λ_max, 20K requests per scenario,
    seed 0): the link at 10% during the dip carries ~96% of what it can; the adaptive threshold
    halves P90 TTFT over the dip (measured 19.7 s vs 39.0 s; asserted < 0.7x) and cuts P99
    (34 s vs 98 s). Not a property of every stream: over seeds 1-3 the P90 ratio was 0.52, 0.49
    and 0.93 (seed 3's dip left the link at 94%, a milder overload).
    Output lengths x1.6 overload decode (static completes 2.43 of 2.56 req/s, requests wait
    ~90 s for a decode slot); re-balancing converts a PD-P instance and keeps up (measured
    2.54 req/s, ~2 s wait), at the price of a higher prefill TTFT."""
    static, adaptive = (
        comparison.row("bandwidth_dip", "static"),
        comparison.row("bandwidth_dip", "adaptive"),
    )
    assert adaptive.threshold_changes > 0
    assert adaptive.ttft_p90_s < 0.7 * static.ttft_p90_s
    assert adaptive.ttft_p99_s < 0.7 * static.ttft_p99_s
    assert static.link_utilization > 0.9
    dual = comparison.row("bandwidth_dip", "dual")
    assert dual.ttft_p90_s < 0.7 * static.ttft_p90_s
    static, rebalance = (
        comparison.row("output_drift", "static"),
        comparison.row("output_drift", "rebalance"),
    )
    assert static.throughput_rps < 0.97 * static.offered_rps
    assert rebalance.conversions >= 1
    assert rebalance.throughput_rps > 0.98 * rebalance.offered_rps
    assert rebalance.decode_wait_mean_s < 0.1 * static.decode_wait_mean_s


def test_compare_runs_prefix_routing_when_the_requests_carry_prefixes(case_problem, plan):
    """Multi-turn sessions from a trace: the prefix policy runs and reuses cached prefixes."""
    sessions, turns = 150, 4
    rng = np.random.default_rng(3)
    first = np.maximum(case_problem.workload.sample(rng, sessions) // 512, 1)
    blocks = []
    for turn in range(turns):
        for session in range(sessions):
            blocks.append([session * 10_000 + b for b in range(int(first[session]) + 4 * turn)])
    tokens = np.array([512.0 * len(b) for b in blocks])
    trace = RequestTrace(
        np.zeros(tokens.size),
        tokens,
        np.full(tokens.size, 1024.0),
        PrefixBlocks.from_lists(blocks),
        "sessions",
    )
    result = compare_policies(
        case_problem.system,
        case_problem.workload,
        plan.configuration,
        requests=tokens.size,
        scenarios=("burst",),
        policies=("static", "prefix"),
        trace=trace,
    )
    static, prefix = result.rows
    assert prefix.ran and prefix.note == ""
    assert prefix.ttft_mean_s < static.ttft_mean_s


def test_compare_rejects_unknown_names(case_problem, plan):
    args = (case_problem.system, case_problem.workload, plan.configuration)
    with pytest.raises(ConfigError, match="unknown scenario 'storm'"):
        compare_policies(*args, scenarios=("storm",))
    with pytest.raises(ConfigError, match="unknown policy 'magic'"):
        compare_policies(*args, policies=("magic",))
    with pytest.raises(ConfigError, match="must be a RoleRebalancing, got AdaptiveThreshold"):
        compare_policies(*args, policy_options={"dual": AdaptiveThreshold()})
    with pytest.raises(ConfigError, match="role re-balancing: period_s"):
        RoleRebalancing(period_s=0.0)


def test_one_factory_builds_every_policy_by_name():
    assert make_policy("static") == StaticThreshold()
    assert make_policy("dual") == RoleRebalancing(adaptive=AdaptiveThreshold())
    assert make_policy("rebalance").adaptive is None
    mine = AdaptiveThreshold(period_s=3.0)
    assert make_policy("adaptive", {"adaptive": mine}) is mine
    assert {type(make_policy(name)).__name__ for name in FACTORY_POLICIES} == {
        "StaticThreshold", "AdaptiveThreshold", "RoleRebalancing", "PrefixAwareThreshold",
    }  # fmt: skip
    assert set(FACTORY_POLICIES) == set(RoutingPolicy)
    with pytest.raises(ConfigError, match="unknown policy 'magic'"):
        make_policy("magic")


@given(
    base=st.floats(1.0, 1e6),
    step=st.floats(1.01, 4.0),
    raises=st.integers(1, 40),
)
@settings(max_examples=300, deadline=None)
def test_adaptive_threshold_returns_exactly_to_the_plan(
    base: float, step: float, raises: int
) -> None:
    """Raised k times and lowered k times, t is the planned threshold to the last bit (t·s/s
    alone is not: 15199.299114933792 · 1.25 / 1.25 = ...794), so a further calm period changes
    nothing and a threshold count is not inflated by rounding (it was: 173 changes instead of
    164 in the README's bandwidth_dip row, with a planned t one rounding away)."""
    policy = AdaptiveThreshold(step_factor=step)
    hot, calm = (1.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    t = base
    for _ in range(raises):
        t = policy.next_threshold(t, base, *hot)
    assert t > base
    for _ in range(raises):
        t = policy.next_threshold(t, base, *calm)
    assert t == base
    assert policy.next_threshold(t, base, *calm) == base
