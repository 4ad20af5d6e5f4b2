"""The prefix cache's hit rate (issue 19): read from a server's /metrics (vLLM V1 counters,
vLLM V0 and SGLang gauges) and from records (the server's usage block; the simulator's own
count), in every summary, and in the KV-capacity finding with what prefix reuse would buy."""

from __future__ import annotations

import pytest

from tokenprobe.diagnose import diagnose
from tokenprobe.metrics import prefix_cache_hit_rate, summarize
from tokenprobe.records import RequestRecord, Run, ServerSample
from tokenprobe.sim import SchedulerConfig, simulate
from tokenprobe.telemetry.prometheus_text import server_sample
from tokenprobe.workload import Arrival, Workload, fixed

# the shapes of real scrapes: vLLM V1 (prometheus_client counters get `_total`), SGLang 0.4
VLLM_V1 = """# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} %d
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} %d
"""
SGLANG = """# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} %s
"""


def _run(server: list[ServerSample], records: list[RequestRecord] | None = None) -> Run:
    return Run("measured", records=records or [], server=server)


def test_vllm_counters_give_the_hit_rate_over_the_run() -> None:
    """Before the run 1,000 tokens queried, 100 hit; after 5,000 and 2,100: (2,100 - 100) /
    (5,000 - 1,000) = 50 % during the run (the counters' history before it does not count)."""
    samples = [server_sample(VLLM_V1 % (q, h), t) for t, q, h in ((0, 1000, 100), (9, 5000, 2100))]
    assert samples[0].prefix_cache_queries_total == 1000 and samples[0].source == "vllm"
    assert prefix_cache_hit_rate(_run(samples)) == pytest.approx(0.5)


def test_an_sglang_gauge_gives_its_mean() -> None:
    samples = [server_sample(SGLANG % v, t) for t, v in ((0, "0.2"), (1, "0.4"))]
    assert samples[0].prefix_cache_hit_rate == 0.2 and samples[0].source == "sglang"
    assert prefix_cache_hit_rate(_run(samples)) == pytest.approx(0.3)


def test_the_records_usage_wins_and_nothing_says_none() -> None:
    """Two requests of 100 prompt tokens, 30 and 70 of them cached: 50 %."""
    records = [
        RequestRecord(f"r{i}", 0.0, 0.0, 0.1, 0.2, 100, 2, extra={"server_cached_tokens": c})
        for i, c in enumerate((30.0, 70.0))
    ]
    gauge = [server_sample(SGLANG % "0.9", 0.0)]
    assert prefix_cache_hit_rate(_run(gauge, records)) == pytest.approx(0.5)
    assert prefix_cache_hit_rate(_run([])) is None
    assert summarize(_run(gauge, records))["prefix_cache_hit_rate"] == pytest.approx(0.5)


def test_the_simulator_counts_the_shared_prefix_it_served_from_cache() -> None:
    """512-token prompts sharing a 256-token prefix (16 blocks of 16), one at a time: the first
    request computes the prefix, the other 99 find it cached: 256 x 99 / (512 x 100) = 49.5 %.
    Without prefix caching nothing is counted (None)."""
    workload = Workload(
        Arrival("closed", concurrency=1), fixed(512), fixed(8), 100, shared_prefix_tokens=256
    )
    on = SchedulerConfig(prefix_caching=True)
    run = simulate(workload=workload, config=on).run()
    assert summarize(run)["prefix_cache_hit_rate"] == pytest.approx(256 * 99 / (512 * 100))
    off = simulate(workload=workload, config=SchedulerConfig(prefix_caching=False)).run()
    assert summarize(off)["prefix_cache_hit_rate"] is None


def test_a_kv_bound_run_without_reuse_says_what_a_shared_prefix_would_buy() -> None:
    """KV for ~30k tokens against 64 x 1.5k, random prompts, prefix caching on: hit rate 0, and
    a prefix of half the prompt would fit (1024 + 512) / (512 + 512) = 1.5x the sequences."""
    config = SchedulerConfig(gpu_memory_utilization=0.26, prefix_caching=True)
    run = simulate(
        input_tokens=1024, output_tokens=512, concurrency=64, num_requests=200, config=config
    ).run()
    finding = next(f for f in diagnose(run).findings if f.kind == "kv-capacity-bound")
    assert finding.evidence["prefix_cache_hit_rate"] == 0.0
    assert "1.50x the sequences" in finding.action
