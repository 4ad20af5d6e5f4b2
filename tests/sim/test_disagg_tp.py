"""Disaggregation with each side's own tensor parallelism (`--prefill-tp`, `--decode-tp`): each
worker's KV pool from its own memory, the KV transfer over min(prefill tp, decode tp) links
(cost/kvtransfer.py) by hand, and `estimate --disaggregate`'s transfer stage equal to the
simulator's transfer of the same prompt."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import MemoryBudget, estimate, make_deployment, memory_report
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import timeline_energy_j
from tokenprobe.sim import DisaggResult, build_workload, capacity_blocks, simulate_fleet
from tokenprobe.sim.engines import vllm_defaults
from tokenprobe.workload import Arrival, RequestSpec, Workload

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
DEP = make_deployment(MODEL, GPU)
PROMPT_KV_BYTES = 536_870_912  # 4,096 tokens x 32 layers x 8 KV heads x 128 x (K, V) x 2 B
runner = CliRunner()


def _one(prompt: int = 4096, output: int = 16) -> Workload:
    return Workload(Arrival("trace", trace=(RequestSpec("r0", 0.0, prompt, output),)), name="1")


def _pd(workload: Workload, split: str = "1p1d", **kw: object) -> DisaggResult:
    result = simulate_fleet(DEP, workload, disaggregate=split, **kw)  # type: ignore[arg-type]
    assert isinstance(result, DisaggResult)
    return result


def test_each_side_sizes_its_pool_by_its_own_memory() -> None:
    """Prefill TP2, decode TP4: each GPU of a worker holds 1/tp of the 16 GB of weights and
    1/tp of every token's 131,072 B of KV (8 KV heads split 4 or 2 ways), so a TP2 worker's
    GPU keeps 65,536 B a token and a TP4 worker's 32,768 B; each pool is its GPUs' free memory
    over that, in 16-token blocks."""
    result = _pd(_one(), prefill_tp=2, decode_tp=4)
    config = vllm_defaults(DEP.gpu)
    for part, tp in ((result.prefill[0], 2), (result.decode[0], 4)):
        dep = make_deployment(MODEL, GPU, tp=tp)
        assert dep.kv_bytes_per_token_per_gpu == 131_072 / tp
        budget = MemoryBudget(
            max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs
        )  # the server's own limits size its activations (sim/api.py capacity_blocks)
        free = memory_report(dep, 1, budget).kv_free_bytes_per_gpu
        assert part.pool.capacity_blocks == capacity_blocks(dep, config)
        assert part.pool.capacity_blocks == int(free // (131_072 / tp)) // 16
    data = result.to_dict()
    assert (data["prefill_tp"], data["decode_tp"]) == (2, 4)
    assert data["config"]["num_gpus"] == 6
    blocks = data["kv_capacity_blocks_per_worker"]
    assert blocks["decode"] > 2 * blocks["prefill"]  # twice the GPUs, less weight on each


def test_the_shards_move_over_as_many_links_as_the_smaller_worker_has() -> None:
    """The same 536,870,912 B whatever the split. TP2 -> TP4 on one HGX H100 (6 of its 8
    GPUs): two NVLinks at once, 900 GB/s: 0.597 ms plus the link latency. TP4 -> TP8 fills
    12 GPUs, two servers: four 400 Gb/s NICs at once, 200 GB/s: 2.684 ms plus NVLink's and
    the NIC's latencies."""
    inside = _pd(_one(), prefill_tp=2, decode_tp=4).records[0].extra["kv_transfer_s"]
    assert inside == pytest.approx(DEP.gpu.link.latency_s + PROMPT_KV_BYTES / 900e9, rel=1e-9)
    topo = DEP.gpu.topology
    assert topo is not None
    across = _pd(_one(), prefill_tp=4, decode_tp=8).records[0].extra["kv_transfer_s"]
    latency = DEP.gpu.link.latency_s + topo.nic_latency_s
    assert across == pytest.approx(latency + PROMPT_KV_BYTES / 200e9, rel=1e-9)


def test_estimates_transfer_stage_is_the_simulators_transfer() -> None:
    """The same formula in both (cost/kvtransfer.py): a 4,096-token prompt on 1p1d TP2
    workers, the simulator's first (unqueued) transfer and estimate's stage agree, and the
    stage adds to estimate's TTFT exactly."""
    dep = make_deployment(MODEL, GPU, tp=2)
    sim = simulate_fleet(dep, _one(), disaggregate="1p1d").records[0].extra["kv_transfer_s"]
    kw = dict(input_tokens=4096, output_tokens=16, tp=2)
    plain = estimate(MODEL, GPU, **kw)  # type: ignore[arg-type]
    split = estimate(MODEL, GPU, disaggregate="1p1d", **kw)  # type: ignore[arg-type]
    stage = split.to_dict()["stages"]["kv_transfer"]
    assert stage["time_s"] == pytest.approx(sim, rel=1e-12)
    assert stage["bytes"] == PROMPT_KV_BYTES and stage["link"] == DEP.gpu.link.kind
    assert stage["links"] == 2
    assert split.ttft_s - plain.ttft_s == pytest.approx(stage["time_s"], rel=1e-9)


def test_under_load_each_worker_keeps_its_pool_and_the_energy_adds_up() -> None:
    workload = build_workload(input_tokens=3000, output_tokens=64, rate_per_s=8, num_requests=120)
    result = _pd(workload, "2p1d", prefill_tp=1, decode_tp=2)
    records = result.records
    assert len({r.request_id for r in records}) == 120 and all(r.ok for r in records)
    for r in records:  # every transferred block arrives before its decode starts
        assert r.first_token_s is not None
        assert r.first_token_s >= r.extra["prefill_done_s"] + r.extra["kv_transfer_s"]
    for part in result.workers:
        assert part.pool.peak_used_blocks <= part.pool.capacity_blocks
    data = result.to_dict()
    assert data["config"]["num_gpus"] == 4  # 2 x TP1 + 1 x TP2
    assert data["config"]["idle_power_w"] == pytest.approx(4 * DEP.gpu.idle_w)
    run = result.run()
    energy = timeline_energy_j(run.timeline, run.duration_s or 0.0)
    assert energy == pytest.approx(data["energy"]["total_j"], rel=1e-6)


def test_bad_worker_parallelism_is_named() -> None:
    with pytest.raises(ConfigError, match="prefill_tp"):
        _pd(_one(), prefill_tp=3)  # 32 heads
    with pytest.raises(ConfigError, match="prefill_tp"):
        simulate_fleet(DEP, _one(), prefill_tp=2)  # no --disaggregate


def test_cli_takes_the_worker_tps_and_estimate_shows_the_transfer() -> None:
    env = {"COLUMNS": "200"}
    sim = ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "2048"]
    sim += ["--output-tokens", "16", "--rate", "4", "--num-requests", "20"]
    out = runner.invoke(
        app, [*sim, "--disaggregate", "1p1d", "--prefill-tp", "2", "--decode-tp", "4", "--json"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert (data["prefill_tp"], data["decode_tp"]) == (2, 4)
    assert data["kv_transfer"]["link"]["links"] == 2
    bad = runner.invoke(app, [*sim, "--decode-tp", "4"], env=env)
    assert bad.exit_code == 2 and "prefill_tp" in bad.output
    est = ["estimate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "4096"]
    table = runner.invoke(app, [*est, "--disaggregate", "1p1d"], env=env)
    assert table.exit_code == 0, table.output
    assert "KV transfer, prefill -> decode worker" in table.output
    assert "kv_transfer" in table.output  # the TTFT breakdown's row
    js = json.loads(runner.invoke(app, [*est, "--disaggregate", "1p1d", "--json"]).output)
    assert js["stages"]["kv_transfer"]["bytes"] == PROMPT_KV_BYTES
    assert js["ttft_breakdown_s"]["kv_transfer_s"] == js["stages"]["kv_transfer"]["time_s"]
    bad = runner.invoke(app, [*est, "--disaggregate", "1x"], env=env)
    assert bad.exit_code == 2 and "disaggregate" in bad.output
