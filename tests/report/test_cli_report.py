"""`tokenprobe report`, `compare` and `serve --help` through the typer app (the commands register
themselves on `app` when their modules are imported)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

import tokenprobe.cli.compare
import tokenprobe.cli.report
import tokenprobe.cli.serve  # noqa: F401  (registers `serve`)
from tokenprobe.cli import app
from tokenprobe.sim import simulate

runner = CliRunner()


def _figure_ids(html: str) -> set[str]:
    match = re.search(r'id="figures">(.*?)</script>', html, re.S)
    assert match is not None
    return set(json.loads(match.group(1)))


def test_report_of_an_estimate(tmp_path: Path) -> None:
    out = tmp_path / "e.html"
    args = ["report", "--estimate", "--model", "llama-3.1-8b", "--gpu", "h200", "--batch", "8"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "llama-3.1-8b on 1x h200" in html and "batch 8" in html
    assert {"roofline", "shares", "throughput", "tpot", "memory", "kv", "energy"} <= _figure_ids(
        html
    )


def test_report_of_a_run_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    simulate(input_tokens=128, output_tokens=32, rate_per_s=5, num_requests=50).write(run_dir)
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", str(run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert {"latency_cdf", "timeline", "run_energy"} <= _figure_ids(out.read_text())


def test_report_of_a_simulation(tmp_path: Path) -> None:
    out = tmp_path / "s.html"
    args = ["report", "--simulate", "--concurrency", "4", "--num-requests", "40"]
    result = runner.invoke(app, [*args, "--input-tokens", "128", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "timeline" in _figure_ids(out.read_text())


def test_report_needs_exactly_one_source(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "--out", str(tmp_path / "x.html")])
    assert result.exit_code == 2
    result = runner.invoke(app, ["report", str(tmp_path), "--estimate"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist (give a run folder" in result.output


def test_compare_gpus_in_the_terminal_and_as_a_report(tmp_path: Path) -> None:
    out = tmp_path / "c.html"
    result = runner.invoke(
        app, ["compare", "--gpus", "a100-sxm-80gb,h100-sxm,h200", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    for gpu in ("a100-sxm-80gb", "h100-sxm", "h200", "TPOT", "output tokens/s"):
        assert gpu in result.output
    assert {"compare", "compare_tpot"} <= _figure_ids(out.read_text())


def test_compare_dtypes_as_json() -> None:
    args = ["compare", "--model", "llama-3.1-70b", "--weight-dtypes", "bf16,fp8", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [r["label"] for r in rows] == ["bf16", "fp8"]
    bf16, fp8 = rows
    assert not bf16["fits"] and fp8["fits"]  # 141 GB of bf16 weights exceed one 80 GB H100


def test_compare_needs_two_configurations_and_known_names() -> None:
    assert runner.invoke(app, ["compare", "--gpus", "h100-sxm"]).exit_code == 2
    result = runner.invoke(app, ["compare", "--gpus", "h100-sxm,h900"])
    assert result.exit_code == 2 and "h900" in result.output


def test_serve_help_names_loopback() -> None:
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "127.0.0.1" in result.output


def test_compare_runs(tmp_path: Path) -> None:
    for name, rate in (("slow", 2.0), ("fast", 40.0)):
        simulate(
            input_tokens=256, output_tokens=64, rate_per_s=rate, num_requests=120, seed=3
        ).write(tmp_path / name)
    out = tmp_path / "runs.html"
    dirs = [str(tmp_path / "slow"), str(tmp_path / "fast")]
    result = runner.invoke(app, ["compare", *dirs, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "TTFT p50 (ms)" in result.output and "slow" in result.output
    assert {"cdf_ttft_s", "cdf_tpot_s", "cdf_itl_s", "cdf_e2e_s"} <= _figure_ids(out.read_text())
    summaries = json.loads(runner.invoke(app, ["compare", *dirs, "--json"]).output)["runs"]
    # 20x the arrival rate on the same GPU: bigger batches, so slower tokens
    assert summaries["fast"]["tpot_s"]["p50"] > summaries["slow"]["tpot_s"]["p50"]
    assert runner.invoke(app, ["compare", dirs[0]]).exit_code == 2
