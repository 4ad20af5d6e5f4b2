"""An engine's eras in one table (sim/engines.py `Era`): the releases each covers, the release
its name stands for and its own scheduler defaults, looked up by name as presets are."""

from __future__ import annotations

from dataclasses import replace

from tokenprobe.hardware import get_gpu
from tokenprobe.sim import engine_defaults, engine_preset, is_vllm_era
from tokenprobe.sim.engines import TRTLLM_SERVE, engine_era, pads_ranks, rank_router_for


def test_each_era_is_found_by_its_name_in_any_case_and_spacing() -> None:
    vllm = engine_era("vLLM-2025H1")
    assert vllm is not None and vllm.stands_for == "0.7.3" and vllm.scheduler is None
    assert engine_era("sglang 2025h1") == engine_preset("sglang").eras["sglang-2025h1"]
    # an engine's own name and a release are not eras
    assert engine_era("vllm") is None and engine_era("0.7.3") is None and engine_era("") is None


def test_an_eras_own_scheduler_comes_from_its_entry() -> None:
    h200 = get_gpu("h200")
    era = engine_defaults("TensorRT-LLM-2025h1", h200, 8)
    # 0.17's PyTorch executor on MLA: no chunked context, no block reuse; the rest as 1.x
    assert era == replace(TRTLLM_SERVE, chunked_prefill=False, prefix_caching=False)
    assert engine_defaults("tensorrt-llm", h200, 8) == TRTLLM_SERVE
    # an era without a scheduler of its own gets its engine's
    assert engine_defaults("sglang-2025h1", h200, 8) == engine_defaults("sglang", h200, 8)


def test_era_names_resolve_to_their_engine_elsewhere() -> None:
    assert is_vllm_era("vllm-2025h1") and is_vllm_era("VLLM-2025h1")
    assert not is_vllm_era("vllm") and not is_vllm_era("sglang-2025h1")
    assert rank_router_for("SGLang-2025h1") == rank_router_for("sglang") == "round-robin"
    assert rank_router_for("vllm-2025h1") == rank_router_for(None) == "least-loaded"


def test_dp_rules_read_the_engine_by_preset() -> None:
    # vLLM V1 pads every DP rank (sim/dpep.py) whatever the spelling; V0's era had no DP pad
    assert pads_ranks("vllm") and pads_ranks("vLLM") and pads_ranks("vllm-openai")
    assert not pads_ranks("vllm-2025h1") and not pads_ranks("sglang") and not pads_ranks(None)
    # a label that is not a preset (a fork's name) keeps the default dispatch and no padding
    assert rank_router_for("my-fork") == "least-loaded" and not pads_ranks("my-fork")
