"""One step of data-parallel attention ranks sharing expert-parallel MoE layers (cost/dpep.py):
the all-to-all bytes and the weights per GPU by hand for Qwen3-30B-A3B on four H100s, the step
as the slowest rank plus the shared MoE, and the single-replica model where they must agree."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from tokenprobe.cost import (
    DUMMY_BATCH,
    BatchShape,
    expert_rows,
    gang_step,
    make_deployment,
    op_costs,
    rank_work_s,
    shared_moe_s,
    shared_parts_s,
    step_cost,
)
from tokenprobe.cost.memory import weights_bytes_per_gpu
from tokenprobe.cost.step import host_time_s
from tokenprobe.cost.stepcomm import dispatch_volume
from tokenprobe.errors import ConfigError


# Qwen3-30B-A3B (catalog config): hidden 2048, 48 layers, 128 experts of 3 x 2048 x 768, top-8,
# 32 query heads and 4 KV heads of 128, vocabulary 151,936 (untied head)
def _f_random(n: int, copies: float) -> float:
    """The busiest of n EP GPUs' copies over the mean under random routing, `copies` a GPU
    (cost/epbalance.py): 1 + (z + (z² − 1)/(6·√copies))·√((1 − 1/n)/copies), z Blom's
    Φ⁻¹((n − 0.375)/(n + 0.25)), the Poisson skewness 1/√copies moving it (Cornish-Fisher)."""
    z = NormalDist().inv_cdf((n - 0.375) / (n + 0.25))
    return 1 + (z + (z * z - 1) / (6 * math.sqrt(copies))) * math.sqrt((1 - 1 / n) / copies)


DP4 = make_deployment("qwen3-30b-a3b", "h100-sxm", tp=4, expert_parallel=True, attention_dp=True)
PLAIN = make_deployment("qwen3-30b-a3b", "h100-sxm")


def test_each_rank_holds_the_dense_weights_and_a_quarter_of_the_experts() -> None:
    """Experts: 48 x 128 x 3 x 2048 x 768 = 28,991,029,248 parameters. The rest: per layer q
    2048 x 4096 + k, v 2 x 2048 x 512 + o 4096 x 2048 + router 2048 x 128 = 19,136,512, x 48
    = 918,552,576, plus embedding and LM head 2 x 151,936 x 2048 = 622,329,856. In bf16 a rank
    holds 2 B x (1,540,882,432 + 28,991,029,248 / 4) = 17,577,279,488 B; one GPU alone all of
    it, 61,063,823,360 B."""
    assert weights_bytes_per_gpu(DP4) == 2 * (1_540_882_432 + 28_991_029_248 // 4)
    assert weights_bytes_per_gpu(PLAIN) == 2 * (1_540_882_432 + 28_991_029_248)
    # KV: 48 layers x 4 heads x 128 x (K, V) x 2 B per token, on the one rank that holds it
    assert DP4.kv_bytes_per_token_per_gpu * DP4.dp == 98_304


def test_the_all_to_all_moves_the_largest_ranks_tokens() -> None:
    """A rank of 64 tokens sends 64 x 2048 x 2 B x 8 experts x 3/4 (to the other three GPUs) =
    1,572,864 B per all-to-all, twice per MoE layer: 96 per step. Each moves at NVLink's
    450 GB/s x the link efficiency, and the busiest of the 4 receivers takes f times the mean
    (cost/epbalance.py: 256 tokens x 8 copies / 4 GPUs = 512 a GPU, skew 0, so
    f = 1 + z'·√(3/4 / 512), z' = z_4 + (z_4² − 1)/(6·√512) with z_4 = Φ⁻¹(3.625/4.25) =
    1.0494: 1.0402); so 48 more tokens on
    the largest rank cost 96 x 48 x 24,576 B x f / (450 GB/s x η) more, whatever the other
    ranks hold."""
    assert dispatch_volume(DP4, 64 * 2048 * 2) == (1_572_864, 96)
    rate = 450e9 * DP4.efficiency.link
    f = _f_random(4, 512)
    assert f == pytest.approx(1.0402, abs=1e-4)
    extra = shared_moe_s(DP4, 256, 64) - shared_moe_s(DP4, 256, 16)
    assert extra == pytest.approx(96 * 48 * 24_576 * f / rate, rel=1e-9)
    assert dispatch_volume(PLAIN, 1e6) == (0.0, 0)  # one GPU: nothing to exchange


def test_the_step_is_the_slowest_rank_plus_the_shared_moe() -> None:
    shapes = [BatchShape.decode(48, 2000), BatchShape.decode(16, 500), BatchShape.prefill(256)]
    step = gang_step(DP4, [*shapes, None])
    batches = [*shapes, DUMMY_BATCH]
    work = [rank_work_s(DP4, s) for s in batches]
    tokens = [s.tokens for s in batches]
    shared = shared_moe_s(DP4, sum(tokens), max(tokens))
    assert step.work_s == pytest.approx(work, rel=1e-12)
    assert step.time_s == pytest.approx(max(work) + shared, rel=1e-12)
    slowest = work.index(max(work))
    assert step.wait_s[slowest] == pytest.approx(0.0, abs=1e-15)
    for w, wait in zip(work, step.wait_s, strict=True):
        assert wait == pytest.approx(max(work) - w, abs=1e-12)


def test_equal_ranks_are_the_balanced_model_and_one_rank_is_one_gpu() -> None:
    """N equal batches are what step_cost prices under attention DP (each GPU 1/N of the
    summed batch); one rank with the experts all on it is the plain single-GPU step."""
    rank = BatchShape.decode(32, 1000)
    together = BatchShape.decode(128, 1000)
    assert gang_step(DP4, [rank] * 4).time_s == pytest.approx(
        step_cost(DP4, together).time_s, rel=1e-12
    )
    one = make_deployment("qwen3-30b-a3b", "h100-sxm", expert_parallel=True, attention_dp=True)
    for shape in (rank, BatchShape.prefill(2048)):
        assert gang_step(one, [shape]).time_s == pytest.approx(
            step_cost(PLAIN, shape).time_s, rel=1e-12
        )


def test_a_lone_busy_rank_makes_the_others_wait() -> None:
    """All the work on rank 0: the other three run the one-token dummy batch and wait the
    difference; the step is longer than the same tokens spread evenly."""
    alone = gang_step(DP4, [BatchShape.decode(128, 1000), None, None, None])
    spread = gang_step(DP4, [BatchShape.decode(32, 1000)] * 4)
    dummy = rank_work_s(DP4, DUMMY_BATCH)
    assert alone.wait_s[0] == pytest.approx(0.0, abs=1e-15)
    for wait in alone.wait_s[1:]:
        assert wait == pytest.approx(alone.work_s[0] - dummy, rel=1e-12)
        assert wait > 0
    assert alone.time_s > spread.time_s


def test_a_batch_per_rank_is_required() -> None:
    with pytest.raises(ConfigError, match="4 ranks"):
        gang_step(DP4, [None, None])


def test_across_two_servers_the_all_to_all_waits_for_the_nics() -> None:
    """DeepSeek-V3 (hidden 7168, top-8, 58 MoE layers: 116 all-to-alls a step) with DP16 + EP
    on two HGX H200 servers: of the bytes a GPU sends, 8 of every 15 go to the other server's
    GPUs over its 400 Gb/s NIC (50 GB/s), the rest over NVLink at the same time, and the NIC is
    the slower path. So 48 more tokens on the largest rank cost 116 x 48 x 7168 x 2 B x 8 x
    15/16 x 8/15 / (50 GB/s x η), times the busiest receiver's excess over the mean (1,024
    tokens x 8 copies / 16 GPUs = 512 a GPU at skew 0: f = 1 + z'·√(15/16 / 512), z' = z_16 +
    (z_16² − 1)/(6·√512), z_16 = Φ⁻¹(15.625/16.25) = 1.7688: 1.0764); on one server (DP8) the
    same tokens cost only NVLink's
    116 x 48 x 7168 x 2 B x 8 x 7/8 / (450 GB/s x η), times its own f (8 GPUs, 1,024 a GPU)."""
    kw = dict(expert_parallel=True, attention_dp=True, weight_dtype="fp8")
    two = make_deployment("deepseek-v3", "h200", tp=16, **kw)  # type: ignore[arg-type]
    one = make_deployment("deepseek-v3", "h200", tp=8, **kw)  # type: ignore[arg-type]
    assert two.nodes == 2 and one.nodes == 1
    eta = two.efficiency.link
    row = 7168 * 2 * 8
    across = shared_moe_s(two, 1024, 64) - shared_moe_s(two, 1024, 16)
    f16 = _f_random(16, 512)
    assert f16 == pytest.approx(1.0764, abs=1e-4)
    nic_s = 116 * 48 * row * 15 / 16 * 8 / 15 / (50e9 * eta)
    assert across == pytest.approx(nic_s * f16, rel=1e-9)
    inside = shared_moe_s(one, 1024, 64) - shared_moe_s(one, 1024, 16)
    f8 = _f_random(8, 1024)
    assert inside == pytest.approx(116 * 48 * row * 7 / 8 / (450e9 * eta) * f8, rel=1e-9)


DP2_TP2 = make_deployment(
    "qwen3-30b-a3b", "h100-sxm", tp=4, expert_parallel=True, attention_dp=True, dp_ranks=2
)


def test_ranks_of_two_gpus_split_attention_and_share_the_experts() -> None:
    """vLLM --data-parallel-size 2 --tensor-parallel-size 2 --enable-expert-parallel on four
    GPUs: a rank splits its attention, dense weights, embedding and head two ways (the router,
    2048 x 128 a layer, is replicated), and each GPU holds a quarter of the experts:
    2 B x ((1,540,882,432 − 12,582,912) / 2 + 12,582,912 + 28,991,029,248 / 4). A token's KV
    is split over the rank's two GPUs: 98,304 / 2 B on each."""
    assert (DP2_TP2.dp, DP2_TP2.dense_tp) == (2, 2)
    router = 48 * 2048 * 128
    dense = 1_540_882_432
    expected = 2 * ((dense - router) // 2 + router + 28_991_029_248 // 4)
    assert weights_bytes_per_gpu(DP2_TP2) == expected
    assert DP2_TP2.kv_bytes_per_token_per_gpu * DP2_TP2.dp == 98_304 / 2


def test_a_ranks_all_reduces_and_its_split_dispatch() -> None:
    """A rank of 64 decode tokens all-reduces 64 x 2048 x 2 B = 262,144 B over its two GPUs
    twice per layer, 96 times: each a ring of 2 x 1/2 of the bytes at 450 GB/s x η plus the
    link latency. Its GPUs dispatch 32 tokens each (vLLM's sequence-parallel MoE):
    32 x 2048 x 2 B x 8 x 3/4 = 786,432 B; the busiest of the 4 EP GPUs receives f = 1.0402
    times the mean at 256 tokens a step (test_the_all_to_all_moves_the_largest_ranks_tokens)."""
    shape = BatchShape.decode(64, 1000)
    ops = op_costs(DP2_TP2, BatchShape.decode(128, 1000))  # two ranks of this shape
    shared = ("experts", "expert_excess")  # the EP GPUs' rows, the busiest one's excess too
    own = sum(o.time_s for o in ops if o.name not in shared) + host_time_s(DP2_TP2, shape)
    ring = DP2_TP2.gpu.link.latency_s + 262_144 / (450e9 * DP2_TP2.efficiency.link)
    assert rank_work_s(DP2_TP2, shape) - own == pytest.approx(96 * ring, rel=1e-9)
    assert dispatch_volume(DP2_TP2, 64 * 2048 * 2 / 2) == (786_432, 96)
    rate = 450e9 * DP2_TP2.efficiency.link
    extra = shared_moe_s(DP2_TP2, 256, 64) - shared_moe_s(DP2_TP2, 256, 16)
    f = _f_random(4, 512)
    assert extra == pytest.approx(96 * 24 * 24_576 / rate * f, rel=1e-9)  # 48 more, 24 a GPU
    balanced = gang_step(DP2_TP2, [shape, shape]).time_s
    assert balanced == pytest.approx(
        step_cost(DP2_TP2, BatchShape.decode(128, 1000)).time_s, rel=1e-12
    )


def test_padding_makes_one_ranks_prefill_expert_work_for_every_rank() -> None:
    """vLLM pads every rank to the largest rank's tokens (cost/dpep.py): a 512-token prompt on
    rank 0 while ranks 1-3 run one-token dummies is 4 x 512 = 2,048 expert rows padded, 512 +
    3 = 515 not. The ranks' own work (max_r work_r) does not change; the shared layers are
    priced for 2,048 rows (each GPU still sends the largest rank's 512 tokens, the busiest
    receiver's excess now that of a 2,048-token step), so the padded step is longer by exactly
    the shared layers' difference."""
    shapes = [BatchShape.prefill(512), None, None, None]
    padded, plain = gang_step(DP4, shapes, padded=True), gang_step(DP4, shapes)
    assert expert_rows(DP4, 515, 512, padded=True) == 2048
    assert expert_rows(DP4, 515, 512, padded=False) == 515
    experts_padded, a2a_padded = shared_parts_s(DP4, 2048, 512, True)
    experts_plain, a2a_plain = shared_parts_s(DP4, 515, 512, True)
    assert padded.work_s == plain.work_s
    # 4x the rows, though not 4x the time: at ~500 rows a GPU's 32 experts are still mostly
    # read, not computed (48 layers x 32 x 3 x 2048 x 768 x 2 B = 14.5 GB a step)
    assert experts_padded > experts_plain
    extra = experts_padded + a2a_padded - experts_plain - a2a_plain
    assert padded.time_s - plain.time_s == pytest.approx(extra, rel=1e-9)


def test_padding_changes_nothing_when_the_ranks_hold_equal_batches() -> None:
    """Four ranks of 64 decoding sequences each: the largest rank's 64 x 4 ranks is the sum, so
    the padded step is the unpadded one (and step_cost's, as the N-equal-ranks test has it)."""
    shape = BatchShape(decode_seqs=64, decode_context_tokens=64 * 1024)
    padded, plain = gang_step(DP4, [shape] * 4, padded=True), gang_step(DP4, [shape] * 4)
    assert padded.time_s == pytest.approx(plain.time_s, rel=1e-12)
