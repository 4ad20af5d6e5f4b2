"""Estimate figures: valid plotly figures whose numbers are the estimate's, in display units."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import pytest

import tokenprobe
from tokenprobe.hardware import get_gpu
from tokenprobe.report import estimate_figures
from tokenprobe.report.estimate_figs import gpu_roofs, roofline, throughput_vs_batch


@pytest.fixture(scope="module")
def est() -> dict[str, Any]:
    return tokenprobe.estimate(
        "llama-3.1-8b", "h100-sxm", input_tokens=1024, output_tokens=256, batch=8
    ).to_dict()


def _trace(fig: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in fig["data"] if t.get("name") == name)


def test_every_figure_passes_plotly_validation(est: dict[str, Any]) -> None:
    figs = estimate_figures(est)
    assert set(figs) == {"roofline", "shares", "memory", "kv", "energy", "tpot", "throughput"}
    for fig in figs.values():
        go.Figure(fig)  # raises ValueError on any unknown property or out-of-range value


def test_every_axis_has_a_title(est: dict[str, Any]) -> None:
    for name, fig in estimate_figures(est).items():
        lay = fig["layout"]
        for key in ("xaxis", "yaxis"):
            if name in ("shares", "memory", "energy") and key in ("yaxis", "xaxis"):
                continue  # categorical axes: the bar labels are the title
            assert lay[key]["title"]["text"], (name, key)


def test_roofline_roof_is_min_of_peak_and_bandwidth(est: dict[str, Any]) -> None:
    peak, bw = gpu_roofs("h100-sxm", "bf16")
    assert peak == get_gpu("h100-sxm").peak_flop_per_s_for("bf16")
    fig = roofline(est, peak, bw)
    roof = fig["data"][0]
    ridge = peak / bw
    assert roof["x"][1] == pytest.approx(ridge)  # ~295 FLOP/B on H100 SXM bf16
    assert roof["y"][1] == pytest.approx(peak / 1e12)  # TFLOP/s
    assert roof["y"][0] == pytest.approx(roof["x"][0] * bw / 1e12)


def test_roofline_places_each_flop_operator_at_its_intensity(est: dict[str, Any]) -> None:
    fig = roofline(est, *gpu_roofs("h100-sxm", "bf16"))
    mlp = est["decode"]["ops"][[o["name"] for o in est["decode"]["ops"]].index("mlp")]
    traces = [t for t in fig["data"] if t.get("legendgroup") == "mlp"]
    assert len(traces) == 2  # prefill and decode
    decode = next(t for t in traces if "decode" in t["hovertemplate"])
    assert decode["x"] == [mlp["arithmetic_intensity_flop_per_byte"]]
    assert decode["y"][0] == pytest.approx(mlp["flop"] / mlp["time_s"] / 1e12)
    # zero-FLOP operators cannot sit on a log axis: named in the title instead
    assert "elementwise" in fig["layout"]["title"]["text"]
    assert not [t for t in fig["data"] if t.get("legendgroup") == "elementwise"]


def test_every_operator_lies_under_the_roof(est: dict[str, Any]) -> None:
    peak, bw = gpu_roofs("h100-sxm", "bf16")
    for t in roofline(est, peak, bw)["data"][1:]:
        for x, y in zip(t["x"], t["y"], strict=True):
            assert y * 1e12 <= min(peak, x * bw) * (1 + 1e-9)


def test_throughput_marks_the_compute_bound_batch(est: dict[str, Any]) -> None:
    fig = throughput_vs_batch(est)
    cb = est["decode"]["compute_bound_batch"]
    assert cb is not None
    (shape,) = fig["layout"]["shapes"]
    assert shape["x0"] == cb
    (note,) = fig["layout"]["annotations"]
    assert f"batch {cb}" in note["text"]
    rows = est["decode"]["throughput_by_batch"]
    assert _trace(fig, "output tokens/s")["y"] == [r["output_tokens_per_s"] for r in rows]


def test_tpot_curve_in_milliseconds(est: dict[str, Any]) -> None:
    fig = estimate_figures(est)["tpot"]
    curve = est["decode"]["tpot_s_by_context"]
    assert fig["data"][0]["x"] == [c for c, _ in curve]
    assert fig["data"][0]["y"] == pytest.approx([t * 1e3 for _, t in curve])


def test_shares_add_up_to_100_percent(est: dict[str, Any]) -> None:
    fig = estimate_figures(est)["shares"]
    totals = [sum(t["x"][i] for t in fig["data"]) for i in range(2)]
    assert totals == pytest.approx([100.0, 100.0])


def test_memory_parts_add_up_to_hbm(est: dict[str, Any]) -> None:
    m = est["memory"]
    fig = estimate_figures(est)["memory"]
    used = sum(t["x"][0] for t in fig["data"])
    # weights + activations + runtime + KV free = usable; plus the unused rest = HBM (GiB)
    assert used == pytest.approx(m["hbm_bytes_per_gpu"] / 2**30)


def test_kv_line_reaches_the_free_memory_at_the_request_limit(est: dict[str, Any]) -> None:
    m = est["memory"]
    fig = estimate_figures(est)["kv"]
    line = fig["data"][0]
    at_limit = line["y"][line["x"].index(m["max_concurrent_requests"])]
    free_gib = m["kv_free_bytes_per_gpu"] / 2**30
    per_request_gib = m["kv_bytes_per_request"] / 2**30
    assert at_limit <= free_gib < at_limit + per_request_gib


def test_a_model_that_does_not_fit_still_draws() -> None:
    est = tokenprobe.estimate(
        "llama-3.1-70b", "h100-sxm", input_tokens=512, output_tokens=64
    ).to_dict()
    assert not est["memory"]["fits"]
    fig = estimate_figures(est)["memory"]
    assert "DOES NOT FIT" in fig["layout"]["title"]["text"]
    for f in estimate_figures(est).values():
        go.Figure(f)


def test_single_token_output_has_no_decode_figures() -> None:
    est = tokenprobe.estimate(
        "llama-3.1-8b", "h100-sxm", input_tokens=64, output_tokens=1
    ).to_dict()
    figs = estimate_figures(est)
    assert "tpot" not in figs and "throughput" not in figs
