"""Continuous batching, chunked prefill, preemption, prefix caching, rejection: hand-checked."""

from __future__ import annotations

import pytest

from tokenprobe.errors import ConfigError
from tokenprobe.sim import SchedulerConfig, run_workload
from tokenprobe.sim.engine import StepFn
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.workload import Arrival, RequestSpec, Workload, fixed

from .helpers import IDLE_W, linear_step, unit_step


def _run(
    workload: Workload,
    capacity_blocks: int = 1000,
    config: SchedulerConfig | None = None,
    scheduler: str = "continuous",
    step: StepFn = unit_step,
) -> SimResult:
    config = config or SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512)
    pool = BlockPool(capacity_blocks, config.block_size, config.prefix_caching)
    return run_workload(workload, step, pool, config, idle_w=IDLE_W, scheduler=scheduler)


def _fixed(n: int, tokens_in: int, tokens_out: int, arrival: Arrival | None = None) -> Workload:
    return Workload(
        arrival or Arrival("offline"),
        fixed(tokens_in, "input_tokens"),
        fixed(tokens_out, "output_tokens"),
        num_requests=n,
    )


def test_single_request_by_hand() -> None:
    # 1 s per step: prefill at 0-1 s gives token 1, then one decode step per token
    result = _run(_fixed(1, 32, 4))
    (record,) = result.records
    assert record.first_token_s == 1.0 and record.finish_s == 4.0
    assert record.token_times_s == [1.0, 2.0, 3.0, 4.0]
    assert record.ttft_s == 1.0 and record.tpot_s == 1.0 and record.queue_s == 0.0
    d = result.to_dict()
    assert d["energy"]["total_j"] == pytest.approx(400.0)
    assert d["energy"]["prefill_j"] == pytest.approx(100.0)
    assert d["energy"]["decode_j"] == pytest.approx(300.0)
    assert record.extra["energy_j"] == pytest.approx(400.0)
    assert d["kv"]["peak_blocks_used"] == 3  # 32 + 3 tokens of KV -> 3 blocks of 16


def test_chunked_prefill_splits_the_prompt() -> None:
    config = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=16)
    result = _run(_fixed(1, 40, 2), config=config)
    # 16 + 16 + 8 prompt tokens in three steps, then one decode step
    assert result.records[0].first_token_s == 3.0
    assert result.records[0].finish_s == 4.0
    tl = result.engine.timeline.rows
    assert [row[5] for row in tl[:3]] == [16, 16, 8]


def test_prompt_over_budget_without_chunking_is_rejected_and_run_goes_on() -> None:
    config = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=16, chunked_prefill=False)
    trace = (RequestSpec("long", 0.0, 40, 2), RequestSpec("short", 0.0, 10, 2))
    result = _run(Workload(Arrival("trace", trace=trace)), config=config)
    by_id = {r.request_id: r for r in result.records}
    assert by_id["long"].error_kind == "rejected_too_long"
    assert "max_num_batched_tokens=16" in (by_id["long"].error_message or "")
    assert by_id["short"].ok and by_id["short"].output_tokens == 2
    d = result.to_dict()
    assert d["rejected"] == 1 and d["errors"] == {"rejected_too_long": 1}


def test_request_longer_than_kv_is_rejected() -> None:
    # 4 blocks x 16 = 64 token slots; 60 in + 10 out needs 69
    trace = (RequestSpec("big", 0.0, 60, 10), RequestSpec("ok", 0.5, 20, 5))
    result = _run(Workload(Arrival("trace", trace=trace)), capacity_blocks=4)
    by_id = {r.request_id: r for r in result.records}
    assert by_id["big"].error_kind == "rejected_too_long"
    assert "64 tokens" in (by_id["big"].error_message or "")
    assert by_id["ok"].ok


def test_preemption_by_recompute_when_blocks_run_out() -> None:
    # two requests of 16 + 40 tokens need 4 blocks each at the end; only 4 exist
    result = _run(_fixed(2, 16, 40), capacity_blocks=4)
    assert result.preemptions >= 1
    assert all(r.ok and r.output_tokens == 40 for r in result.records)
    assert all(len(r.token_times_s) == 40 for r in result.records)
    assert result.pool.peak_used_blocks <= 4
    # the newest admitted (request "1") is the one preempted
    assert result.records[1].extra["preemptions"] >= 1
    assert result.records[0].extra["preemptions"] == 0


def test_guaranteed_no_evict_waits_instead_of_preempting() -> None:
    # the same two requests (16 + 40 tokens: 55 KV slots = 4 blocks each) on 4 blocks: the
    # TensorRT-LLM policy admits the second only when the first has freed its whole reservation
    config = SchedulerConfig(
        max_num_seqs=8, max_num_batched_tokens=512, capacity_policy="guaranteed_no_evict"
    )
    result = _run(_fixed(2, 16, 40), capacity_blocks=4, config=config)
    assert result.preemptions == 0
    first, second = result.records
    assert first.ok and second.ok and second.output_tokens == 40
    # unit steps: request 0 prefills at step 0 and decodes 39 steps (finish 40 s); request 1
    # is admitted at step 40 and finishes 40 steps later
    assert first.finish_s == 40.0
    assert second.first_token_s == 41.0 and second.finish_s == 80.0
    assert result.pool.peak_used_blocks == 4 and result.pool.used_blocks == 0


def test_guaranteed_no_evict_runs_as_many_as_whole_lengths_fit() -> None:
    # 10 requests of 32 + 32 (63 slots = 4 blocks); 13 blocks hold 3 whole requests at once,
    # where on-demand allocation starts more (2 blocks each) and then has to preempt
    workload = _fixed(10, 32, 32)
    gne = SchedulerConfig(
        max_num_seqs=8, max_num_batched_tokens=512, capacity_policy="guaranteed_no_evict"
    )
    reserved = _run(workload, capacity_blocks=13, config=gne)
    on_demand = _run(workload, capacity_blocks=13)
    assert reserved.preemptions == 0 and on_demand.preemptions > 0
    assert max(row[1] for row in reserved.engine.timeline.rows) == 3
    assert all(r.ok and r.output_tokens == 32 for r in reserved.records)
    assert reserved.pool.used_blocks == 0


def test_unknown_capacity_policy_is_named() -> None:
    with pytest.raises(ConfigError, match=r"capacity_policy.*guaranteed_no_evict"):
        SchedulerConfig(capacity_policy="fifo")


def test_prefix_caching_skips_the_shared_prefix() -> None:
    def run(prefix_caching: bool) -> int:
        workload = Workload(
            Arrival("constant", rate_per_s=1.0),
            fixed(100, "input_tokens"),
            fixed(1, "output_tokens"),
            num_requests=10,
            shared_prefix_tokens=64,
        )
        config = SchedulerConfig(
            max_num_seqs=8, max_num_batched_tokens=512, prefix_caching=prefix_caching
        )
        result = _run(workload, config=config)
        return sum(row[5] for row in result.engine.timeline.rows)

    assert run(False) == 1000
    # the first request computes all 100 tokens; the 9 others only the 36 after 4 cached blocks
    assert run(True) == 100 + 9 * 36


def test_closed_loop_keeps_concurrency() -> None:
    result = _run(_fixed(6, 20, 5, Arrival("closed", concurrency=2)), step=linear_step)
    assert max(row[1] for row in result.engine.timeline.rows) <= 2
    finishes = {r.finish_s for r in result.records}
    later = sorted(result.records, key=lambda r: r.sent_s)[2:]
    assert all(r.sent_s in finishes for r in later)  # each sent when a user's previous one ended


def test_static_batching_waits_for_the_whole_batch() -> None:
    config = SchedulerConfig(max_num_seqs=2, max_num_batched_tokens=512)
    trace = tuple(RequestSpec(str(i), 0.0, 16, out) for i, out in enumerate((10, 2, 10, 2)))
    workload = Workload(Arrival("trace", trace=trace))
    static = {r.request_id: r for r in _run(workload, config=config, scheduler="static").records}
    cont = {r.request_id: r for r in _run(workload, config=config).records}
    assert static["0"].finish_s == 10.0 and static["1"].finish_s == 2.0
    # the second batch starts only when the first (padded to 10 tokens) ends at t = 10
    assert static["2"].first_token_s == 11.0 and static["3"].finish_s == 12.0
    assert cont["2"].first_token_s is not None and cont["2"].first_token_s < 11.0


def test_idle_time_is_counted() -> None:
    # two requests 100 s apart: the GPU idles in between at IDLE_W
    trace = (RequestSpec("a", 0.0, 16, 2), RequestSpec("b", 100.0, 16, 2))
    result = _run(Workload(Arrival("trace", trace=trace)))
    e = result.to_dict()["energy"]
    assert e["step_j"] == pytest.approx(400.0)
    assert e["idle_j"] == pytest.approx(IDLE_W * 98.0)
    assert result.to_dict()["busy_fraction"] == pytest.approx(4 / 102)


def test_front_end_latency_delays_admission_but_uses_no_gpu() -> None:
    # unit steps: without a front end the request's first token is at 1 s; with 0.25 s of front
    # end it reaches the scheduler at 0.25 s, so every time shifts by 0.25 s and the steps stay
    config = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512)
    pool = BlockPool(1000, config.block_size, config.prefix_caching)
    result = run_workload(_fixed(1, 32, 4), unit_step, pool, config, idle_w=IDLE_W, frontend_s=0.25)
    (record,) = result.records
    assert record.sent_s == 0.0 and record.first_token_s == 1.25 and record.finish_s == 4.25
    assert record.queue_s == 0.0  # waiting for a slot starts at the hand-over
    assert result.engine.steps == 4
    d = result.to_dict()
    assert d["energy"]["total_j"] == pytest.approx(400.0 + 0.25 * IDLE_W)


def test_front_end_latency_paces_a_closed_loop() -> None:
    # each user's next request is sent when the last one ends, then waits 0.5 s in the front end
    config = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512)
    workload = _fixed(3, 16, 2, Arrival("closed", concurrency=1))

    def finish(frontend_s: float) -> float:
        pool = BlockPool(1000, config.block_size, config.prefix_caching)
        result = run_workload(
            workload, unit_step, pool, config, idle_w=IDLE_W, frontend_s=frontend_s
        )
        return max(r.finish_s or 0.0 for r in result.records)

    assert finish(0.5) == pytest.approx(finish(0.0) + 3 * 0.5)


@pytest.mark.parametrize(("output_tokens", "cached_blocks"), [(10, 4), (20, 2)])
def test_a_preempted_request_recomputes_only_what_the_cache_lost(
    output_tokens: int, cached_blocks: int
) -> None:
    """vLLM v1 with prefix caching: a preempted request's computed blocks stay findable until
    other requests need them, so its recomputation starts after what is left of them."""

    def run(prefix_caching: bool) -> tuple[SimResult, int]:
        config = SchedulerConfig(
            max_num_seqs=8, max_num_batched_tokens=512, prefix_caching=prefix_caching
        )
        result = _run(_fixed(3, 64, output_tokens), capacity_blocks=14, config=config)
        return result, sum(row[5] for row in result.engine.timeline.rows)

    # 3 prompts of 64 tokens take 4 blocks each (12 of 14); at the first decode step each needs
    # a 5th: request 2, the newest, is preempted with 4 computed blocks (+1 token sampled), and
    # requests 0 and 1 take the 2 never-used blocks, which the free queue hands out first. When
    # they finish, request 2 comes back. With 20 output tokens they need a 6th block each at
    # token 80 and take 2 of request 2's cached blocks (its last ones) first.
    cold, cold_prefill = run(False)
    warm, warm_prefill = run(True)
    assert cold.preemptions == warm.preemptions == 1
    for result in (cold, warm):
        assert all(r.ok and r.output_tokens == output_tokens for r in result.records)
        assert result.pool.used_blocks == 0
    assert cold_prefill == 3 * 64 + 65  # prompt + the sampled token, recomputed in full
    assert warm_prefill == 3 * 64 + 65 - cached_blocks * 16
