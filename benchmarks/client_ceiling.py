"""The load generator's own ceiling on this machine, printed as one JSON line.

Against the trivial local stream server (`tokenprobe.loadgen.selftest`, a subprocess of its own):
requests/s with 16-token answers, streamed tokens/s with 512-token answers (closed loop, 32 in
flight), and the p99 send lag of an open loop at 500 requests/s. Targets (issue 4, 2 cores):
>= 2,000 requests/s, >= 100,000 streamed tokens/s, p99 send lag < 2 ms.

`--guidellm PATH` (the `guidellm` executable, e.g. from `pip install guidellm` in another venv)
also runs GuideLLM against the same server (concurrent, same streams and duration, 16-token
answers) and reports its requests/s beside ours, computed from its own JSON report through
tokenprobe's GuideLLM importer and metrics.

    python benchmarks/client_ceiling.py [--duration-s 5] [--guidellm /path/to/guidellm]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tokenprobe.loadgen import bench_summary
from tokenprobe.loadgen.importers import import_runs
from tokenprobe.loadgen.runner import run_blocking
from tokenprobe.loadgen.selftest import SHORT_OUTPUT_TOKENS, StreamServerProcess, measure_ceiling

TARGETS = {"requests_per_s": 2000.0, "streamed_tokens_per_s": 100_000.0, "send_lag_p99_s": 0.002}
GUIDELLM_PROMPTS = 50_000


def guidellm_ceiling(guidellm: str, url: str, duration_s: float, streams: int) -> dict[str, Any]:
    """Run GuideLLM against `url` and summarize its report with tokenprobe's metrics."""
    root = url.removesuffix("/v1")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "prompts.jsonl"
        data.write_text(
            "".join(json.dumps({"prompt": f"{i}: hello"}) + "\n" for i in range(GUIDELLM_PROMPTS))
        )
        report = Path(tmp) / "report.json"
        cmd = [
            guidellm, "run",
            "--backend", f"kind=openai_http,target={root},model=selftest",
            "--profile", f"kind=concurrent,streams={streams}",
            "--constraint", f"kind=max_duration,seconds={duration_s:g}",
            "--data", f"kind=json_file,path={data}",
            "--output", f"kind=json,path={report}",
            "--disable-console",
        ]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=duration_s * 10 + 120)
        (run,) = import_runs(report, "guidellm")
    summary = bench_summary(run)
    return {
        "requests_per_s": summary["requests_per_s"],
        "streamed_tokens_per_s": summary["output_tokens_per_s"],
        "completed": summary["completed"],
        "errors": summary["errors"],
        "streams": streams,
        "output_tokens": SHORT_OUTPUT_TOKENS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--guidellm", default=None, help="path of the guidellm executable")
    args = parser.parse_args()
    with StreamServerProcess() as server:
        ours = run_blocking(measure_ceiling(server.url, args.duration_s, args.concurrency))
        peer = (
            guidellm_ceiling(args.guidellm, server.url, args.duration_s, args.concurrency)
            if args.guidellm
            else None
        )
    passed = {
        "requests_per_s": ours["requests_per_s"] >= TARGETS["requests_per_s"],
        "streamed_tokens_per_s": ours["streamed_tokens_per_s"] >= TARGETS["streamed_tokens_per_s"],
        "send_lag_p99_s": (ours["send_lag_p99_s"] or 1.0) < TARGETS["send_lag_p99_s"],
    }
    line = {"benchmark": "client_ceiling", **ours, "targets": TARGETS, "pass": passed}
    line["guidellm"] = peer
    sys.stdout.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
