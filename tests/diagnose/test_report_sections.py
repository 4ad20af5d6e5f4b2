"""The diagnosis in HTML reports: findings and rules tables, measured vs predicted side by side,
and the host/server telemetry figure. Runs: SIM (tokenprobe.simulate), REAL (the recorded
llama.cpp runs of tests/data/runs), see tests/diagnose/runs.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import plotly.graph_objects as go
import pytest

from diagnose.runs import real_run, sim_run
from tokenprobe.bench import TelemetryConfig
from tokenprobe.diagnose import diagnose
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import summarize
from tokenprobe.report import run_sections, write_report
from tokenprobe.report.diagnosis_figs import comparison_figure


def _section(sections, title):
    return next(s for s in sections if s.title == title)


def test_measured_vs_predicted_table_and_figure_carry_the_comparison() -> None:
    """SIM tiny KV diagnosed with the prediction: the table's numbers are the comparison's in ms
    and J, the figure has a measured and a predicted bar per panel and passes plotly's schema."""
    run = sim_run("tiny_kv")
    diagnosis = diagnose(run, predict=True).to_dict()
    sections = run_sections(run, summarize(run), "tiny", diagnosis=diagnosis)
    table = _section(sections, "Measured vs predicted").tables[0]
    rows = {row[0]: row for row in table.rows}
    tpot = next(r for r in diagnosis["comparison"]["rows"] if r["metric"] == "tpot_s")
    # printed by the report's formatter: 3 significant digits
    assert float(rows["TPOT (ms)"][1]) == pytest.approx(tpot["measured"] * 1e3, rel=5e-3)
    assert float(rows["TPOT (ms)"][2]) == pytest.approx(tpot["predicted"] * 1e3, rel=5e-3)
    assert set(rows) == {"TTFT (ms)", "TPOT (ms)", "J per output token"}
    fig = comparison_figure(diagnosis["comparison"])
    go.Figure(fig)
    assert [t["x"][0] for t in fig["data"]] == ["measured", "predicted"] * 3
    findings = _section(sections, "Diagnosis").tables[0]
    assert "kv-capacity-bound" in [row[1] for row in findings.rows]


def test_a_simulated_run_report_diagnoses_without_a_prediction_figure() -> None:
    """SIM decode: run_sections diagnoses on its own; a simulated run is itself a prediction."""
    run = sim_run("decode")
    titles = [s.title for s in run_sections(run, summarize(run))]
    assert "Diagnosis" in titles and "Measured vs predicted" not in titles


def test_real_run_report_has_findings_telemetry_and_the_skipped_prediction(
    tmp_path: Path,
) -> None:
    """REAL llama.cpp (CPU, no catalog model): cpu-bound in the findings, the host/server figure
    from host.jsonl and server_metrics.jsonl, and a note saying why there is no prediction."""
    run = real_run("pid")
    sections = run_sections(run, summarize(run), "real")
    diagnosis = _section(sections, "Diagnosis")
    assert [row[1] for row in diagnosis.tables[0].rows] == ["cpu-bound"]
    assert any("prediction skipped" in note for note in diagnosis.notes)
    assert any("replay skipped" in note for note in diagnosis.notes)
    fig = _section(sections, "Host and server telemetry").figures["host_server"]
    go.Figure(fig)
    names = {trace["name"] for trace in fig["data"]}
    assert {"host CPU", "server process (% of one core)", "requests running",
            "requests waiting"} <= names  # fmt: skip
    running = next(t for t in fig["data"] if t["name"] == "requests running")
    assert max(running["y"]) == max(s.requests_running or 0 for s in run.server)
    html = write_report(tmp_path / "r.html", sections, "real").read_text()
    assert "cpu-bound" in html and "fig-host_server" in html


def test_a_measured_run_report_shows_its_replay_request_by_request(tmp_path: Path) -> None:
    """A simulated run's records, config and timeline presented as a measured run (what bench
    writes with --gpu and --catalog-model): the report replays it through the simulator and
    shows the table and one scatter point per request; replaying a simulated run reproduces
    it, so every point lies on the diagonal."""
    run = replace(sim_run("decode"), kind="measured")
    ok = [r for r in run.records if r.ok]
    sections = run_sections(run, summarize(run), "as measured")
    replayed = _section(sections, "Measured vs replayed")
    table = replayed.tables[0]
    assert [row[0] for row in table.rows][:3] == ["TTFT p50 (ms)", "TTFT p90 (ms)", "TTFT p99 (ms)"]
    fig = replayed.figures["replay_per_request"]
    go.Figure(fig)
    ttft, _, e2e, _ = fig["data"]
    assert len(ttft["x"]) == len(e2e["x"]) == len(ok)
    by_id = {r.request_id: r for r in ok}
    for (rid, _prompt), x, y in zip(ttft["customdata"], ttft["x"], ttft["y"], strict=True):
        assert x == pytest.approx(by_id[rid].ttft_s * 1e3)
        assert y == pytest.approx(x, rel=0.02, abs=0.5)
    html = write_report(tmp_path / "r.html", sections, "as measured").read_text()
    assert "fig-replay_per_request" in html


def test_bench_refuses_an_unknown_gpu_name_before_measuring() -> None:
    with pytest.raises(ConfigError, match="closest known"):
        TelemetryConfig(gpu="h1000")
