"""`bench --sweep rate=auto` against the real llama.cpp server: the knee under the SLOs found by
metrics.RateSearch, one run folder per rate tried (fresh prompts at each), exit 1 when no rate
meets the SLOs, the folder refused when it already holds a sweep, and the report of the folder
marking the knee. Loose (60 s) and impossible (1 µs) SLOs keep the outcome independent of how
fast this machine is."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import tokenprobe.cli.bench
import tokenprobe.cli.report  # noqa: F401
from loadgen.conftest import LlamaServer
from tokenprobe.cli.app import app
from tokenprobe.records import read_run

runner = CliRunner()


def _auto(url: str, out: Path, *more: str) -> list[str]:
    args = ["bench", "--url", url, "--model", "smollm2", "--input-tokens", "16"]
    args += ["--output-tokens", "2", "--num-requests", "2", "--sweep", "rate=auto"]
    return [*args, "--out", str(out), *more]


def _flat(text: str) -> str:
    return "".join(text.split())


def test_auto_sweep_climbs_while_the_slos_hold_and_reports_the_knee(
    llama: LlamaServer, tmp_path: Path
):
    """A 60 s TTFT SLO holds at every rate: 2, 4, 8 req/s all pass, the budget of 3 runs ends
    the search, and the knee is the highest rate tried."""
    out = tmp_path / "auto"
    more = ["--slo-ttft-s", "60", "--rate", "2", "--sweep-points", "3", "--json"]
    result = runner.invoke(app, _auto(llama.url, out, *more))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [p["rate_per_s"] for p in doc["points"]] == [2.0, 4.0, 8.0]
    assert all(p["meets_slos"] and p["slo_attainment"] == 1.0 for p in doc["points"]), doc["points"]
    assert doc["knee_rate_per_s"] == 8.0
    salts = set()
    for rate in ("2", "4", "8"):
        run = read_run(out / f"rate_per_s_{rate}")
        assert len(run.records) == 2 and all(r.ok for r in run.records)
        assert run.config["rate_per_s"] == float(rate)
        salts.add(run.config["prompt_salt"])
    assert len(salts) == 3 and "" not in salts  # fresh prompts at every point
    report = tmp_path / "auto.html"
    result = runner.invoke(app, ["report", str(out), "--out", str(report)])
    assert result.exit_code == 0, result.output
    assert "knee" in report.read_text()

    again = runner.invoke(app, _auto(llama.url, out, *more), env={"COLUMNS": "300"})
    assert again.exit_code == 2 and "--overwrite" in _flat(again.output), again.output


def test_auto_sweep_with_an_impossible_slo_exits_1_and_keeps_its_runs(
    llama: LlamaServer, tmp_path: Path
):
    out = tmp_path / "never"
    more = ["--slo-ttft-s", "0.000001", "--rate", "2", "--sweep-points", "2"]
    result = runner.invoke(app, _auto(llama.url, out, *more), env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    assert "norate" in _flat(result.output).lower() and "resultsarewritten" in _flat(result.output)
    for rate in ("2", "1"):  # down from the start while nothing passes
        assert len(read_run(out / f"rate_per_s_{rate}").records) == 2


def test_auto_sweep_needs_an_slo_to_judge_by(llama: LlamaServer, tmp_path: Path):
    result = runner.invoke(app, _auto(llama.url, tmp_path / "x"), env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "--slo-ttft-s" in _flat(result.output), result.output
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())
