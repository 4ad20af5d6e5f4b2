"""Online-serving benchmark rows (benchmarks/data): mapping, engine defaults and accuracy at low
load against GPUStack's real `vllm bench serve` runs."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tokenprobe.calibrate import load_csv, load_rows, observe
from tokenprobe.calibrate.serving import scheduler_for
from tokenprobe.cost import make_deployment

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"

CLOSED = {
    "source_id": "gpustack_performance_lab",
    "engine": "vLLM",
    "engine_version": "v0.11.0",
    "model": "Qwen3-8B",
    "model_hf_id": "Qwen/Qwen3-8B",
    "gpu": "H100-SXM",
    "gpu_count": "1",
    "tp": "1",
    "weight_precision": "bf16",
    "workload_type": "closed_loop_concurrency",
    "dataset": "ShareGPT",
    "isl_mean": "233",
    "osl_mean": "221",
    "concurrency": "4",
    "num_requests": "100",
    "ttft_ms_median": "60.0",
    "tpot_ms_median": "7.4",
    "itl_ms_median": "7.3",
    "output_tok_s": "497",
    "notes": "serving script: vllm serve Qwen/Qwen3-8B",
}


def test_a_closed_loop_row_measures_ttft_tpot_and_throughput() -> None:
    (row,) = load_rows([CLOSED]).rows
    assert row.engine == "vllm" and row.simulated
    # TPOT is the cleaner per-token figure: vllm bench serve's ITL splits multi-token chunks
    assert set(row.measured) == {"ttft_median", "tpot_median", "output_throughput"}
    assert row.measured["ttft_median"] == pytest.approx(0.060)


def test_offline_sharegpt_rows_keep_tpot_but_not_throughput() -> None:
    line = {**CLOSED, "workload_type": "offline_max_throughput (request rate inf)"}
    (row,) = load_rows([line]).rows
    assert set(row.measured) == {"tpot_median"}  # the run's length is its longest answers'


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"dp": "8"}, "data-parallel attention"),
        ({"osl_mean": "4"}, "front-end-bound"),
        ({"workload_type": "batch_sweep"}, "workload not one of"),
        ({"isl_mean": ""}, "no input/output lengths"),
        ({"notes": "doc line 336; ...; tokenprobe: COPIED BLOCK, ..."}, "copied result block"),
    ],
)
def test_rows_the_simulator_cannot_replay_are_skipped(change: dict[str, str], reason: str) -> None:
    result = load_rows([{**CLOSED, **change}])
    assert not result.rows and reason in next(iter(result.skipped))


def test_engine_defaults_follow_the_gpu_and_the_command_overrides_them() -> None:
    h100 = make_deployment("qwen3-8b", "h100-sxm")
    a100 = make_deployment("qwen3-8b", "a100-sxm-80gb")
    # vllm/engine/arg_utils.py get_batch_defaults: big non-A100 GPUs get 1024 / 8192
    assert scheduler_for("vllm", h100, "").max_num_seqs == 1024
    assert scheduler_for("vllm", a100, "").max_num_batched_tokens == 2048
    command = "vllm serve x --max-num-seqs 64 --max-num-batched-tokens=4096"
    cfg = scheduler_for("vllm", h100, command)
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (64, 4096)
    tp8 = make_deployment("qwen3-8b", "h100-sxm", tp=8)
    assert scheduler_for("sglang", tp8, "").gpu_memory_utilization == 0.81
    assert scheduler_for("sglang", tp8, "--mem-fraction-static 0.7").gpu_memory_utilization == 0.7
    # each engine sizes its KV its own way and keeps prefix caching (block reuse) on
    rules = {e: scheduler_for(e, h100, "") for e in ("vllm", "sglang", "tensorrt-llm")}
    assert {e: c.memory_rule for e, c in rules.items()} == {
        "vllm": "vllm",
        "sglang": "sglang",
        "tensorrt-llm": "tensorrt-llm",
    }
    assert all(c.prefix_caching for c in rules.values())
    assert rules["tensorrt-llm"].capacity_policy == "guaranteed_no_evict"


def test_itl_rows_are_predicted_by_the_median_gap_not_the_mean_per_request() -> None:
    """sglang.bench_serving's median ITL is the typical step; a request's mean time per token
    (TPOT) also carries the prefill steps that stall it. Offline, with prompts arriving all the
    time, the two differ, and the ITL row must get the former."""
    line = {
        **CLOSED,
        "source_id": "datacrunch_h200_sglang",
        "engine": "SGLang",
        "engine_version": "",
        "gpu": "H100-SXM",
        "workload_type": "offline_max_throughput",
        "isl_mean": "2048",
        "osl_mean": "256",
        "num_requests": "200",
        "tpot_ms_median": "",
        "ttft_ms_median": "",
        "notes": "",
    }
    (row,) = load_rows([line]).rows
    assert "itl_median" in row.measured
    predicted = row.predict(row.deployment)
    assert predicted["itl_median"] < 0.9 * predicted["tpot_median"]


def test_low_load_decode_matches_gpustack_qwen3_8b_on_h100() -> None:
    """Real runs (vllm bench serve, concurrency 1-8, ShareGPT): at low load a step is one small
    decode batch, which the cost model prices from first principles. TTFT is not asserted: it is
    front-end latency the defaults leave at 0 (Efficiency.request_overhead_s)."""
    rows = [
        r
        for r in load_csv(DATA / "gpustack_performance_lab.csv").rows
        if r.label.startswith("Qwen3-8B h100-sxm tp1 closed")
    ]
    assert len(rows) >= 6
    errors = [o.error for o in observe(rows) if o.metric == "tpot_median"]
    assert statistics.median(abs(e) for e in errors) < 0.10


def test_every_extra_csv_loads_and_most_rows_map() -> None:
    for path in sorted(DATA.glob("*.csv")):
        result = load_csv(path)
        assert sum(result.skipped.values()) + len(result.rows) > 0, path.name
    assert len(load_csv(DATA / "sglang_datacrunch_h200.csv").rows) == 25


def test_vllm_async_scheduling_is_the_overlap_switch() -> None:
    """vLLM's --async-scheduling (no value) turns on SchedulerConfig.overlap_schedule where the
    source asks for it (held-out sources); a flag that only contains the name does not, and
    the fitted sources keep host time in series (as the profiles were fitted)."""
    dep = make_deployment("llama-3.1-8b", "h100-sxm")

    def overlaps(notes: str, overlap: bool = True) -> bool:
        return scheduler_for("vllm", dep, notes, overlap=overlap).overlap_schedule

    assert overlaps("vllm serve m --async-scheduling --max-num-seqs 8")
    assert not overlaps("vllm serve m --no-async-scheduling")
    assert not overlaps("vllm serve m --max-num-seqs 8")
    assert not overlaps("vllm serve m --async-scheduling", overlap=False)
