"""DeepSeek-era engine profiles (SGLang 0.4, vLLM 0.7-0.9: MLA and block-FP8 MoE kernels of
early 2025), their selection by engine version, and their held-out errors as recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenprobe.calibrate import load_csv, load_profile, observe, profile_name_for, select_profile
from tokenprobe.calibrate.fit import summarize
from tokenprobe.calibrate.observations import engine_name
from tokenprobe.cli import app
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import engine_defaults, engine_preset

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "deepseek_2025h1.csv"
ERAS = ("sglang-2025h1", "vllm-2025h1")
runner = CliRunner()


@pytest.mark.parametrize(
    ("engine", "version", "expected"),
    [
        ("SGLang", "0.4.3.post2", "sglang-2025h1"),
        ("SGLang", "0.4.1", "sglang-2025h1"),
        ("SGLang", "v0.5.3", "sglang"),  # the late-2025 profile's data
        ("vLLM", "0.7.4.dev181+gf35f8e22 (nightly)", "vllm-2025h1"),
        ("vLLM", "0.9.1 (ROCm 6.4.1)", "vllm-2025h1"),
        ("vLLM", "v0.11.0", "vllm"),
        ("vLLM", "0.6.0 (multi-step)", "vllm-2024"),
    ],
)
def test_engine_versions_name_their_era(engine: str, version: str, expected: str) -> None:
    assert engine_name(engine, version) == expected


def test_an_era_is_its_engine_for_the_scheduler_and_its_profile_per_vendor() -> None:
    assert engine_preset("sglang-2025h1").name == "sglang"
    h200 = get_gpu("h200")
    assert engine_defaults("sglang-2025h1", h200, 8) == engine_defaults("sglang", h200, 8)
    assert profile_name_for("sglang-2025h1", "nvidia") == "sglang-2025h1"
    on_amd = select_profile("sglang-2025h1", "amd")  # SGLang for ROCm: AMD's profile
    assert on_amd is not None and on_amd.name == "sglang-rocm"
    chosen = select_profile("vllm-2025h1", "amd")  # ROCm kernels: AMD's profile
    assert chosen is not None and chosen.name == "vllm-rocm"


@pytest.mark.parametrize("era", ERAS)
def test_era_profiles_load_and_only_slow_the_kernels_they_fitted(era: str) -> None:
    p = load_profile(era)
    base = load_profile(p.engine)
    assert (p.engine, p.vendor) == (era.split("-")[0], "nvidia")
    # the era's kernels, and for SGLang 0.4 the host work its dp attention no longer overlaps
    # and its absorbed-form prefill kernel (refitted alone: fit_profiles.py)
    era_parameters = {
        "mla_attention", "fp8_moe", "step_overhead_s", "seq_overhead_s", "mla_latent_prefill",
    }  # fmt: skip
    assert set(p.parameters) <= era_parameters
    assert {"mla_attention", "fp8_moe"} <= set(p.parameters) or era == "sglang-2025h1"
    # the era's latent-attention kernels run below the GQA attention rate (1 = no penalty)
    assert p.efficiency.mla_attention < 1.0 == base.efficiency.mla_attention
    # parameters the era did not fit are its engine's late-2025 ones (compute_decode tied to
    # compute_prefill where it was above it)
    for name in ("memory", "attention_memory", "link", "routing_skew", "kernel_overhead_s"):
        assert getattr(p.efficiency, name) == getattr(base.efficiency, name), name
    if era != "sglang-2025h1":  # its earlier fit's parameters are kept, not its engine's
        for name in era_parameters - set(p.parameters):
            assert getattr(p.efficiency, name) == getattr(base.efficiency, name), name
    assert p.efficiency.compute_decode <= p.efficiency.compute_prefill
    assert {e.set for e in p.errors} == {"fitted", "held_out"}


def test_only_sglang_0_4_prefills_mla_in_the_absorbed_form() -> None:
    """What the engines' code does (cost/efficiency.py): SGLang 0.4's Triton backend absorbs
    every extend with a cached prefix (every prompt after the first has its BOS cached), vLLM
    prefills in the MHA form; the absorbed kernel's own rate, identified once each DP-attention
    rank prefills its own prompts (sim/sglang_dp.py), runs below the dense GEMMs' (1), and the
    profiles that run no absorbed prefill keep 1."""
    sglang, vllm = load_profile("sglang-2025h1"), load_profile("vllm-2025h1")
    assert sglang.efficiency.mla_absorbed_prefill == 1.0
    assert vllm.efficiency.mla_absorbed_prefill == 0.0
    assert load_profile("sglang").efficiency.mla_absorbed_prefill == 0.0
    assert sglang.efficiency.mla_latent_prefill < 1.0
    assert "mla_latent_prefill" in sglang.parameters
    assert vllm.efficiency.mla_latent_prefill == 1.0


def _estimate(*extra: str) -> dict[str, object]:
    args = ["estimate", "--model", "deepseek-r1", "--gpu", "h200", "--tp", "8"]
    args += ["--weight-dtype", "fp8", "--input-tokens", "3200", "--output-tokens", "800"]
    result = runner.invoke(app, [*args, "--batch", "32", "--json", *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_estimate_with_the_era_engine_prices_with_its_profile() -> None:
    era = _estimate("--engine", "sglang-2025h1")
    assert era == _estimate("--profile", "sglang-2025h1")
    eff = era["efficiency"]
    assert isinstance(eff, dict)
    assert eff["mla_attention"] == load_profile("sglang-2025h1").efficiency.mla_attention
    late = _estimate("--engine", "sglang")
    # slower MLA and block-FP8 MoE kernels: a longer decode step than SGLang 0.5's
    assert float(era["tpot_s"]) > float(late["tpot_s"])  # type: ignore[arg-type]


@pytest.mark.parametrize("era", ERAS)
def test_held_out_errors_are_what_the_profile_records(era: str) -> None:
    """Each held-out record of an era profile on deepseek_2025h1.csv, recomputed from the rows
    with the shipped parameters (the figure validate.py prints for it)."""
    profile = load_profile(era)
    rows = [
        r for r in load_csv(DATA).rows if profile_name_for(r.engine, r.deployment.gpu.vendor) == era
    ]
    held = [e for e in profile.errors if e.set == "held_out"]
    assert held
    sources = {e.source for e in held}
    mine = [r for r in rows if r.source in sources]
    observed = observe(mine, profile.efficiency, profile.power)
    got = {(g.source, g.metric): g for g in summarize(observed)}
    for e in held:
        g = got[(e.source, e.metric)]
        assert g.rows == e.rows, (e.source, e.metric)
        assert 100 * g.mdape == pytest.approx(e.mdape_after_pct, abs=0.05), (e.source, e.metric)
