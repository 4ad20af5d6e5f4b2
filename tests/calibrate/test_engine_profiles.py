"""Engine profiles by engine + era + GPU vendor, and AMD's vLLM-for-ROCm MI300X tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.calibrate import (
    Profile,
    dumps_profile,
    load_csv,
    load_profile,
    observe,
    parse_profile,
    select_profile,
    shipped_profiles,
)
from tokenprobe.cli import app
from tokenprobe.cost import gpu_generation
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.hardware import VENDORS, get_gpu, gpu_names
from tokenprobe.sim import PRESETS, engine_defaults, engine_preset

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
runner = CliRunner()


def test_every_preset_names_a_shipped_profile_fitted_for_that_engine_and_vendor() -> None:
    shipped = set(shipped_profiles())
    generations = {gpu_generation(get_gpu(g)) for g in gpu_names()}
    for preset in PRESETS.values():
        for key, name in preset.profiles.items():
            # a vendor, or "<vendor>/<generation>" with a generation some catalog GPU has
            vendor, _, generation = key.partition("/")
            assert vendor in VENDORS and name in shipped, (preset.name, key, name)
            assert not generation or generation in generations, (preset.name, key)
            profile = load_profile(name)
            assert (profile.engine, profile.vendor) == (preset.name, vendor)
            assert profile.generation == generation, (preset.name, key)
    # and every shipped profile says which engine and vendor it was fitted for
    for name in shipped:
        p = load_profile(name)
        assert p.engine in PRESETS and p.vendor in VENDORS, name


@pytest.mark.parametrize(
    ("engine", "vendor", "expected"),
    [
        ("vllm", "nvidia", "vllm"),
        ("vllm", "amd", "vllm-rocm"),  # ROCm kernels, not CUDA's
        ("vllm-2024", "nvidia", "vllm-2024"),  # an era fitted on NVIDIA keeps its profile
        ("vllm-2024", "amd", "vllm-rocm"),  # ... but not on an AMD GPU
        ("trt-llm", "nvidia", "tensorrt-llm"),  # aliases live in the preset
        ("sglang-2025h1", "amd", "sglang-rocm"),  # 0.4 for ROCm (benchmarks/sglang_rocm.py)
        ("sglang", "amd", "sglang-rocm-aiter"),  # 0.5 for ROCm: AITER, custom all-reduce
        ("tensorrt-llm", "amd", None),  # no profile fitted on AMD: the model's defaults
    ],
)
def test_select_profile_by_engine_era_and_vendor(
    engine: str, vendor: str, expected: str | None
) -> None:
    chosen = select_profile(engine, vendor)
    assert (chosen.name if chosen else None) == expected


def test_unknown_engines_are_refused_naming_the_presets() -> None:
    with pytest.raises(ConfigError, match="tensorrt-llm"):
        select_profile("tgi", "nvidia")
    with pytest.raises(ConfigError, match="engine"):
        engine_defaults("tgi", get_gpu("h100-sxm"))
    assert engine_preset(" TensorRTLLM ").name == "tensorrt-llm"


def test_profile_engine_and_vendor_round_trip_and_are_checked() -> None:
    p = Profile(name="mine", engine="vllm", vendor="amd", version="0.9")
    assert parse_profile(dumps_profile(p)) == p
    with pytest.raises(SchemaError, match=r"engine\.vendor"):
        parse_profile('[engine]\nname = "x"\nvendor = "intel"\n', "bad.toml")


def _simulate(*extra: str) -> dict[str, object]:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "mi300x", "--input-tokens", "64"]
    args += ["--output-tokens", "8", "--rate", "2", "--num-requests", "4", "--json", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def _profile_of(out: dict[str, object]) -> object:
    config = out["config"]
    assert isinstance(config, dict)
    return config.get("profile")


def test_simulate_engine_on_mi300x_prices_with_the_rocm_profile() -> None:
    assert _profile_of(_simulate("--engine", "vllm")) == "vllm-rocm"
    assert _profile_of(_simulate("--engine", "vllm", "--profile", "vllm")) == "vllm"
    assert _profile_of(_simulate()) is None  # no engine named: the model's defaults


def test_estimate_engine_picks_the_vendor_profile() -> None:
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "mi300x", "--json"]
    by_engine = runner.invoke(app, [*args, "--engine", "vllm"])
    by_name = runner.invoke(app, [*args, "--profile", "vllm-rocm"])
    plain = runner.invoke(app, args)
    assert by_engine.exit_code == by_name.exit_code == plain.exit_code == 0, by_engine.output
    assert json.loads(by_engine.output) == json.loads(by_name.output)
    assert json.loads(by_engine.output) != json.loads(plain.output)


def test_amd_tables_map_and_decode_cannot_beat_reading_the_weights() -> None:
    result = load_csv(DATA / "amd_rocm_vllm_mi300x.csv")
    assert not result.skipped and len(result.rows) == 200
    assert sum(r.simulated for r in result.rows) == 40  # the offline-throughput rows
    row = next(
        r
        for r in result.rows
        if "405B mi300x tp8 B1 128/2048 v0.9.1" in r.label and "batch_latency" in r.measured
    )
    assert row.measured["batch_latency"] == pytest.approx(48.453)  # the doc's seconds
    # 2048 decode steps each read every weight once: 405e9 FP8 bytes over 8 GPUs at 5.3 TB/s
    # is 9.6 ms a step, 19.6 s in all; no parameters may price the batch below that
    bound_s = 2048 * 405e9 / 8 / 5.3e12
    for name in ("vllm", "vllm-rocm"):
        p = load_profile(name)
        (obs,) = observe([row], p.efficiency, p.power)
        assert obs.predicted > bound_s


def test_oci_batches_map_as_vllm_of_2024_priced_by_the_rocm_profile() -> None:
    result = load_csv(DATA / "oci_mi300x_vllm.csv")
    assert not result.skipped and len(result.rows) == 9
    row = result.rows[0]
    # the blog states no version, only its date: the 2024 era, which on MI300X is vllm-rocm
    assert row.engine == "vllm-2024" and row.deployment.gpu.vendor == "amd"
    chosen = select_profile(row.engine, row.deployment.gpu.vendor)
    assert chosen is not None and chosen.name == "vllm-rocm"
    assert "oci_vllm_mi300x" not in chosen.fitted_on  # held out of the fit
