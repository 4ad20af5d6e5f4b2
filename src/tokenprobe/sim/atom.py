"""AMD's ATOM (ROCm/ATOM, `python3 -m atom.entrypoints.openai_server`) as a `SchedulerConfig`.

ATOM is AMD's own serving engine for Instinct GPUs (AITER kernels: MLA decode, fused MoE,
MXFP4/FP8 GEMMs). Its server's defaults, read at ROCm/ATOM@9304f0bf6c8d1a3820b8024677b3eaca4cd662d7
(2025-12-19, the commit of the atom0.1.1 image's month; the image tag has no git tag):
- `atom/model_engine/arg_utils.py`: --max-num-seqs 512, --max-num-batched-tokens 16384,
  --gpu-memory-utilization 0.9, --block-size 16, --kv_cache_dtype bf16, --max-model-len the
  config's max_position_embeddings; `atom/config.py` Config: enable_prefix_caching False.
- `atom/model_engine/scheduler.py` `Scheduler.schedule`: while prompts wait it runs a prefill-only
  batch of whole prompts (no chunking: a prompt goes in when `num_batched_tokens +
  num_new_tokens <= max_num_batched_tokens` and `block_manager.can_allocate(seq)`, the blocks of
  its prompt; no reservation for its answer), "TODO for prefill/decode mixed batch"; otherwise a
  decode batch of every running sequence up to max_num_seqs, preempting the newest
  (`self.running.pop()`) when a sequence finds no free block, and the preempted one is
  recomputed first (`self.waiting.appendleft(seq)`).
That is vLLM's V0 scheduler without chunked prefill rule for rule (sim/vllm_v0.py
`VllmV0Scheduler`: prefill-only steps first, admission by free blocks, the newest preempted and
recomputed from the front of the queue), so ATOM runs on it with ATOM's limits.
- `atom/model_engine/model_runner.py` sizes the KV pool as vLLM does: `total *
  gpu_memory_utilization - used - peak + current` after a warm-up forward of
  max_num_batched_tokens (the default memory rule, `SchedulerConfig.memory_rule` "vllm").
Not modelled: ATOM's own host costs (its Python scheduler, graph replay) beyond the profile's.
"""

from __future__ import annotations

from tokenprobe.sim.base import VLLM_V0_SCHEDULING, SchedulerConfig

ATOM_MAX_NUM_SEQS = 512  # arg_utils.py --max-num-seqs
ATOM_MAX_BATCHED_TOKENS = 16384  # arg_utils.py --max-num-batched-tokens
ATOM_GPU_MEMORY_UTILIZATION = 0.9  # arg_utils.py --gpu-memory-utilization
ATOM_BLOCK_SIZE = 16  # arg_utils.py --block-size

ATOM_SERVE = SchedulerConfig(
    max_num_seqs=ATOM_MAX_NUM_SEQS,
    max_num_batched_tokens=ATOM_MAX_BATCHED_TOKENS,
    chunked_prefill=False,  # whole prompts in prefill-only batches
    block_size=ATOM_BLOCK_SIZE,
    prefix_caching=False,  # Config.enable_prefix_caching
    gpu_memory_utilization=ATOM_GPU_MEMORY_UTILIZATION,
    scheduling=VLLM_V0_SCHEDULING,
)
