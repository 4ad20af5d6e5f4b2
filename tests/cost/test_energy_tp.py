"""Power under tensor parallelism (issue 18 item 4): while a step waits on its exposed all-reduce,
only the SMs the exchange kernels run on keep the die's busy (clock-tree) power; the rest is
clock-gated (cost.energy, catalog/energy.toml `sm_count`)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenprobe.cost import BatchShape, PowerModel, make_deployment, step_cost
from tokenprobe.cost.energy import GpuWork
from tokenprobe.cost.energy_figures import energy_figures
from tokenprobe.hardware import get_gpu


def test_the_all_reduce_runs_on_36_sms_of_the_die() -> None:
    """vLLM's custom all-reduce: 36 blocks, one an SM (energy.toml): 36/132 of an H100 SXM,
    36/148 of a B200, 36/108 of an A100; a GPU without an SM count keeps the whole die busy."""
    for name, sms in (("h100-sxm", 132), ("gh200", 132), ("b200", 148), ("a100-sxm-80gb", 108)):
        assert energy_figures(get_gpu(name)).comm_sm_share == pytest.approx(36 / sms), name
    assert energy_figures(get_gpu("mi300x")).comm_sm_share == 1.0


def test_power_at_tp1_and_tp4_by_hand() -> None:
    """One decode step of 20 ms on an H100 SXM (idle 70 W, die range D = 630 W, b = 0.443,
    r = 9.24), the same per-GPU work at TP1 and TP4: 30 GB read from HBM, no tensor work; at
    TP4, 4 ms of the step is exposed all-reduce, which sends 64 MB over NVLink.
    Bytes: 30e9 x (3.9 pJ/bit x 8 + 9.24 x 0.796 pJ) = 30e9 x 38.555 pJ = 1.1567 J over
    20 ms = 57.83 W; link: 64e6 x 8 x 5.5 pJ = 2.816 mJ over 20 ms = 0.14 W.
    TP1: 70 + 0.443 x 630 + 57.83 = 70 + 279.09 + 57.83 = 406.92 W.
    TP4: busy share (20 − (1 − 36/132) x 4) / 20 = 0.85455, so
    70 + 279.09 x 0.85455 + 57.83 + 0.14 = 70 + 238.50 + 57.97 = 366.47 W: 40.5 W lower."""
    model = PowerModel(chip_flop_per_byte=9.24, busy_power_fraction=0.443)
    figures = energy_figures(get_gpu("h100-sxm"))
    tp1 = GpuWork("bf16", 0.0, 30e9, 0.0, 0.020, 0.020, 70.0, 630.0)
    tp4 = GpuWork("bf16", 0.0, 30e9, 64e6, 0.020, 0.020, 70.0, 630.0, comm_s=0.004)
    assert model.power_w(tp1, figures) == pytest.approx(406.92, abs=0.01)
    assert model.power_w(tp4, figures) == pytest.approx(366.47, abs=0.01)


def test_a_gpu_without_an_sm_count_pays_the_busy_power_through_the_exchange() -> None:
    """A GPU outside the catalog (a user's file: no `sm_count`) keeps comm_sm_share = 1: with no
    bytes moved, a step that is 4 ms of exposed exchange in 20 draws idle + b·D, 349.09 W."""
    model = PowerModel(chip_flop_per_byte=9.24, busy_power_fraction=0.443)
    figures = energy_figures(dataclasses.replace(get_gpu("h100-sxm"), name="my-h100"))
    assert figures.comm_sm_share == 1.0
    work = GpuWork("bf16", 0.0, 0.0, 0.0, 0.020, 0.020, 70.0, 630.0, comm_s=0.004)
    assert model.power_w(work, figures) == pytest.approx(70 + 0.443 * 630)


def test_a_tp4_step_draws_less_per_gpu_while_its_all_reduce_is_exposed() -> None:
    """Llama-3.1-70B at TP4 on H100, 64 decoding sequences, priced on the catalog H100 and on the
    same spec under another name (outside the catalog: no SM count, so no gating; its tensor
    figure is the same derivation, within rounding of the catalog's 0.796 pJ). The times agree
    (an energy-only term) and the power differs by the gated busy power,
    (1 − 36/132)·b·D·comm_s/time_s, computed from the step's own comm_s and time_s."""
    dep = make_deployment("llama-3.1-70b", "h100-sxm", tp=4)
    shape = BatchShape(decode_seqs=64, decode_context_tokens=64 * 1500)
    cost = step_cost(dep, shape)
    assert cost.comm_s > 0 and cost.power_w < dep.gpu.tdp_w
    plain_gpu = dataclasses.replace(dep.gpu, name="my-h100")
    plain = step_cost(make_deployment("llama-3.1-70b", plain_gpu, tp=4), shape)
    assert plain.time_s == cost.time_s
    gated_w = (1 - 36 / 132) * dep.power.busy_power_fraction * 630.0 * cost.comm_s / cost.time_s
    assert gated_w > 5.0  # a real share of the step: the check below is not vacuous
    assert plain.power_w - cost.power_w == pytest.approx(gated_w, rel=0.01)


def test_streamed_weights_keep_the_whole_die_busy() -> None:
    """Offloaded weights (vLLM's --cpu-offload-gb) stall the GEMMs on every SM while they stream
    over PCIe: that part of the step's communication is not the all-reduce's 36 blocks, so at
    TP1 (no all-reduce) the catalog H100 and the ungated copy draw the same power."""
    offload = 20 * 2**30
    dep = make_deployment("llama-3.1-8b", "h100-sxm", tp=1, cpu_offload_bytes=offload)
    shape = BatchShape(decode_seqs=32, decode_context_tokens=32 * 1000)
    cost = step_cost(dep, shape)
    assert cost.comm_s > 0  # the streamed weights' time
    plain_gpu = dataclasses.replace(dep.gpu, name="my-h100")
    plain = make_deployment("llama-3.1-8b", plain_gpu, tp=1, cpu_offload_bytes=offload)
    assert step_cost(plain, shape).power_w == pytest.approx(cost.power_w, rel=1e-3)


@settings(max_examples=40, deadline=None)
@given(
    gpu=st.sampled_from(["h100-sxm", "b200", "a100-sxm-80gb", "gh200"]),
    model=st.sampled_from(["llama-3.1-70b", "qwen3-30b-a3b", "llama-4-scout-17b-16e"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    prefill=st.integers(0, 8192),
    batch=st.integers(0, 512),
    cap_fraction=st.floats(0.3, 1.2),
)
def test_power_at_any_tp_never_exceeds_what_the_limit_allows(
    gpu: str, model: str, tp: int, prefill: int, batch: int, cap_fraction: float
) -> None:
    spec = get_gpu(gpu)
    limit_w = max(cap_fraction * spec.tdp_w, spec.idle_w + 1.0)
    dep = make_deployment(model, gpu, tp=tp, power_limit_w=limit_w)
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
