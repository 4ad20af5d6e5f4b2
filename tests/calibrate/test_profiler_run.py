"""The profiler's output path (no GPU needed) and its model code (on CPU, where torch exists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenprobe.calibrate import rows_from_run
from tokenprobe.calibrate.profiler import (
    Point,
    ProfileRun,
    ProfileSpec,
    check_model,
    write_profile_run,
)
from tokenprobe.errors import ConfigError
from tokenprobe.model import ModelSpec, get_model


def test_a_profile_run_folder_reads_back_as_calibration_rows(tmp_path: Path) -> None:
    run = ProfileRun(ProfileSpec("llama-3.1-8b"), "h100-sxm", "NVIDIA H100 80GB HBM3", "2.5")
    run.points = [
        Point("prefill", 1, 2048, 0.050, 600.0, 30.0),
        Point("decode", 8, 2048, 0.0075, 350.0, 2.625),
        Point("decode", 32, 512, 0.0080, None, None),
    ]
    folder = write_profile_run(run, tmp_path / "run")
    loaded = rows_from_run(folder)
    assert not loaded.skipped
    prefill, decode8, decode32 = loaded.rows
    assert prefill.measured == {"prefill_s": pytest.approx(0.050), "power_per_gpu": 600.0}
    assert decode8.measured["decode_step_s"] == pytest.approx(0.0075)
    assert decode8.measured["energy_per_output_token"] == pytest.approx(2.625 / 8)
    assert set(decode32.measured) == {"decode_step_s"}
    assert prefill.engine == "pytorch-eager" and prefill.deployment.gpu.name == "h100-sxm"


def test_bad_profile_settings_are_rejected() -> None:
    with pytest.raises(ConfigError, match="dtype"):
        ProfileSpec("llama-3.1-8b", dtype="int4")
    with pytest.raises(ConfigError, match="batches"):
        ProfileSpec("llama-3.1-8b", batches=(0,))
    with pytest.raises(ConfigError, match="dense"):
        check_model(get_model("qwen3-30b-a3b"))
    with pytest.raises(ConfigError, match="dense"):  # Mamba-2 and MLP-only layers
        check_model(get_model("nemotron-nano-9b-v2"))
    check_model(get_model("llama-3.1-8b"))


def test_the_random_weight_decoder_runs_prefill_and_decode_on_cpu() -> None:
    torch = pytest.importorskip("torch")
    from tokenprobe.calibrate.profiler import _Decoder

    tiny = ModelSpec(
        name="tiny-gqa",
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        intermediate_size=128,
        vocab_size=100,
    )
    dec = _Decoder(torch, tiny, torch.float32, device="cpu")
    prompt = torch.randint(0, 100, (2, 7))
    assert tuple(dec.forward(prompt, None).shape) == (2, 100)
    cache = dec.kv_cache(3, 9)
    assert tuple(dec.forward(torch.randint(0, 100, (3, 1)), cache).shape) == (3, 100)
