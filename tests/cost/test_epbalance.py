"""Expert load imbalance under expert parallelism and group-limited routing's reach
(cost/epbalance.py), by hand: the busiest GPU's share of DeepSeek-V3's routed copies over 32
GPUs, what EPLB leaves of it, how it prices the experts and the exchange, and the nodes a token
reaches under DeepSeek's 4-of-8 groups."""

from __future__ import annotations

import dataclasses
import json
import math
from math import comb
from statistics import NormalDist

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import (
    EPLB_BALANCED_SHARE,
    BatchShape,
    Deployment,
    EpComm,
    ep_comm_from_flags,
    ep_imbalance,
    make_deployment,
    op_costs,
    reach_probability,
    step_cost,
)
from tokenprobe.cost.epexchange import copies_per_token, exchange_parts_s, receive_imbalance
from tokenprobe.model import get_model

runner = CliRunner()
EP32 = dict(tp=32, expert_parallel=True, attention_dp=True, weight_dtype="fp8", nodes=4)


def _z(n: int) -> float:
    """Blom's expected largest of n standard normals: Φ⁻¹((n − 0.375) / (n + 0.25))."""
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _largest(n: int, pop: float, pop_skew: float, copies: float) -> float:
    """1 + (z + (z² − 1)·γ/6)·√v: v the popularity plus the sampling variance (1 − 1/n)/copies,
    γ their skewness, (γ_p·v_p^1.5 + v_s^1.5/√copies) / v^1.5 (cost/epbalance.py)."""
    sampling = (1 - 1 / n) / copies
    v = pop + sampling
    skew = (pop_skew * pop**1.5 + sampling**1.5 / math.sqrt(copies)) / v**1.5
    return 1 + (_z(n) + (_z(n) ** 2 - 1) * skew / 6) * math.sqrt(v)


def _dsv3(skew: float = 0.5, ep: EpComm | None = None, **kw: object) -> Deployment:
    dep = make_deployment("deepseek-v3", "h100-sxm", **{**EP32, **kw}, ep_comm=ep)  # type: ignore[arg-type]
    return dataclasses.replace(
        dep, efficiency=dataclasses.replace(dep.efficiency, routing_skew=skew)
    )


def test_256_experts_over_32_gpus_at_4k_tokens_a_gpu_by_hand() -> None:
    """DeepSeek-V3 (256 experts, top-8) over 32 GPUs, 4,096 tokens a GPU (131,072 a step), expert
    popularity log-normal with σ = 0.5: cv² = e^0.25 − 1 = 0.284025; a GPU's 8 experts, drawn
    from 256, spread its load by cv²/8 x 248/255 = 0.034529, with skewness (cv² + 3)·cv/√8 =
    0.61879; the copies themselves (32,768 a GPU) by (31/32)/32,768 = 2.96e-5, skewness
    1/√32,768. z_32 = Φ⁻¹(31.625/32.25) = 2.0667, moved by the summed skewness 0.6180 to
    2.0667 + (2.0667² − 1) x 0.6180/6 = 2.4036; so the busiest GPU takes f = 1 + 2.4036 x
    √0.034558 = 1.4468 times the mean GPU's rows (a Monte Carlo of 2,000 such steps: 1.454)."""
    assert _z(32) == pytest.approx(2.0667, abs=1e-4)
    cv2 = math.expm1(0.25)
    pop = cv2 / 8 * 248 / 255
    assert pop == pytest.approx(0.034529, abs=1e-6)
    pop_skew = (cv2 + 3) * math.sqrt(cv2) / math.sqrt(8)
    assert pop_skew == pytest.approx(0.61879, abs=1e-5)
    f = _largest(32, pop, pop_skew, 32_768)
    assert f == pytest.approx(1.4468, abs=1e-4)
    assert ep_imbalance(_dsv3(), 4096 * 32) == pytest.approx(f, rel=1e-12)


def test_eplb_balances_the_persistent_share_of_the_popularity() -> None:
    """With EPLB's 32 redundant experts (288 slots, 9 a GPU) the popularity term is what EPLB
    cannot see, (1 − 0.51) of cv²/9 x 279/287, skewness (cv² + 3)·cv/√9: f = 1.2926;
    `--enable-eplb` without redundancy keeps 8 slots a GPU: 1.3129 (against 1.4468 without)."""
    assert EPLB_BALANCED_SHARE == 0.51
    cv2 = math.expm1(0.25)
    pop9 = cv2 / 9 * 279 / 287 * (1 - 0.51)
    f = _largest(32, pop9, (cv2 + 3) * math.sqrt(cv2) / 3, 32_768)
    assert f == pytest.approx(1.2926, abs=1e-4)
    assert ep_imbalance(_dsv3(ep=EpComm(redundant_experts=32)), 4096 * 32) == pytest.approx(f)
    moved = ep_imbalance(_dsv3(ep=EpComm(eplb=True)), 4096 * 32)
    pop8 = cv2 / 8 * 248 / 255 * (1 - 0.51)
    assert moved == pytest.approx(
        _largest(32, pop8, (cv2 + 3) * math.sqrt(cv2) / math.sqrt(8), 32_768)
    )
    assert moved == pytest.approx(1.3129, abs=1e-4)
    assert moved < ep_imbalance(_dsv3(), 4096 * 32)


def test_random_routing_leaves_only_the_sampling_spread() -> None:
    """σ = 0 (LMSYS's "simulated perfect EPLB": random expert selection): at 16,384 tokens a GPU
    over 32 GPUs f = 1 + (2.0667 + 3.2713/(6·√131,072))·√(31/32 / 131,072) = 1.0056; it grows as
    the step shrinks (a decode step of 64 tokens a GPU, 512 copies: 1.0909; a Monte Carlo of the
    multinomial: 1.0935) and never passes n."""
    dep = _dsv3(skew=0.0)
    assert ep_imbalance(dep, 16_384 * 32) == pytest.approx(1.0056, abs=1e-4)
    assert ep_imbalance(dep, 64 * 32) == pytest.approx(1.0909, abs=1e-4)
    steps = [ep_imbalance(dep, t) for t in (1, 32, 1024, 32_768, 1 << 20)]
    assert steps == sorted(steps, reverse=True) and all(1 <= f <= 32 for f in steps)
    assert all(ep_imbalance(_dsv3(skew=s), 2048) >= steps[2] for s in (0.3, 0.8))


def test_no_expert_parallelism_no_imbalance() -> None:
    """One GPU, or experts sliced over TP (every GPU computes every expert's slice): f = 1."""
    assert ep_imbalance(_dsv3(tp=1, nodes=1, attention_dp=False, expert_parallel=False), 4096) == 1
    tp8 = make_deployment("deepseek-v3", "h200", tp=8, weight_dtype="fp8")
    assert ep_imbalance(tp8, 4096) == 1.0


def test_the_busiest_gpu_computes_f_times_the_mean_rows() -> None:
    """The experts operator under EP: the mean GPU's FLOP, 2 x T·k/n rows x 3 x 7168 x 2048
    weights a row over 58 layers; the busiest GPU's (f − 1) more rows are `expert_excess`, at
    the experts' own rates: 0.4468 of the FLOP at σ = 0.5 and 4,096 tokens a GPU. The step
    waits for them, the energy counts the mean GPU's work: against σ = 0 a longer step, the
    same FLOP."""
    shape = BatchShape.prefill(4096, 32)  # 4,096 tokens a GPU
    dep = _dsv3()
    ops = {o.name: o for o in op_costs(dep, shape)}
    rows = 4096 * 32 * 8 / 32
    assert ops["experts"].flop == pytest.approx(58 * 2 * rows * 3 * 7168 * 2048, rel=1e-9)
    assert ops["expert_excess"].flop == pytest.approx(0.44684 * ops["experts"].flop, rel=1e-4)
    assert ops["expert_excess"].compute_s == pytest.approx(
        0.44684 * ops["experts"].compute_s, rel=1e-4
    )
    even = step_cost(_dsv3(skew=0.0), shape)
    skewed = step_cost(dep, shape)
    assert skewed.time_s > even.time_s and skewed.flop == pytest.approx(even.flop, rel=1e-12)
    assert "expert_excess" not in {
        o.name
        for o in op_costs(_dsv3(tp=1, nodes=1, attention_dp=False, expert_parallel=False), shape)
    }


def test_the_exchange_waits_for_the_busiest_receiver() -> None:
    """The plain all-to-all's NIC seconds scale by f (bytes over a fixed rate, the latency
    unchanged); the all-gather back end sends every token to every GPU: no busiest receiver."""
    even, skewed = _dsv3(skew=0.0), _dsv3(skew=0.8)
    _, inter_even = exchange_parts_s(even, 4096, prefill=True)
    _, inter_skew = exchange_parts_s(skewed, 4096, prefill=True)
    latency = 2 * even.gpu.topology.nic_latency_s  # type: ignore[union-attr]
    ratio = ep_imbalance(skewed, 4096 * 32) / ep_imbalance(even, 4096 * 32)
    assert inter_skew - latency == pytest.approx((inter_even - latency) * ratio, rel=1e-9)
    gather = dataclasses.replace(skewed, ep_comm=EpComm(backend="allgather"))
    assert receive_imbalance(gather, 4096, True) == 1.0
    assert copies_per_token(gather, "allgather") == (7.0, 24.0)


def test_group_limited_routing_bounds_the_nodes_a_token_reaches() -> None:
    """DeepSeek-V3 on 4 nodes, 2 of its 8 groups a node, 4 groups a token: another node is
    reached with 1 − C(6,4)/C(8,4) = 55/70; DeepSeek-V2 (160 experts, 8 groups, 3 a token) on 2
    nodes of 4 groups: 1 − C(4,3)/C(8,3) = 52/56; Kimi-K2 (n_group 1): the uniform
    1 − C(384 − 192, 8)/C(384, 8). On 2, 4 and 8 nodes a token's NIC copies stay within
    min(topk_group 4, the other nodes) and below the ungrouped model's."""
    v3, v2, kimi = (get_model(n).moe for n in ("deepseek-v3", "deepseek-v2", "kimi-k2"))
    assert v3 is not None and v2 is not None and kimi is not None
    assert reach_probability(v3, 64) == pytest.approx(1 - comb(6, 4) / comb(8, 4), rel=1e-12)
    assert reach_probability(v2, 80) == pytest.approx(1 - comb(4, 3) / comb(8, 3), rel=1e-12)
    assert reach_probability(kimi, 192) == pytest.approx(1 - comb(192, 8) / comb(384, 8))
    # the copies a token sends over the NIC stay below min(topk_group, other nodes)
    for nodes in (2, 4, 8):
        dep = _dsv3(tp=8 * nodes, nodes=nodes, ep=EpComm(backend="deepep", mode="normal"))
        _, nic = copies_per_token(dep, "normal")
        assert nic <= min(4, nodes - 1)
        free = dataclasses.replace(
            v3, expert_groups=1, groups_per_token=1
        )  # the same placement, every expert open
        ungrouped = dataclasses.replace(dep, model=dataclasses.replace(dep.model, moe=free))
        assert nic <= copies_per_token(ungrouped, "normal")[1]


def test_engine_flags_name_eplb_and_vllms_back_ends() -> None:
    assert ep_comm_from_flags("vllm serve m --enable-expert-parallel --enable-eplb").balanced
    assert not ep_comm_from_flags("vllm serve m --enable-expert-parallel").balanced
    for name in ("naive", "allgather_reducescatter"):
        assert ep_comm_from_flags(f"vllm serve m --all2all-backend {name}").backend == "allgather"
    assert ep_comm_from_flags("vllm serve m --all2all-backend pplx").backend == "all-to-all"


def test_estimate_json_says_the_imbalance_it_used() -> None:
    """`estimate --json` under EP: the factor of each phase, under `communication`; with
    `--enable-eplb` the decode step's is lower, and vLLM's back-end names are accepted."""
    base = ["estimate", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--tp", "32"]
    base += ["--expert-parallel", "--attention-dp", "--weight-dtype", "fp8", "--nodes", "4"]
    base += ["--input-tokens", "1024", "--output-tokens", "64", "--batch", "256", "--json"]
    out = {}
    for extra in ([], ["--enable-eplb"], ["--all2all-backend", "deepep_low_latency"]):
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 0, result.output
        out[" ".join(extra)] = json.loads(result.output)["communication"]
    f = out[""]["decode_step"]["ep_imbalance"]
    # default efficiency: σ = 0, 256 tokens x 8 / 32 GPUs = 64 copies a GPU
    assert f == pytest.approx(_largest(32, 0.0, 0.0, 64), rel=1e-9)
    assert f == pytest.approx(1.2627, abs=1e-4)
    assert out["--enable-eplb"]["decode_step"]["ep_imbalance"] == pytest.approx(f)  # σ = 0
    assert out["--all2all-backend deepep_low_latency"]["decode_step"]["ep_kernels"] == (
        "low-latency"
    )


def test_bad_flags_name_the_field() -> None:
    args = ["estimate", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--tp", "32"]
    args += ["--expert-parallel", "--attention-dp", "--all2all-backend", "carrier-pigeon"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "ep_backend" in result.output.replace(" ", "").replace("\n", "")
