"""Public measurements of the deployments people run now, replayed with what tokenprobe has today.

The rows (benchmarks/data/deployments/*.csv; benchmarks/data/README.md, sections 7-10) are of
three kinds, `pd` (prefill/decode disaggregation), `dpep` (data-parallel attention with expert
parallelism) and `spec` (speculative decoding); benchmarks/deployment_replay.py says how each is
predicted with the simulator and the cost model of today, and counts what cannot be expressed
as not covered. Per kind and per source: rows, covered, and for median TTFT, median ITL and
throughput the median absolute error (MdAPE) and median signed error of
(predicted - measured) / measured. Nothing here is fitted: a source is "held out" unless a
shipped profile names it in `fitted_on` (checked). Parameters: each engine's shipped profile
(`calibrate.profile_name_for`), or the model's defaults with `--params default`.

Usage: python benchmarks/validate_deployments.py [--only NAME ...] [--kind pd|dpep|spec ...]
[--params profile|default] [--rows] [--aggregated]; prints a table, then one JSON line
(`section()` is what benchmarks/validate.py calls).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import validate_inferencemax_disagg
from deployment_replay import KINDS, REPORTED, Replay, replay
from tokenprobe.calibrate import load_profile, shipped_profiles
from tokenprobe.errors import SchemaError, TokenprobeError
from tokenprobe.files import read_text
from validation_data import add_metric_stats, metric_cells, run_main

DATA_DIR = Path(__file__).resolve().parent / "data" / "deployments"
METRICS = ("ttft", "itl", "throughput")
REQUIRED = ("source_id", "source_ref", "kind", "phase", "model", "gpu", "engine")


def load_rows(paths: Sequence[Path]) -> list[dict[str, str]]:
    """Every row of the CSVs; SchemaError for a file without the columns or a row without a
    source (`source_ref`), kind or phase."""
    out = []
    for path in paths:
        reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise SchemaError(str(path), f"no column {', '.join(missing)}")
        for n, row in enumerate(reader, start=2):
            for column in ("source_id", "source_ref", "kind", "phase"):
                if not (row.get(column) or "").strip():
                    raise SchemaError(f"{path}:{n}", f"empty {column}")
            if row["kind"] not in KINDS:
                raise SchemaError(f"{path}:{n}", f"kind {row['kind']!r} not one of {KINDS}")
            out.append({k: v or "" for k, v in row.items() if k})
    return out


# --------------------------------------------------------------------------------- summary


def held_out_sources() -> Callable[[str], bool]:
    fitted = {s for name in shipped_profiles() for s in load_profile(name).fitted_on}
    return lambda source: source not in fitted


def summarize(replays: Sequence[Replay]) -> dict[str, Any]:
    """Rows, covered and MdAPE per metric, per kind and per (kind, source)."""
    held_out = held_out_sources()
    groups: dict[tuple[str, str], list[Replay]] = {}
    for r in replays:
        groups.setdefault((r.kind, "all"), []).append(r)
        groups.setdefault((r.kind, r.source), []).append(r)
    out = []
    for (kind, source), rs in sorted(
        groups.items(), key=lambda kv: (REPORTED.index(kv[0][0]), kv[0][1])
    ):
        row: dict[str, Any] = {"kind": kind, "source": source, "rows": len(rs)}
        row["covered"] = sum(r.predicted is not None for r in rs)
        if source != "all":
            row["held_out"] = held_out(source)
        add_metric_stats(row, [r.errors() for r in rs], METRICS)
        out.append(row)
    not_covered = Counter(f"{r.kind}: {r.why}" for r in replays if r.predicted is None)
    return {"by_kind": out, "not_covered": dict(not_covered)}


def print_summary(summary: Mapping[str, Any], params: str) -> None:
    print(f"\ndeployments replayed (benchmarks/data/deployments; parameters: {params}; nothing "
          "fitted here: held out = no shipped profile fitted on the source)")  # fmt: skip
    print(f"{'kind':6} {'source':28} {'set':8} {'rows':>4} {'cov':>4}  "
          + "  ".join(f"{m + ' n/MdAPE/bias':>22}" for m in METRICS))  # fmt: skip
    for r in summary["by_kind"]:
        cells = metric_cells(r, METRICS)
        part = "" if r["source"] == "all" else ("held-out" if r["held_out"] else "fitted")
        print(f"{r['kind']:6} {r['source']:28} {part:8} {r['rows']:4d} {r['covered']:4d}  "
              + cells)  # fmt: skip
    for why, n in summary["not_covered"].items():
        print(f"  not covered: {n:3d}  {why}")


def section(only: Sequence[str] = (), kinds: Sequence[str] = (), params: str = "profile",
            rows: bool = False, aggregated: bool = False) -> dict[str, Any]:  # fmt: skip
    """Replay the selected rows, print the table and return the JSON-ready summary;
    `aggregated`: the pd rows also by the aggregated stand-in (kind pd-agg)."""
    paths = [
        p for p in sorted(DATA_DIR.glob("*.csv")) if not only or any(o in p.name for o in only)
    ]
    if not paths:
        print(f"\ndeployments: no CSV in {DATA_DIR.name}/ matches {' '.join(only)}")
        return {"params": params, "files": [], "by_kind": [], "not_covered": {}}
    # InferenceMAX's multi-node PD rows have their own replay (per-worker recipes, attention DP)
    imax = validate_inferencemax_disagg.CSV
    paths, with_imax = [p for p in paths if p != imax], imax in paths
    selected = [r for r in load_rows(paths) if not kinds or r["kind"] in kinds]
    replays = [replay(r, params) for r in selected]
    if aggregated:
        replays += [replay(r, params, aggregated=True) for r in selected if r["kind"] == "pd"]
    if rows:
        for r in replays:
            errs = " ".join(f"{m} {100 * e:+6.1f}%" for m, e in r.errors().items())
            print(f"{r.kind:6} {r.source:28} {r.label:44} {errs or 'not covered: ' + r.why}"
                  f"{'  [' + r.note + ']' if r.note else ''}")  # fmt: skip
    summary = summarize(replays)
    print_summary(summary, params)
    out = {"params": params, "files": [p.name for p in paths], **summary}
    if with_imax and (not kinds or "pd" in kinds):
        out["inferencemax_disagg"] = validate_inferencemax_disagg.section(rows)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only the CSVs whose file name contains NAME (repeatable)",
    )
    parser.add_argument("--kind", action="append", default=[], choices=KINDS)
    parser.add_argument("--params", choices=("profile", "default"), default="profile")
    parser.add_argument("--rows", action="store_true", help="print every row's errors")
    parser.add_argument(
        "--aggregated",
        action="store_true",
        help="also replay the pd rows as P + D aggregated replicas (kind pd-agg), for contrast",
    )
    args = parser.parse_args(argv)
    try:
        out = section(args.only, args.kind, args.params, args.rows, args.aggregated)
    except TokenprobeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"benchmark": "validate_deployments", **out}))
    return 0


if __name__ == "__main__":
    run_main(main)
