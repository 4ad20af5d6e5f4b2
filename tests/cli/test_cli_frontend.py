"""The front-end flags as a user runs them: simulate --api-server-processes/--host/--batch-window-s,
estimate and whatif --api-server-processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app

runner = CliRunner()
SHORT = ["--model", "qwen3-8b", "--gpu", "b200", "--weight-dtype", "fp8"]
SHORT += ["--input-tokens", "16", "--output-tokens", "2", "--rate", "4000"]


def _json(args: list[str]) -> dict[str, object]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def test_simulate_with_one_and_four_api_server_processes() -> None:
    one = _json(["simulate", *SHORT, "--num-requests", "1500", "--api-server-processes", "1"])
    four = _json(["simulate", *SHORT, "--num-requests", "1500", "--api-server-processes", "4"])
    f1, f4 = one["frontend"], four["frontend"]
    assert isinstance(f1, dict) and isinstance(f4, dict)
    assert f1["utilization"] > 0.95 > f4["utilization"]
    assert four["requests_per_s"] > 1.4 * one["requests_per_s"]  # type: ignore[operator]
    table = runner.invoke(
        app, ["simulate", *SHORT, "--num-requests", "300", "--api-server-processes", "1"]
    )
    assert table.exit_code == 0 and "Serving front end (CPU)" in table.output


def test_simulate_batch_window_summary_shows_both_runs() -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "256"]
    args += [
        "--output-tokens",
        "64",
        "--rate",
        "2",
        "--num-requests",
        "60",
        "--batch-window-s",
        "2",
    ]
    doc = _json(args)
    bw = doc["batch_window"]
    assert isinstance(bw, dict) and bw["window_s"] == 2.0
    assert bw["with"]["ttft_p50_s"] > bw["without"]["ttft_p50_s"]
    assert bw["with"]["joules_per_output_token"] < bw["without"]["joules_per_output_token"]
    table = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert "Effect of the batch window" in table.output


def test_simulate_host_file(tmp_path: Path) -> None:
    path = tmp_path / "host.toml"
    path.write_text(
        '[fast]\ndisplay_name = "fast cores"\ncpu_cores = 16\ndram_gib = 64\n'
        "dram_gb_per_s = 100\nnvme_gb_per_s = 3\nnic_gbit_per_s = 10\ncpu_core_speed = 2.0\n"
        'sources = ["test"]\n'
    )
    doc = _json(["simulate", *SHORT, "--num-requests", "300", "--host", str(path)])
    cfg = doc["config"]
    assert isinstance(cfg, dict)
    assert cfg["frontend"]["host"] == "fast" and cfg["frontend"]["cpu_core_speed"] == 2.0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--api-server-processes", "0"], "api_server_processes"),
        (["--batch-window-s", "-1"], "batch_window_s"),
        (["--host", "no-such-host"], "host"),
        (["--batch-window-s", "1", "--scheduler", "static"], "batch_window_s"),
    ],
)
def test_bad_front_end_flags_exit_2(args: list[str], needle: str) -> None:
    result = runner.invoke(app, ["simulate", *SHORT, "--num-requests", "10", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and needle in result.output


def test_estimate_and_whatif_use_the_per_process_model() -> None:
    est = ["estimate", "--model", "qwen3-8b", "--gpu", "b200", "--weight-dtype", "fp8"]
    est += ["--input-tokens", "64", "--output-tokens", "16", "--batch", "256"]
    one, four = _json(est), _json([*est, "--api-server-processes", "4"])
    h1, h4 = one["host"], four["host"]
    assert isinstance(h1, dict) and isinstance(h4, dict)
    assert h4["max_requests_per_s"] == pytest.approx(4 * h1["max_requests_per_s"])
    assert (h1["bound"], h4["bound"]) == ("cpu", "gpu")
    wi = ["whatif", *est[1:], "--target", "served_requests_per_s"]
    ranking = _json(wi)["ranking"]
    assert isinstance(ranking, list)
    # CPU-bound: the two CPU upgrades come first; more processes (1 -> 2) beat a 1.5x core
    assert [r["resource"] for r in ranking[:2]] == ["api_server_processes", "cpu_core_speed"]
    gpu_bound = _json([*wi, "--api-server-processes", "16"])["upgrades"]
    assert isinstance(gpu_bound, dict)
    # GPU-bound: a faster core only shortens the tokenizer's 64 us in each request's TTFT
    assert 0 <= gpu_bound["cpu_core_speed"]["gain"]["served_requests_per_s"] < 1e-3


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--disaggregate", "1p1d", "--api-server-processes", "2"], "api_server_processes"),
        (["--disaggregate", "1p1d", "--host", "dgx-h100"], "host"),
        (["--replicas", "2", "--host-power"], "host_power"),
        (["--disaggregate", "1p1d", "--engine-in-api-server"], "engine_in_api_server"),
    ],
)
def test_front_end_flags_a_fleet_cannot_take_name_the_flag(flags: list[str], field: str) -> None:
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "64"]
    base += ["--output-tokens", "8", "--rate", "2", "--num-requests", "4"]
    result = runner.invoke(app, [*base, *flags], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert f"error:{field}=" in "".join(result.output.split())


def test_each_replica_has_its_own_api_server_processes() -> None:
    """The short-request case (one process serves ~1,900 of the 4,000 requests/s offered): two
    replicas with one process each serve about twice one replica's rate, as two servers do;
    the fleet's front end counts both processes."""
    one = _json(["simulate", *SHORT, "--num-requests", "3000", "--api-server-processes", "1"])
    two = _json(
        ["simulate", *SHORT, "--num-requests", "3000", "--api-server-processes", "1",
         "--replicas", "2", "--router", "least-loaded"]
    )  # fmt: skip
    f1, f2 = one["frontend"], two["frontend"]
    assert isinstance(f1, dict) and isinstance(f2, dict)
    assert f2["api_server_processes"] == 2 and f1["utilization"] > 0.95
    ratio = two["requests_per_s"] / one["requests_per_s"]  # type: ignore[operator]
    assert 1.7 < ratio < 2.2, ratio
