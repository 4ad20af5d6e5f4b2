"""SGLang's scheduler (sim/sglang_scheduler.py): hand-traced schedules, reservation, retraction.

Steps take 1 s (`unit_step`), so step k runs from k to k + 1 s and its tokens appear at k + 1.
KV is per token (block_size 1, SGLang's page_size), so capacities below are in tokens.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenprobe.calibrate.serving import scheduler_for
from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import SCHEDULERS, SchedulerConfig, engine_defaults, run_workload
from tokenprobe.sim.base import StepPlan
from tokenprobe.sim.continuous import ContinuousScheduler
from tokenprobe.sim.engine import Engine
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.sim.sglang_scheduler import SglangScheduler
from tokenprobe.sim.state import Ledger
from tokenprobe.workload import Arrival, RequestSpec, Workload, fixed

from .helpers import IDLE_W, linear_step, unit_step

# the radix cache on (SGLang's default): admission by the new_token_ratio reservation
SGLANG = SchedulerConfig(
    scheduling="sglang", max_num_seqs=8, max_num_batched_tokens=512, block_size=1,
    prefix_caching=True,
)  # fmt: skip
VLLM = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512)


def _run(trace: tuple[RequestSpec, ...], config: SchedulerConfig, tokens: int = 1000) -> SimResult:
    pool = BlockPool(tokens // config.block_size, config.block_size, config.prefix_caching)
    workload = Workload(Arrival("trace", trace=trace))
    return run_workload(workload, unit_step, pool, config, idle_w=IDLE_W)


def _by_id(result: SimResult) -> dict[str, object]:
    return {r.request_id: r for r in result.records}


# two requests decode; three more arrive at 2.5 s, during step 2
ARRIVE_WHILE_DECODING = (
    RequestSpec("r0", 0.0, 10, 10),
    RequestSpec("r1", 0.0, 10, 10),
    RequestSpec("a", 2.5, 10, 3),
    RequestSpec("b", 2.5, 10, 3),
    RequestSpec("c", 2.5, 10, 3),
)


def test_arrivals_while_decoding_get_a_prefill_only_step_where_vllm_mixes() -> None:
    rows = {}
    for name, config in (("sglang", SGLANG), ("vllm", VLLM)):
        result = _run(ARRIVE_WHILE_DECODING, config)
        rows[name] = [(row[5], row[6]) for row in result.engine.timeline.rows[:5]]
        rows[name + "_r0"] = result.records[0].token_times_s
    # step 0 prefills r0 + r1 (20 tokens), steps 1-2 decode both; at 3 s the three arrivals
    # wait: SGLang runs their 30 prompt tokens alone, vLLM beside the two decodes
    assert rows["sglang"][:4] == [(20, 0), (0, 2), (0, 2), (30, 0)]
    assert rows["vllm"][:4] == [(20, 0), (0, 2), (0, 2), (30, 2)]
    # so r0's fourth token waits a step on SGLang: 1, 2, 3, then 5 s (not 4 s)
    assert rows["sglang_r0"][:4] == [1.0, 2.0, 3.0, 5.0]
    assert rows["vllm_r0"][:4] == [1.0, 2.0, 3.0, 4.0]
    assert len(rows["sglang_r0"]) == 10 and rows["sglang_r0"][-1] == 11.0  # 10 tokens, 1 gap


def test_mixed_chunk_carries_the_decodes_and_charges_their_tokens() -> None:
    mixed = replace(SGLANG, enable_mixed_chunk=True)
    result = _run(ARRIVE_WHILE_DECODING, mixed)
    assert [(row[5], row[6]) for row in result.engine.timeline.rows[:4]] == [
        (20, 0), (0, 2), (0, 2), (30, 2),
    ]  # fmt: skip
    # the chunk budget is chunked_prefill_size less one token per decode: 12 - 2 = 10 tokens,
    # so only one 10-token prompt joins the two decodes at 3 s
    small = replace(mixed, max_num_batched_tokens=12)
    rows = _run(ARRIVE_WHILE_DECODING, small).engine.timeline.rows
    assert (rows[3][5], rows[3][6]) == (10, 2)


def test_prefill_batch_bounds_chunk_and_max_prefill_tokens() -> None:
    # max_prefill_tokens 25: r0 (10) and r1 (10) fit, "a" (10 more) would pass 25 and waits
    trace = tuple(RequestSpec(n, 0.0, 10, 2) for n in ("r0", "r1", "a"))
    rows = _run(trace, replace(SGLANG, max_prefill_tokens=25)).engine.timeline.rows
    assert [row[5] for row in rows[:2]] == [20, 10]
    # a 40-token prompt with a chunk of 16: 16 + 16 + 8 over three prefill steps, as one request
    rows = _run((RequestSpec("long", 0.0, 40, 2),), replace(SGLANG, max_num_batched_tokens=16))
    assert [row[5] for row in rows.engine.timeline.rows[:3]] == [16, 16, 8]
    assert rows.records[0].first_token_s == 3.0


def test_a_high_new_token_ratio_admits_fewer_requests() -> None:
    # A (50 in, 450 out) runs alone on 900 tokens of KV; B (the same) arrives at 4.5 s. At 5 s A
    # has decoded 4 steps (clock 4): it holds 54 tokens (846 free) with 445 to go. The ratio has
    # decayed 4 x (0.7 - 0.098) / 600 to 0.69599, so A reserves 0.696 x 445 = 309.7 tokens and
    # B's 50 + 450 = 500 < 846 - 309.7 = 536.3 is admitted at once. At conservativeness 1 / 0.7
    # the ratio starts at 1: A reserves 0.99427 x 445 = 442.4, 500 >= 403.6, the batch is full,
    # and B waits for A's last token (step 449, which ends at 450 s). The optimism has its price:
    # both need 1000 tokens at their peak, so at ratio 0.7 one of them is retracted later.
    trace = (RequestSpec("A", 0.0, 50, 450), RequestSpec("B", 4.5, 50, 450))
    starts, retracted = {}, {}
    for c in (1.0, 1 / 0.7):
        result = _run(trace, replace(SGLANG, schedule_conservativeness=c), tokens=900)
        starts[c] = result.engine.seqs[1].first_sched_s
        retracted[c] = result.preemptions
        assert all(r.ok and len(r.token_times_s) == 450 for r in result.records)
    assert starts == {1.0: 5.0, 1 / 0.7: 450.0}
    assert retracted[1.0] >= 1 and retracted[1 / 0.7] == 0


def test_retraction_recovers_when_the_pool_fills() -> None:
    # 700 tokens. A (10 in, 400 out) and S (10 in, 20 out) start together (410 + 30 reserved);
    # C and D (10 in, 400 out) arrive at 99.5 s. At 100 s A holds 109 tokens, 300 to go, and the
    # ratio has decayed to 0.7 - 99 x 0.001003 = 0.6007: A reserves 180.2 of the 591 free, C's
    # 410 < 410.8 is admitted, D's 410 is not (nothing left). A and C then need 820 tokens at
    # their peak: near 300 steps later the pool is full and C (fewer output tokens) is retracted;
    # it goes behind D and everyone still finishes every token.
    trace = (
        RequestSpec("A", 0.0, 10, 400),
        RequestSpec("S", 0.0, 10, 20),
        RequestSpec("C", 99.5, 10, 400),
        RequestSpec("D", 99.5, 10, 400),
    )
    result = _run(trace, SGLANG, tokens=700)
    by_id = {r.request_id: r for r in result.records}
    assert result.preemptions >= 1
    assert by_id["C"].extra["preemptions"] >= 1
    assert by_id["A"].extra["preemptions"] == 0 and by_id["D"].extra["preemptions"] == 0
    assert by_id["C"].first_token_s == 101.0  # admitted at 100 s
    assert all(r.ok and len(r.token_times_s) == r.output_tokens for r in result.records)
    assert result.pool.peak_used_blocks <= 700
    # D was queued before the retracted C came back: it starts first
    d_start = result.engine.seqs[3].first_sched_s
    assert d_start is not None and d_start < by_id["C"].finish_s


@pytest.mark.parametrize(
    "config",
    [
        SGLANG,
        replace(SGLANG, enable_mixed_chunk=True),
        replace(SGLANG, prefix_caching=False),
        replace(SGLANG, block_size=16, max_num_batched_tokens=64),
    ],
    ids=["default", "mixed", "exact", "blocks16"],
)
def test_invariants_under_load(config: SchedulerConfig) -> None:
    """Every request finishes with all its tokens in time order, KV never passes capacity,
    and the requests' energies add up to the steps' (nothing lost, nothing counted twice)."""
    for seed, arrival in enumerate(
        (Arrival("offline"), Arrival("poisson", rate_per_s=40.0), Arrival("closed", concurrency=12))
    ):
        workload = Workload(
            arrival,
            fixed(300, "input_tokens"),
            fixed(120, "output_tokens"),
            num_requests=60,
        )
        pool = BlockPool(3000 // config.block_size, config.block_size, config.prefix_caching)
        result = run_workload(workload, linear_step, pool, config, idle_w=IDLE_W, seed=seed)
        engine = result.engine
        assert all(r.ok and r.output_tokens == 120 for r in result.records)
        for seq in engine.seqs:
            times = engine.ledger.token_times_s(seq.segments)
            assert len(times) == 120 and times == sorted(times)
            assert seq.first_token_s == times[0] and seq.finish_s == times[-1]
        assert pool.peak_used_blocks <= pool.capacity_blocks and pool.used_blocks == 0
        spent = sum(seq.energy_j for seq in engine.seqs)
        assert spent == pytest.approx(engine.step_energy_j, rel=1e-9)
        starts = [row[0] for row in engine.timeline.rows]
        assert starts == sorted(starts)


def test_the_sglang_preset_picks_the_sglang_scheduler() -> None:
    h100 = get_gpu("h100-sxm")
    config = engine_defaults("sglang", h100)
    assert config.scheduling == "sglang" and config.block_size == 1  # page_size 1
    assert config.max_num_batched_tokens == 8192  # chunked_prefill_size on an 80 GB GPU
    assert config.max_prefill_tokens == 16384 and config.schedule_conservativeness == 1.0
    pool, ledger = BlockPool(100, 1), Ledger()
    assert isinstance(SCHEDULERS["continuous"](config, pool, ledger), SglangScheduler)
    vllm = SCHEDULERS["continuous"](engine_defaults("vllm", h100), BlockPool(100), Ledger())
    assert type(vllm) is ContinuousScheduler


def test_serving_commands_set_sglang_flags() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    notes = (
        "python -m sglang.launch_server --chunked-prefill-size 2048 --max-prefill-tokens 4096 "
        "--schedule-conservativeness 0.3 --enable-mixed-chunk --disable-radix-cache"
    )
    config = scheduler_for("sglang", dep, notes)
    # SGLang's chunk may be below max_running_requests (4096): no decode budget to cover
    assert config.max_num_batched_tokens == 2048 and config.max_num_seqs == 4096
    assert config.max_prefill_tokens == 4096 and config.schedule_conservativeness == 0.3
    assert config.enable_mixed_chunk and not config.prefix_caching
    assert scheduler_for("sglang", dep, "").prefix_caching  # the radix cache is on by default


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("scheduling", "tgi"),
        ("schedule_conservativeness", -1.0),
        ("schedule_conservativeness", math.nan),
        ("max_prefill_tokens", 0),
        ("capacity_policy", "guaranteed_no_evict"),
    ],
)
def test_bad_sglang_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        replace(SGLANG, **{field: value})
    assert field in str(err.value)


def test_a_request_sglang_cannot_reserve_is_rejected() -> None:
    # SGLang admits a request only if prompt + min(output, 4096) < the free KV: 60 + 40 on 100
    result = _run((RequestSpec("big", 0.0, 60, 40), RequestSpec("ok", 0.0, 20, 5)), SGLANG, 100)
    by_id = {r.request_id: r for r in result.records}
    assert by_id["big"].error_kind == "rejected_too_long"
    assert "100 tokens" in (by_id["big"].error_message or "")
    assert by_id["ok"].ok


def _ratios(trace: list[RequestSpec], tokens: int) -> tuple[list[float], SglangScheduler]:
    """The new_token_ratio each step was planned with, and the scheduler after the run."""
    pool, ledger = BlockPool(tokens, 1, True), Ledger()
    sched = SglangScheduler(SGLANG, pool, ledger)
    seen: list[float] = []

    def step(plan: StepPlan) -> tuple[float, float]:
        seen.append(sched.new_token_ratio)
        return unit_step(plan)

    Engine(sched, ledger, step, IDLE_W).run(trace)
    return seen, sched


def test_new_token_ratio_decays_each_decode_step_and_resets_when_idle() -> None:
    # global_config.py: init 0.7, floor 0.7 x 0.14 = 0.098, reached in 600 decode steps
    decay = (0.7 - 0.098) / 600
    seen, sched = _ratios([RequestSpec("a", 0.0, 10, 11)], 1000)
    # the prefill step at 0.7, then ten decode steps, each one decay lower
    assert seen == pytest.approx([0.7 - k * decay for k in range(11)])
    assert sched.new_token_ratio == 0.7  # idle again: back to the initial ratio
    seen, _ = _ratios([RequestSpec("b", 0.0, 10, 1000)], 2000)
    assert seen[600] == pytest.approx(0.098) and seen[599] > 0.098
    assert min(seen) == pytest.approx(0.098)  # and no lower


# --schedule-policy lpm (SGLang 0.4's default; sim/sglang_scheduler.py `_lpm_order`)
LPM_CONFIG = replace(SGLANG, max_num_batched_tokens=100, schedule_policy="lpm")


def _first_tokens(trace: tuple[RequestSpec, ...], config: SchedulerConfig) -> dict[str, float]:
    return {r.request_id: r.first_token_s for r in _run(trace, config).records}  # type: ignore[misc]


def test_lpm_takes_the_request_whose_prefix_is_cached_first() -> None:
    """`warm` (prefix group 1, 64 of its 100 tokens shared) prefills in step 0 and caches the
    prefix; `cold` (group 2) and `hot` (group 1) arrive at 0.5 s, cold first. Step 1 is a
    prefill of 100 tokens: FCFS takes cold (100 tokens), hot waits for step 2; lpm sorts hot
    first (64 cached, 36 to compute) and cuts cold to the 64 left, finished in step 2. So hot's
    first token comes at 2 s under lpm and at 3 s under FCFS, cold's the other way round."""
    trace = (
        RequestSpec("warm", 0.0, 100, 2, prefix_tokens=64, prefix_group=1),
        RequestSpec("cold", 0.5, 100, 2, prefix_tokens=64, prefix_group=2),
        RequestSpec("hot", 0.5, 100, 2, prefix_tokens=64, prefix_group=1),
    )
    fcfs = _first_tokens(trace, replace(LPM_CONFIG, schedule_policy="fcfs"))
    lpm = _first_tokens(trace, LPM_CONFIG)
    assert (fcfs["cold"], fcfs["hot"]) == (2.0, 3.0)
    assert (lpm["hot"], lpm["cold"]) == (2.0, 3.0)


def test_lpm_holds_back_a_request_whose_prefix_another_waiting_one_will_cache() -> None:
    """In-batch prefix caching: a and b share a 64-token prefix nobody has cached, c has its
    own; a prefill of 200 tokens takes two of them. FCFS runs a + b in step 0 (both compute
    the prefix) and c in step 1; lpm puts b last (>= 32 shared with a, <= 32 cached), runs
    a + c in step 0 and b in step 1, on a's cached prefix."""
    trace = (
        RequestSpec("a", 0.0, 100, 2, prefix_tokens=64, prefix_group=5),
        RequestSpec("b", 0.0, 100, 2, prefix_tokens=64, prefix_group=5),
        RequestSpec("c", 0.0, 100, 2, prefix_tokens=64, prefix_group=6),
    )
    config = replace(LPM_CONFIG, max_num_batched_tokens=200)
    fcfs = _first_tokens(trace, replace(config, schedule_policy="fcfs"))
    lpm = _first_tokens(trace, config)
    assert (fcfs["a"], fcfs["b"], fcfs["c"]) == (1.0, 1.0, 2.0)
    assert (lpm["a"], lpm["c"], lpm["b"]) == (1.0, 1.0, 2.0)


def test_lpm_is_sglang_only() -> None:
    with pytest.raises(ConfigError, match="schedule_policy"):
        SchedulerConfig(schedule_policy="lpm")
    with pytest.raises(ConfigError, match="schedule_policy"):
        replace(SGLANG, schedule_policy="dfs-weight")
