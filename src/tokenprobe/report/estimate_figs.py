"""Figures of one estimate (the dict of `Estimate.to_dict()`, i.e. `tokenprobe estimate --json`).

Every figure is per GPU, like the estimate's stage numbers. Roofline (Williams, Waterman and
Patterson, CACM 2009): attainable FLOP/s = min(peak FLOP/s, arithmetic intensity x HBM bytes/s);
each operator sits at (its FLOP / its HBM bytes, its FLOP / its modelled time).
"""

from __future__ import annotations

import math
from typing import Any

from tokenprobe.hardware import get_gpu
from tokenprobe.report import fmt
from tokenprobe.report.plot import (
    PALETTE,
    RIGHT_LEGEND,
    SHARE_COLORS,
    STAGE_COLORS,
    Figure,
    axis,
    figure,
    gib,
    hline,
    layout,
    ms,
    tflop_per_s,
    vline,
)

SHARES: tuple[str, ...] = ("compute", "memory", "communication", "overhead")
OP_COLORS: dict[str, str] = {
    "qkv_proj": PALETTE[0],
    "attention": PALETTE[1],
    "o_proj": PALETTE[2],
    "mlp": PALETTE[3],
    "shared_experts": PALETTE[8],
    "experts": PALETTE[4],
    "expert_excess": PALETTE[4],
    "router": PALETTE[5],
    "lm_head": PALETTE[6],
    "elementwise": PALETTE[7],
}
OP_SYMBOL_NAMES: dict[str, str] = {"circle": "circles", "diamond": "diamonds"}
STAGE_LABELS: dict[str, str] = {"prefill": "prefill", "decode": "decode step"}


def gpu_roofs(gpu: str, compute_dtype: str) -> tuple[float, float]:
    """(peak FLOP/s for `compute_dtype`, HBM bytes/s) of a GPU known to this process."""
    spec = get_gpu(gpu)
    peak = spec.peak_flop_per_s_for(compute_dtype) or max(spec.peak_flop_per_s.values())
    return peak, spec.hbm_bytes_per_s


def _stages(est: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, est[name]) for name in ("prefill", "decode") if est.get(name)]


def _op_traces(stage: str, ops: list[dict[str, Any]], symbol: str) -> list[dict[str, Any]]:
    """One marker per operator that does FLOP; the colour names the operator (shared by both
    stages through `legendgroup`), the symbol the stage."""
    traces = []
    for o in ops:
        if o["flop"] <= 0 or o["hbm_bytes"] <= 0 or o["time_s"] <= 0:
            continue
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": o["name"],
                "legendgroup": o["name"],
                "showlegend": stage == "prefill",
                "x": [o["arithmetic_intensity_flop_per_byte"]],
                "y": [tflop_per_s(o["flop"] / o["time_s"])],
                "marker": {
                    "size": 11,
                    "symbol": symbol,
                    "color": OP_COLORS.get(o["name"], "#999999"),
                    "line": {"color": "white", "width": 1},
                },
                "customdata": [[ms(o["time_s"]), o["bound"]]],
                "hovertemplate": f"{STAGE_LABELS[stage]}: {o['name']}<br>%{{x:.3g}} FLOP/B, "
                "%{y:.3g} TFLOP/s<br>%{customdata[0]:.3g} ms, %{customdata[1]}-bound"
                "<extra></extra>",
            }
        )
    return traces


def _stage_point(stage: str, s: dict[str, Any], symbol_name: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"{STAGE_LABELS[stage]}, whole stage (ops: {symbol_name})",
        "x": [s["arithmetic_intensity_flop_per_byte"]],
        "y": [tflop_per_s(s["flop"] / s["time_s"])],
        "marker": {
            "size": 16,
            "symbol": "star",
            "color": STAGE_COLORS[stage],
            "line": {"color": "black", "width": 1},
        },
        "hovertemplate": f"{STAGE_LABELS[stage]}: %{{x:.3g}} FLOP/B, %{{y:.3g}} TFLOP/s"
        "<extra></extra>",
    }


def roofline(est: dict[str, Any], peak_flop_per_s: float, hbm_bytes_per_s: float) -> Figure:
    """Log-log roofline: the compute roof for the estimate's compute dtype, the HBM slope, and
    every operator of prefill (circles) and decode (diamonds) that does FLOP; zero-FLOP operators
    (element-wise, embedding) have no place on a log axis and are named in the title instead."""
    ridge = peak_flop_per_s / hbm_bytes_per_s
    intensities = [
        o["arithmetic_intensity_flop_per_byte"]
        for _, s in _stages(est)
        for o in s["ops"]
        if o["flop"] > 0 and o["hbm_bytes"] > 0
    ]
    lo = min([ridge, *intensities]) / 4
    hi = max([ridge, *intensities]) * 4
    roof = {
        "type": "scatter",
        "mode": "lines",
        "name": f"roof: {tflop_per_s(peak_flop_per_s):.0f} TFLOP/s {est['compute_dtype']}, "
        f"{hbm_bytes_per_s / 1e9:.0f} GB/s HBM",
        "x": [lo, ridge, hi],
        "y": [tflop_per_s(v) for v in (lo * hbm_bytes_per_s, peak_flop_per_s, peak_flop_per_s)],
        "line": {"color": "black", "width": 2},
        "hovertemplate": "roof %{y:.3g} TFLOP/s at %{x:.3g} FLOP/B<extra></extra>",
    }
    data = [roof]
    for (stage, s), symbol in zip(_stages(est), ("circle", "diamond"), strict=False):
        data += [
            *_op_traces(stage, s["ops"], symbol),
            _stage_point(stage, s, OP_SYMBOL_NAMES[symbol]),
        ]
    skipped = sorted({o["name"] for _, s in _stages(est) for o in s["ops"] if o["flop"] <= 0})
    title = f"Roofline, {est['gpu']} (per GPU)"
    if skipped:
        title += f"<br><sup>not shown (0 FLOP, pure memory traffic): {', '.join(skipped)}</sup>"
    shape, note = vline(ridge, f" ridge {ridge:.0f} FLOP/B", log_x=True)
    fig_layout = layout(
        title,
        axis("arithmetic intensity (FLOP per HBM byte, log)", type="log"),
        axis("achieved TFLOP/s (log)", type="log"),
        shapes=[shape],
        annotations=[note],
        legend=RIGHT_LEGEND,
        height=460,
    )
    fig_layout["margin"].update(t=80, b=60)
    return figure(data, fig_layout)


def _nic_s(est: dict[str, Any], stage: str) -> float:
    """Seconds of a stage's communication on the scale-out NICs (0 inside one domain, or for
    an estimate recorded before topology was modelled)."""
    comm = est.get("communication", {}).get("decode_step" if stage == "decode" else stage, {})
    return float(comm.get("inter_node_s", 0.0))


def stage_shares(est: dict[str, Any]) -> Figure:
    """Where the time of each stage goes: 100%-stacked horizontal bars of the compute / memory /
    communication / overhead shares (E12), the stage time in the bar label."""
    stages = _stages(est)
    labels = [f"{STAGE_LABELS[n]}<br>{fmt.duration(s['time_s'])}, {s['bound']}" for n, s in stages]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": share,
            "y": labels,
            "x": [100 * s["shares"][share] for _, s in stages],
            "customdata": [
                [ms(s["shares"][share] * s["time_s"]), ms(_nic_s(est, n))] for n, s in stages
            ],
            "marker": {"color": SHARE_COLORS[share]},
            "hovertemplate": share
            + ": %{x:.1f}% (%{customdata[0]:.3g} ms"
            + (", %{customdata[1]:.3g} ms of it over the NICs" if share == "communication" else "")
            + ")<extra></extra>",
        }
        for share in SHARES
    ]
    fig_layout = layout(
        "Where the time goes, per stage",
        axis("share of stage time (%)", range=[0, 100]),
        axis("", autorange="reversed"),
        barmode="stack",
        legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0, "traceorder": "normal"},
    )
    fig_layout["margin"]["l"] = 150
    return figure(data, fig_layout)


def tpot_vs_context(est: dict[str, Any]) -> Figure:
    """TPOT (decode step time) against the context position while the output is generated."""
    curve = est["decode"]["tpot_s_by_context"] if est.get("decode") else []
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"batch {est['batch']}",
            "x": [c for c, _ in curve],
            "y": [ms(t) for _, t in curve],
            "line": {"color": STAGE_COLORS["decode"]},
            "marker": {"size": 4},
            "hovertemplate": "context %{x} tokens: %{y:.4g} ms<extra></extra>",
        }
    ]
    return figure(
        data,
        layout(
            f"TPOT vs context (batch {est['batch']})",
            axis("context length (tokens)"),
            axis("time per output token (ms)", rangemode="tozero"),
        ),
    )


def throughput_vs_batch(est: dict[str, Any]) -> Figure:
    """Decode output tokens/s against batch (up to the KV limit), with the batch where the
    weight matmuls turn compute-bound marked (E6)."""
    decode = est.get("decode") or {}
    rows = decode.get("throughput_by_batch", [])
    batches = [r["batch"] for r in rows]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "output tokens/s",
            "x": batches,
            "y": [r["output_tokens_per_s"] for r in rows],
            "customdata": [ms(r["step_s"]) for r in rows],
            "line": {"color": PALETTE[0]},
            "hovertemplate": "batch %{x}: %{y:.4g} tokens/s, step %{customdata:.3g} ms"
            "<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "decode step time (ms, right axis)",
            "x": batches,
            "y": [ms(r["step_s"]) for r in rows],
            "yaxis": "y2",
            "line": {"color": PALETTE[1], "dash": "dot"},
            "hovertemplate": "batch %{x}: step %{y:.3g} ms<extra></extra>",
        },
    ]
    shapes, notes = [], []
    cb = decode.get("compute_bound_batch")
    top = max(batches, default=1)
    if cb is not None:
        where = "" if cb <= top else f" (beyond the KV limit, batch {top})"
        text = f"compute-bound from batch {cb}{where} "
        shape, note = vline(cb, text, "#C44E52", log_x=True, left=True)
        shapes.append(shape)
        notes.append(note)
        top = max(top, cb)
    else:
        notes.append(
            {
                "text": "decode stays memory-bound at every batch",
                "xref": "paper",
                "yref": "paper",
                "x": 0.01,
                "y": 0.98,
                "showarrow": False,
                "xanchor": "left",
            }
        )
    x_range = [0, math.log10(max(2, top) * 1.5)]
    fig_layout = layout(
        "Decode throughput vs batch",
        axis("batch (concurrent sequences, log)", type="log", range=x_range),
        axis(
            "output tokens/s",
            range=[0, 1.1 * max((r["output_tokens_per_s"] for r in rows), default=1)],
        ),
        yaxis2=axis("decode step time (ms)", overlaying="y", side="right", rangemode="tozero"),
        shapes=shapes,
        annotations=notes,
    )
    fig_layout["margin"]["r"] = 70
    return figure(data, fig_layout)


def memory_breakdown(est: dict[str, Any]) -> Figure:
    """HBM of one GPU stacked: weights, activations, runtime, free for KV, and what the engine
    leaves unused (HBM x (1 - gpu_memory_utilization)); GiB."""
    m = est["memory"]
    parts = [
        ("weights", m["weights_bytes_per_gpu"], "#4C72B0"),
        ("activations (peak)", m["activation_bytes_per_gpu"], "#DD8452"),
        ("runtime", m["runtime_bytes_per_gpu"], "#8C8C8C"),
        ("free for KV cache", max(0.0, m["kv_free_bytes_per_gpu"]), "#55A868"),
        ("not used by the engine", m["hbm_bytes_per_gpu"] - m["usable_bytes_per_gpu"], "#dddddd"),
    ]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "y": [""],
            "x": [gib(value)],
            "marker": {"color": color},
            "hovertemplate": name + ": %{x:.2f} GiB<extra></extra>",
        }
        for name, value, color in parts
    ]
    shape, note = vline(gib(m["hbm_bytes_per_gpu"]), f" HBM {gib(m['hbm_bytes_per_gpu']):.0f} GiB")
    verdict = "fits" if m["fits"] else f"DOES NOT FIT: {m['reason']}"
    return figure(
        data,
        layout(
            f"Memory per GPU ({verdict})",
            axis("GiB", range=[0, 1.15 * gib(m["hbm_bytes_per_gpu"])]),
            axis(""),
            barmode="stack",
            shapes=[shape],
            annotations=[note],
            height=300,
            legend=RIGHT_LEGEND,
        ),
    )


def kv_vs_concurrency(est: dict[str, Any]) -> Figure:
    """KV cache needed per GPU against concurrent requests at the workload's full context
    (input + output), with the free KV memory and the resulting request limit marked."""
    m = est["memory"]
    per_gpu = (
        m["kv_bytes_per_token_per_gpu"] / m["kv_bytes_per_token"] if m["kv_bytes_per_token"] else 0
    )
    per_request = m["kv_bytes_per_request"] * per_gpu
    limit = m["max_concurrent_requests"]
    top = max(int(limit * 1.25), est["batch"], 4)
    n = sorted({1, *range(0, top + 1, max(1, top // 60)), top, limit} - {0})
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"KV needed at {m['context_tokens']} tokens of context",
            "x": n,
            "y": [gib(k * per_request) for k in n],
            "line": {"color": PALETTE[0]},
            "hovertemplate": "%{x} requests: %{y:.2f} GiB<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": f"this estimate (batch {est['batch']})",
            "x": [est["batch"]],
            "y": [gib(est["batch"] * per_request)],
            "marker": {"size": 11, "color": PALETTE[3]},
            "hovertemplate": "batch %{x}: %{y:.2f} GiB<extra></extra>",
        },
    ]
    free = gib(max(0.0, m["kv_free_bytes_per_gpu"]))
    y_top = 1.1 * max(free, gib(top * per_request))
    s1, n1 = hline(free, f"free for KV: {free:.1f} GiB", "#55A868")
    s2, n2 = vline(limit, f"max {limit} concurrent requests ", "#C44E52", left=True)
    return figure(
        data,
        layout(
            "KV cache capacity vs concurrency (per GPU)",
            axis("concurrent requests", range=[0, top * 1.05]),
            axis("KV cache (GiB per GPU)", range=[0, y_top]),
            shapes=[s1, s2],
            annotations=[n1, n2],
        ),
    )


def energy_per_token(est: dict[str, Any]) -> Figure:
    """kWh per million input tokens (prefill) and per million output tokens (decode)."""
    e = est["energy"]
    names = ["input tokens (prefill)", "output tokens (decode)"]
    values = [e["kwh_per_million_input_tokens"], e["kwh_per_million_output_tokens"]]
    joules = [e["joules_per_input_token"], e["joules_per_output_token"]]
    data = [
        {
            "type": "bar",
            "name": "kWh per million tokens",
            "x": names,
            "y": values,
            "customdata": joules,
            "text": [f"{fmt.num(v)} kWh/M" for v in values],
            "textposition": "outside",
            "marker": {"color": [STAGE_COLORS["prefill"], STAGE_COLORS["decode"]]},
            "hovertemplate": "%{x}: %{y:.4g} kWh per million, %{customdata:.4g} J per token"
            "<extra></extra>",
        }
    ]
    return figure(
        data,
        layout(
            f"Energy per million tokens ({e.get('energy_basis', 'GPU')})",
            axis(""),
            axis("kWh per million tokens", rangemode="tozero"),
            showlegend=False,
        ),
    )


def estimate_figures(est: dict[str, Any]) -> dict[str, Figure]:
    """Every figure of one estimate, by a stable id (the web page and the report use the ids)."""
    peak, bw = gpu_roofs(est["gpu"], est["compute_dtype"])
    figs = {
        "roofline": roofline(est, peak, bw),
        "shares": stage_shares(est),
        "memory": memory_breakdown(est),
        "kv": kv_vs_concurrency(est),
        "energy": energy_per_token(est),
    }
    if est.get("decode"):
        figs["tpot"] = tpot_vs_context(est)
        figs["throughput"] = throughput_vs_batch(est)
    return figs
