"""Simulator invariants over random workloads and settings (hypothesis).

- the clock never goes backwards; - every request finishes or is rejected with a reason;
- KV blocks in use never exceed capacity, and all are returned at the end;
- tokens out == tokens asked; - energy == the integral of the power timeline, and the
  per-request shares add up to the step energy.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenprobe.metrics import timeline_energy_j
from tokenprobe.sim import SchedulerConfig, run_workload
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.workload import Arrival, LengthDist, Workload

from .helpers import IDLE_W, linear_step


@st.composite
def cases(draw: st.DrawFn) -> tuple[Workload, SchedulerConfig, int, str, int]:
    kind = draw(st.sampled_from(["offline", "poisson", "gamma", "closed"]))
    arrival = {
        "offline": Arrival("offline"),
        "poisson": Arrival("poisson", rate_per_s=draw(st.floats(0.5, 50.0))),
        "gamma": Arrival("gamma", rate_per_s=draw(st.floats(0.5, 50.0)), burstiness=0.3),
        "closed": Arrival("closed", concurrency=draw(st.integers(1, 6))),
    }[kind]
    workload = Workload(
        arrival,
        LengthDist("uniform", low=1, high=draw(st.integers(1, 160)), name="input_tokens"),
        LengthDist("uniform", low=1, high=draw(st.integers(1, 60)), name="output_tokens"),
        num_requests=draw(st.integers(1, 25)),
        shared_prefix_tokens=draw(st.sampled_from([0, 8, 40])),
    )
    max_seqs = draw(st.integers(1, 8))
    config = SchedulerConfig(
        max_num_seqs=max_seqs,
        max_num_batched_tokens=draw(st.integers(max_seqs, 200)),
        chunked_prefill=draw(st.booleans()),
        block_size=draw(st.sampled_from([4, 16])),
        prefix_caching=draw(st.booleans()),
    )
    capacity = draw(st.integers(3, 30))
    scheduler = draw(st.sampled_from(["continuous", "continuous", "static"]))
    return workload, config, capacity, scheduler, draw(st.integers(0, 1000))


def _simulate(case: tuple[Workload, SchedulerConfig, int, str, int]) -> SimResult:
    workload, config, capacity, scheduler, seed = case
    pool = BlockPool(capacity, config.block_size, config.prefix_caching)
    return run_workload(
        workload, linear_step, pool, config, idle_w=IDLE_W, scheduler=scheduler, seed=seed
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_invariants(case: tuple[Workload, SchedulerConfig, int, str, int]) -> None:
    result = _simulate(case)
    engine, pool = result.engine, result.pool
    # clock monotone: timeline points and step ends never go back
    times = [row[0] for row in engine.timeline.rows]
    assert times == sorted(times)
    ends = engine.ledger.step_end_s
    assert all(b > a for a, b in itertools.pairwise(ends))
    # every request finished or was rejected with a reason
    assert len(result.records) == case[0].size
    for seq, record in zip(engine.seqs, result.records, strict=True):
        if seq.reject_reason is None:
            assert record.ok and record.finish_s is not None
            # tokens out == tokens asked, each token at a step end, in order
            assert seq.generated == seq.output_tokens == record.output_tokens
            assert len(record.token_times_s) == record.output_tokens
            assert record.token_times_s == sorted(record.token_times_s)
            assert record.token_times_s[-1] == record.finish_s
            assert record.first_token_s == record.token_times_s[0] >= record.sent_s
        else:
            assert record.error_kind == "rejected_too_long" and record.error_message
    # KV never over capacity, and nothing leaks
    assert pool.peak_used_blocks <= pool.capacity_blocks
    assert max(row[2] for row in engine.timeline.rows) <= pool.capacity_blocks
    assert pool.used_blocks == 0
    # energy == integral of the power timeline; shares add up to the step energy
    energy = result.to_dict()["energy"]
    integral = timeline_energy_j(result.timeline_points(), engine.end_s)
    assert abs(integral - energy["total_j"]) <= 1e-9 * max(1.0, integral)
    assert abs(energy["total_j"] - engine.step_energy_j - engine.idle_energy_j) < 1e-6
    shares = sum(seq.energy_j for seq in engine.seqs)
    if case[3] == "continuous":
        assert abs(shares - engine.step_energy_j) <= 1e-6 * max(1.0, shares)
    else:  # static batching pays for padded rows that no request owns
        assert shares <= engine.step_energy_j + 1e-6
