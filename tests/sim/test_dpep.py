"""Data-parallel attention ranks with expert parallelism (sim/dpep.py): one rank is the
single-replica simulator, a step takes the slowest rank plus the shared MoE (cost/dpep.py), a
lone busy rank keeps the others waiting in dummy passes, and the simulator's invariants hold
(no request lost, each rank's KV pool bounded, clocks forward, every step on every rank at
once, the timeline's energy equal to the total)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import (
    DUMMY_BATCH,
    BatchShape,
    MemoryBudget,
    gang_step,
    make_deployment,
    memory_report,
    rank_work_s,
)
from tokenprobe.metrics import timeline_energy_j
from tokenprobe.records import RunConfig
from tokenprobe.sim import (
    DpEpResult,
    build_workload,
    capacity_blocks,
    price_deployment,
    simulate,
    simulate_fleet,
)
from tokenprobe.sim.engines import pads_ranks, vllm_defaults
from tokenprobe.workload import Arrival, RequestSpec, Workload

MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"
DP4 = make_deployment(MODEL, GPU, tp=4, expert_parallel=True, attention_dp=True)
runner = CliRunner()


def _dp(workload: Workload, dep=DP4, **kw: object) -> DpEpResult:  # type: ignore[no-untyped-def]
    result = simulate_fleet(dep, workload, dp=dep.dp, **kw)  # type: ignore[arg-type]
    assert isinstance(result, DpEpResult)
    return result


def _trace(*specs: tuple[float, int, int]) -> Workload:
    reqs = tuple(RequestSpec(f"r{i}", t, n_in, n_out) for i, (t, n_in, n_out) in enumerate(specs))
    return Workload(Arrival("trace", trace=reqs), name="trace")


def test_one_rank_is_the_single_replica_simulator() -> None:
    """One attention rank holding every expert is one GPU: request by request the same times
    and energy as `simulate` gives the plain deployment."""
    one = make_deployment(MODEL, GPU, expert_parallel=True, attention_dp=True)
    workload = build_workload(input_tokens=512, output_tokens=64, rate_per_s=6, num_requests=150)
    single = simulate(deployment=make_deployment(MODEL, GPU), workload=workload, seed=2)
    gang = _dp(workload, one, seed=2)
    a = {r.request_id: (r.first_token_s, r.finish_s) for r in single.records}
    b = {r.request_id: (r.first_token_s, r.finish_s) for r in gang.records}
    assert a.keys() == b.keys()
    for rid, times in a.items():
        assert b[rid] == pytest.approx(times, rel=1e-9), rid
    total = gang.to_dict()["energy"]["total_j"]
    assert total == pytest.approx(single.to_dict()["energy"]["total_j"], rel=1e-9)


def test_a_lone_request_keeps_three_ranks_in_dummy_passes() -> None:
    """One 512-token prompt, one output token: rank 0 prefills it while ranks 1-3 each run a
    one-token dummy batch, padded to 512 rows as vLLM pads (the default engine), so the step
    takes gang_step's padded time for (prefill, -, -, -) and the first token comes then (after
    the front end's latency); ranks 1-3 wait rank 0's work less the dummy's."""
    result = _dp(_trace((0.0, 512, 1)))
    (record,) = result.records
    step = gang_step(DP4, [BatchShape.prefill(512), None, None, None], padded=True)
    front_s = DP4.efficiency.request_overhead_s
    assert record.first_token_s == pytest.approx(front_s + step.time_s, rel=1e-9)
    data = result.to_dict()["data_parallel"]
    assert data["gang_steps"] == 1 and data["dummy_steps"] == 3
    ranks = data["per_rank"]
    assert ranks[0]["wait_s"] == pytest.approx(0.0, abs=1e-12) and ranks[0]["dummy_steps"] == 0
    for rank, wait in zip(ranks[1:], step.wait_s[1:], strict=True):
        assert rank["dummy_steps"] == 1
        assert rank["wait_s"] == pytest.approx(wait, rel=1e-9) and wait > 0


def test_all_requests_on_one_rank_leave_the_others_waiting() -> None:
    """Requests 1 s apart each finish before the next arrives, so the least-loaded router finds
    every rank empty and sends each to rank 0 (ties go to the lowest index): ranks 1-3 serve
    nothing and run a dummy pass in every step, waiting in each for rank 0's work less the
    dummy's, so over the run rank 0's work less steps x the dummy's. The 2,048-token prefills
    outweigh the four one-token decode steps after each: most of the time is waiting."""
    workload = _trace(*((float(i), 2048, 4) for i in range(12)))
    skewed = _dp(workload, router="least-loaded").to_dict()
    rows = skewed["per_replica"]
    assert [r["completed"] for r in rows] == [12, 0, 0, 0]
    ranks = skewed["data_parallel"]["per_rank"]
    steps = skewed["data_parallel"]["gang_steps"]
    assert ranks[0]["dummy_steps"] == 0 and ranks[0]["wait_s"] == pytest.approx(0, abs=1e-9)
    dummy_s = rank_work_s(DP4, DUMMY_BATCH)
    for rank in ranks[1:]:
        assert rank["dummy_steps"] == steps
        assert rank["work_s"] == pytest.approx(steps * dummy_s, rel=1e-9)
        assert rank["wait_s"] == pytest.approx(ranks[0]["work_s"] - steps * dummy_s, rel=1e-6)
    assert skewed["imbalance"]["requests_max_over_mean"] == pytest.approx(4.0)


def test_piling_the_work_on_one_rank_costs_time_the_others_spend_waiting() -> None:
    """Four 2,048-token requests a second sharing a 1,536-token system prompt: the
    prefix-aware router keeps them on rank 0, where the prefix is cached (loads stay under its
    32-request balance bound); round-robin gives each rank one. Piled up, the ranks step
    longer (one rank's four prefills against four ranks' one each) and ranks 1-3 spend over a
    tenth of it waiting for rank 0; spread, the ranks hold equal batches at equal times and
    none waits."""
    specs = tuple(
        RequestSpec(f"r{4 * s + k}", float(s), 2048, 8, prefix_tokens=1536, prefix_group=1)
        for s in range(6)
        for k in range(4)
    )
    workload = Workload(Arrival("trace", trace=specs), name="shared-prefix")
    piled = _dp(workload, router="prefix-aware").to_dict()
    spread = _dp(workload, router="round-robin").to_dict()
    assert [r["completed"] for r in piled["per_replica"]] == [24, 0, 0, 0]
    assert [r["completed"] for r in spread["per_replica"]] == [6, 6, 6, 6]
    assert piled["data_parallel"]["gang_busy_s"] > spread["data_parallel"]["gang_busy_s"]
    for rank in spread["data_parallel"]["per_rank"]:
        assert rank["wait_s"] == pytest.approx(0.0, abs=1e-9)
    busy_s = piled["data_parallel"]["gang_busy_s"]
    for rank in piled["data_parallel"]["per_rank"][1:]:
        assert rank["wait_s"] > 0.1 * busy_s


@pytest.mark.parametrize("router", ["round-robin", "least-loaded", "prefix-aware"])
def test_under_load_nothing_is_lost_and_the_ranks_step_together(router: str) -> None:
    workload = build_workload(input_tokens=1024, output_tokens=96, rate_per_s=40, num_requests=400)
    result = _dp(workload, router=router, seed=4)
    records = result.records
    assert len({r.request_id for r in records}) == 400 and all(r.ok for r in records)
    data = result.to_dict()
    assert sum(row["completed"] for row in data["per_replica"]) == 400
    starts = []
    for part in result.fleet.replicas:
        assert part.pool.peak_used_blocks <= part.pool.capacity_blocks
        times = [row[0] for row in part.engine.timeline.rows]
        assert times == sorted(times)  # each rank's clock only moves forward
        starts.append({row[0] for row in part.engine.timeline.rows if row[4] > part_idle(part)})
    assert all(s == starts[0] for s in starts)  # every step starts on every rank at once
    run = result.run()
    energy = timeline_energy_j(run.timeline, run.duration_s or 0.0)
    assert energy == pytest.approx(data["energy"]["total_j"], rel=1e-6)
    assert data["config"]["num_gpus"] == 4 and data["data_parallel"]["ranks"] == 4


def part_idle(part) -> float:  # type: ignore[no-untyped-def]
    return float(part.engine.timeline.rows[0][4])  # the first point is idle power


def test_each_rank_pool_is_its_gpus_free_memory_over_the_models_kv() -> None:
    """A rank's GPU holds the dense weights and a quarter of the experts
    (tests/cost/test_dpep.py); what is free of its HBM holds KV at 98,304 B per token (all 48
    layers and 4 KV heads: the rank keeps its sequences whole), in blocks of 16 tokens."""
    config = vllm_defaults(DP4.gpu)
    result = _dp(build_workload(input_tokens=64, output_tokens=4, rate_per_s=5, num_requests=8))
    budget = MemoryBudget(
        max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs
    )  # the server's own limits size its activations (sim/api.py capacity_blocks)
    free = memory_report(DP4, 1, budget).kv_free_bytes_per_gpu
    per_rank = result.fleet.replicas[0].pool.capacity_blocks
    assert per_rank == capacity_blocks(DP4, config) // 4
    assert abs(per_rank - free // 98_304 // 16) <= 1  # the pool's blocks round the other way
    assert result.to_dict()["kv"]["capacity_blocks"] == per_rank


def test_cli_runs_the_ranks_and_names_bad_flags() -> None:
    base = ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "256"]
    base += ["--output-tokens", "16", "--rate", "10", "--num-requests", "40"]
    env = {"COLUMNS": "200"}
    ok = runner.invoke(
        app, [*base, "--data-parallel-size", "2", "--enable-expert-parallel"], env=env
    )
    assert ok.exit_code == 0, ok.output
    assert "2 attention ranks" in ok.output and "waited for the slowest" in ok.output
    out = runner.invoke(app, [*base, "--dp", "2", "--enable-expert-parallel", "--json"], env=env)
    data = json.loads(out.output)
    assert data["completed"] == 40 and len(data["data_parallel"]["per_rank"]) == 2
    flags = ["--dp", "2", "--enable-expert-parallel", "--tp", "2", "--json"]
    two = runner.invoke(app, [*base, *flags], env=env)
    data = json.loads(two.output)  # two ranks of TP2: four GPUs
    assert data["config"]["num_gpus"] == 4 and data["data_parallel"]["ranks"] == 2
    for extra, field in (
        (["--dp", "2"], "dp"),
        (["--dp", "2", "--enable-expert-parallel", "--tp", "3"], "tp / dp_ranks"),
        (["--dp", "0", "--enable-expert-parallel"], "dp"),
    ):
        bad = runner.invoke(app, [*base, *extra], env=env)
        assert bad.exit_code == 2 and field in bad.output, bad.output
    ep = runner.invoke(app, [*base, "--tp", "2", "--enable-expert-parallel", "--json"], env=env)
    assert json.loads(ep.output)["config"]["expert_parallel"] is True  # EP over the TP GPUs
    dense = ["simulate", "--model", "llama-3.1-8b", "--gpu", GPU, "--input-tokens", "8"]
    dense += ["--output-tokens", "8", "--rate", "1", "--dp", "2", "--enable-expert-parallel"]
    bad = runner.invoke(app, dense, env=env)
    assert bad.exit_code == 2 and "no experts" in bad.output


def test_the_run_config_prices_the_ranks_again() -> None:
    """A DP + EP run's config.json names attention DP, so a reader (diagnose --predict,
    calibrate) prices the same layout again."""
    result = _dp(build_workload(input_tokens=64, output_tokens=4, rate_per_s=5, num_requests=4))
    config = RunConfig.of(result.run(with_timeline=False))
    assert config.deployment.attention_dp and config.deployment.expert_parallel
    again = price_deployment(config.deployment)
    assert (again.tp, again.dp, again.attention_dp) == (4, 4, True)


def test_ranks_of_two_gpus_hold_their_kv_split_two_ways() -> None:
    """Two ranks of TP2 on four GPUs: a token's 98,304 B of KV is split over its rank's two
    GPUs (4 KV heads, 2 each), so a rank's pool is its GPU's free memory over 49,152 B a
    token; the two ranks serve everything and step together."""
    dep = make_deployment(MODEL, GPU, tp=4, expert_parallel=True, attention_dp=True, dp_ranks=2)
    config = vllm_defaults(dep.gpu)
    budget = MemoryBudget(
        max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs
    )
    free = memory_report(dep, 1, budget).kv_free_bytes_per_gpu
    workload = build_workload(input_tokens=512, output_tokens=32, rate_per_s=20, num_requests=80)
    result = _dp(workload, dep)
    assert all(r.ok for r in result.records) and len(result.records) == 80
    pools = [part.pool for part in result.fleet.replicas]
    assert len(pools) == 2
    for pool in pools:
        assert abs(pool.capacity_blocks - free // 49_152 // 16) <= 1
        assert pool.peak_used_blocks <= pool.capacity_blocks
    data = result.to_dict()
    assert data["config"]["num_gpus"] == 4
    assert data["config"]["idle_power_w"] == pytest.approx(4 * dep.gpu.idle_w)


def test_vllm_pads_the_ranks_and_sglang_does_not() -> None:
    """vLLM 0.10-0.11 pads every DP rank to the largest rank's tokens whenever CUDA graphs are
    configured (the vllm preset's dp_padding, sim/engines.py); the run says so. A lone
    512-token prompt with three idle ranks: padded, the experts compute 4 x 512 rows, so the
    first token comes later than under the unpadded gang step."""
    assert pads_ranks("vllm") and not pads_ranks("sglang") and not pads_ranks(None)
    result = _dp(_trace((0.0, 512, 1)))
    assert result.to_dict()["data_parallel"]["padded_to_largest_rank"] is True
    (record,) = result.records
    plain = gang_step(DP4, [BatchShape.prefill(512), None, None, None])
    assert record.first_token_s > DP4.efficiency.request_overhead_s + plain.time_s
