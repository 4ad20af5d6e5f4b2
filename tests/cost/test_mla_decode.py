"""SGLang 0.4's Triton MLA decode kernel reads the latent once per 16 heads (cost/mla_decode.py):
TP8 (16 of DeepSeek-V3's 128 heads a GPU) reads it once, a DP-attention rank (all 128) 8 times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenprobe.cost import BatchShape, Deployment, Efficiency, make_deployment, op_costs
from tokenprobe.cost.mla_decode import head_block_passes
from tokenprobe.errors import ConfigError

SGLANG_04 = Efficiency(mla_decode_head_block=16)
SHAPE = BatchShape(decode_seqs=16, decode_context_tokens=16 * 1000)


V3 = ("deepseek-v3", "h200")
KW = {"weight_dtype": "fp8", "kv_dtype": "bf16"}


def _dp() -> Deployment:
    return make_deployment(*V3, tp=8, expert_parallel=True, attention_dp=True, **KW)


def _bytes(dep: Deployment, name: str) -> float:
    return sum(o.hbm_bytes for o in op_costs(dep, SHAPE) if o.name == name)


@pytest.mark.parametrize(("heads", "block", "passes"), [(16, 16, 1), (128, 16, 8), (20, 16, 2)])
def test_passes_are_heads_over_the_block_rounded_up(heads: int, block: int, passes: int) -> None:
    assert head_block_passes(heads, block) == passes
    assert head_block_passes(heads, 0) == 1  # a kernel that reads the cache once


def test_a_dp_attention_rank_reads_the_latent_eight_times_by_hand() -> None:
    """One DP rank of 8 (attention TP 1, 128 heads) decoding 2 of the step's 16 sequences, 1000
    cached tokens each, a 16-bit cache: 7 more passes x 2 x 1000 tokens x 576 latent elements
    x 2 bytes x 61 layers = 983,808,000 bytes; under TP8 (16 heads a GPU) no second pass."""
    dp = _dp()
    dp = replace(dp, efficiency=SGLANG_04)
    assert _bytes(dp, "latent_rereads") == pytest.approx(7 * 2 * 1000 * 576 * 2 * 61)
    tp = replace(make_deployment(*V3, tp=8, **KW), efficiency=SGLANG_04)
    assert _bytes(tp, "latent_rereads") == 0.0
    plain = replace(dp, efficiency=Efficiency())  # 0: no re-reads (the default)
    assert _bytes(plain, "latent_rereads") == 0.0
    assert _bytes(plain, "attention") == pytest.approx(_bytes(dp, "attention"))


def test_the_rereads_run_at_the_attention_rate() -> None:
    """They are the same kernel: time / bytes equals the attention operator's memory rate."""
    dp = _dp()
    dp = replace(dp, efficiency=replace(SGLANG_04, attention_memory=0.5, mla_attention=0.5))
    ops = {o.name: o for o in op_costs(dp, SHAPE)}
    reread = ops["latent_rereads"]
    assert reread.memory_s == pytest.approx(reread.hbm_bytes / (dp.gpu.hbm_bytes_per_s * 0.25))


@pytest.mark.parametrize("value", [-1.0, 2000.0, float("nan")])
def test_the_head_block_is_checked(value: float) -> None:
    with pytest.raises(ConfigError, match="mla_decode_head_block"):
        Efficiency(mla_decode_head_block=value)
