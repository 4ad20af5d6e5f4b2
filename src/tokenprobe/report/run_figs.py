"""Figures of a run (simulated, measured or imported; `tokenprobe.records.Run`).

Big runs stay small on the page: a latency CDF is drawn through at most `CDF_POINTS` quantiles,
and timelines (piecewise constant, see `records.TimelinePoint`) are averaged over at most
`TIMELINE_BINS` equal time bins, exactly (time-weighted, from the running integral), so a
10,000-request run with 40,000 scheduler steps costs a few hundred kB of JSON.

Every run's timeline (measured ones have no scheduler timeline) opens with what its records
say: requests in flight (time-weighted mean per bin, exact) with arrivals per second, and output
tokens per second. Their bin is a round width (1, 2 or 5 x 10^k s) chosen from the run's
duration so that it gives 100 to 250 bins (`timeline_bin_s`): fine enough to see ramps and
stalls, coarse enough that a bin holds more than one event on a busy run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tokenprobe.metrics import run_duration_s
from tokenprobe.records import Run
from tokenprobe.report import fmt
from tokenprobe.report.plot import PALETTE, STAGE_COLORS, Figure, axis, figure, layout, ms

CDF_POINTS = 400
TIMELINE_BINS = 800
LATENCIES: tuple[tuple[str, str], ...] = (
    ("ttft_s", "TTFT"),
    ("tpot_s", "TPOT"),
    ("itl_s", "ITL"),
    ("e2e_s", "E2E"),
)


def latency_values_s(run: Run) -> dict[str, list[float]]:
    """Per-request TTFT, TPOT, E2E and pooled ITL of the successful requests (seconds)."""
    ok = [r for r in run.records if r.ok]
    return {
        "ttft_s": [v for r in ok if (v := r.ttft_s) is not None],
        "tpot_s": [v for r in ok if (v := r.tpot_s) is not None],
        "itl_s": [gap for r in ok for gap in r.itl_s],
        "e2e_s": [v for r in ok if (v := r.e2e_s) is not None],
    }


def cdf_points(
    values: Sequence[float], points: int = CDF_POINTS
) -> tuple[list[float], list[float]]:
    """(x, F(x)) of the empirical CDF, through at most `points` quantiles (linear, as numpy)."""
    if not values:
        return [], []
    arr = np.asarray(values, dtype=np.float64)
    if arr.size <= points:
        xs = np.sort(arr)
        return xs.tolist(), (np.arange(1, xs.size + 1) / xs.size).tolist()
    probs = np.linspace(0.0, 1.0, points)
    return np.quantile(arr, probs).tolist(), probs.tolist()


def latency_cdfs(run: Run) -> Figure:
    """CDFs of TTFT, TPOT, ITL and E2E on one log-x axis (ms)."""
    values = latency_values_s(run)
    data = []
    for (key, label), color in zip(LATENCIES, PALETTE, strict=False):
        xs, ps = cdf_points(values[key])
        if not xs:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{label} ({len(values[key]):,} values)",
                "x": [ms(x) for x in xs],
                "y": ps,
                "line": {"color": color, "width": 2},
                "hovertemplate": label + " %{x:.4g} ms: %{y:.1%} of values below<extra></extra>",
            }
        )
    return figure(
        data,
        layout(
            "Latency CDFs (successful requests; ITL: of token gaps)",
            axis("latency (ms, log)", type="log"),
            axis("share of values below", range=[0, 1.02], tickformat=".0%"),
        ),
    )


def bin_step_mean(
    t_s: np.ndarray, values: np.ndarray, end_s: float, bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean of a step function (value[i] from t_s[i] to t_s[i+1], the last to
    end_s) over `bins` equal bins of [t_s[0], end_s]; returns (bin starts, means)."""
    start = float(t_s[0])
    end = max(end_s, float(t_s[-1]))
    if end <= start:
        return t_s[:1], values[:1]
    ends = np.append(t_s[1:], end)
    cum = np.concatenate([[0.0], np.cumsum(values * (ends - t_s))])
    edges = np.linspace(start, end, bins + 1)
    k = np.clip(np.searchsorted(t_s, edges, side="right") - 1, 0, len(t_s) - 1)
    integral = cum[k] + values[k] * (edges - t_s[k])
    return edges[:-1], np.diff(integral) / np.diff(edges)


def _step(t: np.ndarray, v: np.ndarray, end_s: float, bins: int) -> tuple[list[float], list[float]]:
    if t.size <= bins:
        return t.tolist(), v.tolist()
    x, y = bin_step_mean(t, v, end_s, bins)
    return x.tolist(), y.tolist()


MIN_BINS, MAX_BINS = 100, 250


def timeline_bin_s(duration_s: float) -> float:
    """The smallest round bin width (1, 2 or 5 x 10^k s) that cuts `duration_s` into at most
    `MAX_BINS` bins; it gives at least `MIN_BINS` (250 / 2.5) bins."""
    if not duration_s > 0:
        return 1.0
    k = math.floor(math.log10(duration_s / MAX_BINS))
    for exp in (k, k + 1):
        for mantissa in (1.0, 2.0, 5.0):
            width = mantissa * 10.0**exp
            if duration_s / width <= MAX_BINS * (1 + 1e-9):
                return width
    return 10.0 ** (k + 1)


def _edges(end_s: float) -> np.ndarray:
    width = timeline_bin_s(end_s)
    n = max(1, math.ceil(end_s / width - 1e-9))
    return np.arange(n + 1) * width


def arrivals_per_s(run: Run, end_s: float) -> tuple[list[float], list[float]]:
    """Requests sent per second, counted in bins of `timeline_bin_s(end_s)` from 0."""
    sent = np.fromiter((r.sent_s for r in run.records), dtype=np.float64)
    if sent.size == 0 or end_s <= 0:
        return [], []
    edges = _edges(end_s)
    counts, _ = np.histogram(sent, bins=edges)
    return edges[:-1].tolist(), (counts / np.diff(edges)).tolist()


def in_flight(run: Run, end_s: float) -> tuple[list[float], list[float]]:
    """Requests in flight (sent, not finished; a request without a finish until `end_s`),
    time-weighted mean per bin of `timeline_bin_s(end_s)`."""
    if not run.records or end_s <= 0:
        return [], []
    starts = [(r.sent_s, 1.0) for r in run.records]
    ends = [(r.finish_s if r.finish_s is not None else end_s, -1.0) for r in run.records]
    events = sorted(starts + ends)
    t = np.array([0.0] + [e[0] for e in events])
    level = np.cumsum(np.array([0.0] + [e[1] for e in events]))
    edges = _edges(end_s)
    x, y = bin_step_mean(t, level, float(edges[-1]), len(edges) - 1)
    return x.tolist(), y.tolist()


def output_tokens_per_s(run: Run, end_s: float) -> tuple[list[float], list[float]]:
    """Output tokens per second of the successful requests, per bin of `timeline_bin_s`: each
    streamed chunk carries output_tokens / chunks (a chunk may hold several tokens); a request
    without token times counts its tokens at its finish."""
    times: list[float] = []
    weights: list[float] = []
    for r in run.records:
        if not r.ok or r.output_tokens <= 0:
            continue
        if r.token_times_s:
            share = r.output_tokens / len(r.token_times_s)
            times.extend(r.token_times_s)
            weights.extend([share] * len(r.token_times_s))
        elif r.finish_s is not None:
            times.append(r.finish_s)
            weights.append(float(r.output_tokens))
    if not times or end_s <= 0:
        return [], []
    edges = _edges(end_s)
    sums, _ = np.histogram(np.asarray(times), bins=edges, weights=np.asarray(weights))
    return edges[:-1].tolist(), (sums / np.diff(edges)).tolist()


def _panel_axes(n: int) -> dict[str, Any]:
    """Stacked y-axis domains for n panels sharing the x axis (top panel first)."""
    gap = 0.04
    height = (1 - gap * (n - 1)) / n
    axes: dict[str, Any] = {}
    for i in range(n):
        top = 1 - i * (height + gap)
        axes[f"yaxis{'' if i == 0 else i + 1}"] = {
            "domain": [round(max(0.0, top - height), 6), round(min(1.0, top), 6)]
        }
    return axes


def _line(name: str, x: list[float], y: list[float], yaxis: str, color: str) -> dict[str, Any]:
    return {
        "type": "scattergl" if len(x) > 5000 else "scatter",
        "mode": "lines",
        "name": name,
        "x": x,
        "y": y,
        "yaxis": yaxis,
        "line": {"color": color, "shape": "hv", "width": 1.5},
        "hovertemplate": name + ": %{y:.4g} at %{x:.4g} s<extra></extra>",
    }


def _timeline_panels(run: Run, end_s: float, bins: int) -> list[tuple[str, list[dict[str, Any]]]]:
    tl = run.timeline
    t = np.fromiter((p.t_s for p in tl), dtype=np.float64, count=len(tl))

    def series(attr: str) -> np.ndarray:
        return np.fromiter((getattr(p, attr) for p in tl), dtype=np.float64, count=len(tl))

    capacity = run.config.get("kv_capacity_blocks")
    kv = series("kv_blocks_used")
    kv_title = "KV (blocks)"
    if isinstance(capacity, int | float) and capacity > 0:
        kv, kv_title = 100 * kv / capacity, "KV in use (%)"
    panels = []
    for title, values, color in (
        ("batch (seqs)", series("batch_size"), PALETTE[0]),
        (kv_title, kv, PALETTE[2]),
        ("queue (requests)", series("queue_len"), PALETTE[4]),
        ("power, all GPUs (W)", series("power_w"), STAGE_COLORS["decode"]),
    ):
        x, y = _step(t, values, end_s, bins)
        panels.append((title, [_line(title.split(" (")[0], x, y, "", color)]))
    return panels


def _telemetry_panel(run: Run, end_s: float, bins: int) -> tuple[str, list[dict[str, Any]]]:
    traces = []
    gpus = sorted({s.gpu_index or 0 for s in run.telemetry if s.power_w is not None})
    for i, gpu in enumerate(gpus):
        pts = [(s.t_s, s.power_w) for s in run.telemetry if (s.gpu_index or 0) == gpu and s.power_w]
        pts.sort()
        t = np.array([p[0] for p in pts])
        w = np.array([p[1] for p in pts])
        x, y = _step(t, w, end_s, bins)
        traces.append(_line(f"GPU {gpu} power (measured)", x, y, "", PALETTE[(3 + i) % 10]))
    return "GPU power (W)", traces


def _record_panels(run: Run, end_s: float) -> list[tuple[str, list[dict[str, Any]]]]:
    panels = []
    x, y = in_flight(run, end_s)
    if x:
        panels.append(("in flight (requests)", [_line("in flight", x, y, "", PALETTE[0])]))
    x, y = output_tokens_per_s(run, end_s)
    if x:
        panels.append(("output tokens/s", [_line("output tokens/s", x, y, "", PALETTE[1])]))
    return panels


def run_timelines(run: Run, bins: int = TIMELINE_BINS) -> Figure:
    """Requests in flight with arrivals per second (right axis) and output tokens/s from the
    records, then the scheduler timeline (batch, KV use, queue, power; simulated runs) and
    measured GPU power (telemetry), on one time axis."""
    end_s = run_duration_s(run)
    panels = _record_panels(run, end_s)
    if run.timeline:
        panels.extend(_timeline_panels(run, end_s, bins))
    if run.telemetry:
        panels.append(_telemetry_panel(run, end_s, bins))
    if not panels:
        panels = [("in flight (requests)", [])]
    fig_layout = layout("Timeline", axis("time since the run's start (s)"), {})
    fig_layout.update(_panel_axes(len(panels)))
    data: list[dict[str, Any]] = []
    for i, (title, traces) in enumerate(panels):
        name = "y" if i == 0 else f"y{i + 1}"
        key = "yaxis" if i == 0 else f"yaxis{i + 1}"
        fig_layout[key].update(axis(title, rangemode="tozero", title_font={"size": 11}))
        fig_layout[key]["anchor"] = "x"
        for trace in traces:
            trace["yaxis"] = name
            data.append(trace)
    n = len(panels)
    x, rate = arrivals_per_s(run, end_s)
    if x:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "arrivals (requests/s, right axis)",
                "x": x,
                "y": rate,
                "yaxis": f"y{n + 1}",
                "line": {"color": "#333", "width": 1, "shape": "hv"},
                "opacity": 0.55,
                "hovertemplate": "%{y:.3g} requests/s at %{x:.4g} s<extra></extra>",
            }
        )
        fig_layout[f"yaxis{n + 1}"] = axis(
            "arrivals (req/s)",
            overlaying="y",
            side="right",
            rangemode="tozero",
            showgrid=False,
            title_font={"size": 11},
        )
    fig_layout["xaxis"]["anchor"] = "y" if n == 1 else f"y{n}"
    fig_layout["height"] = 160 * n + 150
    # the legend just under the x axis title, whatever the height (its y is in plot fractions)
    plot_px = fig_layout["height"] - fig_layout["margin"]["t"] - fig_layout["margin"]["b"]
    fig_layout["legend"]["y"] = -70 / plot_px
    fig_layout["margin"]["r"] = 70
    fig_layout["hovermode"] = "x"
    return figure(data, fig_layout)


def run_energy(summary: dict[str, Any]) -> Figure | None:
    """kWh per million input and per million output tokens of a run, when the summary has them."""
    e = summary.get("energy")
    if not isinstance(e, dict):
        return None
    keys = ("kwh_per_million_input_tokens", "kwh_per_million_output_tokens")
    values = [e.get(k) for k in keys]
    if any(not isinstance(v, int | float) for v in values):
        return None
    data = [
        {
            "type": "bar",
            "x": ["input tokens (prefill)", "output tokens (decode)"],
            "y": values,
            "text": [f"{fmt.num(v)} kWh/M" for v in values],
            "textposition": "outside",
            "marker": {"color": [STAGE_COLORS["prefill"], STAGE_COLORS["decode"]]},
            "hovertemplate": "%{x}: %{y:.4g} kWh per million<extra></extra>",
        }
    ]
    return figure(
        data,
        layout(
            "Energy per million tokens",
            axis(""),
            axis("kWh per million tokens", rangemode="tozero"),
            showlegend=False,
        ),
    )


def run_figures(run: Run, summary: dict[str, Any]) -> dict[str, Figure]:
    """Every figure of one run, by a stable id."""
    figs = {"latency_cdf": latency_cdfs(run), "timeline": run_timelines(run)}
    energy = run_energy(summary)
    if energy is not None:
        figs["run_energy"] = energy
    return figs


def latency_cdf_overlay(named: list[tuple[str, Run]], key: str = "ttft_s") -> Figure:
    """One latency's CDF (TTFT, TPOT, ITL or E2E) for several runs on one log-x axis (ms)."""
    label = dict(LATENCIES)[key]
    data = []
    for i, (name, run) in enumerate(named):
        xs, ps = cdf_points(latency_values_s(run)[key])
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name,
                "x": [ms(x) for x in xs],
                "y": ps,
                "line": {"color": PALETTE[i % len(PALETTE)], "width": 2},
                "hovertemplate": name + ": %{x:.4g} ms, %{y:.1%} below<extra></extra>",
            }
        )
    return figure(
        data,
        layout(
            f"{label} CDF by run",
            axis(f"{label} (ms, log)", type="log"),
            axis("fraction of requests", range=[0, 1.02], tickformat=".0%"),
        ),
    )
