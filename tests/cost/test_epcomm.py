"""Expert-parallel dispatch and combine as the engines run them (cost/epcomm.py): DeepSeek-V3 EP32
across four HGX H100 nodes by hand (FP8 dispatch with its scales, one NIC copy per destination
node, BF16 combine), DeepEP's low-latency kernels against the README figures they are read from,
two-batch overlap as max(compute, communication), EPLB's redundant experts, engine flags, and
the default that must price exactly what the plain all-to-all priced before."""

from __future__ import annotations

import dataclasses
import math
from math import comb
from statistics import NormalDist

import pytest

from tokenprobe.cost import (
    VLLM_ALL2ALL_BACKENDS,
    BatchShape,
    EpComm,
    ep_comm_from_flags,
    estimate,
    gang_step,
    make_deployment,
    rank_work_s,
    shared_parts_s,
    step_cost,
)
from tokenprobe.cost.comm import alltoall_parts_s
from tokenprobe.cost.epexchange import copies_per_token, ep_exchange_s, exchange_parts_s, hop_bytes
from tokenprobe.cost.memory import weights_bytes_per_gpu
from tokenprobe.cost.step import host_time_s
from tokenprobe.cost.stepcomm import comm_breakdown
from tokenprobe.errors import ConfigError

DEEPEP_TBO = EpComm(backend="deepep", overlap=True)
# DeepSeek-V3: hidden 7168, 256 routed experts, top-8, 58 MoE layers; FP8 checkpoint
EP32 = dict(tp=32, expert_parallel=True, attention_dp=True, weight_dtype="fp8", nodes=4)


def _dsv3(ep: EpComm | None = None, **kw: object) -> object:
    return make_deployment("deepseek-v3", "h100-sxm", **{**EP32, **kw}, ep_comm=ep)  # type: ignore[arg-type]


def _ungrouped(dep: object) -> object:
    """`dep` with DeepSeek-V3's group-limited routing switched off (every expert open)."""
    model = dep.model  # type: ignore[attr-defined]
    moe = dataclasses.replace(model.moe, expert_groups=1, groups_per_token=1)
    return dataclasses.replace(dep, model=dataclasses.replace(model, moe=moe))  # type: ignore[type-var]


def _f_random(n: int, copies: float) -> float:
    """The busiest of n EP GPUs' copies over the mean under random routing, `copies` a GPU
    (cost/epbalance.py): 1 + (z + (z² − 1)/(6·√copies))·√((1 − 1/n)/copies), z Blom's
    Φ⁻¹((n − 0.375)/(n + 0.25)), the Poisson skewness 1/√copies moving it (Cornish-Fisher)."""
    z = NormalDist().inv_cdf((n - 0.375) / (n + 0.25))
    return 1 + (z + (z * z - 1) / (6 * math.sqrt(copies))) * math.sqrt((1 - 1 / n) / copies)


def test_deepseek_v3_ep32_dispatch_and_combine_bytes_by_hand() -> None:
    """A GPU's 16,384 prefill tokens under DeepEP's normal kernels. DeepSeek-V3 routes a token
    to 8 experts within 4 of its 8 groups of 32 (n_group 8, topk_group 4); a node holds 64
    experts, 2 whole groups, so a token misses a given node when none of its 4 groups is among
    them: C(6, 4) / C(8, 4) = 15/70, and reaches each of the 3 other nodes with 55/70 = 0.785714:
    2.357143 NIC copies a token (plain all-to-all: 8 x 24/32 = 6). Dispatch in FP8: 7168 B +
    7168 / 128 fp32 scales x 4 B = 7392 B a copy; combine in BF16: 14,336 B. So the NIC carries
    16,384 x 2.357143 x 7392 = 285.47 MB out and 16,384 x 2.357143 x 14,336 = 553.64 MB back
    per MoE layer. NVLink: 28 GPUs are reached over it (32 less the 4 entry GPUs); a GPU holds 8
    of one group's 32 experts, reached when its group is chosen (4/8) and one of the group's 2
    picks lands on it: 0.5 x (1 − C(24, 2) / C(32, 2)) = 0.5 x (1 − 276/496) = 0.221774.
    Without the group limit: a node is missed with C(192, 8) / C(256, 8) = 0.096446, 3 x
    0.903554 = 2.710661 NIC copies; a GPU is reached with 1 − C(248, 8) / C(256, 8) = 0.227087."""
    dep = _dsv3(EpComm(backend="deepep", mode="normal"))
    link_c, nic_c = copies_per_token(dep, "normal")  # type: ignore[arg-type]
    assert nic_c == pytest.approx(3 * 55 / 70, rel=1e-12)
    assert link_c == pytest.approx(28 * 0.5 * (1 - 276 / 496), rel=1e-12)
    assert nic_c <= min(4, 3)  # never more nodes than the 4 groups nor the 3 other nodes
    (d_link, d_nic), (c_link, c_nic) = hop_bytes(dep, 16_384, prefill=True)  # type: ignore[arg-type]
    assert d_nic == pytest.approx(285.47e6, rel=1e-4)
    assert c_nic == pytest.approx(553.64e6, rel=1e-4)
    assert c_link / d_link == pytest.approx(14_336 / 7392, rel=1e-12)
    free = _ungrouped(dep)
    p_node = 1 - comb(192, 8) / comb(256, 8)
    assert p_node == pytest.approx(0.903554, abs=1e-6)
    link_u, nic_u = copies_per_token(free, "normal")  # type: ignore[arg-type]
    assert nic_u == pytest.approx(3 * 0.903554, rel=1e-6)
    assert link_u == pytest.approx(28 * 0.227087, rel=1e-5)
    plain = _dsv3()
    assert copies_per_token(plain, "all-to-all") == pytest.approx((8 * 7 / 32, 8 * 24 / 32))  # type: ignore[arg-type]


def test_deepseek_v3_ep32_exchange_time_by_hand() -> None:
    """The NIC path is the slower (NVLink: 6.21 copies x 7392 B x 16,384 = 752 MB at 450 GB/s x
    0.765 = 2.2 ms < 6.6 ms): dispatch 285.47 MB at DeepEP's 43.5 GB/s (58 GB/s "logical" x 3/4
    on a 50 GB/s CX7), combine 553.64 MB at 42.75 GB/s, each hop plus the link's 7 us and the
    NIC's 5 us. The busiest of the 32 GPUs receives f = 1.00562 times the mean (16,384 tokens
    x 8 copies a GPU, random routing at the default skew 0: 1 + (z_32 + (z_32² − 1)/(6·√131,072))
    ·√(31/32 / 131,072), z_32 = 2.0667), and the README's rates already hold the excess of its
    own test, 4,096 tokens a GPU: 1.01125; so the bytes take f / 1.01125 of their
    time at the README's rates: 6.526 + 12.879 ms + 10 us = 19.42 ms a layer, all on the NICs
    but the 2 x 7 us."""
    dep = _dsv3(EpComm(backend="deepep"))
    f, readme = _f_random(32, 131_072), _f_random(32, 32_768)
    assert (f, readme) == pytest.approx((1.00562, 1.01125), abs=1e-5)
    intra, inter = exchange_parts_s(dep, 16_384, prefill=True)  # type: ignore[arg-type]
    assert intra == pytest.approx(14e-6, rel=1e-9)
    nic_s = (285.47e6 / 43.5e9 + 553.64e6 / 42.75e9) * f / readme
    assert inter == pytest.approx(nic_s + 10e-6, rel=1e-4)
    # the plain all-to-all of the same tokens: 6 copies of 14,336 B twice at the profile's rate
    plain = _dsv3()
    assert sum(exchange_parts_s(plain, 16_384, True)) > 3 * (intra + inter)  # type: ignore[arg-type]


def test_low_latency_kernels_match_the_readme_they_are_read_from() -> None:
    """DeepEP README, EP32 low-latency kernels, 128 tokens, top-8, FP8 dispatch, BF16 combine:
    dispatch 155 us, combine 273 us. Priced: 128 x 8 x 24/32 NIC copies x 7392 B = 5.68 MB at
    36 GB/s = 157.7 us (+ 12 us of latencies); combine 11.01 MB at 39.75 GB/s = 277.0 us
    (+ 12 us): within 10 % of each, as the rates were read off those rows."""
    dep = _dsv3(EpComm(backend="deepep", mode="low-latency"))
    (_, d_nic), (_, c_nic) = hop_bytes(dep, 128, prefill=False)
    assert c_nic == pytest.approx(128 * 6 * 14_336)  # type: ignore[arg-type]
    assert d_nic == pytest.approx(128 * 6 * 7392)
    intra, inter = exchange_parts_s(dep, 128, prefill=False)  # type: ignore[arg-type]
    assert intra + inter == pytest.approx(155e-6 + 273e-6, rel=0.10)


def test_auto_mode_picks_normal_for_prefill_and_low_latency_for_decode() -> None:
    dep = _dsv3(EpComm(backend="deepep"))
    prefill = comm_breakdown(dep, BatchShape.prefill(4096, 32))  # type: ignore[arg-type]
    decode = comm_breakdown(dep, BatchShape.decode(4096, 2000))  # type: ignore[arg-type]
    assert (prefill["ep_kernels"], decode["ep_kernels"]) == ("normal", "low-latency")
    assert prefill["ep_dispatch_bytes_per_element"] == 1 + 4 / 128
    # bf16 checkpoints dispatch in bf16 unless told (SGLang quantises for DeepGEMM's FP8 only)
    bf16 = _dsv3(EpComm(backend="deepep"), weight_dtype="bf16", kv_dtype="bf16")
    assert comm_breakdown(bf16, BatchShape.decode(64, 100))["ep_dispatch_bytes_per_element"] == 2  # type: ignore[arg-type]


def test_the_default_prices_what_the_plain_all_to_all_priced() -> None:
    """No back end named: two all-to-alls per MoE layer of cost/comm.py's formula, each of the
    busiest GPU's bytes: T x 7168 x 2 B x 8 x 31/32 times the imbalance of 1,000 tokens x 8
    copies a GPU at skew 0 (EP32: 1.0228, EP4: 1.0102), across nodes and inside one."""
    for dep in (_dsv3(), make_deployment("qwen3-30b-a3b", "h100-sxm", tp=4,
                                         expert_parallel=True, attention_dp=True)):  # fmt: skip
        h, k, n = dep.model.hidden_size, 8, dep.tp  # type: ignore[attr-defined]
        f = _f_random(n, 8000)
        assert f == pytest.approx({32: 1.0228, 4: 1.0102}[n], abs=1e-4)
        old = alltoall_parts_s(dep, 1000 * h * 2 * k * (n - 1) / n * f)  # type: ignore[arg-type]
        new = exchange_parts_s(dep, 1000, prefill=True)  # type: ignore[arg-type]
        assert new == pytest.approx((2 * old[0], 2 * old[1]), rel=1e-12)


def test_two_batch_overlap_takes_the_larger_of_compute_and_communication() -> None:
    """step = max(GPU work, EP exchange) + host with TBO, their sum without; the same
    deployment otherwise, so the difference is exactly the smaller of the two."""
    shape = BatchShape.prefill(4096, 128)  # 16,384 tokens a GPU
    sum_dep, tbo_dep = _dsv3(EpComm(backend="deepep")), _dsv3(DEEPEP_TBO)
    plain, tbo = step_cost(sum_dep, shape), step_cost(tbo_dep, shape)  # type: ignore[arg-type]
    ep_s = ep_exchange_s(sum_dep, shape)  # type: ignore[arg-type]
    gpu_s = plain.time_s - plain.comm_s - host_time_s(sum_dep, shape)  # type: ignore[arg-type]
    assert tbo.time_s == pytest.approx(plain.time_s - min(gpu_s, ep_s), rel=1e-9)
    assert tbo.time_s >= max(gpu_s, ep_s)
    # the gang of ranks: the same rule over the slowest rank's work and the shared experts
    shapes = [BatchShape.prefill(4096, 4)] * 31 + [BatchShape.prefill(4096, 2)]
    step = gang_step(tbo_dep, shapes)  # type: ignore[arg-type]
    experts, a2a = shared_parts_s(tbo_dep, 4096 * 126, 4 * 4096, prefill=True)  # type: ignore[arg-type]
    work = max(rank_work_s(tbo_dep, s) for s in shapes)  # type: ignore[arg-type]
    assert step.time_s == pytest.approx(max(work + experts, a2a), rel=1e-9)


def test_redundant_experts_make_ep72_possible_and_cost_their_weights() -> None:
    """256 experts do not divide over 72 GPUs; 288 (EPLB's 32 redundant) do, 4 a GPU. On 32
    GPUs the 32 redundant experts add one expert a GPU of 3 x 7168 x 2048 = 44,040,192 FP8
    parameters in each of 58 MoE layers: 2,554,331,136 B more; the routed rows a GPU computes
    stay 1/32 of all of them."""
    kw = dict(EP32, tp=72, nodes=9)
    with pytest.raises(ConfigError, match="redundant"):
        make_deployment("deepseek-v3", "h100-sxm", **kw)  # type: ignore[arg-type]
    ep72 = make_deployment("deepseek-v3", "h100-sxm", **kw, ep_comm=EpComm(redundant_experts=32))  # type: ignore[arg-type]
    assert ep72.tp == 72
    eplb, base = _dsv3(EpComm(redundant_experts=32)), _dsv3()
    extra = weights_bytes_per_gpu(eplb) - weights_bytes_per_gpu(base)  # type: ignore[arg-type]
    assert extra == 44_040_192 * 58
    shape = BatchShape.prefill(4096, 128)
    flop = {d: step_cost(d, shape).flop for d in (eplb, base)}  # type: ignore[arg-type]
    assert flop[eplb] == pytest.approx(flop[base], rel=1e-12)
    with pytest.raises(ConfigError, match="redundant_experts"):
        make_deployment("deepseek-v3", "h100-sxm", tp=8, ep_comm=EpComm(redundant_experts=8))


def test_engine_flags_name_the_back_end() -> None:
    sglang = (
        "--tp 72 --dp 72 --enable-dp-attention --moe-a2a-backend deepep --deepep-mode "
        "low_latency --enable-two-batch-overlap --ep-num-redundant-experts 32"
    )
    assert ep_comm_from_flags(sglang) == EpComm("deepep", "low-latency", "auto", True, 32)
    assert ep_comm_from_flags("--enable-deepep-moe") == EpComm(backend="deepep")
    vllm = "--all2all-backend deepep_high_throughput --enable-dbo"
    assert ep_comm_from_flags(vllm) == EpComm("deepep", "normal", "auto", True, 0)
    assert ep_comm_from_flags("--tp 8") == EpComm()
    # vLLM's environment variable reads like the flag; a name vLLM lacks keeps the default
    low = EpComm("deepep", "low-latency")
    assert ep_comm_from_flags('VLLM_ALL2ALL_BACKEND="deepep_low_latency" vllm serve m') == low
    assert ep_comm_from_flags("--all2all-backend magic") == EpComm()
    # vLLM reads the variable only when the flag is unset: the flag wins
    both = "VLLM_ALL2ALL_BACKEND=naive vllm serve m --all2all-backend deepep_low_latency"
    assert ep_comm_from_flags(both) == low


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("backend", "nccl"),
        ("mode", "fast"),
        ("dispatch_dtype", "fp4"),
        ("redundant_experts", -1),
        ("overlap", "yes"),
    ],
)
def test_a_bad_setting_names_its_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        EpComm(**{field: value})  # type: ignore[arg-type]
    assert str(value) in str(err.value)


@pytest.mark.parametrize("ep", [8, 16, 32, 64])
def test_dedup_never_sends_more_over_the_nic_and_a_faster_nic_never_slows(ep: int) -> None:
    """Union bound: a node is reached with at most k x (its experts)/E = k d / n, so (m − 1)
    p_dom <= k (n − d) / n, the per-expert copies; and each hop's time falls as the NIC's rate
    rises (a GPU of the same kind with an 800 Gb/s NIC)."""
    nodes = max(1, ep // 8)
    dep = _dsv3(EpComm(backend="deepep", mode="normal"), tp=ep, nodes=nodes)
    _, nic = copies_per_token(dep, "normal")  # type: ignore[arg-type]
    _, nic_plain = copies_per_token(dep, "all-to-all")  # type: ignore[arg-type]
    assert nic <= nic_plain + 1e-12
    gpu = dep.gpu  # type: ignore[attr-defined]
    topo = dataclasses.replace(gpu.topology, nic_bytes_per_s=2 * gpu.topology.nic_bytes_per_s)
    fast = dataclasses.replace(dep, gpu=dataclasses.replace(gpu, topology=topo))
    for tokens, prefill in ((16_384, True), (128, False)):
        slow_s = sum(exchange_parts_s(dep, tokens, prefill))  # type: ignore[arg-type]
        fast_s = sum(exchange_parts_s(fast, tokens, prefill))
        assert fast_s <= slow_s
        if nodes > 1:
            assert fast_s < slow_s


def test_estimate_takes_the_back_end_and_says_which_ran() -> None:
    kw = dict(input_tokens=4096, output_tokens=256, batch=128, tp=32, expert_parallel=True,
              attention_dp=True, weight_dtype="fp8")  # fmt: skip
    plain = estimate("deepseek-v3", "h100-sxm", **kw)  # type: ignore[arg-type]
    tbo = estimate("deepseek-v3", "h100-sxm", **kw, ep_comm=DEEPEP_TBO)  # type: ignore[arg-type]
    assert tbo.ttft_s < plain.ttft_s and tbo.tpot_s <= plain.tpot_s
    comm = tbo.to_dict()["communication"]
    assert (comm["prefill"]["ep_kernels"], comm["decode_step"]["ep_kernels"]) == (
        "normal",
        "low-latency",
    )
    assert "two-batch overlap" in comm["prefill"]["ep_backend"]


def test_cli_and_serving_flags_read_vllm_names_alike() -> None:
    # `simulate --all2all-backend NAME` and a replayed `vllm serve ... --all2all-backend NAME`
    # read one map (VLLM_ALL2ALL_BACKENDS); pplx is priced as the plain all-to-all
    from tokenprobe.cli.ep_options import ep_comm_option

    for name in VLLM_ALL2ALL_BACKENDS:
        cli = ep_comm_option(name, "auto", False, 0)
        assert cli == ep_comm_from_flags(f"vllm serve m --all2all-backend {name}"), name
    assert ep_comm_option("pplx", "auto", False, 0).backend == "all-to-all"
