"""Checkpoints that quantize only the routed experts (gpt-oss MXFP4) keep the rest in 16 bits.

openai/gpt-oss-120b config.json: quantization_config {quant_method: mxfp4,
modules_to_not_convert: [model.layers.*.self_attn, model.layers.*.mlp.router,
model.embed_tokens, lm_head]}. The figures below are derived by hand from that config:
hidden 2880, 64 query heads and 8 KV heads of 64, 128 experts, 36 layers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenprobe.cost import BatchShape, make_deployment
from tokenprobe.cost.memory import weights_bytes_per_gpu
from tokenprobe.cost.ops import dense_weight_bytes, layer_terms
from tokenprobe.model import get_model
from tokenprobe.model.hf_config import from_hf_config

MXFP4_BYTES = 0.5 + 1 / 32  # e2m1 values plus one e8m0 scale per 32 (OCP MX v1.0)
H, LAYERS = 2880, 36
QKV = H * (64 * 64 + 2 * 8 * 64)  # 14,745,600 weights
O_PROJ = 64 * 64 * H  # 11,796,480
ROUTER = H * 128  # 368,640


def _deps(tp: int = 1) -> tuple[object, object]:
    model = get_model("gpt-oss-120b")
    as_is = make_deployment(model, "h200-sxm", tp=tp, weight_dtype="mxfp4")
    all_mxfp4 = make_deployment(
        replace(model, experts_only_quant=""), "h200-sxm", tp=tp, weight_dtype="mxfp4"
    )
    return as_is, all_mxfp4


def test_catalog_reads_the_checkpoint_rule() -> None:
    assert get_model("gpt-oss-120b").experts_only_quant == "mxfp4"
    assert get_model("gpt-oss-20b").experts_only_quant == "mxfp4"
    assert get_model("deepseek-v3").experts_only_quant == ""  # fp8 blocks everywhere


@pytest.mark.parametrize(
    "quant",
    [
        {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},  # attention quantized
        {"quant_method": "mxfp4"},
        {"quant_method": 4, "modules_to_not_convert": ["model.layers.*.self_attn"]},
        "mxfp4",
    ],
)
def test_other_configs_state_no_rule(quant: object) -> None:
    cfg = {
        "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512,
        "vocab_size": 1000, "quantization_config": quant,
    }  # fmt: skip
    assert from_hf_config(cfg).experts_only_quant == ""


def test_weights_in_memory() -> None:
    """At TP1 the 16-bit attention and router add (2 − 0.53125) B to each of their
    (14,745,600 + 11,796,480 + 368,640) x 36 = 968,785,920 weights: 1.42 GB (biases aside)."""
    as_is, all_mxfp4 = _deps()
    extra = weights_bytes_per_gpu(as_is) - weights_bytes_per_gpu(all_mxfp4)
    expected = (QKV + O_PROJ + ROUTER) * LAYERS * (2 - MXFP4_BYTES)
    assert extra == pytest.approx(expected, rel=1e-3)
    assert dense_weight_bytes(as_is) == 2.0
    assert dense_weight_bytes(all_mxfp4) == MXFP4_BYTES


def test_decode_step_reads_attention_weights_in_bf16() -> None:
    """qkv_proj and o_proj of a decode step read their weights once: under TP2 each GPU
    holds half of them, (14,745,600 + 11,796,480) / 2 x 36 layers, now at 2 B, not 0.53125."""
    as_is, all_mxfp4 = _deps(tp=2)
    shape = BatchShape.decode(8, 1000)

    def attn_bytes(dep: object) -> float:
        return sum(n * b for name, n, _, b, _ in layer_terms(dep, shape)  # type: ignore[arg-type]
                   if name in ("qkv_proj", "o_proj"))  # fmt: skip

    extra = attn_bytes(as_is) - attn_bytes(all_mxfp4)
    assert extra == pytest.approx((QKV + O_PROJ) / 2 * LAYERS * (2 - MXFP4_BYTES), rel=1e-3)


def test_other_formats_and_models_unchanged() -> None:
    """The rule holds for the checkpoint's own format only: gpt-oss run in fp8 (a
    requantized checkpoint) reads every weight in fp8; a dense model in MXFP4 likewise."""
    fp8 = make_deployment("gpt-oss-120b", "h200-sxm", weight_dtype="fp8")
    assert dense_weight_bytes(fp8) == 1.0
    dense = make_deployment("llama-3.1-8b", "h200-sxm", weight_dtype="mxfp4")
    assert dense_weight_bytes(dense) == MXFP4_BYTES


def test_hopper_upcast_hides_under_the_expert_read() -> None:
    """ops.py's docstring: with every expert touched (4096 decode rows), each H200 of a TP2
    gpt-oss-120b upcasts 3 x 2880 x 2880 / 2 x 128 x 36 = 57.33e9 weights once each, 3.125
    CUDA-core ops a weight (catalog/energy.toml): 1.79e11 ops, 5.3 ms at 33.5e12 lanes/s,
    under the 57.33e9 x 0.53125 B / 4.8 TB/s = 6.3 ms of reading them."""
    from tokenprobe.cost.energy_figures import energy_figures
    from tokenprobe.cost.step import dequant_ops

    dep, _ = _deps(tp=2)
    weights = 3 * H * H / 2 * 128 * LAYERS
    ops = dequant_ops(dep, BatchShape.decode(4096, 100), energy_figures(dep.gpu))  # type: ignore[arg-type]
    assert ops == pytest.approx(3.125 * weights, rel=1e-3)
    assert ops / 33.5e12 < weights * MXFP4_BYTES / dep.gpu.hbm_bytes_per_s  # type: ignore[attr-defined]
