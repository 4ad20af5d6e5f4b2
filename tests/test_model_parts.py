"""Architectures as parts (issue 18): each kind of layer is one object, a model a list of them.

Every figure below is derived by hand from the public config (in each docstring) and the
modeling code the part cites: transformers `Qwen3NextGatedDeltaNet` / `Qwen3NextAttention`,
`NemotronHMamba2Mixer`, DeepSeek-V3.2-Exp `Indexer`, vLLM's cache layouts.
"""

from __future__ import annotations

from typing import Any

import pytest

from tokenprobe.cost import BatchShape, make_deployment, memory_report, state_blocks_per_seq
from tokenprobe.cost.ops import layer_terms
from tokenprobe.errors import ConfigError
from tokenprobe.model import (
    Dsa,
    GatedDeltaNet,
    Gqa,
    Mamba2,
    Mla,
    Moe,
    from_hf_config,
    get_model,
)
from tokenprobe.sim import simulate
from tokenprobe.sim.base import SchedulerConfig, never_fits_reason
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Seq
from tokenprobe.workload import Arrival, LengthDist, RequestSpec, Workload


def _kinds(name: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for layer in get_model(name).layers:
        kind = type(layer.mixer).__name__ if layer.mixer is not None else "-"
        kind += "/" + (type(layer.ffn).__name__ if layer.ffn is not None else "-")
        counts[kind] = counts.get(kind, 0) + 1
    return counts


# ---- Qwen3-Next: 3 Gated DeltaNet : 1 gated attention, every layer MoE ----------------------


def test_qwen3_next_is_a_list_of_gdn_and_gated_attention_layers() -> None:
    m = get_model("qwen3-next-80b-a3b")
    assert _kinds("qwen3-next-80b-a3b") == {"GatedDeltaNet/Moe": 36, "Gqa/Moe": 12}
    assert [type(layer.mixer).__name__ for layer in m.layers[:4]] == [
        "GatedDeltaNet", "GatedDeltaNet", "GatedDeltaNet", "Gqa",
    ]  # fmt: skip
    assert m.architecture == "hybrid GDN+gated GQA MoE"


def test_qwen3_next_parameter_counts_by_hand() -> None:
    """hidden 2048. Gated DeltaNet: in_proj_qkvz 2048 x (2·2048 + 2·4096) + in_proj_ba
    2048 x 64 + conv 8192 x 4 + dt_bias, A_log 64 + norm 128 + out_proj 4096 x 2048
    = 33,718,464. Gated attention: q 2048 x 8192 (query + gate) + k, v 2048 x 512 each + o
    4096 x 2048 + q/k norms 512 = 27,263,488. MoE: router 2048 x 512 + 512 experts x 3 x 2048 x
    512 + shared 3 x 2048 x 512 + shared gate 2048 = 1,614,809,088. Norms 2 x 2048 per layer.
    36 x 1,648,531,648 + 12 x 1,642,076,672 + embeddings 2 x 151,936 x 2048 + final norm 2048
    = 79,674,391,296. Active: 10 routed experts: 36 x 69,376,192 + 12 x 62,921,216 + embeddings
    + final norm = 3,874,929,408."""
    m = get_model("qwen3-next-80b-a3b")
    layers = {type(layer.mixer): layer.mixer for layer in m.layers}
    assert layers[GatedDeltaNet].params() == 33_718_464
    assert layers[Gqa].params() == 27_263_488
    moe = m.layers[0].ffn
    assert isinstance(moe, Moe) and moe.params() == 1_614_809_088 - 2048
    assert m.params_total == 79_674_391_296
    assert m.params_active == 3_874_929_408


def test_qwen3_next_caches_kv_only_in_attention_layers_and_a_state_per_sequence() -> None:
    """KV per token: 12 attention layers x 2 x 2 KV heads x 256 = 12,288 elements (24 KiB in
    bf16; all 48 layers would be 96 KiB). State per sequence: 36 x (32 value heads x 128 x 128
    delta-rule matrix + 3 x 8192 conv) = 19,759,104 elements, whatever the context."""
    m = get_model("qwen3-next-80b-a3b")
    assert m.kv_elements_per_token == 12_288
    assert m.kv_elements_for_context(1000) == 1000 * 12_288
    assert m.state_elements_per_seq == 36 * (32 * 128 * 128 + 3 * 8192)


def test_gdn_splits_over_tp_and_refuses_a_split_of_its_heads_it_cannot_make() -> None:
    one = make_deployment("qwen3-next-80b-a3b", "h100-sxm", tp=1)
    four = make_deployment("qwen3-next-80b-a3b", "h100-sxm", tp=4)
    # bf16 state: 36 layers' state split by heads over 4 GPUs
    per_gpu = memory_report(four, 1).state_bytes_per_request / 4
    assert per_gpu == pytest.approx(19_759_104 * 2 / 4)
    assert memory_report(one, 1).state_bytes_per_request == pytest.approx(19_759_104 * 2)
    gdn = next(layer.mixer for layer in four.model.layers if isinstance(layer.mixer, GatedDeltaNet))
    with pytest.raises(ConfigError) as info:
        gdn.split(3)
    assert info.value.field == "tp"


def test_recurrent_decode_reads_the_state_not_the_context() -> None:
    """A GDN layer's decode step reads and writes each sequence's state once (2 x 548,864
    elements x 2 B per layer) whatever the context; attention reads grow with the context."""
    dep = make_deployment("qwen3-next-80b-a3b", "h100-sxm", tp=4)

    def bytes_of(name: str, context: int) -> float:
        terms = layer_terms(dep, BatchShape.decode(8, context))
        return sum(t[1] * t[3] for t in terms if t[0] == name)

    assert bytes_of("linear_attention", 1000) == bytes_of("linear_attention", 100_000)
    assert bytes_of("attention", 100_000) > 50 * bytes_of("attention", 1000)
    state = 2 * 8 * (32 * 128 * 128 + 3 * 8192) / 4 * 2  # read + write, 8 seqs, /tp, bf16
    io = 8 * (12_352 + 4096) / 4 * 2  # projections' outputs in, value_dim out
    assert bytes_of("linear_attention", 1000) == pytest.approx(36 * (state + io))


# ---- Nemotron-H: Mamba-2 / attention / MLP layers ----------------------------------------------


def test_nemotron_nano_layer_pattern_and_parameters_by_hand() -> None:
    """Pattern M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-: 27 Mamba-2, 4 attention,
    25 MLP layers, one RMSNorm each. Mamba-2 (I = 128 x 80 = 10,240, G·N = 8 x 128): in_proj
    4480 x (2·10,240 + 2·1024 + 128) + conv 12,288 x 4 + bias 12,288 + dt_bias, A_log, D 384 +
    norm 10,240 + out_proj 10,240 x 4480 = 147,446,144. Attention: 4480 x (5120 + 2 x 1024) +
    5120 x 4480 = 55,050,240. MLP (ReLU², up and down): 2 x 4480 x 15,680 = 140,492,800. Total
    27 x 147,450,624 + 4 x 55,054,720 + 25 x 140,497,280 + 2 x 131,072 x 4480 + 4480
    = 8,888,227,328 (HF lists 8.89B)."""
    assert _kinds("nemotron-nano-9b-v2") == {"Mamba2/-": 27, "Gqa/-": 4, "-/DenseMlp": 25}
    m = get_model("nemotron-nano-9b-v2")
    mixers = {type(layer.mixer): layer.mixer for layer in m.layers if layer.mixer is not None}
    assert mixers[Mamba2].params() == 147_446_144
    assert mixers[Gqa].params() == 55_050_240
    assert m.params_total == 8_888_227_328
    assert m.architecture == "hybrid Mamba-2+GQA dense"


def test_nemotron_cache_and_max_concurrency_count_the_state() -> None:
    """KV: 4 attention layers x 2 x 8 x 128 = 8192 elements per token; state: 27 x (128 x 80 x
    128 SSM + 3 x 12,288 conv) = 36,384,768 elements per sequence, the SSM part in fp32 (vLLM's
    NemotronH default): 27 x (1,310,720 x 4 + 36,864 x 2) B = 143.5 MB. A request of 4096 tokens
    on one H100 holds 4096 x 16 KiB of KV + that state, and max concurrency is the free KV
    memory over that sum, not over the KV alone."""
    m = get_model("nemotron-nano-9b-v2")
    assert m.kv_elements_per_token == 8192
    assert m.state_elements_per_seq == 27 * (128 * 80 * 128 + 3 * 12_288)
    dep = make_deployment(m, "h100-sxm")
    r = memory_report(dep, 4096)
    kv, state = 4096 * 8192 * 2, 27 * (128 * 80 * 128 * 4 + 3 * 12_288 * 2)
    assert r.state_bytes_per_request == state
    assert r.kv_bytes_per_request == kv + state
    assert r.max_concurrent_requests == int(r.kv_free_bytes_per_gpu // (kv + state))
    assert r.max_concurrent_requests < 0.6 * r.kv_free_bytes_per_gpu / kv


def test_attention_only_models_hold_no_state() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    assert dep.model.state_elements_per_seq == 0
    assert memory_report(dep, 4096).state_bytes_per_request == 0
    assert state_blocks_per_seq(dep, 16) == 0


# ---- DeepSeek-V3.2: MLA + DeepSeek sparse attention ---------------------------------------------


def test_dsa_adds_the_indexer_to_deepseek_v3() -> None:
    """Indexer per layer: wq_b 1536 x 64 x 128 + wk 7168 x 128 + k_norm 2 x 128 + weights_proj
    7168 x 64 = 13,959,424; 61 layers. Cache: the MLA latent (512 + 64 elements) plus fp8
    indexer keys, 128 B + one fp32 scale = 132 B per token and layer."""
    v3, v32 = get_model("deepseek-v3"), get_model("deepseek-v3.2-exp")
    assert v32.params_total - v3.params_total == 61 * 13_959_424
    dsa = v32.attention
    assert isinstance(dsa, Dsa) and isinstance(v3.attention, Mla)
    assert dsa.cache_bytes_per_token_per_gpu(2.0, 8) == 576 * 2 + 132
    dep = make_deployment(v32, "h200", tp=8, kv_dtype="bf16")
    assert dep.kv_bytes_per_token_per_gpu == 61 * (576 * 2 + 132)
    assert v32.architecture == "MoE MLA+DSA"


def test_dsa_attends_to_the_top_k_and_indexes_every_token() -> None:
    """Decode at 10,000 tokens of context: the MLA attention runs over the top 2048 tokens
    (its FLOP and KV reads equal dense MLA's at a context of 2048), while the indexer scores all
    10,000: 2 x 64 heads x 128 = 16,384 FLOP per (query, key) pair."""
    v3 = make_deployment("deepseek-v3", "h200", tp=8)
    v32 = make_deployment("deepseek-v3.2-exp", "h200", tp=8)

    def term(dep: Any, name: str, context: int) -> tuple[float, float]:
        terms = [t for t in layer_terms(dep, BatchShape.decode(1, context)) if t[0] == name]
        return sum(t[1] * t[2] for t in terms), sum(t[1] * t[3] for t in terms)

    sparse_flop, _ = term(v32, "attention", 10_000)
    dense_flop, _ = term(v3, "attention", 2048)
    assert sparse_flop == pytest.approx(dense_flop)
    indexer_flop, indexer_bytes = term(v32, "indexer", 10_000)
    assert indexer_flop == pytest.approx(61 * 16_384 * 10_000)
    assert indexer_bytes == pytest.approx(61 * 10_001 * 132)


# ---- Qwen3.5: the same parts, an fp32 recurrent state --------------------------------------------


def test_qwen35_keeps_its_delta_rule_state_in_fp32() -> None:
    """mamba_ssm_dtype float32: per GDN layer 64 value heads x 128 x 128 in fp32 + 3 x 12,288
    conv elements in bf16; 45 GDN layers of 60."""
    dep = make_deployment("qwen3.5-397b-a17b", "h200", tp=8, weight_dtype="fp8")
    per_layer = 64 * 128 * 128 * 4 + 3 * 12_288 * 2
    assert memory_report(dep, 1).state_bytes_per_request == pytest.approx(45 * per_layer)
    assert _kinds("qwen3.5-397b-a17b") == {"GatedDeltaNet/Moe": 45, "Gqa/Moe": 15}


# ---- the paged pool and the simulator reserve the state ---------------------------------------


def test_pool_counts_a_sequence_state_beside_its_token_blocks() -> None:
    pool = BlockPool(1000, block_size=16, state_blocks=100)
    assert pool.seq_blocks(1) == 101
    assert pool.seq_blocks(33) == 103
    assert BlockPool(1000).seq_blocks(33) == 3


def test_a_request_whose_state_cannot_fit_is_refused() -> None:
    """49 tokens of KV fill 4 of the 10 blocks; with a state of 8 blocks it needs 12."""
    seq = Seq(0, RequestSpec("r0", 0.0, 40, 10), 0.0)
    assert never_fits_reason(seq, BlockPool(10, block_size=16)) is None
    reason = never_fits_reason(seq, BlockPool(10, block_size=16, state_blocks=8))
    assert reason is not None and "fixed state of 8 blocks" in reason


def test_simulated_hybrid_sequences_hold_their_state_while_they_run() -> None:
    """Nemotron Nano on one H100: 548 blocks of 16 tokens per sequence's state (143.5 MB over
    16 KiB per token x 16). 40 offline requests of 1000 + 100 tokens all run at once, so the
    pool's peak holds at least 40 states (without them it would hold about 40 x 69 blocks)."""
    dep = make_deployment("nemotron-nano-9b-v2", "h100-sxm")
    assert state_blocks_per_seq(dep, 16) == 548
    wl = Workload(Arrival("offline"), LengthDist("fixed", 1000), LengthDist("fixed", 100), 40)
    result = simulate(deployment=dep, workload=wl, config=SchedulerConfig(), seed=0).to_dict()
    assert result["kv"]["peak_blocks_used"] >= 40 * 548


# ---- readers of the new kinds refuse what they cannot price ------------------------------------

NEMOTRON = {
    "model_type": "nemotron_h",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "hybrid_override_pattern": "M*M-",
    "mamba_num_heads": 8,
    "mamba_head_dim": 32,
    "n_groups": 2,
    "ssm_state_size": 16,
}


def test_a_nemotron_config_reads_its_pattern() -> None:
    m = from_hf_config(NEMOTRON)
    assert [layer.spec.attention for layer in m.layers] == ["mamba", "full", "mamba", "none"]
    assert m.layers[3].ffn is not None and m.layers[0].ffn is None


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"hybrid_override_pattern": "M*ME"}, "hybrid_override_pattern"),
        ({"num_hidden_layers": 5}, "num_hidden_layers"),
        ({"n_groups": 3}, "n_groups"),
        ({"mamba_num_heads": True}, "mamba_num_heads"),
        ({"mamba_ssm_cache_dtype": "int4"}, "mamba_ssm_cache_dtype"),
    ],
)
def test_bad_nemotron_values_are_refused_by_name(update: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        from_hf_config({**NEMOTRON, **update})
    assert info.value.field == field


def test_a_gdn_config_without_attention_layers_is_refused() -> None:
    cfg = {
        "model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "intermediate_size": 512, "vocab_size": 1000,
        "layer_types": ["linear_attention", "linear_attention"],
    }  # fmt: skip
    with pytest.raises(ConfigError) as info:
        from_hf_config(cfg)
    assert info.value.field == "layer_types"


def test_mamba_groups_fewer_than_tp_are_replicated() -> None:
    """128 heads x 64, 8 groups of state 128 (Nemotron-H-8B's mixer): at tp 8 each GPU holds one
    group (B, C of 2 x 128); at tp 16 the 8 groups are replicated so each GPU still holds one
    whole group, while the heads halve again (vLLM MambaMixer2)."""
    mixer = Mamba2(hidden=4096, heads=128, head_dim=64, groups=8, state_size=128, conv_kernel=4)
    eight, sixteen = mixer.split(8), mixer.split(16)
    assert eight.qkv_out == 2 * 8192 / 8 + 2 * 128 + 128 / 8
    assert sixteen.qkv_out == 2 * 8192 / 16 + 2 * 128 + 128 / 16
    assert sixteen.state_elems_per_seq == 8 * 64 * 128 + 3 * (8192 / 16 + 2 * 128)
    with pytest.raises(ConfigError):
        mixer.split(12)


def test_pipeline_stages_split_the_state_by_layers() -> None:
    one = make_deployment("nemotron-nano-9b-v2", "h100-sxm")
    two = make_deployment("nemotron-nano-9b-v2", "h100-sxm", pp=2)
    state_one = memory_report(one, 1).state_bytes_per_request
    assert memory_report(two, 1).state_bytes_per_request == pytest.approx(state_one)
    assert state_blocks_per_seq(two, 16) == state_blocks_per_seq(one, 16)


def test_tensor_parallel_all_reduces_follow_the_row_parallel_outputs() -> None:
    """One all-reduce per row-parallel matmul (Megatron-LM): Llama-3.1-8B's 32 layers have an
    o_proj and a down_proj each (64); Nemotron Nano's 56 blocks are one mixer or one MLP (56)."""
    from tokenprobe.cost.stepcomm import comm_breakdown

    shape = BatchShape.decode(8, 1000)
    llama = make_deployment("llama-3.1-8b", "h100-sxm", tp=2)
    nemotron = make_deployment("nemotron-nano-9b-v2", "h100-sxm", tp=2)
    assert comm_breakdown(llama, shape)["allreduces_per_step"] == 64
    assert comm_breakdown(nemotron, shape)["allreduces_per_step"] == 56
