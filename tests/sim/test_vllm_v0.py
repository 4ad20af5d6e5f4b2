"""vLLM's V0 engine (sim/vllm_v0.py): which versions ran it, its defaults, its prefill-only steps.

Steps take 1 s (`unit_step`): step k runs from k to k + 1 s and its tokens appear at k + 1.
"""

from __future__ import annotations

import pytest

from tokenprobe.calibrate.serving import scheduler_for
from tokenprobe.cost import VLLM_FULL_KV_RULE, VLLM_MLA_2025H1_RULE, make_deployment
from tokenprobe.hardware import get_gpu
from tokenprobe.sim import (
    SchedulerConfig,
    run_workload,
    runs_v0,
    vllm_v0_defaults,
    vllm_version_defaults,
)
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.workload import Arrival, RequestSpec, Workload

from .helpers import IDLE_W, unit_step


@pytest.mark.parametrize(
    ("version", "notes", "v0"),
    [
        ("0.7.4.dev181+gf35f8e22", "", True),  # dstack's H200 nightly (Mar 2025)
        ("0.7.3.dev138+g21f6ca217 (ROCm 6.3)", "", True),
        ("v0.6.6", "", True),
        ("0.7.0", "VLLM_USE_V1=1 vllm serve ...", False),  # vLLM issue 12568's run
        ("0.8.0", "", False),  # V1 is the default from 0.8.0
        ("0.8.5", "VLLM_USE_V1=0 vllm serve ...", True),
        ("0.11.0", "", False),
        ("nightly", "", False),  # unreadable: today's default engine
    ],
)
def test_versions_before_0_8_ran_v0_unless_told_otherwise(
    version: str, notes: str, v0: bool
) -> None:
    assert runs_v0(version, notes) is v0


def test_v0_defaults_turn_chunked_prefill_off_for_mla_and_batch_whole_prompts() -> None:
    h200, mi300x = get_gpu("h200"), get_gpu("mi300x")
    # DeepSeek-R1 (MLA, max_position_embeddings 163840): no chunking, a step of up to
    # max(163840, 2048) prompt tokens, 256 sequences, no prefix caching, prefill-only steps
    mla = vllm_v0_defaults(h200, 163840, mla=True)
    assert (mla.chunked_prefill, mla.max_num_batched_tokens) == (False, 163840)
    assert (mla.max_num_seqs, mla.prefix_caching, mla.scheduling) == (256, False, "vllm-v0")
    assert vllm_v0_defaults(h200, 1024, mla=True).max_num_batched_tokens == 2048  # the floor
    # other models above 32K of context get V0's chunked prefill (2048 tokens) on NVIDIA only
    gqa = vllm_v0_defaults(h200, 131072, mla=False)
    assert (gqa.chunked_prefill, gqa.max_num_batched_tokens, gqa.scheduling) == (
        True,
        2048,
        "vllm",
    )
    assert not vllm_v0_defaults(mi300x, 131072, mla=False).chunked_prefill
    assert not vllm_v0_defaults(h200, 32768, mla=False).chunked_prefill


def test_serving_rows_of_a_v0_version_get_v0_and_the_command_sets_max_model_len() -> None:
    dep = make_deployment("deepseek-ai/DeepSeek-R1", "h200", tp=8, weight_dtype="fp8")
    assert dep.model.max_context_tokens == 163840  # the catalog config's max_position_embeddings
    v0 = scheduler_for("vllm-2025h1", dep, "vllm serve ...", "0.7.4.dev181+gf35f8e22")
    assert (v0.scheduling, v0.max_num_batched_tokens) == ("vllm-v0", 163840)
    short = scheduler_for("vllm-2025h1", dep, "vllm serve x --max-model-len 32768", "0.7.3")
    assert short.max_num_batched_tokens == 32768
    v1 = scheduler_for("vllm-2025h1", dep, "", "0.7.0 (VLLM_USE_V1=1)")
    assert (v1.scheduling, v1.chunked_prefill, v1.max_num_batched_tokens) == ("vllm", True, 8192)


def _run(trace: tuple[RequestSpec, ...], config: SchedulerConfig, tokens: int = 1000) -> SimResult:
    pool = BlockPool(tokens // config.block_size, config.block_size, config.prefix_caching)
    return run_workload(
        Workload(Arrival("trace", trace=trace)), unit_step, pool, config, idle_w=IDLE_W
    )


# three prompts of 10 tokens at once, a step budget of 20 tokens: the third waits a step
WAVE = tuple(RequestSpec(f"r{i}", 0.0, 10, 4) for i in range(3))
V0 = SchedulerConfig(
    max_num_seqs=8, max_num_batched_tokens=20, chunked_prefill=False, block_size=1,
    scheduling="vllm-v0",
)  # fmt: skip
MIXED = SchedulerConfig(
    max_num_seqs=8, max_num_batched_tokens=20, chunked_prefill=False, block_size=1
)


def test_v0_pauses_the_decodes_for_a_prefill_step_so_a_wave_decodes_together() -> None:
    v0, mixed = _run(WAVE, V0), _run(WAVE, MIXED)
    # V0: step 0 prefills r0 + r1 (20 tokens), step 1 prefills r2 alone (no decode: the
    # prefill-only step), steps 2-4 decode all three: every request ends at 5 s
    assert [(row[5], row[6]) for row in v0.engine.timeline.rows[:3]] == [(20, 0), (10, 0), (0, 3)]
    by_id = {r.request_id: r for r in v0.records}
    assert by_id["r0"].token_times_s == [1.0, 3.0, 4.0, 5.0]
    assert by_id["r2"].token_times_s == [2.0, 3.0, 4.0, 5.0]
    # the mixed (V1-like) step decodes r0 and r1 beside r2's prompt: they end a step earlier,
    # and the three no longer finish together
    assert [(row[5], row[6]) for row in mixed.engine.timeline.rows[:2]] == [(20, 0), (10, 2)]
    ends = sorted(r.finish_s for r in mixed.records)
    assert ends == [4.0, 4.0, 5.0]


def test_version_defaults_carry_the_versions_mla_memory_rule_and_flashmla_blocks() -> None:
    dep = make_deployment("deepseek-ai/DeepSeek-R1", "h200", tp=8, weight_dtype="fp8")
    # dstack's H200 nightly: V0, the padded latent and absorbed weights, FlashMLA's 64 blocks
    dstack = vllm_version_defaults(
        dep, "0.7.4.dev181+gf35f8e22", "VLLM_ATTENTION_BACKEND=FLASHMLA vllm serve ..."
    )
    assert (dstack.scheduling, dstack.memory_rule, dstack.block_size) == (
        "vllm-v0",
        VLLM_MLA_2025H1_RULE,
        64,
    )
    # vLLM issue 12568: 0.7.0 on V1 caches full K/V (no MLA backend before 0.7.1)
    old = vllm_version_defaults(dep, "0.7.0", "VLLM_USE_V1=1")
    assert (old.scheduling, old.memory_rule, old.block_size) == ("vllm", VLLM_FULL_KV_RULE, 16)
    # 0.8.5: V1 and today's rule; the era preset name stands for 0.7.3 (its profile's rows)
    assert vllm_version_defaults(dep, "0.8.5").memory_rule == "vllm"
    era = vllm_version_defaults(dep, "vllm-2025h1")
    assert (era.scheduling, era.memory_rule, era.max_num_batched_tokens) == (
        "vllm-v0",
        VLLM_MLA_2025H1_RULE,
        163840,
    )
    # a model without MLA keeps vLLM's rule whatever the version; FlashMLA is NVIDIA's only
    llama = make_deployment("llama-3.1-8b", "mi300x")
    assert vllm_version_defaults(llama, "0.7.3", "VLLM_ATTENTION_BACKEND=FLASHMLA").memory_rule == (
        "vllm"
    )
    assert vllm_version_defaults(llama, "0.7.3", "VLLM_ATTENTION_BACKEND=FLASHMLA").block_size == 16
