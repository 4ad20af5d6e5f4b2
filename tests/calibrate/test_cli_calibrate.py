"""`tokenprobe calibrate` and `tokenprobe profile` as a user runs them."""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.calibrate import load_profile
from tokenprobe.calibrate.profiler import CSV_COLUMNS, write_csv
from tokenprobe.cli import calibrate as _calibrate  # noqa: F401  (registers the commands)
from tokenprobe.cli.app import app

from .conftest import MODELS, ms, synthetic_rows

runner = CliRunner()


def _profile_csv(path: Path, truth) -> Path:
    """The synthetic measurements as a profiler CSV (what `tokenprobe profile` writes)."""
    lines = []
    for row in synthetic_rows(truth):
        model, step = row.label.split(" ")[:2]
        batch, tokens = row.label.split(" ")[2:4]
        line = dict.fromkeys(CSV_COLUMNS, "")
        line.update(
            source_id="tokenprobe_profile",
            engine="pytorch-eager",
            model=model,
            model_hf_id=model,
            gpu="h100-sxm",
            weight_precision="bf16",
            kv_cache_precision="bf16",
            tp="1",
            workload_type=f"{step}_step",
            batch_size=batch.removeprefix("B"),
            isl=tokens.removeprefix("L"),
            power_W_total=f"{row.measured['power_per_gpu']:.9g}",
        )
        key = "ttft_ms_mean" if step == "prefill" else "itl_ms_mean"
        line[key] = ms(row.measured[f"{step}_s" if step == "prefill" else "decode_step_s"])
        lines.append(line)
    write_csv(lines, path)
    return path


def test_calibrate_prints_before_after_and_writes_a_profile(tmp_path: Path, truth) -> None:
    csv_path = _profile_csv(tmp_path / "profile.csv", truth)
    out = tmp_path / "fitted.toml"
    result = runner.invoke(
        app, ["calibrate", str(csv_path), "--out", str(out), "--holdout", f"*{MODELS[0]}*"]
    )
    assert result.exit_code == 0, result.output
    for text in ("fitted", "held_out", "prefill_s", "decode_step_s", "before", "after"):
        assert text in result.output
    profile = load_profile(out)
    assert profile.name == "pytorch-eager"
    assert profile.efficiency.memory == pytest.approx(0.72, rel=0.05)
    held = [e for e in profile.errors if e.set == "held_out"]
    assert held and all(e.mdape_after_pct < e.mdape_before_pct for e in held)


def test_calibrate_json_and_a_run_folder(tmp_path: Path, truth) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _profile_csv(run / "profile.csv", truth)
    result = runner.invoke(app, ["calibrate", str(run), "--json", "--param", "memory"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc["parameters"]) == {"memory"}
    assert doc["fitted_rows"] > 0 and doc["held_out_rows"] > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["no/such/file.csv"], "input"),
        (["--param", "warp_speed", "PLACEHOLDER"], "warp_speed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, truth, args, needle) -> None:
    csv_path = _profile_csv(tmp_path / "p.csv", truth)
    args = [str(csv_path) if a == "PLACEHOLDER" else a for a in args]
    result = runner.invoke(app, ["calibrate", *args])
    assert result.exit_code == 2
    assert needle in result.output and "Traceback" not in result.output


def test_profile_without_torch_says_so_and_exits_0(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    result = runner.invoke(app, ["profile", "--model", "llama-3.1-8b"])
    assert result.exit_code == 0
    assert "PyTorch is not installed" in result.output
    assert "tokenprobe[profile]" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_profile_without_a_cuda_gpu_says_so_and_exits_0(monkeypatch) -> None:
    fake = types.ModuleType("torch")
    fake.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    fake.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)
    result = runner.invoke(app, ["profile", "--model", "llama-3.1-8b", "--out", "unused"])
    assert result.exit_code == 0
    assert "no CUDA GPU" in result.output
    assert not Path("unused").exists()
