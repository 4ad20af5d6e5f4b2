"""SGLang 0.4 for ROCm on MI300X (`sglang-rocm`, benchmarks/sglang_rocm.py): its selection by
engine and vendor, the mechanisms its fit may move, the MLA decode regime that makes the MI300X
rows see the attention kernel's HBM rate, and its held-out record as validate.py prints it."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from tokenprobe.calibrate import (
    Row,
    load_csv,
    load_profile,
    observe,
    profile_name_for,
    select_profile,
)
from tokenprobe.calibrate.fit import summarize
from tokenprobe.cost import (
    BatchShape,
    Efficiency,
    Workload,
    estimate_deployment,
    make_deployment,
    step_cost,
)

from .fit_profiles_script import fit_profiles

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "deepseek_2025h1.csv"
NAME = "sglang-rocm"
# the kernel launch its HIP build changes and RCCL's fixed cost per TP all-reduce
# (benchmarks/sglang_rocm.py); the host's step time stays the era's
MECHANISMS = {"mla_attention", "allreduce_extra_latency_s"}


def _rows() -> list[Row]:
    return [r for r in load_csv(DATA).rows if r.engine.startswith("sglang")]


def test_sglang_04_on_an_amd_gpu_is_priced_by_sglang_rocm_and_h200_rows_are_not() -> None:
    chosen = select_profile("sglang-2025h1", "amd")  # the era's rows, and the era by name
    assert chosen is not None and chosen.name == NAME
    # SGLang 0.5's ROCm images (AITER kernels) get their own carried-over profile, not 0.4's
    aiter = select_profile("sglang", "amd")
    assert aiter is not None and aiter.name == "sglang-rocm-aiter"
    assert profile_name_for("sglang-2025h1", "nvidia") == "sglang-2025h1"
    p = load_profile(NAME)
    assert (p.engine, p.vendor) == ("sglang", "amd")
    by_gpu = {
        (r.deployment.gpu.name, profile_name_for(r.engine, r.deployment.gpu.vendor))
        for r in _rows()
    }
    assert by_gpu == {("mi300x", NAME), ("h200", "sglang-2025h1")}


def test_it_moves_only_the_rocm_mechanisms_from_the_eras_parameters() -> None:
    spec = fit_profiles().PROFILES[NAME]
    assert spec["start"] == "sglang-2025h1"
    assert set(spec["parameters"]) == MECHANISMS
    p, era = load_profile(NAME), load_profile("sglang-2025h1")
    assert set(p.parameters) <= MECHANISMS
    for f in fields(Efficiency):
        if f.name not in MECHANISMS:
            assert getattr(p.efficiency, f.name) == getattr(era.efficiency, f.name), f.name
    assert {e.set for e in p.errors} == {"fitted", "held_out"}
    assert set(p.fitted_on) == {"dstack_online_sglang-2025h1"}
    # RCCL's time is GPU-side, not host time the overlap loop hides: the host's step stays the
    # era's, and only this profile pays the extra all-reduce latency
    assert p.efficiency.step_overhead_s == era.efficiency.step_overhead_s
    assert p.efficiency.allreduce_extra_latency_s > 0 == era.efficiency.allreduce_extra_latency_s


def test_rccl_latency_lengthens_the_4_user_decode_step_by_122_collectives() -> None:
    """A decode step of dstack's 4-user run (4 sequences at ~3,600 tokens of context) on 8 x
    MI300X: the profile's step less the same step at allreduce_extra_latency_s 0 is DeepSeek-R1's
    61 layers x 2 TP all-reduces x the latency, all communication time."""
    p = load_profile(NAME)
    dep = make_deployment(
        "deepseek-ai/DeepSeek-R1", "mi300x", tp=8, weight_dtype="fp8", kv_dtype="bf16",
        efficiency=p.efficiency,
    )  # fmt: skip
    zero = replace(dep, efficiency=p.efficiency.with_overrides({"allreduce_extra_latency_s": 0}))
    shape = BatchShape(decode_seqs=4, decode_context_tokens=4 * 3_600)
    a, b = step_cost(zero, shape), step_cost(dep, shape)
    extra_s = 61 * 2 * p.efficiency.allreduce_extra_latency_s
    assert b.time_s - a.time_s == pytest.approx(extra_s, rel=1e-9)
    assert b.comm_s - a.comm_s == pytest.approx(extra_s, rel=1e-9)


def test_tp8_mla_decode_reads_every_latent_on_every_gpu() -> None:
    """Why the MI300X rows (TP 8) see the MLA decode kernel's HBM rate and the H200 rows (DP
    attention) barely do. DeepSeek-R1: 128 heads, kv_lora_rank 512, rope 64, a 576-element
    latent of 2 B. Decode FLOP per (query, cached token) = 2 x heads_gpu x (2 x 512 + 64):
    TP 8 gives 16 heads a GPU, 34,816 FLOP over 1,152 B = 30.2 FLOP/B, against MI300X's ridge of
    1,307.4 TFLOP/s / 5.3 TB/s = 247 (memory-bound at any efficiency pair of the profiles);
    DP attention keeps 128 heads, 278,528 FLOP / 1,152 B = 241.8 FLOP/B. And each DP rank reads
    only its own 1/8 of the batch's latents: 8x fewer attention bytes a GPU."""
    eff = load_profile(NAME).efficiency
    wl = Workload(input_tokens=3200, output_tokens=800, batch=64)
    ops = {}
    for gpu, dp_attention in (("mi300x", False), ("h200", True)):
        dep = make_deployment(
            "deepseek-ai/DeepSeek-R1",
            gpu,
            tp=8,
            weight_dtype="fp8",
            kv_dtype="bf16",
            attention_dp=dp_attention,
            expert_parallel=dp_attention,
            efficiency=eff,
        )
        decode = estimate_deployment(dep, wl).to_dict()["decode"]
        ops[gpu] = next(op for op in decode["ops"] if op["name"] == "attention")
    tp8, dp = ops["mi300x"], ops["h200"]
    # the query rows read besides the latent lower the intensity by < 1 % (TP) / 2 % (DP)
    assert tp8["arithmetic_intensity_flop_per_byte"] == pytest.approx(34_816 / 1_152, rel=0.01)
    assert dp["arithmetic_intensity_flop_per_byte"] == pytest.approx(278_528 / 1_152, rel=0.025)
    assert tp8["bound"] == "memory"
    assert tp8["hbm_bytes"] / dp["hbm_bytes"] == pytest.approx(8, rel=0.03)


@pytest.mark.slow
def test_held_out_record_is_what_the_rows_give() -> None:
    """The held-out record (dstack's 15 offline MI300X runs, simulated as validate.py replays
    them) recomputed from the rows with the shipped parameters."""
    p = load_profile(NAME)
    held = [e for e in p.errors if e.set == "held_out"]
    assert {(e.source, e.metric, e.rows) for e in held} == {
        ("dstack_offline_sglang-2025h1", "output_throughput", 15)
    }
    rows = [
        r
        for r in _rows()
        if r.source == held[0].source
        and profile_name_for(r.engine, r.deployment.gpu.vendor) == NAME
    ]
    (got,) = summarize(observe(rows, p.efficiency, p.power))
    assert got.rows == held[0].rows
    assert 100 * got.mdape == pytest.approx(held[0].mdape_after_pct, abs=0.05)
