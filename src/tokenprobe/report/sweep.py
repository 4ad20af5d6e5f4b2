"""A sweep (`bench --sweep concurrency=1,2,4` or `rate=...`): one run folder per load point
under the sweep folder (`<out>/concurrency_4/`, `<out>/rate_2/`, see loadgen.sweep_configs),
shown as throughput-vs-latency and goodput-vs-load curves with the knee marked.

The knee (`find_knee`), the highest load worth running at:
- SLO rule, when the points' summaries carry SLOs (`slo_ttft_s` / `slo_tpot_s`) and goodput: the
  highest-load point whose SLO attainment (requests within the SLOs / all requests sent, failed
  ones included) is at least `SLO_ATTAINMENT` (90 %, the attainment DistServe (Zhong et al., OSDI
  2024) plans for). None when no point meets it.
- Saturation rule, otherwise: the first point after which the next point's output tokens/s gain
  less than `KNEE_THROUGHPUT_GAIN` (10 %) while its p90 end-to-end latency grows more than
  `KNEE_LATENCY_GROWTH` (50 %): past it, more load buys latency, not throughput. None when the
  sweep never saturates.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenprobe.metrics import SLO_ATTAINMENT, slo_attainment, summarize
from tokenprobe.records import CONFIG_FILE, read_run, read_summary
from tokenprobe.report import fmt
from tokenprobe.report.describe import run_facts
from tokenprobe.report.html import Row, Section, Table
from tokenprobe.report.plot import PALETTE, Figure, axis, figure, layout, vline
from tokenprobe.units import MILLI

KNEE_THROUGHPUT_GAIN = 0.10
KNEE_LATENCY_GROWTH = 0.50
LOAD_FIELDS: tuple[tuple[str, str], ...] = (
    ("concurrency", "concurrency (users)"),
    ("rate_per_s", "request rate (req/s)"),
)
KNEE_COLOR = "#C44E52"


@dataclass(frozen=True)
class SweepPoint:
    """One load point: its folder name, the swept field and value, its config and summary."""

    name: str
    load_field: str
    load: float
    kind: str
    config: dict[str, Any]
    summary: dict[str, Any]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _stat(summary: dict[str, Any], key: str, stat: str) -> float | None:
    stats = summary.get(key)
    return _number(stats.get(stat)) if isinstance(stats, dict) else None


def point_load(config: dict[str, Any]) -> tuple[str, float] | None:
    """(field, value) of a point's load: its concurrency, else its request rate."""
    for key, _ in LOAD_FIELDS:
        value = _number(config.get(key))
        if value is not None and value > 0:
            return key, value
    return None


def is_sweep_folder(path: str | Path) -> bool:
    """A folder without config.json whose sub-folders include at least one run folder."""
    root = Path(path)
    if not root.is_dir() or os.path.lexists(root / CONFIG_FILE):
        return False
    return bool(sweep_point_dirs(root))


def sweep_point_dirs(root: Path) -> list[Path]:
    """The run folders (sub-folders with a config.json) directly under a sweep folder."""
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    return [p for p in entries if p.is_dir() and os.path.lexists(p / CONFIG_FILE)]


def make_point(name: str, kind: str, config: dict[str, Any], summary: dict[str, Any]) -> SweepPoint:
    """A SweepPoint of a run's config and summary (its load: concurrency or rate, else 0)."""
    load = point_load(config) or ("concurrency", 0.0)
    return SweepPoint(name, load[0], load[1], kind, config, summary)


def read_sweep(root: str | Path) -> list[SweepPoint]:
    """Every point of a sweep folder, by load (a point without summary.json is summarized)."""
    points = []
    for path in sweep_point_dirs(Path(root)):
        run = read_run(path)
        summary = read_summary(path) or summarize(run)
        points.append(make_point(path.name, run.kind, run.config, summary))
    return sorted(points, key=lambda p: (p.load_field, p.load))


def attainment(point: SweepPoint) -> float | None:
    """Share of the point's requests (failed ones included) that met its SLOs; None when the
    point has no SLOs or no goodput."""
    s = point.summary
    slos = [_number(s.get(k, point.config.get(k))) for k in ("slo_ttft_s", "slo_tpot_s")]
    if all(v is None for v in slos):
        return None
    return slo_attainment(
        {
            k: _number(s.get(k))
            for k in ("goodput_requests_per_s", "duration_s", "completed", "failed")
        }
    )


def _growth(before: float | None, after: float | None) -> float | None:
    """after / before - 1, or None when either is unknown or `before` is not positive."""
    if before is None or after is None or before <= 0:
        return None
    return after / before - 1


def find_knee(points: list[SweepPoint]) -> tuple[int | None, str]:
    """(index of the knee point in `points` (sorted by load), the rule that chose it); see the
    module docstring for the two rules."""
    shares = [attainment(p) for p in points]
    if any(a is not None for a in shares):
        ok = [i for i, a in enumerate(shares) if a is not None and a >= SLO_ATTAINMENT]
        rule = f"highest load with at least {SLO_ATTAINMENT:.0%} of requests within the SLOs"
        return (ok[-1] if ok else None), rule
    rule = (
        f"last point before throughput gains < {KNEE_THROUGHPUT_GAIN:.0%} while p90 E2E "
        f"grows > {KNEE_LATENCY_GROWTH:.0%}"
    )
    for i in range(len(points) - 1):
        a, b = points[i].summary, points[i + 1].summary
        gain = _growth(_number(a.get("output_tokens_per_s")), _number(b.get("output_tokens_per_s")))
        growth = _growth(_stat(a, "e2e_s", "p90"), _stat(b, "e2e_s", "p90"))
        if gain is None or growth is None:
            continue
        if gain < KNEE_THROUGHPUT_GAIN and growth > KNEE_LATENCY_GROWTH:
            return i, rule
    return None, rule


def load_text(load: float) -> str:
    """A load for people: a concurrency or a whole rate without decimals (4, not 4.00)."""
    return f"{int(load):,}" if float(load).is_integer() else fmt.num(load)


def _load_label(field: str) -> str:
    return dict(LOAD_FIELDS).get(field, field)


def _knee_marker(x: list[float | None], y: list[float | None], knee: int | None) -> list[Any]:
    if knee is None or x[knee] is None or y[knee] is None:
        return []
    return [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "knee",
            "x": [x[knee]],
            "y": [y[knee]],
            "marker": {"symbol": "star", "size": 18, "color": KNEE_COLOR},
            "hovertemplate": "knee<extra></extra>",
        }
    ]


def throughput_latency_figure(points: list[SweepPoint], knee: int | None) -> Figure:
    """Output tokens/s against p90 latency (TTFT and E2E, ms, log x), one marker per load point
    labelled with its load; the knee starred on the E2E curve."""
    tput = [_number(p.summary.get("output_tokens_per_s")) for p in points]
    labels = [load_text(p.load) for p in points]
    data: list[dict[str, Any]] = []
    e2e: list[float | None] = []
    for (key, name), color in zip(
        (("ttft_s", "TTFT p90"), ("e2e_s", "E2E p90")), (PALETTE[0], PALETTE[1]), strict=True
    ):
        xs = [None if (v := _stat(p.summary, key, "p90")) is None else v / MILLI for p in points]
        e2e = xs
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers+text",
                "name": name,
                "x": xs,
                "y": tput,
                "text": labels,
                "textposition": "top left",
                "cliponaxis": False,
                "line": {"color": color, "width": 2},
                "hovertemplate": name + " %{x:.4g} ms: %{y:.4g} tokens/s (load %{text})"
                "<extra></extra>",
            }
        )
    data.extend(_knee_marker(e2e, tput, knee))
    return figure(
        data,
        layout(
            "Throughput vs latency (labels: the load of each point)",
            axis("p90 latency (ms, log)", type="log"),
            axis("output tokens/s", rangemode="tozero"),
        ),
    )


def goodput_load_figure(points: list[SweepPoint], knee: int | None) -> Figure:
    """Requests/s (and goodput where SLOs were given) against the swept load; the knee as a
    dashed line."""
    field = points[0].load_field if points else "concurrency"
    x: list[float | None] = [p.load for p in points]
    rps = [_number(p.summary.get("requests_per_s")) for p in points]
    good = [_number(p.summary.get("goodput_requests_per_s")) for p in points]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "requests/s completed",
            "x": x,
            "y": rps,
            "line": {"color": PALETTE[0], "width": 2},
            "hovertemplate": "%{y:.4g} req/s at load %{x}<extra></extra>",
        }
    ]
    if any(g is not None for g in good):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "goodput (req/s within the SLOs)",
                "x": x,
                "y": good,
                "line": {"color": PALETTE[2], "width": 2},
                "hovertemplate": "goodput %{y:.4g} req/s at load %{x}<extra></extra>",
            }
        )
    fig_layout = layout(
        "Goodput vs load",
        axis(_load_label(field)),
        axis("requests/s", rangemode="tozero"),
    )
    if knee is not None:
        shape, note = vline(points[knee].load, f"knee: {load_text(points[knee].load)}", KNEE_COLOR)
        fig_layout["shapes"], fig_layout["annotations"] = [shape], [note]
    return figure(data, fig_layout)


def _slos(points: list[SweepPoint]) -> str:
    """The SLOs the points were counted against (the first point that names any)."""
    for p in points:
        parts = [
            f"{label} <= {fmt.ms(v, unit=True)}"
            for key, label in (("slo_ttft_s", "TTFT"), ("slo_tpot_s", "TPOT"))
            if (v := _number(p.summary.get(key, p.config.get(key)))) is not None
        ]
        if parts:
            return ", ".join(parts)
    return ""


def _point_rows(points: list[SweepPoint], knee: int | None) -> list[Row]:
    rows: list[Row] = []
    for i, p in enumerate(points):
        s = p.summary
        share = attainment(p)
        rows.append(
            (
                p.name + (" (knee)" if i == knee else ""),
                load_text(p.load),
                f"{fmt.num(s.get('completed'))} / {fmt.num(s.get('failed'))}",
                fmt.num(s.get("requests_per_s")),
                fmt.num(s.get("output_tokens_per_s")),
                fmt.num(s.get("goodput_requests_per_s")),
                fmt.pct(share),
                *(
                    fmt.ms(_stat(s, k, q))
                    for k, q in (
                        ("ttft_s", "p50"),
                        ("ttft_s", "p90"),
                        ("tpot_s", "p50"),
                        ("e2e_s", "p90"),
                    )
                ),
            )
        )
    return rows


POINT_HEADER: Row = (
    "point",
    "load",
    "completed / failed",
    "req/s",
    "output tok/s",
    "goodput req/s",
    "within SLOs",
    "TTFT p50 (ms)",
    "TTFT p90 (ms)",
    "TPOT p50 (ms)",
    "E2E p90 (ms)",
)


def sweep_sections(points: list[SweepPoint], name: str = "") -> list[Section]:
    """A sweep's report: what ran and the knee first, the curves, then the table of points."""
    knee, rule = find_knee(points)
    first = points[0] if points else None
    facts = run_facts(first.kind, first.config) if first else {}
    field = first.load_field if first else "concurrency"
    what: list[Row] = [(k if k != "gpu" else "GPU", v) for k, v in facts.items() if k != "load"]
    what.append(("swept", f"{_load_label(field)}: {', '.join(load_text(p.load) for p in points)}"))
    if knee is None:
        verdict = f"no knee within the sweep ({rule})"
    else:
        k = points[knee]
        verdict = (
            f"{_load_label(field)} {load_text(k.load)} ({k.name}): "
            f"{fmt.num(k.summary.get('output_tokens_per_s'))} output tokens/s at p90 E2E "
            f"{fmt.ms(_stat(k.summary, 'e2e_s', 'p90'), unit=True)}"
        )
    what.append(("knee", verdict))
    slos = _slos(points)
    if slos:
        what.append(("SLOs", slos))
    return [
        Section(
            "At a glance" + (f": sweep {name}" if name else ""),
            tables=[Table("What was swept", ("", ""), what, text=True)],
            notes=[f"Knee rule: {rule}."],
            css_class="headline",
        ),
        Section(
            "Curves",
            figures={
                "sweep_throughput_latency": throughput_latency_figure(points, knee),
                "sweep_goodput": goodput_load_figure(points, knee),
            },
        ),
        Section(
            "Points", tables=[Table("One run per point", POINT_HEADER, _point_rows(points, knee))]
        ),
    ]
