"""Sampler overhead: CPU share of one core spent sampling the host (psutil alone) at 10 and 50 Hz.

The process does nothing but sample for `--seconds` per rate (the main thread sleeps), so the
process CPU time over the wall time is the sampler's cost; an idle baseline of the same length
(no sampler) is subtracted. Issue 5's target: at least 20 Hz at under 2 % of one core. Prints one
JSON line.

    python benchmarks/sampler_overhead.py [--seconds 5] [--rates 10,50] [--nvml]
"""

from __future__ import annotations

import argparse
import json
import time

from tokenprobe.telemetry.host import HostReader
from tokenprobe.telemetry.sampler import Sampler, open_gpus


def cpu_share(seconds: float, sampler: Sampler | None) -> tuple[float, int]:
    """(process CPU seconds / wall seconds, host samples taken) over `seconds`."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if sampler is None:
        time.sleep(seconds)
        taken = 0
    else:
        with sampler:
            time.sleep(seconds)
        taken = len(sampler.host_samples)
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0), taken


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="10,50", help="sampling rates in Hz")
    parser.add_argument("--nvml", action="store_true", help="also read every GPU NVML sees")
    args = parser.parse_args()
    baseline, _ = cpu_share(args.seconds, None)
    results: dict[str, dict[str, float | int]] = {}
    notes: list[str] = []
    for rate_hz in (float(r) for r in args.rates.split(",")):
        gpus, opened = open_gpus() if args.nvml else (None, [])
        notes += opened
        sampler = Sampler(gpus, HostReader(), period_s=1.0 / rate_hz)
        share, taken = cpu_share(args.seconds, sampler)
        results[f"{rate_hz:g}_hz"] = {
            "cpu_share_of_one_core": round(max(share - baseline, 0.0), 5),
            "samples": taken,
            "expected_samples": int(args.seconds * rate_hz),
            "missed_ticks": sampler.missed_ticks,
        }
    line = {
        "benchmark": "sampler_overhead",
        "sources": "psutil+nvml" if args.nvml else "psutil",
        "seconds_per_rate": args.seconds,
        "idle_baseline_share": round(baseline, 5),
        "results": results,
        "notes": sorted(set(notes)),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
