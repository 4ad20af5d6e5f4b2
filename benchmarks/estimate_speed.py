"""Speed of the estimator: one `estimate()` call, and the vectorised decode sweep.

Targets (issue 2): one estimate < 5 ms inside Python; sweep >= 100,000 configurations/s.
Prints one JSON line.
"""

from __future__ import annotations

import json
import platform
import time

import numpy as np

import tokenprobe
from tokenprobe.cost.sweep import decode_sweep
from tokenprobe.hardware import gpu_names


def _estimate_ms(repeats: int = 200) -> float:
    tokenprobe.estimate("llama-3.1-8b", "h100-sxm", input_tokens=1024, output_tokens=256)
    start = time.perf_counter()
    for _ in range(repeats):
        tokenprobe.estimate(
            "llama-3.1-8b", "h100-sxm", input_tokens=1024, output_tokens=256, batch=8
        )
    return (time.perf_counter() - start) / repeats * 1e3


def _sweep_rate() -> tuple[int, float]:
    gpus = gpu_names()
    batches, contexts = np.arange(1, 257), np.linspace(128, 32768, 64)
    decode_sweep("llama-3.1-8b", gpus[:1], batches[:2], contexts[:2])
    start = time.perf_counter()
    sweep = decode_sweep("llama-3.1-8b", gpus, batches, contexts)
    return sweep.configurations, sweep.configurations / (time.perf_counter() - start)


def main() -> None:
    estimate_ms = _estimate_ms()
    configs, rate = _sweep_rate()
    print(
        json.dumps(
            {
                "benchmark": "estimate_speed",
                "estimate_ms": round(estimate_ms, 3),
                "estimate_target_ms": 5.0,
                "sweep_configurations": configs,
                "sweep_configurations_per_s": round(rate),
                "sweep_target_per_s": 100_000,
                "ok": estimate_ms < 5.0 and rate >= 100_000,
                "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
            }
        )
    )


if __name__ == "__main__":
    main()
