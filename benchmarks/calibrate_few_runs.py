"""Calibration from a user's few runs (MISSION M5) on public data, split by run.

Each measured series of a public table (one engine, model, GPU and parallelism, i.e. one server)
with at least six rows gives its light, middle and heavy rows to a fit started from the engine's
shipped profile; its other rows are predicted with the shipped and with the fitted parameters
(`tokenprobe.calibrate.few_runs` says how). Prints one JSON line: per source and pooled, the rows
judged and the median absolute error before and after, per metric. Only tables priced without
simulating are used by default (the whole run takes about a minute on one core).
    python benchmarks/calibrate_few_runs.py [--only mlenergy]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from tokenprobe.calibrate import CALIBRATION_RUNS, Row, few_runs, load_csv
from validation_data import REPO_ROOT, candidates

SOURCES = (
    "mlenergy_leaderboard_v3_h100.csv",
    "mlenergy_leaderboard_v3_b200.csv",
    "argonne_llm_inference_bench.csv",
    "trtllm_v0.9.0_static_batch.csv",
    "amd_rocm_vllm_mi300x.csv",
)


def _mdape(pairs: list[tuple[float, float]]) -> dict[str, float]:
    """Median and 90th percentile of |error|, before and after, in percent."""
    p90 = max(0, round(0.9 * len(pairs)) - 1)
    before, after = sorted(b for b, _ in pairs), sorted(a for _, a in pairs)
    return {
        "rows": len(pairs),
        "before_pct": round(100 * statistics.median(before), 1),
        "after_pct": round(100 * statistics.median(after), 1),
        "p90_before_pct": round(100 * before[p90], 1),
        "p90_after_pct": round(100 * after[p90], 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=None, help="the shared/validation folder")
    ap.add_argument("--only", action="append", default=[], help="CSVs whose name contains this")
    args = ap.parse_args(argv)
    _, folder = candidates(args.data_dir)
    paths = [d / n for n in SOURCES for d in (folder, REPO_ROOT / "benchmarks" / "data")]
    chosen = [p for p in paths if p.is_file() and all(o in p.name for o in args.only)]
    if not chosen:
        print(f"no table of {', '.join(SOURCES)} found (--data-dir, --only)", file=sys.stderr)
        return 2
    rows: list[Row] = [r for p in chosen for r in load_csv(p).rows]
    per_source = few_runs(rows)
    pooled: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for metrics in per_source.values():
        for metric, pairs in metrics.items():
            pooled[metric] += pairs
    doc = {
        "benchmark": "calibrate_few_runs",
        "calibration_runs_per_server": CALIBRATION_RUNS,
        "tables": [p.name for p in chosen],
        "pooled": {m: _mdape(p) for m, p in sorted(pooled.items())},
        "sources": {
            s: {m: _mdape(p) for m, p in sorted(v.items())} for s, v in sorted(per_source.items())
        },
    }
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
