"""`diagnose --predict` (measured vs predicted) and the `tokenprobe diagnose` command.

Runs: SIM = tokenprobe.simulate; REAL = tests/data/runs/llamacpp_cpu_* (real llama.cpp server,
CPU only, SmolLM2: no catalog model/GPU, so no prediction).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.diagnose  # noqa: F401  (registers the command on app)
from diagnose.runs import DATA, sim_run
from tokenprobe.cli.app import app
from tokenprobe.cost import estimate
from tokenprobe.diagnose import diagnose
from tokenprobe.records import write_run

runner = CliRunner()


def _rows(comparison: dict) -> dict[str, dict]:
    return {row["metric"]: row for row in comparison["rows"]}


def test_poisson_sim_matches_the_cost_model_within_a_few_percent_on_tpot() -> None:
    """SIM Poisson at 4 req/s: the simulator prices steps with the same cost model, so the
    decode step time agrees with estimate(batch = mean in flight) and no mismatch fires."""
    result = diagnose(sim_run("poisson"), predict=True)
    rows = _rows(result.comparison or {})
    assert set(rows) == {"ttft_s", "tpot_s", "joules_per_output_token"}
    assert rows["tpot_s"]["ratio"] == pytest.approx(1.0, abs=0.1)
    assert rows["joules_per_output_token"]["measured"] is not None
    load = (result.comparison or {})["load"]
    assert (load["input_tokens"], load["output_tokens"]) == (512, 128)
    single = estimate("llama-3.1-8b", "h100-sxm", input_tokens=512, output_tokens=128)
    assert rows["ttft_s"]["predicted"] == pytest.approx(single.ttft_s)
    assert "prediction-mismatch" not in result.kinds()


def test_queueing_on_a_full_kv_cache_shows_as_a_ttft_mismatch() -> None:
    """SIM tiny KV: requests wait for KV blocks, which the static estimate does not model."""
    result = diagnose(sim_run("tiny_kv"), predict=True)
    assert _rows(result.comparison or {})["ttft_s"]["ratio"] > 10
    assert "prediction-mismatch" in result.kinds()
    assert "prediction-mismatch" not in diagnose(sim_run("tiny_kv")).kinds()  # only with predict


def test_real_cpu_run_without_a_catalog_model_skips_the_prediction_with_a_note() -> None:
    result = runner.invoke(
        app, ["diagnose", str(DATA / "runs" / "llamacpp_cpu_pid"), "--predict", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["comparison"]["rows"] == []
    assert any("catalog" in note for note in doc["comparison"]["notes"])
    rules = {r["rule"]: r["status"] for r in doc["rules"]}
    assert rules["prediction-mismatch"] == "skipped" and rules["cpu-bound"] == "fired"
    assert [f["kind"] for f in doc["findings"]] == ["cpu-bound"]


def test_tables_by_default_with_measured_vs_predicted(tmp_path: Path) -> None:
    """SIM tiny KV written as a run folder, then diagnosed from the folder as a user would."""
    write_run(sim_run("tiny_kv"), tmp_path / "run")
    result = runner.invoke(app, ["diagnose", str(tmp_path / "run"), "--predict"])
    assert result.exit_code == 0, result.output
    for needle in ("Findings", "kv-capacity-bound", "Rules", "Measured vs predicted", "tpot_s"):
        assert needle in result.output


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p / "missing", "not a folder"),
        (lambda p: p, "not a tokenprobe run folder"),
    ],
)
def test_a_bad_folder_is_one_clear_line_and_exit_2(make, needle: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["diagnose", str(make(tmp_path))])
    assert result.exit_code == 2
    text = result.output.replace("\n", "")  # rich wraps the one line at the terminal's width
    assert text.count("error:") == 1 and needle in text
    assert "Traceback" not in result.output


def test_a_corrupt_records_line_names_the_file(tmp_path: Path) -> None:
    write_run(sim_run("decode"), tmp_path)
    with (tmp_path / "records.jsonl").open("a") as f:
        f.write("{broken\n{}\n")
    result = runner.invoke(app, ["diagnose", str(tmp_path)])
    assert result.exit_code == 2 and "records.jsonl:65" in result.output.replace("\n", "")
