"""The older decoders the public validation tables run (issue 18 items 1-2): GPT-J, OPT, BLOOM,
Aquila, Falcon-180B, and DeciLM's per-layer KV heads.

Every count is derived by hand from the model's published architecture (the derivation is in each
test) and then checked against the catalog entry read from its transcribed config.json; the
catalog tests (test_model_catalog.py) check the same entries against the publishers' figures.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.model import from_hf_config, get_model, uniform_gqa
from tokenprobe.units import KiB

BF16 = 2  # bytes per KV element


def test_gpt_j_parallel_block_counts_and_kv() -> None:
    """GPT-J-6B: n_embd 4096, 16 heads of 256, 28 layers, n_inner None -> 16,384, vocab 50,400.
    Per layer: q/k/v/out_proj without biases 4 x 4096² = 67,108,864; fc_in + fc_out with biases
    2 x 4096 x 16,384 + 16,384 + 4096 = 134,238,208; one LayerNorm (ln_1, weight + bias) 8192
    -> 201,355,264. x 28 = 5,637,947,392; + wte 50,400 x 4096 = 206,438,400, an untied lm_head
    of the same size plus its 50,400 biases, ln_f 8192 -> 6,050,882,784 (the card: 6,053,381,344,
    0.04 % more). KV: 2 x 16 x 256 x 28 layers x 2 B = 448 KiB per token."""
    m = get_model("EleutherAI/gpt-j-6b")
    assert m.params_total == 6_050_882_784
    assert abs(m.params_total - 6_053_381_344) / 6_053_381_344 < 0.01
    assert m.kv_bytes_per_token_per_gpu(BF16, 1) == 448 * KiB
    assert (m.norms_per_layer, m.gated_mlp, m.lm_head_bias) == (1, False, True)


def test_opt_learned_positions_are_parameters() -> None:
    """OPT-6.7B: hidden 4096, 32 heads, 32 layers, ffn_dim 16,384 (ReLU, no gate), vocab 50,272.
    Per layer: q/k/v/out_proj with biases 4 x (4096² + 4096) = 67,125,248; fc1 + fc2 with biases
    134,238,208; two LayerNorms 16,384 -> 201,379,840. x 32 = 6,444,154,880; + embed_tokens
    50,272 x 4096 = 205,914,112 (lm_head tied); + the learned position table of 2048 + 2 rows
    (offset 2) x 4096 = 8,396,800; + final LayerNorm 8192 -> 6,658,473,984 (paper: 6.7B).
    KV: 2 x 32 x 128 x 32 x 2 B = 512 KiB per token."""
    m = get_model("facebook/opt-6.7b")
    assert m.position_embedding_params == 2050 * 4096
    assert m.params_total == 6_658_473_984
    assert m.kv_bytes_per_token_per_gpu(BF16, 1) == 512 * KiB


def test_bloom_embedding_norm_and_alibi() -> None:
    """BLOOM-7b1: hidden 4096, 32 heads, 30 layers, vocab 250,880, ALiBi (no position weights).
    Per layer: query_key_value 4096 x 12,288 + 12,288 = 50,343,936; dense 4096² + 4096 =
    16,781,312; MLP 2 x 4096 x 16,384 + 16,384 + 4096 = 134,238,208; two LayerNorms 16,384 ->
    201,379,840. x 30 = 6,041,395,200; + word_embeddings 1,027,604,480 (tied) + its LayerNorm
    8192 + ln_f 8192 = 7,069,016,064, the model card's count exactly. KV: 2 x 32 x 128 x 30 x 2 B
    = 480 KiB per token."""
    m = get_model("bigscience/bloom-7b1")
    assert m.params_total == 7_069_016_064
    assert m.position_embedding_params == 0
    assert m.kv_bytes_per_token_per_gpu(BF16, 1) == 480 * KiB


def test_aquila_is_read_as_llama() -> None:
    """Aquila-7B: Llama's layers, hidden 4096, MLP 11,008 (SwiGLU), 32 MHA heads, vocab 100,008.
    Per layer: 4 x 4096² + 3 x 4096 x 11,008 + 2 x 4096 = 202,383,360; x 32 = 6,476,267,520;
    + embedding and untied head 2 x 100,008 x 4096 = 819,265,536 + final norm 4096 =
    7,295,537,152."""
    m = get_model("BAAI/Aquila-7B")
    assert m.params_total == 7_295_537_152
    assert m.architecture == "dense MHA"


def test_falcon_180b_gqa_kv_bytes() -> None:
    """Falcon-180B: new_decoder_architecture, 232 heads of 64, 8 KV heads, 80 layers, hidden
    14,848. KV: 80 layers x 8 KV heads x 64 x 2 (K, V) x 2 B = 163,840 B = 160 KiB per token.
    Per layer: query_key_value 14,848 x (232 + 2 x 8) x 64 = 235,667,456; dense 14,848² =
    220,463,104; MLP 2 x 14,848 x 59,392 = 1,763,704,832; ln_attn + ln_mlp with biases 59,392
    -> 2,219,894,784. x 80 + embedding 65,024 x 14,848 = 965,476,352 (tied) + ln_f 29,696 =
    178,557,088,768 (TII: 180B, 0.8 % more). Under tp 8 each GPU holds one KV head: 20 KiB."""
    m = get_model("tiiuae/falcon-180B")
    assert m.kv_bytes_per_token_per_gpu(BF16, 1) == 80 * 8 * 64 * 2 * 2 == 160 * KiB
    assert m.params_total == 178_557_088_768
    assert m.architecture == "dense GQA"
    assert m.kv_bytes_per_token_per_gpu(BF16, 8) == 20 * KiB


# ---- DeciLM's variable GQA: per-layer KV heads ---------------------------------------------
def test_decilm_7b_per_layer_kv_heads() -> None:
    """DeciLM-7B: Llama's layers (hidden 4096, 32 heads of 128, SwiGLU 14,336, vocab 32,000,
    untied) with num_key_value_heads_per_layer 4,4,4,4,4, 2 x5, 4, 2 x9, 1 x11, 4: 67 KV heads
    over the 32 layers. KV: 2 x 128 x 67 x 2 B = 34,304 B per token (a uniform 4 would be
    65,536). Parameters: per layer q + o 2 x 4096² = 33,554,432, MLP 3 x 4096 x 14,336 =
    176,160,768, norms 8192 -> 209,723,392 x 32 = 6,711,148,544; k + v 2 x 4096 x 128 =
    1,048,576 per KV head x 67 = 70,254,592; embedding + head 2 x 32,000 x 4096 = 262,144,000;
    final norm 4096 -> 7,043,551,232 (the card: 7.04 billion)."""
    m = get_model("Deci/DeciLM-7B")
    assert sum(m.kv_heads_per_layer) == 67 and m.kv_head_counts == (1, 2, 4)
    assert m.kv_bytes_per_token_per_gpu(BF16, 1) == 2 * 128 * 67 * BF16 == 34_304
    assert m.params_total == 7_043_551_232
    assert uniform_gqa(m).kv_bytes_per_token_per_gpu(BF16, 1) == 2 * 128 * 4 * 32 * BF16
    assert get_model("Deci/DeciLM-7B-instruct").params_total == m.params_total


DECI: dict[str, Any] = {  # DeciLM's keys on a small shape (4 layers of 8 heads of 32)
    "model_type": "deci",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads_per_layer": [4, 2, 2, 1],
    "intermediate_size": 512,
    "vocab_size": 1000,
}


def test_per_layer_kv_heads_are_per_layer_parts() -> None:
    """KV per token: 2 x 32 x (4 + 2 + 2 + 1) x 2 B = 1152 B, where a uniform 4 would be 2048 B.
    Parameters: each layer's k/v projections are 2 x 256 x 32 x kv; q/o 2 x 256² and the SwiGLU
    MLP 3 x 256 x 512 are the same in every layer."""
    m = from_hf_config(DECI)
    assert [layer.mixer.kv_heads for layer in m.layers] == [4, 2, 2, 1]  # type: ignore[union-attr]
    assert m.kv_bytes_per_token_per_gpu(BF16, 1) == 2 * 32 * 9 * BF16 == 1152
    assert m.num_kv_heads == 4 and m.kv_head_counts == (1, 2, 4)
    per_layer_fixed = 2 * 256 * 256 + 3 * 256 * 512 + 2 * 256
    kv = 2 * 256 * 32 * 9
    assert m.params_total == 4 * per_layer_fixed + kv + 2 * 1000 * 256 + 256
    uniform = uniform_gqa(m)  # how vLLM serves it: every layer at the widest layer's 4
    assert uniform.kv_bytes_per_token_per_gpu(BF16, 1) == 2 * 32 * 4 * 4 * BF16
    assert uniform_gqa(uniform) is uniform


def test_tensor_parallel_split_checks_each_layers_kv_heads() -> None:
    """tp 4 divides 4 and is a multiple of 2 and 1 (those layers replicate their KV heads);
    tp 3 divides none of them and is refused, naming tp."""
    m = from_hf_config(DECI | {"num_attention_heads": 8})
    assert make_deployment(m, "h100-sxm", tp=4).tp == 4
    with pytest.raises(ConfigError) as info:
        make_deployment(from_hf_config(DECI | {"num_attention_heads": 12,
                                               "hidden_size": 384}), "h100-sxm", tp=3)  # fmt: skip
    assert info.value.field == "tp"


@pytest.mark.parametrize(
    ("counts", "why"),
    [([4, 2, 2], "one per layer"), ([4, 3, 2, 1], "divide"), ([4, 2, 2, 0], "divide")],
)
def test_bad_per_layer_kv_heads_are_refused(counts: list[int], why: str) -> None:
    with pytest.raises(ConfigError) as info:
        from_hf_config(DECI | {"num_key_value_heads_per_layer": counts})
    assert info.value.field == "num_key_value_heads_per_layer"
    assert why in info.value.allowed


def test_opt_with_projected_embeddings_is_refused() -> None:
    """OPT-350m's 512-wide embeddings with project_in/out layers are not modelled: refused."""
    cfg = json.loads(json.dumps(_catalog_config("opt-6.7b")))
    with pytest.raises(ConfigError) as info:
        from_hf_config(cfg | {"word_embed_proj_dim": 512})
    assert (info.value.field, info.value.value) == ("word_embed_proj_dim", 512)


def _catalog_config(name: str) -> dict[str, Any]:
    from tokenprobe.model import CATALOG_DIR

    cfg: dict[str, Any] = json.loads((CATALOG_DIR / f"{name}.json").read_text())
    return cfg


# ---- the catalog listing and the HF ids the validation tables name --------------------------
@pytest.mark.parametrize(
    ("hf_id", "name", "kind"),
    [
        ("EleutherAI/gpt-j-6b", "gpt-j-6b", "dense MHA"),
        ("facebook/opt-6.7b", "opt-6.7b", "dense MHA"),
        ("bigscience/bloom-7b1", "bloom-7b1", "dense MHA"),
        ("BAAI/Aquila-7B", "aquila-7b", "dense MHA"),
        ("tiiuae/falcon-180B", "falcon-180b", "dense GQA"),
        ("Deci/DeciLM-7B", "decilm-7b", "dense GQA+MQA"),
    ],
)
def test_models_lists_them_with_their_kind(hf_id: str, name: str, kind: str) -> None:
    listed = json.loads(CliRunner().invoke(app, ["models", "--json"]).stdout)["models"]
    row = next(r for r in listed if r["name"] == name)
    assert (row["hf_id"], row["architecture"]) == (hf_id, kind)
    assert get_model(hf_id).params_total == row["params_total"]
