"""The run beside its replay in the simulator (`diagnose.replay`): a table of the figures that
both sides have (TTFT/TPOT/ITL percentiles in ms, throughput, queueing, KV use, J per output
token) and a per-request scatter: each point is one request, measured TTFT (or end-to-end time)
across, the same request simulated up; the diagonal is agreement, so points far above it are
requests the model makes slower than they were, points below it requests it makes faster."""

from __future__ import annotations

import math
from typing import Any

from tokenprobe.report import fmt
from tokenprobe.report.html import Row, Section, Table
from tokenprobe.report.plot import PALETTE, Figure, axis, figure, layout, ms

# metric -> (label, formatter) of the rows the table shows, in order
_ROWS: dict[str, tuple[str, Any]] = {
    **{
        f"{m} {p}": (f"{label} {p} (ms)", fmt.ms)
        for m, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"))
        for p in ("p50", "p90", "p99")
    },
    "queue_s p50": ("queue p50 (ms)", fmt.ms),
    "requests_per_s": ("requests/s", fmt.num),
    "output_tokens_per_s": ("output tokens/s", fmt.num),
    "requests_waiting_mean": ("requests waiting (mean)", fmt.num),
    "kv_cache_usage_mean": ("KV cache in use (mean)", fmt.pct),
    "joules_per_output_token": ("J per output token", fmt.num),
}
_PANELS = (("ttft_s", "TTFT"), ("e2e_s", "end-to-end time"))
# above this many points plotly's WebGL scatter draws them (the SVG one slows the page down)
WEBGL_POINTS = 1000


def replay_table(replayed: dict[str, Any]) -> Table:
    rows: list[Row] = []
    by_metric = {r["metric"]: r for r in replayed["rows"]}
    for metric, (label, show) in _ROWS.items():
        row = by_metric.get(metric)
        if row is None or (row["measured"] is None and row["simulated"] is None):
            continue
        rows.append((label, show(row["measured"]), show(row["simulated"]), fmt.num(row["ratio"])))
    caption = f"The run vs its replay ({replayed.get('deployment', '')}, engine "
    caption += f"{replayed.get('engine')} from the {replayed.get('engine_source')})"
    return Table(caption, ("", "measured", "simulated", "measured / simulated"), rows)


def _finite_pairs(xs: list[Any], ys: list[Any]) -> tuple[list[float], list[float], list[int]]:
    keep = [
        i
        for i, (x, y) in enumerate(zip(xs, ys, strict=True))
        if isinstance(x, int | float) and isinstance(y, int | float)
        if math.isfinite(x) and math.isfinite(y)
    ]
    return [ms(xs[i]) for i in keep], [ms(ys[i]) for i in keep], keep


def replay_scatter(per_request: dict[str, list[Any]]) -> Figure | None:
    """Two panels (TTFT, end-to-end), measured across and simulated up, in ms, with the
    diagonal; None when no request has both."""
    data: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    width, gap = 0.44, 0.12
    for i, (key, label) in enumerate(_PANELS):
        x, y, keep = _finite_pairs(per_request[f"measured_{key}"], per_request[f"simulated_{key}"])
        if not x:
            return None
        suffix = "" if i == 0 else str(i + 1)
        start = i * (width + gap)
        extra[f"xaxis{suffix}"] = axis(
            f"measured {label} (ms)", domain=[start, start + width], anchor=f"y{suffix}"
        )
        extra[f"yaxis{suffix}"] = axis(f"simulated {label} (ms)", anchor=f"x{suffix}")
        ids = [per_request["request_id"][j] for j in keep]
        prompts = [per_request["input_tokens"][j] for j in keep]
        data.append(
            {
                "type": "scattergl" if len(x) > WEBGL_POINTS else "scatter",
                "mode": "markers",
                "name": f"{label} per request",
                "x": x,
                "y": y,
                "customdata": [[r, n] for r, n in zip(ids, prompts, strict=True)],
                "marker": {"color": PALETTE[i], "size": 5, "opacity": 0.6},
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hovertemplate": "%{customdata[0]} (%{customdata[1]} prompt tokens): measured "
                "%{x:.4g} ms, simulated %{y:.4g} ms<extra></extra>",
            }
        )
        top = max(max(x), max(y))
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "measured = simulated",
                "legendgroup": "diagonal",
                "showlegend": i == 0,
                "x": [0, top],
                "y": [0, top],
                "line": {"color": "#333", "dash": "dash", "width": 1},
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hoverinfo": "skip",
            }
        )
    fig_layout = layout(
        "Per request: measured vs replayed", extra.pop("xaxis"), extra.pop("yaxis"), **extra
    )
    return figure(data, fig_layout)


def replay_section(replayed: dict[str, Any]) -> Section:
    figures: dict[str, Figure] = {}
    scatter = replay_scatter(replayed["per_request"]) if replayed.get("per_request") else None
    if scatter is not None:
        figures["replay_per_request"] = scatter
    notes = [
        f"The run's own {replayed.get('requests')} successful requests (arrival times and "
        "lengths) replayed through the simulator on the deployment and profile its config "
        f"names (profile: {replayed.get('profile') or 'the engine default'}).",
        *replayed.get("notes", []),
    ]
    return Section(
        "Measured vs replayed", tables=[replay_table(replayed)], figures=figures, notes=notes
    )
