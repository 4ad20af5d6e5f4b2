"""Run figures: exact binning of step timelines, CDFs through quantiles, arrivals, validity."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from tokenprobe.records import RequestRecord, Run, TelemetrySample, TimelinePoint
from tokenprobe.report import run_figures
from tokenprobe.report.run_figs import (
    arrivals_per_s,
    bin_step_mean,
    cdf_points,
    in_flight,
    output_tokens_per_s,
    run_timelines,
    timeline_bin_s,
)


def _record(i: int, sent: float) -> RequestRecord:
    first = sent + 0.1
    return RequestRecord(
        request_id=f"r{i}",
        scheduled_s=sent,
        sent_s=sent,
        first_token_s=first,
        finish_s=first + 0.9,
        input_tokens=100,
        output_tokens=10,
        token_times_s=[first + 0.1 * k for k in range(10)],
    )


def _run() -> Run:
    timeline = [
        TimelinePoint(t_s=0.0, batch_size=1, kv_blocks_used=10, queue_len=0, power_w=300.0),
        TimelinePoint(t_s=1.0, batch_size=3, kv_blocks_used=30, queue_len=2, power_w=500.0),
        TimelinePoint(t_s=3.0, batch_size=0, kv_blocks_used=0, queue_len=0, power_w=100.0),
    ]
    return Run(
        kind="simulated",
        config={"kv_capacity_blocks": 100},
        records=[_record(i, 0.5 * i) for i in range(6)],
        timeline=timeline,
        duration_s=4.0,
    )


def test_bin_step_mean_is_the_time_weighted_mean() -> None:
    # 300 W on [0,1), 500 W on [1,3), 100 W on [3,4]: two bins of 2 s -> (300+500)/2, (500+100)/2
    t = np.array([0.0, 1.0, 3.0])
    p = np.array([300.0, 500.0, 100.0])
    starts, means = bin_step_mean(t, p, end_s=4.0, bins=2)
    assert starts.tolist() == [0.0, 2.0]
    assert means.tolist() == pytest.approx([400.0, 300.0])
    # energy is kept whatever the binning: sum(mean x width) = 300 + 1000 + 100 J
    _, fine = bin_step_mean(t, p, end_s=4.0, bins=7)
    assert float(np.sum(fine * 4.0 / 7)) == pytest.approx(1400.0)


def test_cdf_points_are_quantiles_and_small_sets_stay_exact() -> None:
    xs, ps = cdf_points([3.0, 1.0, 2.0])
    assert xs == [1.0, 2.0, 3.0]
    assert ps == pytest.approx([1 / 3, 2 / 3, 1.0])
    values = np.arange(10_001, dtype=float)
    xs, ps = cdf_points(values.tolist(), points=101)
    assert len(xs) == 101
    assert xs[50] == pytest.approx(5000.0) and ps[50] == pytest.approx(0.5)


def test_arrivals_per_s_counts_requests_in_round_bins() -> None:
    run = _run()
    run.records = [_record(i, 0.1 * i) for i in range(30)]  # sent at 0, 0.1, ..., 2.9 s
    x, rate = arrivals_per_s(run, end_s=4.0)
    width = timeline_bin_s(4.0)
    assert len(x) == round(4.0 / width)
    assert x[1] - x[0] == pytest.approx(width)
    assert sum(r * width for r in rate) == pytest.approx(30)  # every request counted once
    assert max(rate) == pytest.approx(1 / width)  # one request per bin at most at this spacing


@pytest.mark.parametrize("duration_s", [0.37, 4.0, 13.86, 99.0, 1000.0, 86_400.0])
def test_timeline_bins_are_round_and_between_100_and_250(duration_s: float) -> None:
    width = timeline_bin_s(duration_s)
    mantissa = width / 10 ** np.floor(np.log10(width))
    assert round(mantissa, 9) in (1.0, 2.0, 5.0)
    assert 100 <= np.ceil(duration_s / width - 1e-9) <= 250


def test_in_flight_is_the_time_weighted_count() -> None:
    # 6 requests sent every 0.5 s, each in flight 1.0 s: 2 in flight at any time from 0.5 to 3 s
    x, y = in_flight(_run(), end_s=4.0)
    width = timeline_bin_s(4.0)
    assert len(x) == round(4.0 / width)
    # the integral of the in-flight count is the summed request time: 6 x 1.0 s
    assert sum(v * width for v in y) == pytest.approx(6.0)
    mid = [v for t, v in zip(x, y, strict=True) if 0.5 <= t < 2.9]
    assert mid == pytest.approx([2.0] * len(mid))


def test_output_tokens_per_s_counts_every_token_once() -> None:
    _, y = output_tokens_per_s(_run(), end_s=4.0)
    width = timeline_bin_s(4.0)
    assert sum(v * width for v in y) == pytest.approx(60)  # 6 requests x 10 tokens


def test_run_figures_are_valid_and_in_display_units() -> None:
    figs = run_figures(
        _run(),
        {"energy": {"kwh_per_million_input_tokens": 0.01, "kwh_per_million_output_tokens": 0.05}},
    )
    assert set(figs) == {"latency_cdf", "timeline", "run_energy"}
    for fig in figs.values():
        go.Figure(fig)
    ttft = next(t for t in figs["latency_cdf"]["data"] if t["name"].startswith("TTFT"))
    assert ttft["x"] == pytest.approx([100.0] * 6)  # ms
    itl = next(t for t in figs["latency_cdf"]["data"] if t["name"].startswith("ITL"))
    assert itl["x"] == pytest.approx([100.0] * 54)
    kv = next(t for t in figs["timeline"]["data"] if t["name"] == "KV in use")
    assert kv["y"] == [10.0, 30.0, 0.0]  # % of the 100-block capacity


def test_timeline_of_a_measured_run_draws_telemetry_power() -> None:
    telemetry = [TelemetrySample(t_s=0.1 * i, gpu_index=0, power_w=200.0 + i) for i in range(50)]
    run = Run(kind="measured", records=[_record(0, 0.0)], telemetry=telemetry, duration_s=5.0)
    fig = run_timelines(run)
    go.Figure(fig)
    names = [t["name"] for t in fig["data"]]
    assert names == [
        "in flight",
        "output tokens/s",
        "GPU 0 power (measured)",
        "arrivals (requests/s, right axis)",
    ]


def test_big_timelines_are_binned() -> None:
    n = 40_000
    timeline = [
        TimelinePoint(
            t_s=0.01 * i, batch_size=i % 7, kv_blocks_used=i % 50, queue_len=0, power_w=400.0
        )
        for i in range(n)
    ]
    run = Run(kind="simulated", records=[_record(0, 0.0)], timeline=timeline, duration_s=400.0)
    fig = run_timelines(run, bins=500)
    power = next(t for t in fig["data"] if t["name"] == "power, all GPUs")
    assert len(power["x"]) == 500
    assert power["y"] == pytest.approx([400.0] * 500)


def test_cdf_overlay_has_one_line_per_run() -> None:
    from tokenprobe.report.run_figs import latency_cdf_overlay

    fig = latency_cdf_overlay([("a", _run()), ("b", _run())], "tpot_s")
    go.Figure(fig)
    assert [t["name"] for t in fig["data"]] == ["a", "b"]
    assert fig["data"][0]["x"] == pytest.approx([100.0] * 6)  # 0.9 s over 9 gaps = 100 ms


def test_a_run_with_no_records_still_draws() -> None:
    figs = run_figures(Run(kind="measured"), {})
    assert set(figs) == {"latency_cdf", "timeline"}
    for fig in figs.values():
        go.Figure(fig)
    assert figs["latency_cdf"]["data"] == []
