"""benchmarks/validate_inferencemax_disagg.py: every InferenceMAX disaggregated row finds the recipe
that ran it, the recipes' flags become the workers' schedulers and EP back ends as the engines
read them, one small row replays end to end through the disaggregated simulator, and rows the
table does not hold are counted as not covered with their reason."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import inferencemax_recipes as ir  # noqa: E402
import validate_inferencemax_disagg as vi  # noqa: E402

ROWS = vi.load_rows()


def _row(framework: str, isl: str, concurrency: str, decode: str) -> dict[str, str]:
    for r in ROWS:
        if (
            f"framework={framework};" in r["notes"]
            and (r["isl"], r["concurrency"]) == (isl, concurrency)
            and f"decode: {decode}" in r["notes"]
        ):
            return r
    raise AssertionError(f"no row {framework} {isl} c{concurrency} {decode}")


def test_every_row_finds_the_entry_that_ran_it() -> None:
    """198 rows, each matched on framework, model, precision, lengths, MTP, worker counts and
    GPUs and concurrency; and no two entries claim the same row."""
    assert len(ROWS) == 198
    for row in ROWS:
        recipe = vi.recipe_for(row)
        twins = [
            r for r in ir.RECIPES
            if r is not recipe and r.framework == recipe.framework and r.spec == recipe.spec
            and (r.isl, r.osl, r.precision, r.prefix) == (recipe.isl, recipe.osl, recipe.precision,
                                                           recipe.prefix)
            and (r.prefill_workers, r.prefill.gpus, r.decode_workers, r.decode.gpus)
            == (recipe.prefill_workers, recipe.prefill.gpus, recipe.decode_workers,
                recipe.decode.gpus)
            and int(row["concurrency"]) in r.concurrency
        ]  # fmt: skip
        assert not twins, row["notes"]


def test_a_trt_entry_as_the_sweep_config_gives_it() -> None:
    """nvidia-master.yaml, dsr1 fp4 1k/1k, no MTP, TEP: 1 prefill server TP4 EP4 (batch 4,
    4,608 tokens), 4 decode servers TP8 EP8 (batch 128, 128 tokens, 0.9 of free memory); its
    conc-list 1..141 per decode server is the rows' 4..564 (bench.sh: x 4 servers)."""
    recipe = vi.recipe_for(_row("dynamo-trt", "1024", "564", "4 workers x TP8"))
    p, d = recipe.prefill, recipe.decode
    assert (recipe.prefill_workers, p.gpus, p.attention_dp) == (1, 4, False)
    assert (recipe.decode_workers, d.gpus, d.moe_backend) == (4, 8, "TRTLLM")
    assert recipe.concurrency == (4, 8, 16, 32, 64, 128, 256, 564) and recipe.mtp_k == 0
    dep = vi.worker_deployment(_row("dynamo-trt", "1024", "564", "4 workers x TP8"),
                               recipe.decode, "tensorrt-llm")  # fmt: skip
    config = vi.worker_config("tensorrt-llm", dep, recipe.decode)
    assert (config.max_num_seqs, config.max_num_batched_tokens) == (128, 128)
    assert config.gpu_memory_utilization == 0.9


def test_a_trt_attention_dp_worker_has_each_ranks_batch_times_its_ranks() -> None:
    """DEP16 decode, max_batch_size 64 and max_num_tokens 256 per rank (MTP 3: 64 x 4 tokens),
    so the worker runs 16 x 64 = 1,024 sequences and 16 x 256 = 4,096 tokens a step, with
    TensorRT-LLM's WIDEEP all-to-all (gen_yaml.py: tp >= 16 under attention DP)."""
    row = _row("dynamo-trt", "1024", "512", "1 workers x TP16")
    recipe = vi.recipe_for(row)
    assert recipe.mtp_k == 3 and recipe.decode.moe_backend == "WIDEEP"
    dep = vi.worker_deployment(row, recipe.decode, "tensorrt-llm")
    assert dep.attention_dp and dep.num_gpus == 16 and dep.ep_comm.backend == "all-to-all"
    config = vi.worker_config("tensorrt-llm", dep, recipe.decode)
    assert (config.max_num_seqs, config.max_num_batched_tokens) == (1024, 4096)
    prefill = vi.worker_deployment(row, recipe.prefill, "tensorrt-llm")  # DEP4, CUTLASS
    assert prefill.attention_dp and prefill.ep_comm.backend == "allgather"


def test_sglang_wide_ep_flags_read_as_sglang_reads_them() -> None:
    """Dynamo SGLang fp8 8k/1k max-tpt: 5 prefill workers of 8 GPUs (PREFILL_NODES 10) with
    DeepEP normal kernels, one 32-GPU decode worker with DeepEP low-latency kernels and 32
    redundant experts, --max-running-requests 8192; the low-latency entry is TP (no DP)."""
    row = _row("dynamo-sglang", "8192", "6144", "1 workers x TP1")
    recipe = vi.recipe_for(row)
    assert (recipe.prefill_workers, recipe.prefill.gpus, recipe.decode.gpus) == (5, 8, 32)
    dec = vi.worker_deployment(row, recipe.decode, "sglang")
    assert (dec.ep_comm.backend, dec.ep_comm.mode, dec.ep_comm.redundant_experts) == (
        "deepep", "low-latency", 32
    )  # fmt: skip
    assert vi.worker_deployment(row, recipe.prefill, "sglang").ep_comm.mode == "normal"
    assert vi.worker_config("sglang", dec, recipe.decode).max_num_seqs == 8192
    low = vi.recipe_for(_row("dynamo-sglang", "8192", "4", "1 workers x TP1"))
    assert not low.decode.attention_dp and low.decode.gpus == 4


def test_mi355x_decode_runs_as_many_requests_as_mori_dispatches() -> None:
    """sglang_disagg_server.sh: a DP decode worker's --max-running-requests is
    MORI_MAX_DISPATCH_TOKENS_DECODE x its ranks, 160 x 16 = 2,560 for the DEP16 worker; MTP's
    NEXTN with DECODE_MTP_SIZE 2 drafts."""
    row = next(r for r in ROWS if "MI355X" in r["gpu"] and "spec_decoding=mtp" in r["notes"]
               and "decode: 1 workers" in r["notes"])  # fmt: skip
    recipe = vi.recipe_for(row)
    assert recipe.mtp_k == 2 and recipe.decode.gpus == 16 and recipe.decode.attention_dp
    dep = vi.worker_deployment(row, recipe.decode, "sglang")
    assert vi.worker_config("sglang", dep, recipe.decode).max_num_seqs == 2560


def test_a_small_row_replays_through_the_disaggregated_simulator() -> None:
    """fp4 1k/1k low latency at c4 (1 prefill TP4, 2 decode TP4): covered, every metric
    positive and finite; the closed-loop stand-in holds about 4 requests in flight."""
    r = vi.replay(_row("dynamo-sglang", "1024", "4", "2 workers"))
    assert r.predicted is not None, r.why
    assert set(r.errors()) == set(vi.METRICS)
    assert all(v > 0 and math.isfinite(v) for v in r.predicted.values())
    held = float(r.note.split("(")[-1].split(" in flight")[0])
    assert held == pytest.approx(4, rel=0.1)
    assert r.extra["kv_link"]["link"] == "nvlink5"  # 12 GPUs inside the 72-GPU domain


def test_a_row_without_its_entry_is_not_covered_and_says_why() -> None:
    row = dict(_row("dynamo-sglang", "1024", "4", "2 workers"), concurrency="3")
    r = vi.replay(row)
    assert r.predicted is None and "no recipe entry" in r.why
    summary = vi.summarize([r])
    assert summary["not_covered"] == {r.why: 1} and summary["by_group"][-1]["covered"] == 0


def test_validate_deployments_hands_the_csv_to_this_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """validate_deployments replays inferencemax_disagg.csv here, not through the generic PD
    path (whose one-deployment fleet cannot express its workers); one real row stands for it."""
    import validate_deployments as vd

    row = _row("dynamo-sglang", "1024", "4", "2 workers")
    monkeypatch.setattr(vi, "load_rows", lambda path=vi.CSV: [row])
    out = vd.section(only=["inferencemax"])
    assert out["files"] == [] and out["by_kind"] == []
    assert out["inferencemax_disagg"]["by_group"][-1]["covered"] == 1
    assert "inferencemax_disagg" not in vd.section(only=["inferencemax"], kinds=["dpep"])
