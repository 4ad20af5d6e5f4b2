"""`tokenprobe estimate` as a user runs it: tables, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app

runner = CliRunner()


def test_tables_by_default() -> None:
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"])
    assert result.exit_code == 0, result.output
    for text in ("TTFT", "TPOT", "Memory per GPU", "kWh per million output tokens", "prefill"):
        assert text in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "llama-3.1-8x", "--gpu", "h100-sxm"], "llama-3.1-8b"),
        (["--model", "llama-3.1-8b", "--gpu", "h1000"], "h100"),
        (["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "-5"], "input_tokens"),
        (["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "3"], "tp=3"),
        (["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--efficiency", "memory"], "efficiency"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = runner.invoke(app, ["estimate", *args])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert needle in result.output
    assert len(result.output.strip().splitlines()) <= 3


def test_malformed_config_json(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{ not json")
    result = runner.invoke(app, ["estimate", "--model", str(bad), "--gpu", "h100-sxm"])
    assert result.exit_code == 2
    assert "not valid JSON" in result.output


def test_config_folder_is_accepted(tmp_path: Path) -> None:
    cfg = {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = runner.invoke(app, ["estimate", "--model", str(tmp_path), "--gpu", "l4", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params_total"] == pytest.approx(1.236e9, rel=0.01)


def test_catalog_listings() -> None:
    models = runner.invoke(app, ["models", "--json"])
    gpus = runner.invoke(app, ["gpus", "--json"])
    assert models.exit_code == 0 and gpus.exit_code == 0
    assert len(json.loads(models.stdout)["models"]) >= 20
    assert len(json.loads(gpus.stdout)["gpus"]) >= 12


def test_user_hardware_file_is_accepted_as_gpu() -> None:
    gpu_file = Path(__file__).parents[1] / "data" / "hardware" / "my_gpu.toml"
    result = runner.invoke(
        app, ["estimate", "--model", "llama-3.1-8b", "--gpu", str(gpu_file), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tpot_s"] > 0


def test_a_calibrated_profile_changes_the_estimate() -> None:
    base = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    tuned = runner.invoke(app, [*base, "--profile", "vllm-2024"])
    assert tuned.exit_code == 0, tuned.output
    d = json.loads(tuned.stdout)
    assert d["efficiency"] != plain["efficiency"]
    assert d["tpot_s"] != plain["tpot_s"]
    bad = runner.invoke(app, [*base, "--profile", "nosuch"])
    assert bad.exit_code == 2 and "vllm" in bad.output
