"""The models issue 18 item 2 listed as blocked: Kimi-K2, Qwen3-Coder-480B, MiniMax-M2, GLM-5,
Nemotron-H-8B/47B/56B and Nemotron-Nano-12B-v2. Their published parameter counts are checked
with the rest of the catalog (test_model_catalog.py); here are the reader rules each needed and
the architecture facts, every figure derived by hand from the config in the test's comment."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import parse_json
from tokenprobe.model import CATALOG_DIR, from_hf_config, get_model, load_config_file

NEW = ("kimi-k2", "qwen3-coder-480b-a35b", "minimax-m2", "glm-5", "nemotron-h-8b",
       "nemotron-h-47b", "nemotron-h-56b", "nemotron-nano-12b-v2")  # fmt: skip


def _config(name: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((CATALOG_DIR / f"{name}.json").read_text())
    cfg.pop("_tokenprobe")
    return cfg


def _refused(cfg: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        from_hf_config(cfg)
    return info.value


# ---- Kimi-K2: DeepSeek-V3's reader under model_type kimi_k2 ------------------------------


def test_kimi_k2_is_deepseek_v3_layers_with_384_experts_and_one_dense_layer() -> None:
    spec = get_model("moonshotai/Kimi-K2-Instruct")
    assert spec.name == "kimi-k2" and spec.architecture == "MoE MLA"
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.moe.first_dense_layers) == (
        384, 8, 1,
    )  # fmt: skip
    # MLA latent cache: kv_lora 512 + rope 64 per token and layer, 61 layers
    assert spec.kv_elements_per_token == 61 * (512 + 64)


# ---- Qwen3-Coder-480B: qwen3_moe with use_qk_norm ----------------------------------------


def test_qwen3_coder_reads_use_qk_norm_and_refuses_it_off() -> None:
    spec = get_model("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8")
    assert spec.name == "qwen3-coder-480b-a35b" and spec.qk_norm
    # GQA: 2 (K, V) x 8 KV heads x 128 per layer, 62 layers
    assert spec.kv_elements_per_token == 62 * 2 * 8 * 128
    error = _refused({**_config("qwen3-coder-480b-a35b"), "use_qk_norm": False})
    assert error.field == "use_qk_norm"


# ---- MiniMax-M2: full GQA, full-width q/k norms, Mixtral-style experts -------------------


def test_minimax_m2_counts_its_full_width_qk_norms() -> None:
    """q_norm over 48 x 128 and k_norm over 8 x 128 per layer (vLLM minimax_m2.py), where a
    per-head norm pair holds 2 x 128: 62 x (48 + 8 - 2) x 128 = 428,544 more weights."""
    cfg = _config("minimax-m2")
    full = from_hf_config(cfg)
    per_head = from_hf_config({**cfg, "qk_norm_type": "per_head"})
    assert full.params_total - per_head.params_total == 62 * (48 + 8 - 2) * 128
    assert full.architecture == "MoE GQA" and full.moe is not None
    assert (full.moe.num_experts, full.moe.experts_per_token) == (256, 8)
    assert full.moe.num_shared_experts == 0


def test_minimax_m2_5_matches_its_safetensors_total() -> None:
    """M2.5 resolves to minimax-m2 by its transcribed shape; its checkpoint's total from the HF
    API, 228,703,644,928 (quoted in a public parameter-count test), exceeds ours by the fp8
    checkpoint's block scales: one fp32 scale per 128 x 128 block of every quantized matrix
    (all but the embedding and LM head: modules_to_not_convert gate, lm_head), so about
    (total - embedding - head) / 16,384 = 227.46e9 / 16,384 = 13.88 M more tensors' elements."""
    spec = get_model("MiniMaxAI/MiniMax-M2.5")
    assert spec.name == "minimax-m2"
    scales = (spec.params_total - spec.embedding_params - spec.lm_head_params) / (128 * 128)
    assert 228_703_644_928 - spec.params_total == pytest.approx(scales, rel=0.02)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("attn_type_list", [1] * 61 + [0]),  # a lightning-attention layer (MiniMax-01's kind)
        ("shared_intermediate_size", 1536),
        ("qk_norm_type", "per_token"),
        ("use_qk_norm", False),  # vLLM's MiniMaxM2Attention builds its q/k norms regardless
    ],
)
def test_minimax_m2_refuses_what_it_does_not_price(key: str, value: Any) -> None:
    assert _refused({**_config("minimax-m2"), key: value}).field == key


# ---- GLM-5: glm_moe_dsa, DeepSeek sparse attention on GLM's widths -----------------------


def test_glm_5_is_mla_with_the_indexer_and_three_dense_layers() -> None:
    spec = get_model("zai-org/GLM-5")
    assert spec.architecture == "MoE MLA+DSA" and spec.dsa is not None
    assert (spec.dsa.index_heads, spec.dsa.index_head_dim, spec.dsa.index_topk) == (32, 128, 2048)
    assert spec.moe is not None and spec.moe.first_dense_layers == 3


def test_glm_5_per_layer_lists_are_read_and_checked() -> None:
    cfg = _config("glm-5")
    listed = {
        **cfg,
        "layer_types": ["deepseek_sparse_attention"] * 78,
        "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 75,
        "indexer_types": ["full"] * 78,
    }
    assert from_hf_config(listed).params_total == from_hf_config(cfg).params_total
    shared = ["full", "shared"] * 39  # GLM-5.x layers reusing an earlier top-k: not modelled
    assert _refused({**cfg, "indexer_types": shared}).field == "indexer_types"
    assert _refused({**cfg, "index_topk_freq": 2}).field == "index_topk_freq"
    wrong = ["dense"] + ["sparse"] * 77
    assert _refused({**cfg, "mlp_layer_types": wrong}).field == "mlp_layer_types"


# ---- Nemotron-H: Infinity in a config.json -----------------------------------------------


def test_a_config_with_an_infinite_time_step_limit_is_read(tmp_path: Path) -> None:
    """transformers writes NemotronHConfig's time_step_limit (0.0, inf) as [0.0, Infinity]."""
    text = (CATALOG_DIR / "nemotron-h-8b.json").read_text()
    assert '"time_step_limit": [\n    0.0,\n    Infinity\n  ]' in text
    file = tmp_path / "config.json"
    file.write_text(text)
    assert load_config_file(file).params_total == get_model("nemotron-h-8b").params_total
    file.write_text(text.replace("Infinity", "NaN"))
    with pytest.raises(SchemaError):
        load_config_file(file)  # NaN is never a legitimate config value


def test_infinity_is_refused_by_default_and_accepted_on_request() -> None:
    with pytest.raises(SchemaError):
        parse_json('{"x": Infinity}', "x.json")
    assert parse_json('{"x": [-Infinity, Infinity]}', "x.json", infinity=True) == {
        "x": [-math.inf, math.inf]
    }
    with pytest.raises(SchemaError):
        parse_json('{"x": NaN}', "x.json", infinity=True)


def test_an_infinite_width_is_still_refused_by_name() -> None:
    cfg = {**_config("nemotron-h-8b"), "intermediate_size": math.inf}
    assert _refused(cfg).field == "intermediate_size"


def test_nemotron_h_8b_state_per_sequence() -> None:
    """24 Mamba-2 layers, each an SSM state of 128 heads x 64 x 128 plus a conv state of
    (kernel 4 - 1) x (128 x 64 + 2 x 8 groups x 128) = 1,048,576 + 30,720 elements; 4
    attention layers of 2 x 8 x 128 KV elements per token."""
    spec = get_model("nvidia/Nemotron-H-8B-Base-8K")
    assert spec.state_elements_per_seq == 24 * (128 * 64 * 128 + 3 * (128 * 64 + 2 * 8 * 128))
    assert spec.kv_elements_per_token == 4 * 2 * 8 * 128
    assert spec.architecture == "hybrid Mamba-2+GQA dense"


@pytest.mark.parametrize(
    ("hf_id", "layers"),
    [
        ("nvidia/Nemotron-H-56B-Base-8K", (54, 10, 54)),  # NVIDIA: 54 Mamba-2, 10 attn, 54 MLP
        ("nvidia/Nemotron-H-47B-Base-8K", (45, 5, 48)),  # model card: five attention layers
    ],
)
def test_nemotron_h_47b_and_56b_layer_kinds(hf_id: str, layers: tuple[int, int, int]) -> None:
    kinds = get_model(hf_id).layer_types
    assert (kinds.count("mamba"), kinds.count("full"), kinds.count("mlp")) == layers


def test_nemotron_nano_12b_v2_has_the_9b_layer_kinds_wider() -> None:
    spec = get_model("nvidia/NVIDIA-Nemotron-Nano-12B-v2")
    kinds = spec.layer_types
    assert (kinds.count("mamba"), kinds.count("full"), kinds.count("mlp")) == (28, 6, 28)
    assert spec.mamba is not None and spec.mamba.head_dim == 80


# ---- the CLI ------------------------------------------------------------------------------

runner = CliRunner()


def test_models_lists_each_with_its_architecture_kind() -> None:
    result = runner.invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.output
    kinds = {row["name"]: row["architecture"] for row in json.loads(result.stdout)["models"]}
    assert {name: kinds.get(name) for name in NEW} == {
        "kimi-k2": "MoE MLA",
        "qwen3-coder-480b-a35b": "MoE GQA",
        "minimax-m2": "MoE GQA",
        "glm-5": "MoE MLA+DSA",
        "nemotron-h-8b": "hybrid Mamba-2+GQA dense",
        "nemotron-h-47b": "hybrid Mamba-2+GQA dense",
        "nemotron-h-56b": "hybrid Mamba-2+GQA dense",
        "nemotron-nano-12b-v2": "hybrid Mamba-2+GQA dense",
    }


@pytest.mark.parametrize("name", NEW)
def test_estimate_on_eight_h200(name: str) -> None:
    result = runner.invoke(
        app, ["estimate", "--model", name, "--gpu", "h200", "--tp", "8", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["params_total"] == get_model(name).params_total
    assert out["tpot_s"] > 0 and out["ttft_s"] > 0
