"""Power of quantized and MoE steps (cost.energy's CUDA-core and instruction-issue terms).

Hand derivations use the catalog's figures: H100 SXM idle 70 W, dynamic range D = 630 W, bf16
0.796 pJ and fp8 0.398 pJ a tensor FLOP, HBM3 3.9 pJ/bit = 31.2 pJ/byte, 23.5 pJ a CUDA-core
instruction lane, 3.125 instructions to unpack one MXFP4 weight element (catalog/energy.toml).
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenprobe.cost import BatchShape, PowerModel, make_deployment, step_cost
from tokenprobe.cost import energy_figures as figures_module
from tokenprobe.cost import step as step_module
from tokenprobe.cost.efficiency import DEFAULT_EFFICIENCY
from tokenprobe.cost.energy import GpuWork
from tokenprobe.cost.energy_figures import U_GEMM, energy_figures
from tokenprobe.cost.ops import expert_weight_elements
from tokenprobe.errors import SchemaError
from tokenprobe.hardware import get_gpu

H100 = energy_figures(get_gpu("h100-sxm"))
MODEL = PowerModel(chip_flop_per_byte=100.0, busy_power_fraction=0.2)
# 1 ms moving 3 GB with no tensor work, busy throughout: 70 + 0.2 x 630 + 3e9 B x (31.2 pJ +
# 100 x 0.796 pJ) / 1 ms = 528.4 W (test_energy.py's memory-bound step)
BASE = GpuWork("bf16", 0.0, 3e9, 0.0, 1e-3, 1e-3, 70.0, 630.0)


@pytest.mark.parametrize(
    ("gpu", "fp32_tflop", "pj"), [("h100-sxm", 67.0, 23.5), ("b200", 80.0, 26.9)]
)
def test_cuda_core_energy_follows_from_the_fp32_datasheet_rate(
    gpu: str, fp32_tflop: float, pj: float
) -> None:
    """(TDP − idle) / (0.8 × FP32 FLOP/s / 2 FLOP an FMA lane): H100 630 W / (0.8 × 33.5e12)
    = 23.5 pJ; B200 860 W / (0.8 × 40e12) = 26.9 pJ."""
    spec = get_gpu(gpu)
    derived_pj = (spec.tdp_w - spec.idle_w) / (U_GEMM * fp32_tflop * 1e12 / 2) * 1e12
    assert derived_pj == pytest.approx(pj, abs=0.05)
    assert energy_figures(spec).cuda_op_j == pytest.approx(pj * 1e-12)


def test_dequant_energy_per_element_by_format_and_generation() -> None:
    """Hopper unpacks MXFP4 for a bf16 MMA: 3.125 x 23.5 pJ = 73.4 pJ an element; weights the
    tensor cores take as stored (fp8 under fp8, bf16) cost nothing; Blackwell has no count."""
    assert H100.dequant_j_per_element("mxfp4", "bf16") == pytest.approx(3.125 * 23.5e-12)
    assert H100.dequant_j_per_element("fp8", "fp8") == 0.0
    assert H100.dequant_j_per_element("bf16", "bf16") == 0.0
    assert energy_figures(get_gpu("h200")).dequant_j_per_element("mxfp4", "bf16") > 0
    assert energy_figures(get_gpu("b200")).dequant_j_per_element("mxfp4", "bf16") == 0.0


def test_cuda_core_instructions_add_their_energy_by_hand() -> None:
    """1e9 MXFP4 elements unpacked in the 1 ms step: 3.125e9 lanes x 23.5 pJ x (1 − 0.2) / 1 ms
    = 58.75 W on top of 528.4 W (the busy share b = 0.2 of the lane figure is already in b·D);
    at half clock the instruction energy goes as f² (a quarter)."""
    work = dataclasses.replace(BASE, cuda_ops=3.125e9)
    assert MODEL.power_w(work, H100) == pytest.approx(528.4 + 58.75)
    at_half = MODEL.power_w(work, H100, 0.5) - MODEL.power_w(BASE, H100, 0.5)
    assert at_half == pytest.approx(58.75 / 4)


@pytest.mark.parametrize("busy_fraction", [0.0, 0.2, 0.449, 0.8])
def test_an_fp32_stream_at_the_derivations_rate_draws_the_tdp(busy_fraction: float) -> None:
    """The lane figure's own premise: H100 FP32 FMA lanes at U_GEMM x 33.5e12 a second, busy the
    whole 1 ms step, no bytes: 70 + b·630 + (1 − b) x 23.5 pJ x 26.8e12 = 70 + b·630 + (1 − b) x
    629.8 = 699.8-700 W whatever b is (without the (1 − b) it would be 700 + b·630)."""
    model = PowerModel(chip_flop_per_byte=100.0, busy_power_fraction=busy_fraction)
    work = GpuWork("bf16", 0.0, 0.0, 0.0, 1e-3, 1e-3, 70.0, 630.0, cuda_ops=26.8e12 * 1e-3)
    power_w = model.power_w(work, H100)
    assert power_w == pytest.approx(70 + 630 * busy_fraction + 629.8 * (1 - busy_fraction))
    assert power_w <= 700.0


def test_instruction_bound_time_draws_the_whole_dynamic_range_by_hand() -> None:
    """A quarter of the 1 ms step instruction-bound: (1 − 0.2) x 630 W x 0.25 = 126 W more, so
    the die draws D = 630 W in that quarter instead of b·D = 126 W; never more than the step's
    busy time (the issue share is clipped to it)."""
    assert MODEL.power_w(dataclasses.replace(BASE, issue_s=0.25e-3), H100) == pytest.approx(654.4)
    idle_half = dataclasses.replace(BASE, busy_s=0.5e-3, issue_s=0.9e-3)
    # busy half the step, all of it issue-bound: 70 + 0.2·630·0.5 + 0.8·630·0.5 + 332.4 (bytes)
    assert MODEL.power_w(idle_half, H100) == pytest.approx(70 + 63 + 252 + 332.4)


def test_expert_weight_elements_of_one_token_by_hand() -> None:
    """gpt-oss-20b, one decoding token: top-4 of 32 experts in each of 24 layers, an expert
    3 x 2880 x 2880 weights (gate, up, down): 24 x 4 x 24,883,200 = 2.389e9 elements."""
    dep = make_deployment("gpt-oss-20b", "h100-sxm", weight_dtype="mxfp4")
    elements = expert_weight_elements(dep, BatchShape.decode(1, 100))
    assert elements == pytest.approx(24 * 4 * 3 * 2880 * 2880)
    ops = step_module.dequant_ops(dep, BatchShape.decode(1, 100), H100)
    assert ops == pytest.approx(3.125 * elements)
    bf16 = make_deployment("gpt-oss-20b", "h100-sxm")
    assert step_module.dequant_ops(bf16, BatchShape.decode(1, 100), H100) == 0.0


def _power_by_hand(dep_name: str, weight: str, shape: BatchShape, issue_frac: float) -> None:
    """A one-GPU step's power from the StepCost's own time, bytes and compute share (no links,
    busy the whole step): 70 + b·630 + (1 − b)·630·issue/t + [e_tc·u_c·t·peak + (31.2 pJ +
    r·0.796 pJ)·bytes + (1 − b)·23.5 pJ·3.125·elements] / t."""
    eff = DEFAULT_EFFICIENCY.with_overrides({"fp8_moe": 0.75})
    dep = make_deployment(dep_name, "h100-sxm", weight_dtype=weight, efficiency=eff)
    cost = step_cost(dep, shape)
    power = dep.power
    t = cost.time_s
    peak = {"bf16": 989.4e12, "fp8": 1978.9e12}[dep.compute_dtype]
    e_tc = {"bf16": 0.796e-12, "fp8": 0.398e-12}[dep.compute_dtype]
    experts = [o for o in step_module.op_costs(dep, shape) if o.name == "experts"]
    issue_s = issue_frac * sum(max(o.compute_s, o.memory_s) for o in experts)
    elements = expert_weight_elements(dep, shape) if weight == "mxfp4" else 0.0
    b = power.busy_power_fraction
    expected = (
        70.0
        + b * 630.0
        + (1 - b) * 630.0 * issue_s / t
        + (
            e_tc * cost.compute_util * t * peak
            + (31.2e-12 + power.chip_flop_per_byte * 0.796e-12) * cost.hbm_bytes
            + (1 - b) * 23.5e-12 * 3.125 * elements
        )
        / t
    )
    assert expected < 700.0  # the cap does not bind, so the formula is the whole story
    assert cost.power_w == pytest.approx(expected, rel=2e-3)


def test_mxfp4_moe_decode_step_power_by_hand() -> None:
    """gpt-oss-20b in MXFP4 on one H100, 16 sequences: unpacking adds (1 − b) x 3.125 x 23.5 pJ
    an expert weight element read; quantized_moe = 1 by default, so no instruction-bound time."""
    _power_by_hand("gpt-oss-20b", "mxfp4", BatchShape.decode(16, 16 * 1000), 0.0)


def test_fp8_moe_decode_step_power_by_hand() -> None:
    """Qwen3-30B-A3B in FP8 on one H100, 16 sequences, fp8_moe = 0.75: a quarter of the expert
    kernels' time is instruction-bound; fp8 under an fp8 MMA needs no unpacking."""
    _power_by_hand("qwen3-30b-a3b", "fp8", BatchShape.decode(16, 16 * 1000), 0.25)


@settings(max_examples=30, deadline=None)
@given(
    case=st.sampled_from(
        [
            ("gpt-oss-20b", "h100-sxm", "mxfp4"),
            ("gpt-oss-120b", "h100-sxm", "mxfp4"),
            ("gpt-oss-120b", "b200", "mxfp4"),
            ("qwen3-30b-a3b", "h100-sxm", "fp8"),
        ]
    ),
    prefill=st.integers(0, 8192),
    batch=st.integers(0, 1024),
    cap_fraction=st.floats(0.3, 1.2),
)
def test_quantized_moe_power_never_exceeds_the_limit(
    case: tuple[str, str, str], prefill: int, batch: int, cap_fraction: float
) -> None:
    model, gpu, weight = case
    spec = get_gpu(gpu)
    limit_w = max(cap_fraction * spec.tdp_w, spec.idle_w + 1.0)
    eff = DEFAULT_EFFICIENCY.with_overrides({"fp8_moe": 0.5, "quantized_moe": 0.5})
    dep = make_deployment(model, gpu, weight_dtype=weight, efficiency=eff, power_limit_w=limit_w)
    shape = BatchShape(
        prefill_tokens=prefill,
        prefill_attn_pairs=prefill * (prefill + 1) / 2,
        prefill_seqs=1 if prefill else 0,
        decode_seqs=batch,
        decode_context_tokens=batch * 1000,
    )
    if shape.tokens == 0:
        return
    cost = step_cost(dep, shape)
    assert spec.idle_w <= cost.power_w <= min(limit_w, spec.tdp_w) + 1e-9
    assert cost.energy_j == pytest.approx(cost.power_w * cost.time_s * dep.num_gpus)


def test_a_dequant_count_without_an_instruction_energy_is_a_schema_error() -> None:
    """catalog/energy.toml: a generation's dequant_ops_per_element needs cuda_core_pj_per_op
    (the count alone prices nothing); the error names the table and the field."""
    text = resources.files("tokenprobe").joinpath("catalog", "energy.toml").read_text("utf-8")
    doc = tomllib.loads(text)
    figures_module._check(copy.deepcopy(doc))  # the shipped catalog passes
    del doc["generation"]["hopper"]["cuda_core_pj_per_op"]
    with pytest.raises(SchemaError, match=r"generation\.hopper.*dequant_ops_per_element"):
        figures_module._check(doc)
