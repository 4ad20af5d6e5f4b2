"""KV-capacity-bound from the server's OWN /metrics (the path a measured vLLM run takes), on
HANDWRITTEN vLLM V1 scrapes: the text format of tests/data/telemetry/vllm_metrics.txt with the
gauges set by the test (not a recording), parsed by `server_sample` as `bench --telemetry` does."""

from __future__ import annotations

from tokenprobe.diagnose import diagnose
from tokenprobe.records import Run
from tokenprobe.telemetry.prometheus_text import server_sample

SCRAPE = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} {preempted}
"""


def _run(kv: list[float], waiting: list[int], preempted: list[int]) -> Run:
    samples = [
        server_sample(SCRAPE.format(running=24, waiting=w, kv=k, preempted=p), t_s=0.5 * i)
        for i, (k, w, p) in enumerate(zip(kv, waiting, preempted, strict=True))
    ]
    return Run(kind="imported", server=samples, duration_s=0.5 * len(samples))


def test_full_kv_with_a_queue_and_preemptions_fires_from_server_metrics() -> None:
    run = _run([0.5, 0.8, *[0.97] * 18], [0, 0, *[6] * 18], [0, 0, 0, 1, 2, *[3] * 15])
    finding = next(f for f in diagnose(run).findings if f.kind == "kv-capacity-bound")
    assert finding.evidence["preemptions"] == 3  # the counter's rise over the run
    assert finding.evidence["kv_usage_peak"] == 0.97
    assert finding.severity == "critical"


def test_half_full_kv_without_pressure_does_not_fire() -> None:
    run = _run([0.45] * 20, [0] * 20, [5] * 20)  # preemptions before the run do not count
    verdict = next(v for v in diagnose(run).verdicts if v.rule == "kv-capacity-bound")
    assert verdict.status == "clear"


def test_full_kv_without_queueing_or_preemption_is_not_a_bottleneck_yet() -> None:
    run = _run([0.95] * 20, [0] * 20, [0] * 20)
    verdict = next(v for v in diagnose(run).verdicts if v.rule == "kv-capacity-bound")
    assert verdict.status == "clear"
