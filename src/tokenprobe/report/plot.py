"""Plotly figures as plain JSON-able dicts (`{"data": [...], "layout": {...}}`).

Figures are built as dicts, not `plotly.graph_objects`, so the same object goes into the HTML
report and out of the web API unchanged, and building one costs microseconds. The tests check
every figure against plotly's schema (`plotly.graph_objects.Figure(fig)` raises on a bad key).

Unit conversion happens here and only here (DESIGN.md: ms, GiB, TFLOP/s in reports): library
values are SI floats; axis titles name the display unit.
"""

from __future__ import annotations

import math
from typing import Any

from tokenprobe.units import GIGA, MILLI, TERA, GiB

Figure = dict[str, Any]

# Colour per time-share category, shared by every figure so a colour means one thing everywhere.
SHARE_COLORS: dict[str, str] = {
    "compute": "#4C72B0",
    "memory": "#DD8452",
    "communication": "#55A868",
    "overhead": "#8C8C8C",
}
STAGE_COLORS: dict[str, str] = {"prefill": "#4C72B0", "decode": "#C44E52"}
PALETTE: tuple[str, ...] = (
    "#4C72B0",
    "#DD8452",
    "#55A868",
    "#C44E52",
    "#8172B3",
    "#937860",
    "#DA8BC3",
    "#8C8C8C",
    "#CCB974",
    "#64B5CD",
)


def ms(seconds: float) -> float:
    """Seconds -> milliseconds, for display."""
    return seconds / MILLI


def gib(n_bytes: float) -> float:
    """Bytes -> GiB (2**30 bytes), for display."""
    return n_bytes / GiB


def tflop_per_s(flop_per_s: float) -> float:
    """FLOP/s -> TFLOP/s (1e12), for display."""
    return flop_per_s / TERA


def gb_per_s(bytes_per_s: float) -> float:
    """bytes/s -> GB/s (1e9), for display."""
    return bytes_per_s / GIGA


def axis(title: str, **extra: Any) -> dict[str, Any]:
    """An axis with a title (which carries the unit) and a light grid; `automargin` and a title
    standoff keep the title clear of the tick labels (and the margins grow to fit it)."""
    return {
        "title": {"text": title, "standoff": 8},
        "automargin": True,
        "gridcolor": "#e5e5e5",
        "zeroline": False,
        **extra,
    }


def layout(title: str, x: dict[str, Any], y: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The common layout: white background, compact margins, legend on top."""
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "xaxis": x,
        "yaxis": y,
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "margin": {"l": 70, "r": 30, "t": 60, "b": 100},
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0},
        "hovermode": "closest",
        **extra,
    }


def figure(data: list[dict[str, Any]], fig_layout: dict[str, Any]) -> Figure:
    return {"data": data, "layout": fig_layout}


def vline(
    x: float, text: str, color: str = "#333", log_x: bool = False, left: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A dashed vertical marker across the plot and its label (a layout shape + annotation).

    Plotly places annotations on a log axis by log10 of the value, shapes by the value itself."""
    shape = {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": color, "dash": "dash", "width": 1.5},
    }
    note = {
        "x": math.log10(x) if log_x else x,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "text": text,
        "showarrow": False,
        "xanchor": "right" if left else "left",
        "yanchor": "top",
        "font": {"color": color},
        "bgcolor": "rgba(255,255,255,0.8)",
    }
    return shape, note


def hline(y: float, text: str, color: str = "#333") -> tuple[dict[str, Any], dict[str, Any]]:
    """A dashed horizontal marker across the plot and its label."""
    shape = {
        "type": "line",
        "xref": "paper",
        "yref": "y",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"color": color, "dash": "dash", "width": 1.5},
    }
    note = {
        "x": 0,
        "y": y,
        "xref": "paper",
        "yref": "y",
        "text": text,
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "bottom",
        "font": {"color": color},
    }
    return shape, note


RIGHT_LEGEND: dict[str, Any] = {"orientation": "v", "yanchor": "top", "y": 1, "x": 1.02}
