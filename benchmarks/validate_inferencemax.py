"""InferenceMAX's single-node rows, held out of every fit: errors per configuration group.

benchmarks/data/inferencemax_agg.csv (data README §12) is read by validate.py like every CSV of
benchmarks/data (mapper: tokenprobe.calibrate.inferencemax) and predicted with the shipped
profile of the row's engine on its GPU's vendor and the engine's default scheduler with the
row's serving flags, as a user would get them (`tokenprobe simulate --engine ...`). This module
prints, per group (GPU, engine, version, checkpoint, weight format), the rows run out of the
rows there are, and the MdAPE and median signed error (+: predicted high) of output throughput,
median TPOT and median TTFT; then the rows that cannot be expressed, by group and reason.

Standalone: ``python benchmarks/validate_inferencemax.py`` (the same table, shipped profiles only,
~3-5 min on 2 cores); validate.py prints it after its tables when the CSV is selected
(``validate.py --only inferencemax --no-deployments``).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repo_paths import DATA_DIR
from tokenprobe.calibrate import (
    Observation,
    group_key,
    group_of,
    load_profile,
    load_rows,
    observe,
    profile_of,
)
from tokenprobe.calibrate.inferencemax import SOURCE_ID
from tokenprobe.files import read_text
from validation_data import bias_pct, mdape_pct, run_main

CSV = DATA_DIR / "inferencemax_agg.csv"
WIDTH = 100  # the longest group name (an ATOM image tag and checkpoint)
METRICS = (
    ("throughput", "output_throughput"),
    ("TPOT", "tpot_median"),
    ("TTFT", "ttft_median"),
)


def lines(path: Path = CSV) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_text(path), newline="")))


def unexpressed(rows: Sequence[dict[str, str]]) -> Counter[tuple[str, str]]:
    """(group, reason) -> rows that map to no prediction (sources.load_rows' reasons)."""
    out: Counter[tuple[str, str]] = Counter()
    for line in rows:
        result = load_rows([line], "row")
        for reason, n in result.skipped.items():
            out[(group_key(line), reason.removeprefix("row: "))] += n
    return out


def table(
    observations: Sequence[Observation], rows: Sequence[dict[str, str]]
) -> list[dict[str, Any]]:
    """Per group: coverage and each metric's MdAPE and bias (module docstring)."""
    mine = [o for o in observations if o.source.startswith(SOURCE_ID)]
    totals = Counter(group_key(line) for line in rows)
    out = []
    for group, total in sorted(totals.items()):
        obs = [o for o in mine if group_of(o.label) == group]
        entry: dict[str, Any] = {"group": group, "rows": total, "run": len({o.label for o in obs})}
        for name, metric in METRICS:
            errors = [o.error for o in obs if o.metric == metric]
            entry[f"{name}_mdape_pct"] = mdape_pct(errors)
            entry[f"{name}_bias_pct"] = bias_pct(errors)
        out.append(entry)
    return out


def _cell(value: float | None, signed: bool = False) -> str:
    if value is None:
        return f"{'-':>7}"
    return f"{value:+6.1f}%" if signed else f"{value:6.1f}%"


def section(observations: Sequence[Observation], path: Path = CSV) -> dict[str, Any]:
    """Print the group table and the unexpressed rows; return both for the JSON line."""
    rows = lines(path)
    groups = table(observations, rows)
    print("\nInferenceMAX single-node rows (held out of every fit; shipped profiles):")
    head = " ".join(f"{n + ' MdAPE':>15} {'bias':>7}" for n, _ in METRICS)
    print(f"{'group':{WIDTH}} {'run':>8} {head}")
    for g in groups:
        cells = " ".join(
            f"{_cell(g[f'{n}_mdape_pct']):>15} {_cell(g[f'{n}_bias_pct'], True)}"
            for n, _ in METRICS
        )
        print(f"{g['group']:{WIDTH}} {g['run']:3d}/{g['rows']:<4d} {cells}")
    run, total = sum(g["run"] for g in groups), sum(g["rows"] for g in groups)
    print(f"coverage: {run}/{total} rows ({100 * run / max(total, 1):.0f} %)")
    missing = unexpressed(rows)
    print("not expressed (group: reason):")
    for (group, reason), n in sorted(missing.items()):
        print(f"  {n:4d}  {group}: {reason}")
    return {
        "groups": groups,
        "coverage": [run, total],
        "not_expressed": [{"group": g, "reason": r, "rows": n} for (g, r), n in missing.items()],
    }


def predict(path: Path = CSV) -> list[Observation]:
    """Every expressible row predicted with its shipped profile (defaults where none ships)."""
    out: list[Observation] = []
    for row in load_rows(lines(path), path.name).rows:
        name = profile_of(row)
        if name is None:
            out.extend(observe([row]))
        else:
            p = load_profile(name)
            out.extend(observe([row], p.efficiency, p.power))
    return out


def main() -> int:
    section(predict())
    return 0


if __name__ == "__main__":
    run_main(main)
