"""The power model (cost.energy) and its per-generation figures (catalog/energy.toml)."""

from __future__ import annotations

import dataclasses
import tomllib
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenprobe.cost import (
    BatchShape,
    PowerModel,
    Workload,
    estimate_deployment,
    make_deployment,
    step_cost,
)
from tokenprobe.cost.energy import GpuWork
from tokenprobe.cost.energy_figures import U_GEMM, energy_figures
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import get_gpu, gpu_names

CATALOG = tomllib.loads(
    resources.files("tokenprobe").joinpath("catalog", "energy.toml").read_text("utf-8")
)
# each generation's figures are derived from this part (energy.toml's sources)
FLAGSHIPS = {
    "turing": "t4",
    "ampere": "a100-sxm-80gb",
    "ada": "l40s",
    "hopper": "h100-sxm",
    "blackwell": "b200",
    "cdna3": "mi300x",
}


@pytest.mark.parametrize("generation", sorted(FLAGSHIPS))
def test_tensor_figures_follow_from_the_flagship_datasheet(generation: str) -> None:
    """(TDP − idle) / (0.8 × dense peak) per dtype, from gpus.toml's own figures: e.g. H100 SXM
    bf16 (700 − 70) W / (0.8 × 989.4 TFLOP/s) = 0.796 pJ."""
    gpu = get_gpu(FLAGSHIPS[generation])
    table = CATALOG["generation"][generation]["tensor_pj_per_flop"]
    assert set(table) == set(gpu.peak_flop_per_s)
    for dtype, pj in table.items():
        derived_pj = (gpu.tdp_w - gpu.idle_w) / (U_GEMM * gpu.peak_flop_per_s[dtype]) * 1e12
        assert pj == pytest.approx(derived_pj, abs=0.001), dtype


def test_hopper_bf16_figure_by_hand() -> None:
    assert energy_figures(get_gpu("h100-sxm")).flop_j("bf16") == pytest.approx(0.796e-12)
    assert energy_figures(get_gpu("h200")).flop_j("fp8") == pytest.approx(0.398e-12)


def test_every_catalog_gpu_has_a_generation_and_memory() -> None:
    for name in gpu_names():
        figures = energy_figures(get_gpu(name))
        assert figures.generation != "derived", name
        assert figures.dram_j_per_byte > 0 and figures.link_j_per_byte > 0


def test_a_gpu_outside_the_catalog_derives_its_tensor_figure_from_its_spec() -> None:
    h100 = get_gpu("h100-sxm")
    mine = dataclasses.replace(h100, name="my-accelerator", tdp_w=500.0)
    figures = energy_figures(mine)
    assert figures.generation == "derived"
    # (500 − 70) W / (0.8 × 989.4e12 FLOP/s)
    assert figures.flop_j("bf16") == pytest.approx(430 / (0.8 * 989.4e12))


def test_power_of_a_memory_bound_step_by_hand() -> None:
    """1 ms moving 3 GB on an H100 with no tensor work, busy throughout:
    70 W idle + 0.2 × 630 W busy + 3e9 B × (3.9 pJ/bit × 8 + 100 × 0.796 pJ) / 1 ms
    = 70 + 126 + 3e12 × 110.8e-12 = 528.4 W."""
    model = PowerModel(chip_flop_per_byte=100.0, busy_power_fraction=0.2)
    work = GpuWork("bf16", 0.0, 3e9, 0.0, 1e-3, 1e-3, 70.0, 630.0)
    assert model.power_w(work, energy_figures(get_gpu("h100-sxm"))) == pytest.approx(528.4)


def test_a_lower_clock_costs_less_energy_per_operation() -> None:
    """At clock f the per-operation energy goes as f² and the busy power as f³ (n = 3): at
    f = 0.5, 70 + 126/8 + 79.6e-12·3e12/4 + 31.2e-12·3e12 W."""
    model = PowerModel(chip_flop_per_byte=100.0, busy_power_fraction=0.2)
    work = GpuWork("bf16", 0.0, 3e9, 0.0, 1e-3, 1e-3, 70.0, 630.0)
    expected = 70 + 126 / 8 + 79.6e-12 * 3e12 / 4 + 31.2e-12 * 3e12
    assert model.power_w(work, energy_figures(get_gpu("h100-sxm")), 0.5) == pytest.approx(expected)


def test_busy_power_scales_with_the_die_not_the_board_limit() -> None:
    """The dynamic range 0.8 × e_flop(bf16) × bf16 peak: TDP − idle on the flagship (H100 SXM
    630 W, B200 860 W); a GH200 runs the H100 die under a 900 W limit and keeps 630 W."""
    for name, watts in (("h100-sxm", 630.0), ("gh200", 630.0), ("b200", 860.0)):
        gpu = get_gpu(name)
        assert energy_figures(gpu).die_dynamic_w(gpu) == pytest.approx(watts, rel=1e-3), name


def test_power_model_rejects_out_of_range_values_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="busy_power_fraction"):
        PowerModel(busy_power_fraction=1.5)
    with pytest.raises(ConfigError, match="chip_flop_per_byte"):
        PowerModel(chip_flop_per_byte=float("nan"))


@settings(max_examples=40, deadline=None)
@given(
    gpu=st.sampled_from(["h100-sxm", "b200", "a100-sxm-80gb", "mi300x", "l40s"]),
    prefill=st.integers(0, 16384),
    batch=st.integers(0, 512),
    cap_fraction=st.floats(0.3, 1.2),
)
def test_power_never_exceeds_what_the_limit_allows(
    gpu: str, prefill: int, batch: int, cap_fraction: float
) -> None:
    spec = get_gpu(gpu)
    limit_w = max(cap_fraction * spec.tdp_w, spec.idle_w + 1.0)
    dep = make_deployment("llama-3.1-8b", gpu, power_limit_w=limit_w)
    shape = BatchShape(
        prefill_tokens=prefill,
        prefill_attn_pairs=prefill * (prefill + 1) / 2,
        prefill_seqs=1 if prefill else 0,
        decode_seqs=batch,
        decode_context_tokens=batch * 2000,
    )
    if shape.tokens == 0:
        return
    cost = step_cost(dep, shape)
    assert spec.idle_w <= cost.power_w <= min(limit_w, spec.tdp_w) + 1e-9
    assert cost.energy_j == pytest.approx(cost.power_w * cost.time_s * dep.num_gpus)


def test_a_cap_at_70_percent_slows_prefill_more_than_decode() -> None:
    """Seed 003: ~10 % speed lost at 70 % of TDP. Compute-bound prefill stretches by ~1/f, f =
    ((490 − 70) / (700 − 70))^(1/3) = 0.874 at most; HBM-bound decode only by 1/f^0.3."""
    runs = {"prefill": Workload(4096, 16, 16), "decode": Workload(128, 1024, 64)}
    slowdown = {}
    for kind, workload in runs.items():
        full = make_deployment("llama-3.1-8b", "h100-sxm")
        capped = make_deployment("llama-3.1-8b", "h100-sxm", power_limit_w=0.7 * 700)
        a = estimate_deployment(full, workload, find_compute_bound=False)
        b = estimate_deployment(capped, workload, find_compute_bound=False)
        slowdown[kind] = b.e2e_s / a.e2e_s
        assert b.prefill.power_w <= 490 + 1e-9
    assert 1.0 < slowdown["decode"] < slowdown["prefill"] <= 1 / 0.874 + 1e-6
    assert slowdown["prefill"] > 1.05


def test_energy_per_input_and_output_token_stay_separate() -> None:
    """Prefill energy is charged to input tokens, decode energy to output tokens: a longer
    output leaves J/input token unchanged."""
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    short = estimate_deployment(dep, Workload(1024, 64, 8), find_compute_bound=False).energy()
    long = estimate_deployment(dep, Workload(1024, 512, 8), find_compute_bound=False).energy()
    assert short["joules_per_input_token"] == pytest.approx(long["joules_per_input_token"])
    assert short["joules_per_output_token"] != pytest.approx(short["joules_per_input_token"])


def test_a_recorded_power_table_is_read_back_and_old_activity_factors_dropped() -> None:
    model = PowerModel.from_mapping({"chip_flop_per_byte": 50.0, "compute_activity": 0.9})
    assert model == PowerModel(chip_flop_per_byte=50.0)
    with pytest.raises(ConfigError, match=r"power\.watts"):
        PowerModel.from_mapping({"watts": 1.0})
