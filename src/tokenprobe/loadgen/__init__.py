"""The load generator: a streaming OpenAI-compatible client, closed/open-loop runner, datasets,
importers of other tools' results, and a self-test against a trivial local stream server.

Python API (the CLI `tokenprobe bench` is a thin layer over it):

    from tokenprobe.loadgen import BenchConfig, run_bench
    run = run_bench(BenchConfig(url="http://127.0.0.1:8080/v1", model="m", concurrency=4,
                                num_requests=100, input_tokens=128, output_tokens=64, out="runs/x"))
"""

from __future__ import annotations

from tokenprobe.loadgen.client import StreamClient, Target, WireRequest
from tokenprobe.loadgen.config import BenchConfig
from tokenprobe.loadgen.credentials import mask_url, metrics_urls, url_secrets
from tokenprobe.loadgen.importers import import_runs
from tokenprobe.loadgen.prompts import PromptItem
from tokenprobe.loadgen.runner import (
    OnRecord,
    count_dataset,
    run_bench,
    run_bench_async,
    sweep_configs,
)
from tokenprobe.loadgen.selftest import run_self_test
from tokenprobe.loadgen.summary import bench_summary, client_figures

__all__ = [
    "BenchConfig",
    "OnRecord",
    "PromptItem",
    "StreamClient",
    "Target",
    "WireRequest",
    "bench_summary",
    "client_figures",
    "count_dataset",
    "import_runs",
    "mask_url",
    "metrics_urls",
    "run_bench",
    "run_bench_async",
    "run_self_test",
    "sweep_configs",
    "url_secrets",
]
