"""Properties of the roofline step model (hypothesis)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenprobe.cost import (
    DEFAULT_EFFICIENCY,
    BatchShape,
    Deployment,
    make_deployment,
    op_costs,
    step_cost,
)
from tokenprobe.cost.ops import KERNELS
from tokenprobe.hardware import GpuSpec

MODELS = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-3-27b", "qwen3-30b-a3b"]

shapes = st.builds(
    lambda pt, pc, ds, ctx: BatchShape(
        prefill_tokens=pt,
        prefill_attn_pairs=pt * (pt + 1) / 2,
        prefill_seqs=1 if pt else 0,
        decode_seqs=ds,
        decode_context_tokens=ds * ctx,
    ),
    st.integers(0, 8192),
    st.just(0),
    st.integers(0, 512),
    st.integers(1, 32768),
)


def _faster(gpu: GpuSpec, what: str, factor: float) -> GpuSpec:
    if what == "compute":
        peaks = {k: v * factor for k, v in gpu.peak_flop_per_s.items()}
        return dataclasses.replace(gpu, peak_flop_per_s=peaks)
    if what == "memory":
        return dataclasses.replace(gpu, hbm_bytes_per_s=gpu.hbm_bytes_per_s * factor)
    link = dataclasses.replace(gpu.link, bytes_per_s=gpu.link.bytes_per_s * factor)
    return dataclasses.replace(gpu, link=link)


def _dep(model: str, tp: int = 1) -> Deployment:
    return make_deployment(model, "h100-sxm", tp=tp, weight_dtype="fp8")


@settings(max_examples=60, deadline=None)
@given(
    shape=shapes,
    model=st.sampled_from(MODELS),
    what=st.sampled_from(["compute", "memory", "link"]),
    factor=st.floats(1.0, 10.0),
)
def test_time_never_rises_when_a_resource_gets_faster(
    shape: BatchShape, model: str, what: str, factor: float
) -> None:
    if shape.tokens == 0:
        return
    dep = _dep(model, tp=2)
    faster = dataclasses.replace(dep, gpu=_faster(dep.gpu, what, factor))
    assert step_cost(faster, shape).time_s <= step_cost(dep, shape).time_s * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(shape=shapes, model=st.sampled_from(MODELS))
def test_time_is_sum_of_roofline_ops_plus_comm_plus_overhead(shape: BatchShape, model: str) -> None:
    if shape.tokens == 0:
        return
    dep = _dep(model, tp=2)
    cost = step_cost(dep, shape)
    ops = op_costs(dep, shape)
    alpha = dep.efficiency.kernel_overhead_s
    for op in ops:  # each operator: kernels x alpha + max(compute, memory), over its layers
        kernels = KERNELS[op.name]
        assert op.time_s == pytest.approx(
            op.layers * kernels * alpha + max(op.compute_s, op.memory_s)
        )
    expected = sum(o.time_s for o in ops) + cost.comm_s + dep.efficiency.step_overhead_s
    assert cost.time_s == pytest.approx(expected)
    assert sum(cost.shares().values()) == pytest.approx(1.0)
    assert dep.gpu.idle_w <= cost.power_w <= dep.gpu.tdp_w


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 256), ctx=st.integers(1, 32000), extra=st.integers(1, 4000))
def test_decode_step_grows_with_context_and_batch(batch: int, ctx: int, extra: int) -> None:
    dep = _dep("llama-3.1-8b")
    base = step_cost(dep, BatchShape.decode(batch, ctx)).time_s
    assert step_cost(dep, BatchShape.decode(batch, ctx + extra)).time_s >= base
    assert step_cost(dep, BatchShape.decode(batch + 1, ctx)).time_s >= base


def test_power_cap_slows_compute_bound_work_and_caps_power() -> None:
    full = make_deployment("llama-3.1-70b", "h100-sxm", tp=4)
    capped = dataclasses.replace(full, power_limit_w=0.5 * full.gpu.tdp_w)
    shape = BatchShape.prefill(8192)
    a, b = step_cost(full, shape), step_cost(capped, shape)
    assert b.power_w <= 0.5 * full.gpu.tdp_w + 1e-9
    assert b.time_s > a.time_s
    assert b.clock_fraction < 1


def test_sliding_window_layers_read_at_most_their_window() -> None:
    dep = make_deployment("gpt-oss-20b", "h100-sxm")
    short = step_cost(dep, BatchShape.decode(8, 1000)).hbm_bytes
    long = step_cost(dep, BatchShape.decode(8, 100_000)).hbm_bytes
    full_only = [g for g in dep.model.layer_groups if g[0].window == 0]
    assert full_only  # gpt-oss alternates sliding and full layers
    # bytes still grow (full layers) but by less than if every layer read the whole context
    per_token_all = dep.kv_bytes_per_token_per_gpu
    assert 0 < long - short < 8 * 99_000 * per_token_all


def test_moe_touches_more_experts_as_batch_grows() -> None:
    dep = _dep("mixtral-8x7b")
    one = step_cost(dep, BatchShape.decode(1, 512)).hbm_bytes
    many = step_cost(dep, BatchShape.decode(64, 512)).hbm_bytes
    assert many > 2 * one  # 2 of 8 experts at batch 1, nearly all 8 at batch 64


def test_power_limit_at_or_below_idle_is_rejected() -> None:
    from tokenprobe.errors import ConfigError

    with pytest.raises(ConfigError, match="idle power"):
        make_deployment("llama-3.1-8b", "h100-sxm", power_limit_w=1.0)


def test_quantized_moe_and_fp8_moe_slow_only_their_expert_kernels() -> None:
    replace = dataclasses.replace
    shape = BatchShape.decode(64, 1024)
    slow = replace(DEFAULT_EFFICIENCY, quantized_moe=0.5)

    def experts_s(dep: Deployment) -> float:
        return next(o.time_s for o in op_costs(dep, shape) if o.name == "experts")

    oss = make_deployment("gpt-oss-20b", "h100-sxm", weight_dtype="mxfp4")
    oss_slow = replace(oss, efficiency=slow)
    assert experts_s(oss_slow) > 1.5 * experts_s(oss)
    # only the expert kernels change
    others = {o.name: o.time_s for o in op_costs(oss, shape) if o.name != "experts"}
    assert others == {o.name: o.time_s for o in op_costs(oss_slow, shape) if o.name != "experts"}
    # a 16-bit MoE and a quantized dense model are untouched
    for dep in (
        make_deployment("qwen3-30b-a3b", "h100-sxm"),
        make_deployment("llama-3.1-8b", "h100-sxm", weight_dtype="fp8"),
    ):
        same = step_cost(replace(dep, efficiency=slow), shape).time_s
        assert same == step_cost(dep, shape).time_s
    # 8-bit expert weights have their own figure: quantized_moe leaves them, fp8_moe slows them
    fp8 = make_deployment("qwen3-30b-a3b", "h100-sxm", weight_dtype="fp8")
    assert experts_s(replace(fp8, efficiency=slow)) == experts_s(fp8)
    fp8_slow = replace(fp8, efficiency=replace(DEFAULT_EFFICIENCY, fp8_moe=0.5))
    assert experts_s(fp8_slow) > 1.5 * experts_s(fp8)
    assert experts_s(replace(oss, efficiency=fp8_slow.efficiency)) == experts_s(oss)


def test_expert_parallel_layers_wait_for_the_gpu_that_touched_most_experts() -> None:
    """E[max over GPUs of Binomial(E/n, p)], checked against a seeded Monte Carlo of uniform
    top-k routing, and its limits: one GPU = the mean; every expert touched = all of them."""
    import numpy as np

    from tokenprobe.cost.ops import expected_distinct_experts, slowest_gpu_experts

    rng = np.random.default_rng(0)
    experts, k, tokens, gpus = 64, 4, 6, 8
    trials = []
    for _ in range(4000):
        touched = np.zeros(experts, dtype=bool)
        for _ in range(tokens):
            touched[rng.choice(experts, k, replace=False)] = True
        trials.append(touched.reshape(gpus, -1).sum(axis=1).max())
    slowest = slowest_gpu_experts(experts, k, tokens, gpus)
    assert slowest == pytest.approx(np.mean(trials), rel=0.03)
    mean = expected_distinct_experts(experts, k, tokens) / gpus
    assert mean < slowest_gpu_experts(experts, k, tokens, gpus) <= experts / gpus
    one_gpu = slowest_gpu_experts(experts, k, tokens, 1)
    assert one_gpu == pytest.approx(expected_distinct_experts(experts, k, tokens), rel=1e-9)
    assert slowest_gpu_experts(experts, k, 10_000, gpus) == pytest.approx(experts / gpus)
    grid = slowest_gpu_experts(experts, k, np.array([1.0, 6.0, 10_000.0]), gpus)
    assert grid[1] == pytest.approx(slowest_gpu_experts(experts, k, 6, gpus))


@given(st.integers(1, 20000), st.integers(1, 20000))
@settings(max_examples=60, deadline=None)
def test_gemm_efficiency_never_falls_as_rows_grow(a: int, b: int) -> None:
    """More token rows in a step's GEMMs fill more of each tile and more SMs: the achievable
    FLOP/s climbs from compute_decode (<= 128 rows) to compute_prefill (>= 2048 rows), and a
    scalar and an array of rows price alike (the simulator and the sweep share one formula)."""
    import numpy as np

    from tokenprobe.cost.step import rates

    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    lo, hi = sorted((a, b))
    assert rates(dep, lo)[0] <= rates(dep, hi)[0]
    grid = rates(dep, np.array([float(a), float(b)]))[0]
    assert grid.tolist() == pytest.approx([rates(dep, a)[0], rates(dep, b)[0]])
    eff = dep.efficiency
    assert rates(dep, 64)[0] == pytest.approx(dep.peak_flop_per_s * eff.compute_decode)
    assert rates(dep, 4096)[0] == pytest.approx(dep.peak_flop_per_s * eff.compute_prefill)
    mid = (eff.compute_decode + eff.compute_prefill) / 2  # 512 rows: half way in log2
    assert rates(dep, 512)[0] == pytest.approx(dep.peak_flop_per_s * mid)


def test_a_large_decode_batch_runs_its_gemms_at_the_large_gemm_rate() -> None:
    """900 decoding sequences are a 900-row GEMM: priced nearer compute_prefill than a
    64-sequence batch, so its compute time per sequence is lower."""
    dep = make_deployment("llama-3.1-70b", "h100-sxm", tp=4)
    small = next(o for o in op_costs(dep, BatchShape.decode(64, 512)) if o.name == "mlp")
    large = next(o for o in op_costs(dep, BatchShape.decode(900, 512)) if o.name == "mlp")
    assert large.compute_s / 900 < small.compute_s / 64


def test_routing_skew_touches_fewer_experts_at_small_batches_and_all_at_large() -> None:
    """Skewed routers read fewer distinct experts' weights for a few tokens than uniform routing,
    and still all of them for a large batch; skew 0 is the uniform formula."""
    from tokenprobe.cost.ops import expected_distinct_experts

    uniform = 128 * (1 - (1 - 8 / 128) ** 8)
    assert expected_distinct_experts(128, 8, 8) == pytest.approx(uniform)
    assert expected_distinct_experts(128, 8, 8, 0.0) == pytest.approx(uniform)
    last = uniform
    for skew in (0.5, 1.0, 1.5):
        now = expected_distinct_experts(128, 8, 8, skew)
        assert now < last
        last = now
    assert expected_distinct_experts(128, 8, 20_000, 1.0) == pytest.approx(128, rel=1e-3)


def test_skewed_distinct_experts_agree_with_a_seeded_top_k_monte_carlo() -> None:
    """The independent-pick approximation against real top-k routing without replacement:
    each token draws its k experts by Gumbel-top-k over log-popularity σ·z (same quantiles)."""
    import numpy as np

    from tokenprobe.cost.ops import _skewed_pick_probabilities, expected_distinct_experts

    experts, k, skew = 128, 8, 1.0
    p = _skewed_pick_probabilities(experts, k, skew)
    logits = np.log(p)
    rng = np.random.default_rng(11)
    for tokens in (8, 32, 128):
        counts = []
        for _ in range(400):
            g = logits + rng.gumbel(size=(tokens, experts))
            picks = np.argpartition(-g, k, axis=1)[:, :k]
            counts.append(len(np.unique(picks)))
        model = expected_distinct_experts(experts, k, tokens, skew)
        assert model == pytest.approx(float(np.mean(counts)), rel=0.06)


def test_routing_skew_is_a_spread_not_a_fraction() -> None:
    """σ of the expert popularity may exceed 1 (the vllm profile fits 1.3) but not go negative."""
    from tokenprobe.errors import ConfigError

    assert DEFAULT_EFFICIENCY.with_overrides({"routing_skew": 1.3}).routing_skew == 1.3
    with pytest.raises(ConfigError, match="routing_skew"):
        DEFAULT_EFFICIENCY.with_overrides({"routing_skew": -0.1})
    with pytest.raises(ConfigError, match="moe_compute"):
        DEFAULT_EFFICIENCY.with_overrides({"moe_compute": 1.5})
