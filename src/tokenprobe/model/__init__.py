"""Model architecture from a Hugging Face `config.json` or the built-in catalog (requirement E1).

- `spec.py`: `ModelSpec`, the shape of a decoder-only model, its parameter, KV-cache and
  per-sequence state counts; `shapes.py`: the shapes of its parts (MLA, MoE, DSA, Gated
  DeltaNet, Mamba-2) and the limits every shape is checked against.
- `layers.py`: the model as a list of `Layer`s made of parts; `attention.py` (GQA family, MLA,
  DSA), `recurrent.py` (Gated DeltaNet, Mamba-2) and `ffn.py` (dense, MoE): each part knows its
  parameters, cache per token and per sequence, FLOP/bytes and TP split.
- `families.py`: the model families read from a config.json (defaults from the transformers
  configuration classes), and the rule for shape keys no reader reads (refused, named).
- `hf_config.py`: `from_hf_config`, the readers, every value checked where it is read;
  `hf_hybrid.py` (hybrid and sparse-attention keys) and `hf_legacy.py` (GPT-J, OPT, BLOOM,
  DeciLM's per-layer KV heads) beside it.
- `catalog.py`: the catalog of `catalog/models/*.json`, config files on disk, `get_model`.
"""

from __future__ import annotations

from tokenprobe.model.attention import (
    CoreTerm,
    Dsa,
    Gqa,
    MixerSplit,
    Mla,
    StepShape,
    minimum,
    state_bytes_per_seq,
)
from tokenprobe.model.catalog import CATALOG_DIR, catalog_names, get_model, load_config_file
from tokenprobe.model.families import FAMILIES, SHAPE_KEY
from tokenprobe.model.ffn import DenseMlp, FfnSplit, Moe
from tokenprobe.model.hf_config import from_hf_config
from tokenprobe.model.hf_legacy import uniform_gqa
from tokenprobe.model.layers import Attention, Ffn, Layer, Mixer
from tokenprobe.model.recurrent import GatedDeltaNet, Mamba2
from tokenprobe.model.spec import (
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN_SIZE,
    MAX_INTERMEDIATE_SIZE,
    MAX_LAYERS,
    MAX_POSITION_EMBEDDINGS,
    MAX_VOCAB_SIZE,
    MAX_WINDOW_TOKENS,
    AttentionKind,
    DsaSpec,
    GdnSpec,
    LayerSpec,
    MambaSpec,
    MlaSpec,
    ModelSpec,
    MoeSpec,
)

__all__ = [
    "CATALOG_DIR",
    "FAMILIES",
    "MAX_EXPERTS",
    "MAX_HEADS",
    "MAX_HEAD_DIM",
    "MAX_HIDDEN_SIZE",
    "MAX_INTERMEDIATE_SIZE",
    "MAX_LAYERS",
    "MAX_POSITION_EMBEDDINGS",
    "MAX_VOCAB_SIZE",
    "MAX_WINDOW_TOKENS",
    "SHAPE_KEY",
    "Attention",
    "AttentionKind",
    "CoreTerm",
    "DenseMlp",
    "Dsa",
    "DsaSpec",
    "Ffn",
    "FfnSplit",
    "GatedDeltaNet",
    "GdnSpec",
    "Gqa",
    "Layer",
    "LayerSpec",
    "Mamba2",
    "MambaSpec",
    "Mixer",
    "MixerSplit",
    "Mla",
    "MlaSpec",
    "ModelSpec",
    "Moe",
    "MoeSpec",
    "StepShape",
    "catalog_names",
    "from_hf_config",
    "get_model",
    "load_config_file",
    "minimum",
    "state_bytes_per_seq",
    "uniform_gqa",
]
