"""Speed of `plan`: 5 GPU types x 3 TP x 3 precisions (GPU counts follow from the rate) for one
chat workload, on every core. Target (issue 7): under 60 s. Prints one JSON line."""

from __future__ import annotations

import json
import os
import time

from tokenprobe.plan import PlanRequest, candidates, fixed_lengths, plan


def main() -> None:
    in_len, out_len = fixed_lengths(512, 256)
    req = PlanRequest(
        "llama-3.1-70b", 30.0, in_len, out_len, 2.0, 0.05,
        candidates(["h100-sxm", "h200", "a100-sxm-80gb", "l40s", "b200"], ["bf16", "fp8", "int4"],
                   [2, 4, 8], [256]),
    )  # fmt: skip
    start = time.perf_counter()
    result = plan(req)
    elapsed = time.perf_counter() - start
    best = result.feasible[0] if result.feasible else None
    print(json.dumps({
        "benchmark": "plan_speed",
        "candidates": len(req.candidates),
        "simulated": sum(1 for o in result.outcomes if o.simulated),
        "simulations": result.simulations,
        "seconds": round(elapsed, 2),
        "target_s": 60,
        "ok": elapsed < 60,
        "workers": os.cpu_count(),
        "best": None if best is None else best.candidate.label,
        "best_gpus": None if best is None else best.gpus,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
