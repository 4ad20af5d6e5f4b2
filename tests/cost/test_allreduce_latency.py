"""`Efficiency.allreduce_extra_latency_s`: the collective library's fixed cost per TP all-reduce
(RCCL where SGLang 0.4 on ROCm ran without its custom all-reduce; cost/comm.py), priced as
GPU-side communication time, in the exact step, the vectorised sweep and the breakdown alike,
and not hidden by SGLang 0.4's overlap loop (sim/sglang_overlap.py), which hides host time."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from tokenprobe.cost import (
    BatchShape,
    Deployment,
    Efficiency,
    make_deployment,
    step_cost,
    step_time_energy,
)
from tokenprobe.cost.stepcomm import comm_breakdown, comm_time_s
from tokenprobe.cost.sweep import decode_step_time_grid
from tokenprobe.sim.sglang_overlap import overlapped_step_fn
from tokenprobe.units import MICRO, MILLI

LATENCY_S = 100 * MICRO
# DeepSeek-R1 as the MI300X rows of sglang-rocm run it: plain TP 8, FP8 weights
R1 = make_deployment("deepseek-ai/DeepSeek-R1", "mi300x", tp=8, weight_dtype="fp8", kv_dtype="bf16")
SHAPE = BatchShape(decode_seqs=4, decode_context_tokens=4 * 3_600)


def _with(dep: Deployment, latency_s: float, step_s: float = 0.5 * MILLI) -> Deployment:
    eff = Efficiency(allreduce_extra_latency_s=latency_s, step_overhead_s=step_s)
    return replace(dep, efficiency=eff)


def test_a_decode_step_pays_61_layers_x_2_allreduces_x_the_latency() -> None:
    """DeepSeek-R1 has 61 layers, each with two row-parallel outputs (attention o_proj and the
    MLP/MoE down projection), so a TP 8 step runs 122 all-reduces; 100 us more a collective adds
    122 x 100 us = 12.2 ms to the step, all of it communication time."""
    assert R1.model.num_layers == 61
    base, slow = _with(R1, 0.0), _with(R1, LATENCY_S)
    a, b = step_cost(base, SHAPE), step_cost(slow, SHAPE)
    assert b.time_s - a.time_s == pytest.approx(61 * 2 * LATENCY_S, rel=1e-9)
    assert b.comm_s - a.comm_s == pytest.approx(61 * 2 * LATENCY_S, rel=1e-9)
    assert b.overhead_s == pytest.approx(a.overhead_s)  # not host time


def test_the_overlap_loop_hides_the_host_time_not_the_allreduce_latency() -> None:
    """Host 3 ms a step, hidden under the GPU's part by the overlap loop in both cases; the
    122 x 100 us of all-reduce latency stays in the overlapped step."""
    host_s = 3 * MILLI
    times = []
    for latency_s in (0.0, LATENCY_S):
        dep = _with(R1, latency_s, host_s)
        t, _ = step_time_energy(dep, SHAPE)
        priced = functools.partial(step_time_energy, dep)
        t2, _ = overlapped_step_fn(dep, priced)(SHAPE)  # type: ignore[arg-type]
        assert t2 == pytest.approx(t - host_s)  # the GPU part (> 3 ms) hides the host's
        times.append(t2)
    assert times[1] - times[0] == pytest.approx(122 * LATENCY_S, rel=1e-9)


def test_sweep_breakdown_and_exact_step_price_it_alike() -> None:
    """The vectorised decode grid (plans, plots) equals the exact step at every point, and the
    breakdown's all-reduce seconds equal the step's communication time (no EP, no pipeline)."""
    dep = _with(R1, LATENCY_S)
    batches, contexts = np.array([1.0, 16.0, 128.0]), np.array([512.0, 4096.0])
    grid = decode_step_time_grid(dep, batches, contexts)
    for i, b in enumerate(batches):
        for j, c in enumerate(contexts):
            shape = BatchShape.decode(int(b), int(c))
            assert grid[i, j] == pytest.approx(step_cost(dep, shape).time_s, rel=1e-9)
            out = comm_breakdown(dep, shape)
            assert out["allreduce_s"] == pytest.approx(comm_time_s(dep, shape), rel=1e-12)


def test_across_domains_the_latency_is_paid_once_a_collective() -> None:
    """A TP 16 group over two 8-GPU domains: the hierarchical all-reduce's intra-domain phase
    carries the fixed cost once, so 100 us more adds 122 x 100 us to the step here too."""
    dep16 = make_deployment(
        "deepseek-ai/DeepSeek-R1", "mi300x", tp=16, weight_dtype="fp8", kv_dtype="bf16"
    )
    a, b = (comm_time_s(_with(dep16, x), SHAPE) for x in (0.0, LATENCY_S))
    assert b - a == pytest.approx(122 * LATENCY_S, rel=1e-9)


def test_default_is_zero_and_bounded() -> None:
    assert Efficiency().allreduce_extra_latency_s == 0.0
    from tokenprobe.errors import ConfigError

    with pytest.raises(ConfigError, match="allreduce_extra_latency_s"):
        Efficiency(allreduce_extra_latency_s=-1e-6)
