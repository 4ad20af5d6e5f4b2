"""A measured run's RunConfig and its replay, against the REAL llama.cpp server (SmolLM2-135M on
the CPU; tests/loadgen/conftest.py): `bench --gpu/--catalog-model` keeps both in config.json,
the config reads back into the same object, and `diagnose --predict` replays the run's own
arrivals and lengths through the simulator on the deployment it names (issue 16 items 2, 3).

The catalog has no SmolLM2, so the run is priced as llama-3.1-8b on an H100: the point here is
the replay and the table, not the accuracy of a CPU server's prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench
import tokenprobe.cli.diagnose  # noqa: F401
from loadgen.conftest import LlamaServer
from tokenprobe.cli.app import app
from tokenprobe.metrics import summarize
from tokenprobe.records import RunConfig, read_run

runner = CliRunner()
CATALOG_MODEL, GPU = "llama-3.1-8b", "h100-sxm"


@pytest.fixture(scope="module")
def measured(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("measured") / "run"
    args = ["bench", "--url", llama.url, "--model", "smollm2", "--out", str(out)]
    args += ["--rate", "4", "--num-requests", "8", "--input-tokens", "24"]
    args += ["--output-tokens", "12", "--seed", "7", "--slo-ttft-s", "5", "--slo-tpot-s", "1"]
    args += ["--telemetry", "--telemetry-period-s", "0.1"]
    args += ["--gpu", GPU, "--catalog-model", CATALOG_MODEL]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def test_bench_writes_a_run_config_that_reads_back_into_the_same_object(
    measured: Path, llama: LlamaServer
) -> None:
    run = read_run(measured)
    rc = RunConfig.of(run)
    assert rc.source == "measured"
    dep = rc.deployment
    assert (dep.model, dep.catalog_model, dep.gpu) == ("smollm2", CATALOG_MODEL, GPU)
    assert (rc.slo_ttft_s, rc.slo_tpot_s, rc.seed) == (5.0, 1.0, 7)
    assert rc.server_url == llama.url and rc.served_model == "smollm2"
    # llama.cpp lists its models as owned by "llamacpp" and has no /version
    assert (rc.server_engine, rc.server_version) == ("llamacpp", None)
    assert rc.extra["telemetry"]["period_s"] == 0.1  # the writer's other settings are kept
    # every field survives the trip through config.json and back
    again = RunConfig.from_dict(json.loads(json.dumps(rc.to_dict())), "measured")
    assert again == rc


def test_predict_replays_the_measured_run_side_by_side(measured: Path) -> None:
    result = runner.invoke(app, ["diagnose", str(measured), "--predict", "--json"])
    assert result.exit_code == 0, result.output
    replay = json.loads(result.output)["replay"]
    run = read_run(measured)
    ok = [r for r in run.records if r.ok]
    assert replay["requests"] == len(ok) > 0
    # llama.cpp is no engine preset of the simulator: vLLM's
    assert (replay["engine"], replay["engine_source"]) == ("vllm", "default")
    assert replay["deployment"] == f"{CATALOG_MODEL} on 1x {GPU}"
    rows = {row["metric"]: row for row in replay["rows"]}
    summary = summarize(run)
    for metric in ("ttft_s", "tpot_s", "itl_s"):
        for p in ("p50", "p90", "p99"):
            row = rows[f"{metric} {p}"]
            assert row["measured"] == pytest.approx(summary[metric][p])
            assert row["simulated"] is not None and row["simulated"] > 0
            assert row["ratio"] == pytest.approx(row["measured"] / row["simulated"])
    assert rows["output_tokens_per_s"]["measured"] == pytest.approx(summary["output_tokens_per_s"])
    # a CPU server measured against an H100's simulation: the replay says where they part
    verdicts = {v["rule"]: v["status"] for v in json.loads(result.output)["rules"]}
    assert verdicts["replay-mismatch"] == "fired"


def test_predict_prints_the_replay_table(measured: Path) -> None:
    result = runner.invoke(app, ["diagnose", str(measured), "--predict"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = "".join(result.output.split())
    assert "Therunvsitsreplayinthesimulator" in text
    assert "ttft_sp99" in text and "measured/simulated" in text


def test_gpu_and_catalog_model_are_kept_without_telemetry_too(
    llama: LlamaServer, tmp_path: Path
) -> None:
    """They price the run, whatever else is sampled (they were dropped without --telemetry)."""
    out = tmp_path / "run"
    args = ["bench", "--url", llama.url, "--model", "smollm2", "--out", str(out)]
    args += ["--concurrency", "2", "--num-requests", "4", "--input-tokens", "16"]
    args += ["--output-tokens", "8", "--gpu", "l4", "--catalog-model", "qwen2.5-7b"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    dep = RunConfig.of(read_run(out)).deployment
    assert (dep.gpu, dep.catalog_model, dep.model) == ("l4", "qwen2.5-7b", "smollm2")
    bad = runner.invoke(app, [*args[:-4], "--gpu", "h100-sxmm", "--overwrite"])
    assert bad.exit_code == 2 and "h100-sxm" in bad.output  # the closest known name
