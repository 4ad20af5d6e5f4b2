"""Side-by-side figures and rows for several estimates (A100 vs H100 vs H200, fp16 vs fp8...).

A comparison row is a flat dict of the headline numbers of one estimate (`compare_row`); the
web app's what-if panel (the same workload on every catalog GPU) uses the same rows and figure.
"""

from __future__ import annotations

from typing import Any

from tokenprobe.report import fmt
from tokenprobe.report.plot import PALETTE, Figure, axis, figure, layout, ms

# (row key, axis title, to display units, higher is better)
METRICS: tuple[tuple[str, str, float, bool], ...] = (
    ("ttft_s", "TTFT (ms)", 1e3, False),
    ("tpot_s", "TPOT (ms)", 1e3, False),
    ("output_tokens_per_s", "output tokens/s", 1.0, True),
    ("joules_per_output_token", "J per output token", 1.0, False),
)


def compare_row(label: str, est: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of one estimate dict (SI units), labelled."""
    m, e = est["memory"], est["energy"]
    return {
        "label": label,
        "model": est["model"],
        "gpu": est["gpu"],
        "num_gpus": est["num_gpus"],
        "weight_dtype": est["weight_dtype"],
        "kv_dtype": est["kv_dtype"],
        "ttft_s": est["ttft_s"],
        "tpot_s": est["tpot_s"],
        "e2e_s": est["e2e_s"],
        "output_tokens_per_s": est["output_tokens_per_s"],
        "joules_per_output_token": e["joules_per_output_token"],
        "kwh_per_million_output_tokens": e["kwh_per_million_output_tokens"],
        "max_concurrent_requests": m["max_concurrent_requests"],
        "compute_bound_batch": (est.get("decode") or {}).get("compute_bound_batch"),
        "fits": m["fits"],
        "reason": m["reason"],
    }


# 2 x 2 grid of panels: (x domain, y domain), reading order
GRID: tuple[tuple[list[float], list[float]], ...] = (
    ([0.0, 0.44], [0.6, 1.0]),
    ([0.56, 1.0], [0.6, 1.0]),
    ([0.0, 0.44], [0.0, 0.4]),
    ([0.56, 1.0], [0.0, 0.4]),
)
MAX_LABELLED_BARS = 6


def _panel(
    rows: list[dict[str, Any]], index: int
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    key, title, scale, better_high = METRICS[index]
    suffix = "" if index == 0 else str(index + 1)
    x_domain, y_domain = GRID[index]
    labels = [r["label"] for r in rows]
    values = [r[key] * scale if r["fits"] else None for r in rows]
    trace: dict[str, Any] = {
        "type": "bar",
        "name": title,
        "x": labels,
        "y": values,
        "xaxis": f"x{suffix}",
        "yaxis": f"y{suffix}",
        "marker": {"color": [PALETTE[i % len(PALETTE)] for i in range(len(rows))]},
        "hovertemplate": "%{x}: %{y:.4g} " + title + "<extra></extra>",
    }
    if len(rows) <= MAX_LABELLED_BARS:
        trace["text"] = [fmt.num(v) if v is not None else "does not fit" for v in values]
        trace["textposition"] = "outside"
        trace["cliponaxis"] = False
    direction = "higher is better" if better_high else "lower is better"
    x_axis = {
        "domain": x_domain,
        "anchor": f"y{suffix}",
        "tickangle": -40 if len(rows) > 3 else 0,
        "tickmode": "array",
        "tickvals": labels,
        "automargin": True,
    }
    y_axis = axis(
        f"{title} ({direction})",
        domain=y_domain,
        anchor=f"x{suffix}",
        rangemode="tozero",
        automargin=True,
    )
    return trace, x_axis, y_axis


def comparison_figure(rows: list[dict[str, Any]], title: str = "Side by side") -> Figure:
    """TTFT, TPOT, output tokens/s and J per output token of each row as four bar panels; a
    configuration that does not fit in memory shows no bar (and says so when bars are labelled)."""
    missing = [r["label"] for r in rows if not r["fits"]]
    if missing:
        title += f"<br><sup>no bar: does not fit in memory ({', '.join(missing)})</sup>"
    fig_layout = layout(title, {}, {}, showlegend=False, height=720)
    data = []
    for i in range(len(METRICS)):
        trace, x_axis, y_axis = _panel(rows, i)
        data.append(trace)
        suffix = "" if i == 0 else str(i + 1)
        fig_layout[f"xaxis{suffix}"] = x_axis
        fig_layout[f"yaxis{suffix}"] = y_axis
    fig_layout["margin"]["b"] = 40
    return figure(data, fig_layout)


def tpot_curves(labelled: list[tuple[str, dict[str, Any]]]) -> Figure:
    """TPOT against context of several estimates on one axis."""
    data = []
    for i, (label, est) in enumerate(labelled):
        curve = est["decode"]["tpot_s_by_context"] if est.get("decode") else []
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": label,
                "x": [c for c, _ in curve],
                "y": [ms(t) for _, t in curve],
                "line": {"color": PALETTE[i % len(PALETTE)], "width": 2},
                "hovertemplate": label + ": %{y:.4g} ms at %{x} tokens<extra></extra>",
            }
        )
    return figure(
        data,
        layout(
            "TPOT vs context",
            axis("context length (tokens)"),
            axis("time per output token (ms)", rangemode="tozero"),
        ),
    )
