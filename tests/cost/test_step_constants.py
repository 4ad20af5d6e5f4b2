"""The per-deployment constants of a step's price (cost/step.py `step_constants`) change no price.

`step_cost` keeps what it derives from the Deployment alone on the deployment, worked out on its
first step. These tests price every shape twice, once through the kept constants and once with
them worked out afresh for that very shape, and ask for bit-identical costs: a constant that
secretly depended on the first shape priced (or a field the cache forgot) would differ."""

from __future__ import annotations

import dataclasses

import pytest

from tokenprobe.cost import BatchShape, Deployment, EpComm, make_deployment, step_cost
from tokenprobe.cost.step import (
    flop_rate_scales,
    power_cap_w,
    special_byte_rates,
    step_constants,
)
from tokenprobe.cost.stepcomm import comm_time_s, link_bytes


def _deepseek_two_nodes() -> Deployment:
    """MLA, attention DP + EP over 16 GPUs (two HGX nodes), DeepEP with overlap and EPLB."""
    comm = EpComm(backend="deepep", overlap=True, redundant_experts=16)
    return make_deployment(
        "deepseek-v3", "h200", tp=16, expert_parallel=True, attention_dp=True,
        weight_dtype="fp8", ep_comm=comm,
    )  # fmt: skip


DEPLOYMENTS = {
    "dense": lambda: make_deployment("llama-3.1-8b", "h100-sxm"),
    "power-limited": lambda: make_deployment("llama-3.1-8b", "h100-sxm", power_limit_w=350.0),
    "fp8 tp4": lambda: make_deployment("llama-3.1-70b", "h100-sxm", tp=4, weight_dtype="fp8"),
    "pipeline": lambda: make_deployment("llama-3.1-70b", "h100-sxm", tp=2, pp=2),
    "two nodes": lambda: make_deployment("llama-3.1-405b", "h100-sxm", tp=16),
    "moe ep": lambda: make_deployment("qwen3-30b-a3b", "h100-sxm", tp=2, expert_parallel=True),
    "mxfp4 moe": lambda: make_deployment("gpt-oss-120b", "h100-sxm", weight_dtype="mxfp4"),
    "mla dp+ep deepep": lambda: _deepseek_two_nodes(),
    "hybrid": lambda: make_deployment("nemotron-h-8b", "h100-sxm"),
    "offload": lambda: make_deployment("llama-3.1-8b", "h100-sxm", cpu_offload_bytes=4e9),
}
SHAPES = [
    BatchShape(decode_seqs=1, decode_context_tokens=50),
    BatchShape(decode_seqs=256, decode_context_tokens=256 * 3000),
    BatchShape(100, 100 * 101 / 2, 1, 37, 37 * 700),
    BatchShape(8192, 2 * 8192 * 400.0, 2),
    BatchShape(3000, 3000 * 400.0, 3, 256, 256 * 3000),
]


def _fresh(dep: Deployment) -> Deployment:
    """`dep` without its kept constants: the next step works them out again."""
    dep.__dict__.pop("_step_constants", None)
    return dep


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_kept_constants_price_every_shape_as_fresh_ones_do(name: str) -> None:
    kept = DEPLOYMENTS[name]()
    step_cost(kept, SHAPES[-1])  # its constants now come from another shape's first step
    fresh = DEPLOYMENTS[name]()
    for shape in SHAPES:
        assert step_cost(kept, shape) == step_cost(_fresh(fresh), shape), shape


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_the_constants_are_what_the_cost_functions_return(name: str) -> None:
    dep = DEPLOYMENTS[name]()
    k = step_constants(dep)
    assert k.special == special_byte_rates(dep)
    assert k.fscale == flop_rate_scales(dep)
    assert k.cap_w == power_cap_w(dep)
    assert k.capped == (power_cap_w(dep) < dep.gpu.tdp_w)
    # a deployment without links skips their terms: they are exactly zero on every shape
    for shape in SHAPES:
        zero = comm_time_s(dep, shape) == 0.0 and link_bytes(dep, shape) == 0.0
        assert zero or not k.no_comm, shape
    assert k.no_comm == (name in ("dense", "power-limited", "mxfp4 moe", "hybrid"))


def test_a_replaced_deployment_works_its_own_constants_out() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    step_cost(dep, SHAPES[0])
    capped = dataclasses.replace(dep, power_limit_w=300.0)
    assert step_constants(capped).cap_w == 300.0
    assert step_constants(dep).cap_w == dep.gpu.tdp_w
    assert step_cost(capped, SHAPES[1]).power_w <= 300.0 < step_cost(dep, SHAPES[1]).power_w
