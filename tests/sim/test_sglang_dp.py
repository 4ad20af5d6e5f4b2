"""SGLang 0.4's --enable-dp-attention (sim/sglang_dp.py) and the closed loop of users that the
data-parallel ranks serve (sim/gang_feed.py): the 0.4 settings of each rank, the closed loop's
bookkeeping (C requests in flight, the next one sent at a finish), and the waves of a closed loop
of fixed lengths, whose TTFT is one gang step of the prompts on one rank, however many ranks."""

from __future__ import annotations

import pytest

from tokenprobe.calibrate.serving import serving_rows
from tokenprobe.cost import BatchShape, gang_step, make_deployment
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import (
    DpEpResult,
    engine_defaults,
    runs_sglang_04,
    sglang_04_scheduler,
    simulate_fleet,
)
from tokenprobe.workload import Arrival, Workload, fixed

MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"
DP4 = make_deployment(MODEL, GPU, tp=4, expert_parallel=True, attention_dp=True)
SGLANG = engine_defaults("sglang", DP4.gpu, DP4.tp)


def _closed(users: int, prompt: int, output: int, requests: int) -> DpEpResult:
    workload = Workload(
        Arrival("closed", concurrency=users),
        fixed(prompt, "input_tokens"),
        fixed(output, "output_tokens"),
        num_requests=requests,
    )
    result = simulate_fleet(DP4, workload, dp=DP4.dp, router="round-robin", config=SGLANG)
    assert isinstance(result, DpEpResult)
    return result


def test_the_04_settings_of_a_dp_attention_rank() -> None:
    """server_args.py (0.4.x): chunked_prefill_size 8192 on a GPU of >= 25,000 MB, halved with
    --enable-dp-attention (4096), schedule_conservativeness x 0.3; a command's own chunk is
    halved too. MI300X (192 GB) gets 8192, not SGLang 0.5's 16384 from 160 GiB."""
    mi300x = get_gpu("mi300x")
    base = engine_defaults("sglang", mi300x, 8)
    assert base.max_num_batched_tokens == 16384  # the 0.5 table
    plain = sglang_04_scheduler(base, mi300x, dp_attention=False, chunk_flag=False)
    assert plain.max_num_batched_tokens == 8192
    assert plain.schedule_conservativeness == base.schedule_conservativeness
    dp = sglang_04_scheduler(base, mi300x, dp_attention=True, chunk_flag=False)
    assert dp.max_num_batched_tokens == 4096
    assert dp.schedule_conservativeness == pytest.approx(0.3 * base.schedule_conservativeness)
    given = sglang_04_scheduler(base, mi300x, dp_attention=True, chunk_flag=True)
    assert given.max_num_batched_tokens == 16384 // 2
    assert runs_sglang_04("SGLang", "0.4.3.post2") and runs_sglang_04("sglang", "v0.4.1")
    assert runs_sglang_04("sglang", "0.4.2.post4 (ROCm 6.3)") and runs_sglang_04("sglang-2025h1")
    assert not runs_sglang_04("sglang", "0.5.4") and not runs_sglang_04("sglang", "0.40")
    assert not runs_sglang_04("vllm", "0.4.1") and not runs_sglang_04("sglang")


def test_a_closed_loop_keeps_its_users_requests_in_flight() -> None:
    """C = 6 users on 4 ranks (two ranks get two, two get one): the first C requests are sent
    at t = 0 and each later one exactly when an earlier one finished (sorted send times of
    requests C.. equal the sorted first N - C finish times), so at most C are in flight."""
    users, n = 6, 30
    result = _closed(users, prompt=300, output=20, requests=n)
    records = sorted(result.records, key=lambda r: r.sent_s)
    assert len(records) == n and all(r.error_kind is None for r in records)
    assert [r.sent_s for r in records[:users]] == [0.0] * users
    finishes = sorted(r.finish_s for r in records if r.finish_s is not None)
    later = [r.sent_s for r in records[users:]]
    assert later == pytest.approx(finishes[: n - users], rel=1e-12)
    events = sorted([(r.sent_s, 1) for r in records] + [(r.finish_s, -1) for r in records])
    in_flight = peak = 0
    for _, change in events:  # a finish at t sorts before the send it releases at t
        in_flight += change
        peak = max(peak, in_flight)
    assert peak == users


@pytest.mark.parametrize("per_rank", [1, 2])
def test_a_wave_waits_for_one_rank_of_prompts_not_all(per_rank: int) -> None:
    """Closed loop of 4·k users of fixed lengths on 4 ranks, round robin: every wave puts k
    prompts on each rank, all ranks prefill together in one gang step (k x 512 tokens fit one
    prefill batch), decode together and finish together, so every request of every wave has the
    same TTFT: the front end's latency plus gang_step of k 512-token prompts on each rank. The
    attention of those prompts is a rank's own (data-parallel attention splits requests, not
    heads): with k = 2 the step is the one of 2 prompts a rank, not of 8 prompts spread over
    4 ranks' heads."""
    ranks = DP4.dp
    result = _closed(ranks * per_rank, prompt=512, output=16, requests=ranks * per_rank * 3)
    step = gang_step(DP4, [BatchShape.prefill(512, batch=per_rank)] * ranks)
    front_s = DP4.efficiency.request_overhead_s
    ttfts = [r.first_token_s - r.sent_s for r in result.records if r.first_token_s is not None]
    assert len(ttfts) == ranks * per_rank * 3
    assert ttfts == pytest.approx([front_s + step.time_s] * len(ttfts), rel=1e-9)
    if per_rank == 2:  # the wave's step is longer than one prompt a rank's
        single = gang_step(DP4, [BatchShape.prefill(512)] * ranks)
        assert step.time_s > single.time_s


DSTACK_ROW = {
    "source_id": "dstack_deepseek_r1_online",
    "engine": "SGLang",
    "engine_version": "0.4.3.post2",
    "model": "DeepSeek-R1",
    "model_hf_id": "deepseek-ai/DeepSeek-R1",
    "gpu": "H200-SXM",
    "gpu_count": "8",
    "tp": "8",
    "pp": "1",
    "dp": "8",
    "weight_precision": "fp8",
    "workload_type": "closed_loop_concurrency (bench_serving --max-concurrency)",
    "dataset": "random (fixed lengths)",
    "isl": "3200",
    "osl": "800",
    "isl_mean": "3200",
    "osl_mean": "800",
    "concurrency": "8",
    "num_requests": "500",
    "ttft_ms_median": "3967.2",
    "tpot_ms_median": "43.48",
    "output_tok_s": "164.1",
    "notes": "serving command: python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-R1 "
    "--tp 8 --trust-remote-code --enable-dp-attention",
}


def test_a_dstack_dp_row_runs_sglang_04_ranks() -> None:
    """An SGLang 0.4.3 --enable-dp-attention row maps to 8 ranks of 4096-token chunks and a
    0.3 x reservation ratio, on an attention-DP deployment (the prediction runs the gang)."""
    (row,) = serving_rows(DSTACK_ROW, dp_attention=True)
    config = row.predict.keywords["config"]  # type: ignore[attr-defined]
    assert config.max_num_batched_tokens == 4096
    assert config.schedule_conservativeness == pytest.approx(0.3)
    assert row.deployment.attention_dp and row.deployment.dp == 8
