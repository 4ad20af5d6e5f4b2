"""MLA attention: the absorbed decode FLOP per token, and the era factor `mla_attention`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenprobe.cost import BatchShape, Efficiency, make_deployment, op_costs, step_cost
from tokenprobe.errors import ConfigError

CTX = 4096


def _attention(dep: object, shape: BatchShape) -> object:
    return next(o for o in op_costs(dep, shape) if o.name == "attention")  # type: ignore[arg-type]


def test_absorbed_mla_decode_flop_per_token_by_hand() -> None:
    # DeepSeek-V3 config.json: 128 heads, kv_lora_rank 512, qk_rope_head_dim 64, 61 layers.
    # Absorbed decode (DeepSeek-V2 paper sec. 2.1.3): q·[c_kv; k_rope] over 512 + 64 elements and
    # p·c_kv over 512 per head per context token, 2 FLOP a multiply-add; TP 8 leaves 16 heads a
    # GPU: 2 * 16 * (512 + 64 + 512) = 34,816 FLOP per context token per layer.
    dep = make_deployment("deepseek-v3", "h200", tp=8, weight_dtype="fp8")
    ops = [o for o in op_costs(dep, BatchShape.decode(1, CTX)) if o.name == "attention"]
    assert sum(o.layers for o in ops) == 61
    assert sum(o.flop for o in ops) == pytest.approx(61 * CTX * 2 * 16 * (512 + 64 + 512))
    # ... over a latent cache of 576 fp8 bytes per token per layer (every TP rank holds it all)
    kv_read = sum(o.hbm_bytes for o in ops)
    assert kv_read >= 61 * CTX * 576
    assert kv_read < 61 * CTX * 576 * 1.05  # plus the new token's entry and q/o activations


@pytest.mark.parametrize("shape", [BatchShape.decode(64, 64 * CTX), BatchShape.prefill(4096)])
def test_mla_attention_factor_slows_only_the_attention_of_mla_models(shape: BatchShape) -> None:
    dep = make_deployment("deepseek-v3", "h200", tp=8, weight_dtype="fp8")
    slow = replace(dep, efficiency=Efficiency(mla_attention=0.25))
    base, slowed = _attention(dep, shape), _attention(slow, shape)
    # both roofline rates divide by 4 (the era's kernels reach a quarter of each)
    assert slowed.compute_s == pytest.approx(4 * base.compute_s)  # type: ignore[attr-defined]
    assert slowed.memory_s == pytest.approx(4 * base.memory_s)  # type: ignore[attr-defined]
    others = {o.name: o.time_s for o in op_costs(dep, shape) if o.name != "attention"}
    assert others == {o.name: o.time_s for o in op_costs(slow, shape) if o.name != "attention"}
    # a GQA model has no MLA layer: the factor changes nothing
    gqa = make_deployment("llama-3.1-8b", "h100-sxm")
    gqa_slow = replace(gqa, efficiency=Efficiency(mla_attention=0.25))
    assert step_cost(gqa, shape).time_s == step_cost(gqa_slow, shape).time_s


def _ops(dep: object, shape: BatchShape, name: str) -> list[object]:
    return [o for o in op_costs(dep, shape) if o.name == name]  # type: ignore[arg-type]


def test_absorbed_prefill_prices_the_prompt_pairs_in_the_latent_form_by_hand() -> None:
    # A 1000-token prompt has 1000 * 1001 / 2 = 500,500 causal query-key pairs. MHA form (the
    # default, vLLM's prefill): q·k over 128 + 64 and p·v over 128 per head, 2 FLOP a
    # multiply-add, 16 heads a GPU at TP 8: 2 * 16 * (192 + 128) = 10,240 FLOP a pair. Absorbed
    # form (SGLang 0.4's Triton extend with a cached prefix): decode's 2 * 16 * (512 + 64 + 512)
    # = 34,816 FLOP a pair, 3.4x, in its own operator.
    dep = make_deployment("deepseek-v3", "h200", tp=8, weight_dtype="fp8")
    shape = BatchShape.prefill(1000)
    pairs = 1000 * 1001 / 2
    mha = sum(o.flop for o in _ops(dep, shape, "attention"))  # type: ignore[attr-defined]
    assert mha == pytest.approx(61 * pairs * 2 * 16 * (192 + 128))
    assert not _ops(dep, shape, "latent_prefill")
    absorbed = replace(dep, efficiency=Efficiency(mla_absorbed_prefill=1.0))
    latent = _ops(absorbed, shape, "latent_prefill")
    assert sum(o.flop for o in latent) == pytest.approx(61 * pairs * 2 * 16 * (512 + 64 + 512))  # type: ignore[attr-defined]
    assert sum(o.flop for o in _ops(absorbed, shape, "attention")) == 0.0  # type: ignore[attr-defined]
    # half absorbed: half the pairs in each form
    half = replace(dep, efficiency=Efficiency(mla_absorbed_prefill=0.5))
    assert sum(o.flop for o in _ops(half, shape, "latent_prefill")) == pytest.approx(  # type: ignore[attr-defined]
        61 * pairs / 2 * 2 * 16 * 1088
    )
    # a decode step has no prompt pairs: nothing moves
    decode = BatchShape.decode(32, 32 * CTX)
    assert step_cost(absorbed, decode).time_s == step_cost(dep, decode).time_s


def test_latent_prefill_runs_at_its_own_kernel_rate() -> None:
    dep = make_deployment("deepseek-v3", "h200", tp=8, weight_dtype="fp8")
    shape = BatchShape.prefill(4096)
    fast = replace(dep, efficiency=Efficiency(mla_absorbed_prefill=1.0))
    slow = replace(dep, efficiency=Efficiency(mla_absorbed_prefill=1.0, mla_latent_prefill=0.1))
    (a,), (b,) = (
        [o for o in _ops(d, shape, "latent_prefill") if o.layers == 58] for d in (fast, slow)
    )
    # a tenth of the rate: ten times the compute time of the same FLOP; it reads no HBM
    assert b.compute_s == pytest.approx(10 * a.compute_s)  # type: ignore[attr-defined]
    assert a.hbm_bytes == b.hbm_bytes == 0.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "value"),
    [("mla_absorbed_prefill", 1.5), ("mla_absorbed_prefill", -0.1), ("mla_latent_prefill", 0.0)],
)
def test_absorbed_prefill_share_and_rate_are_checked(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        Efficiency(**{field: value})
