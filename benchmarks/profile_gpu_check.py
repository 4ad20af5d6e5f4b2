"""The device check of issue 8: profile Llama-3.1-8B (bf16) on the local GPU, then compare the
estimator's prefill and decode-step times with the default parameters and with a profile fitted
on two thirds of the measured series (held-out: every third batch size / prefill length).

Needs PyTorch and an NVIDIA GPU (about 5-10 minutes on an H100/H200); without them it prints why
and exits 0. Writes the run folder (keep it as test data) and prints one JSON line.

    python benchmarks/profile_gpu_check.py [--out profile-llama-3.1-8b] [--model llama-3.1-8b]
"""

from __future__ import annotations

import argparse
import json
import time

from tokenprobe.calibrate import calibrate, observe, rows_from_run, save_profile
from tokenprobe.calibrate.profiler import (
    ProfileSpec,
    gpu_unavailable_reason,
    profile_gpu,
    write_profile_run,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--out", default="profile-llama-3.1-8b")
    args = parser.parse_args()
    reason = gpu_unavailable_reason()
    if reason is not None:
        print(f"profile_gpu_check: {reason}; nothing measured")
        return 0
    t0 = time.perf_counter()
    spec = ProfileSpec(
        model=args.model,
        batches=(1, 4, 16, 32, 64, 128, 256),
        contexts=(512, 2048, 8192),
        prefill_lengths=(128, 256, 512, 1024, 2048, 4096, 8192),
    )
    run = profile_gpu(spec)
    folder = write_profile_run(run, args.out)
    rows = rows_from_run(folder).rows
    cal = calibrate(rows)
    save_profile(cal.profile(f"pytorch-eager-{run.gpu}"), folder / "fitted_profile.toml")
    before = observe(rows)
    after = observe(rows, cal.fit.params.efficiency, cal.fit.params.power)
    print(f"{'point':40} {'metric':16} {'measured':>10} {'default':>8} {'fitted':>8}")
    for b, a in zip(before, after, strict=True):
        print(f"{b.label:40} {b.metric:16} {b.measured:10.4g} {100 * b.error:+7.1f}% "
              f"{100 * a.error:+7.1f}%")  # fmt: skip
    for e in cal.errors():
        print(f"{e.set:9} {e.metric:24} {e.rows:4d} {e.mdape_before_pct:6.1f}% -> "
              f"{e.mdape_after_pct:6.1f}%")  # fmt: skip
    print(
        json.dumps(
            {
                "benchmark": "profile_gpu_check",
                "device": run.device_name,
                "points": len(run.points),
                "peak_memory_bytes": run.peak_memory_bytes,
                "wall_s": round(time.perf_counter() - t0, 1),
                **cal.to_dict(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
