"""vLLM for ROCm (`vllm-rocm`, Feb-Jul 2025 images) prices MLA attention and block-FP8 MoE with
the era's kernel efficiencies (`vllm-2025h1`, fitted on H200): vLLM 0.7-0.9 ran the same Triton
kernels for them on ROCm (benchmarks/fit_profiles.py `kernels_of`). AMD's dense rows, which the
rest of `vllm-rocm` is fitted on, never run those kernels."""

from __future__ import annotations

from tokenprobe.calibrate import load_profile
from tokenprobe.cost import Workload, estimate_deployment, make_deployment

from .fit_profiles_script import fit_profiles

KERNELS = ("mla_attention", "fp8_moe")


def _spec() -> dict[str, object]:
    spec: dict[str, object] = fit_profiles().PROFILES["vllm-rocm"]
    return spec


def test_rocm_takes_the_eras_mla_and_block_fp8_moe_kernels() -> None:
    assert _spec()["kernels_of"] == ("vllm-2025h1", KERNELS)
    rocm, era = load_profile("vllm-rocm"), load_profile("vllm-2025h1")
    for name in KERNELS:
        assert getattr(rocm.efficiency, name) == getattr(era.efficiency, name), name
        assert name not in rocm.parameters  # taken, not fitted on AMD's rows


def test_amds_dense_rows_never_see_those_kernels() -> None:
    rocm = load_profile("vllm-rocm")
    late = rocm.efficiency.with_overrides({"mla_attention": 1.0, "fp8_moe": 0.75})
    dense = make_deployment(
        "llama-3.1-70b", "mi300x", tp=8, weight_dtype="fp8", efficiency=rocm.efficiency
    )
    wl = Workload(input_tokens=2048, output_tokens=128, batch=64)
    a = estimate_deployment(dense, wl)
    b = estimate_deployment(make_deployment(
        "llama-3.1-70b", "mi300x", tp=8, weight_dtype="fp8", efficiency=late
    ), wl)  # fmt: skip
    same = {k: v for k, v in a.to_dict().items() if k != "efficiency"}  # all it predicts
    assert same == {k: v for k, v in b.to_dict().items() if k != "efficiency"}
    # DeepSeek-R1 (MLA, block-FP8 MoE) does: the era's slower kernels lengthen its decode
    r1 = {"tp": 8, "weight_dtype": "fp8"}
    era = estimate_deployment(
        make_deployment("deepseek-ai/DeepSeek-R1", "mi300x", efficiency=rocm.efficiency, **r1), wl
    )
    later = estimate_deployment(
        make_deployment("deepseek-ai/DeepSeek-R1", "mi300x", efficiency=late, **r1), wl
    )
    assert era.to_dict()["tpot_s"] > later.to_dict()["tpot_s"]
