"""The diagnosis in a report: findings and rules as tables, measured vs predicted side by side
(table and a three-panel bar figure: TTFT in ms, TPOT in ms, J per output token), and, for a
measured run with telemetry, the host's and the server's own view over time (CPU, server process,
requests running and waiting, KV-cache use) on the run's clock."""

from __future__ import annotations

from typing import Any

from tokenprobe.records import Run
from tokenprobe.report import fmt
from tokenprobe.report.html import Row, Section, Table
from tokenprobe.report.plot import PALETTE, Figure, axis, figure, layout
from tokenprobe.report.replay_figs import replay_section

MEASURED_COLOR, PREDICTED_COLOR = "#C44E52", "#4C72B0"
PANELS: tuple[tuple[str, str, float], ...] = (
    ("ttft_s", "TTFT (ms)", 1e3),
    ("tpot_s", "TPOT (ms)", 1e3),
    ("joules_per_output_token", "J per output token", 1.0),
)


def _evidence(evidence: dict[str, Any]) -> str:
    return "; ".join(
        f"{k} = {fmt.num(v) if isinstance(v, float) else v}"
        for k, v in evidence.items()
        if v is not None
    )


def findings_table(diagnosis: dict[str, Any]) -> Table:
    rows: list[Row] = [
        (f["severity"], f["kind"], f["summary"], _evidence(f["evidence"]), f["action"])
        for f in diagnosis["findings"]
    ]
    return Table("Findings", ("severity", "kind", "what", "evidence", "action"), rows, text=True)


def rules_table(diagnosis: dict[str, Any]) -> Table:
    rows: list[Row] = [(r["rule"], r["status"], r["reason"]) for r in diagnosis["rules"]]
    return Table("Every rule", ("rule", "status", "reason"), rows, text=True)


def _cell(value: float | None, scale: float) -> str:
    return fmt.num(None if value is None else value * scale)


def comparison_table(comparison: dict[str, Any]) -> Table:
    rows: list[Row] = []
    for metric, label, scale in PANELS:
        row = next((r for r in comparison["rows"] if r["metric"] == metric), None)
        if row is None:
            continue
        ratio = fmt.num(row["ratio"])
        rows.append((label, _cell(row["measured"], scale), _cell(row["predicted"], scale), ratio))
    caption = "Measured vs predicted"
    if comparison.get("deployment"):
        caption += f" ({comparison['deployment']})"
    return Table(caption, ("", "measured", "predicted", "measured / predicted"), rows)


def comparison_figure(comparison: dict[str, Any]) -> Figure:
    """Three panels side by side, each with a measured and a predicted bar in its own unit."""
    data: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    by_metric = {r["metric"]: r for r in comparison["rows"]}
    width, gap = 0.28, 0.05
    for i, (metric, label, scale) in enumerate(PANELS):
        row = by_metric.get(metric, {})
        suffix = "" if i == 0 else str(i + 1)
        start = i * (width + gap)
        extra[f"xaxis{suffix}"] = {"domain": [start, start + width], "anchor": f"y{suffix}"}
        extra[f"yaxis{suffix}"] = axis(label, anchor=f"x{suffix}", rangemode="tozero")
        for name, color in (("measured", MEASURED_COLOR), ("predicted", PREDICTED_COLOR)):
            value = row.get(name)
            data.append(
                {
                    "type": "bar",
                    "name": name,
                    "legendgroup": name,
                    "showlegend": i == 0,
                    "x": [name],
                    "y": [None if value is None else value * scale],
                    "marker": {"color": color},
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                    "hovertemplate": f"{label}: %{{y:.4g}} ({name})<extra></extra>",
                }
            )
    fig_layout = layout("Measured vs predicted", extra.pop("xaxis"), extra.pop("yaxis"), **extra)
    return figure(data, fig_layout)


def _trace(name: str, t: list[float], y: list[float], yaxis: str, color: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": t,
        "y": y,
        "yaxis": yaxis,
        "line": {"color": color, "shape": "hv", "width": 1.5},
        "hovertemplate": name + ": %{y:.3g} at %{x:.3g} s<extra></extra>",
    }


def telemetry_figure(run: Run) -> Figure | None:
    """Host CPU (%) and the server process (% of one core) above, the server's running and
    waiting requests and KV use (%) below; None when the run has neither."""
    top: list[dict[str, Any]] = []
    host = [h for h in run.host if h.cpu_util is not None]
    if host:
        top.append(
            _trace(
                "host CPU",
                [h.t_s for h in host],
                [100 * (h.cpu_util or 0) for h in host],
                "y",
                PALETTE[0],
            )
        )
    proc = [h for h in run.host if h.process_cpu_util is not None]
    if proc:
        y = [100 * (h.process_cpu_util or 0) for h in proc]
        top.append(
            _trace("server process (% of one core)", [h.t_s for h in proc], y, "y", PALETTE[1])
        )
    ok = [s for s in run.server if s.error is None]
    bottom: list[dict[str, Any]] = []
    for name, attr, scale, color in (
        ("requests running", "requests_running", 1.0, PALETTE[2]),
        ("requests waiting", "requests_waiting", 1.0, PALETTE[3]),
        ("KV-cache use (%)", "kv_cache_usage", 100.0, PALETTE[4]),
    ):
        points = [(s.t_s, getattr(s, attr)) for s in ok if getattr(s, attr) is not None]
        if points:
            t, v = [p[0] for p in points], [p[1] * scale for p in points]
            bottom.append(_trace(name, t, v, "y2", color))
    if not top and not bottom:
        return None
    # the x axis sits under the lower panel (anchored to y2), so its title never lands inside
    # a panel; the y titles are short enough for each panel's height
    fig_layout = layout(
        "Host and server over the run",
        axis("time since the run's start (s)", anchor="y2"),
        axis("CPU (%)", domain=[0.56, 1.0], anchor="x", rangemode="tozero"),
        yaxis2=axis("server /metrics", domain=[0.0, 0.44], anchor="x", rangemode="tozero"),
        height=520,
    )
    fig_layout["legend"]["y"] = -0.18
    return figure(top + bottom, fig_layout)


def diagnosis_sections(diagnosis: dict[str, Any], run: Run | None = None) -> list[Section]:
    """The "Diagnosis" section (findings, every rule, notes) and, when the diagnosis was made
    with a prediction that could be made, "Measured vs predicted" and, with a replay,
    "Measured vs replayed" (report.replay_figs)."""
    notes = list(diagnosis.get("notes", []))
    if not diagnosis["findings"]:
        notes.insert(0, "No rule fired.")
    sections = [
        Section(
            "Diagnosis",
            tables=[findings_table(diagnosis), rules_table(diagnosis)],
            notes=notes,
        )
    ]
    comparison = diagnosis.get("comparison")
    if comparison and comparison["rows"]:
        load = comparison.get("load") or {}
        sections.append(
            Section(
                "Measured vs predicted",
                tables=[comparison_table(comparison)],
                figures={"measured_vs_predicted": comparison_figure(comparison)},
                notes=[
                    "Prediction: tokenprobe.estimate at the run's load: "
                    f"{load.get('input_tokens')} input and {load.get('output_tokens')} output "
                    "tokens, "
                    f"{load.get('batch')} requests in flight (Little's law). "
                    "TTFT is one prompt's prefill alone; queueing shows as a ratio above 1.",
                    *comparison.get("notes", []),
                ],
            )
        )
    elif comparison:
        sections[0].notes.extend(f"prediction skipped: {n}" for n in comparison.get("notes", []))
    replayed = diagnosis.get("replay")
    if replayed and replayed["rows"]:
        sections.append(replay_section(replayed))
    elif replayed:
        sections[0].notes.extend(f"replay skipped: {n}" for n in replayed.get("notes", []))
    telemetry = telemetry_figure(run) if run is not None else None
    if telemetry is not None:
        sections.append(Section("Host and server telemetry", figures={"host_server": telemetry}))
    return sections
