"""Sweep reports: the points of a REAL llama.cpp sweep (tests/report/data), the knee by both
rules, the curves, and `tokenprobe report SWEEP_FOLDER`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from typer.testing import CliRunner

import tokenprobe.cli.report  # noqa: F401  (registers `report`)
from tokenprobe.cli import app
from tokenprobe.records import read_run
from tokenprobe.report import find_knee, is_sweep_folder, make_point, read_sweep, sweep_sections
from tokenprobe.report.sweep import (
    KNEE_LATENCY_GROWTH,
    KNEE_THROUGHPUT_GAIN,
    SLO_ATTAINMENT,
    goodput_load_figure,
    throughput_latency_figure,
)

SWEEP = Path(__file__).resolve().parent / "data" / "sweep_llamacpp"
SLO_TTFT_S, SLO_TPOT_S = 0.5, 0.08  # what the recording was made with (data/README.md)


def test_a_sweep_folder_is_recognised_and_a_run_folder_is_not() -> None:
    assert is_sweep_folder(SWEEP)
    assert not is_sweep_folder(SWEEP / "concurrency_1")
    assert not is_sweep_folder(SWEEP / "no-such-folder")


def test_the_points_are_read_in_load_order() -> None:
    points = read_sweep(SWEEP)
    assert [(p.name, p.load_field, p.load) for p in points] == [
        ("concurrency_1", "concurrency", 1.0),
        ("concurrency_2", "concurrency", 2.0),
        ("concurrency_4", "concurrency", 4.0),
    ]


def _attainment_from_records(folder: Path) -> float:
    records = read_run(folder).records
    good = sum(
        1
        for r in records
        if r.ok
        and r.ttft_s is not None
        and r.ttft_s <= SLO_TTFT_S
        and (r.tpot_s is None or r.tpot_s <= SLO_TPOT_S)
    )
    return good / len(records)


def test_the_slo_knee_is_the_highest_load_that_meets_the_slos() -> None:
    points = read_sweep(SWEEP)
    shares = [_attainment_from_records(SWEEP / p.name) for p in points]
    expected = max(i for i, a in enumerate(shares) if a >= SLO_ATTAINMENT)
    knee, rule = find_knee(points)
    assert knee == expected
    assert "SLO" in rule


def _point(load: float, tput: float, e2e_p90_s: float) -> Any:
    summary = {"output_tokens_per_s": tput, "e2e_s": {"p90": e2e_p90_s}, "requests_per_s": 1.0}
    return make_point(f"concurrency_{load:g}", "measured", {"concurrency": int(load)}, summary)


def test_the_saturation_knee_without_slos() -> None:
    # 1 -> 2 -> 4 doubles throughput; 4 -> 8 gains 5% while p90 E2E doubles: the knee is 4
    points = [_point(1, 100, 1.0), _point(2, 200, 1.05), _point(4, 380, 1.2)]
    points.append(
        _point(8, 380 * (1 + KNEE_THROUGHPUT_GAIN / 2), 1.2 * (1 + 2 * KNEE_LATENCY_GROWTH))
    )
    knee, rule = find_knee(points)
    assert knee == 2 and "throughput" in rule


def test_no_knee_while_the_sweep_still_scales() -> None:
    # latency grows a lot but throughput keeps growing: not saturated
    points = [_point(1, 100, 1.0), _point(2, 190, 2.0), _point(4, 350, 4.0)]
    assert find_knee(points)[0] is None
    # throughput flat but latency flat too: no knee either (both conditions are needed)
    points = [_point(1, 100, 1.0), _point(2, 101, 1.01)]
    assert find_knee(points)[0] is None


def test_the_curves_are_valid_and_mark_the_knee() -> None:
    points = read_sweep(SWEEP)
    knee, _ = find_knee(points)
    assert knee is not None
    tl = throughput_latency_figure(points, knee)
    gl = goodput_load_figure(points, knee)
    for fig in (tl, gl):
        go.Figure(fig)
    star = next(t for t in tl["data"] if t["name"] == "knee")
    assert star["y"] == [points[knee].summary["output_tokens_per_s"]]
    assert star["x"] == [pytest.approx(points[knee].summary["e2e_s"]["p90"] * 1e3)]
    assert gl["layout"]["shapes"][0]["x0"] == points[knee].load
    goodput = next(t for t in gl["data"] if t["name"].startswith("goodput"))
    assert goodput["y"] == [p.summary["goodput_requests_per_s"] for p in points]


def test_sweep_sections_name_the_knee() -> None:
    points = read_sweep(SWEEP)
    knee, _ = find_knee(points)
    assert knee is not None
    sections = sweep_sections(points, "s")
    what = {row[0]: row[1] for row in sections[0].tables[0].rows}
    assert what["knee"].startswith(f"concurrency (users) {points[knee].load:g} ")
    assert what["SLOs"] == "TTFT <= 500 ms, TPOT <= 80.0 ms"
    rows = sections[-1].tables[0].rows
    assert [r[0] for r in rows].count(f"{points[knee].name} (knee)") == 1


def test_cli_reports_a_sweep_folder(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(SWEEP, sweep)
    (sweep / "concurrency_2" / "summary.json").unlink()  # a point never closed: summarized
    out = tmp_path / "s.html"
    result = CliRunner().invoke(app, ["report", str(sweep), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    match = re.search(r'id="figures">(.*?)</script>', html, re.S)
    assert match is not None
    assert set(json.loads(match.group(1))) == {"sweep_throughput_latency", "sweep_goodput"}
    assert "concurrency_2" in html and "Knee rule" in html
