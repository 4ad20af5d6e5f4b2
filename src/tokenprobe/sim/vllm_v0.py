"""vLLM's V0 engine (the default before v0.8.0) as a `SchedulerConfig`: whole-prompt prefill steps.

`sim.engines.vllm_defaults` is the V1 engine (`vllm serve` from 0.8.0: "V1 is now enabled by
default", vLLM v0.8.0 release notes, Mar 2025). Before that, and with `VLLM_USE_V1=0`, `vllm
serve` ran the V0 engine with its own defaults (vllm/engine/arg_utils.py `_set_default_args_v0`,
read at Farrrrland/vllm084@36ca3c652f00a1d6c5d6860bc237ad38425e2d53, a copy of v0.8.4; the same
rules in 0.7.x's `create_engine_config`):
- chunked prefill is off for MLA models ("Chunked prefill not supported for Multimodal or MLA in
  V0"; from v0.7.1 `VllmConfig.__post_init__` also forced it off, "MLA is enabled; forcing chunked
  prefill and prefix caching to be disabled", vllm-project/vllm PR #12642, merged 2025-02-01, and
  kept that for every non-CUDA platform: the ROCm 0.7.4 log in ROCm/vllm issue #457). Other models
  get it only on NVIDIA GPUs with max_model_len > 32768 ("to avoid OOM errors in initial memory
  profiling");
- without chunked prefill a step's token budget is max(max_model_len, 2048) (vllm/config.py
  `SchedulerConfig.__post_init__`: "If max_model_len is too short, use 2048"), so a whole prompt
  and as many more as fit go into one prefill step; with it, 2048;
- max_num_seqs 256 ("Set max_num_seqs to 256 for VLLM_V0"); prefix caching off unless asked for.

Why it matters: V0 without chunking runs a prefill-only step whenever prompts wait
(vllm/core/scheduler.py `_schedule_default`: "Don't schedule decodes if prefills are
scheduled"), so the
closed-loop users of a fixed-length benchmark, who all send together, stay in lock-step waves
and a wave's first tokens come after the whole wave's prefill: dstack's vLLM 0.7.3/0.7.4 runs of
DeepSeek-R1 (benchmarks/data/deepseek_2025h1.csv) measure a median TTFT that grows ~0.23 s per
concurrent user (0.97 s at 4, 14.4 s at 64 on 8 x H200), where V1's chunked, mixed steps would
break the waves up and keep TTFT near one prompt's prefill at every concurrency.

`VllmV0Scheduler` schedules so (`SchedulerConfig.scheduling = "vllm-v0"`): SGLang's scheduler in
the simulator already runs prefill-only steps on a decode clock (sim/sglang_scheduler.py), so V0
is that machinery with V0's rules in place of SGLang's: a waiting prompt is admitted when the
step's token budget, max_num_seqs and the free KV blocks allow (`_schedule_prefills`; no
new_token_ratio reservation), and when a decode finds no free block the most recently admitted
request is preempted, recomputed from the *front* of the queue
(`self.waiting.extendleft(running_scheduled.preempted)`). A wave prefilled over several steps
then starts decoding together, as on V0, where letting the decodes ride along (V1's mixed steps,
sim/continuous.py with chunked prefill off) staggers them and breaks the waves up.
Not modelled: V0's block watermark at admission and its swap-out preemption (the simulator
always recomputes).

`vllm_version_defaults` is the one place that turns a vLLM version into its server's setup: V0's
defaults above (or V1's, `engine_defaults`), the memory rule of that version for an MLA model
(`cost.vllm_mla_rule`: the full K/V of <= 0.7.0, the padded latent and extra MLA weights of
0.7.1-0.7.x) and FlashMLA's 64-token KV blocks when the command selects that backend
(`VLLM_ATTENTION_BACKEND=FLASHMLA`; vllm/platforms/cuda.py: "Forcing kv cache block size to 64
for FlashMLA backend"). The replay of public rows (calibrate/serving.py) and `simulate --engine`
both use it. An era preset name (`vllm-2025h1`) stands for its `Era.stands_for` release: the one its
shipped profile was fitted on (dstack's 0.7.3 / 0.7.4.dev runs, V0).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tokenprobe.cost import Deployment, engine_release, vllm_mla_rule
from tokenprobe.hardware import GpuSpec
from tokenprobe.sim.base import VLLM_V0_SCHEDULING, SchedulerConfig
from tokenprobe.sim.continuous import ContinuousScheduler
from tokenprobe.sim.engines import engine_defaults, engine_era, engine_preset
from tokenprobe.sim.sglang_scheduler import SglangScheduler
from tokenprobe.sim.state import Seq

V1_DEFAULT_FROM = (0, 8)  # vLLM v0.8.0: V1 is the default engine (release notes)
V0_MAX_NUM_SEQS = 256  # arg_utils `_set_default_args_v0`
V0_MIN_BATCHED_TOKENS = 2048  # vllm/config.py `_DEFAULT_MAX_NUM_BATCHED_TOKENS`
V0_LONG_CONTEXT_TOKENS = 32768  # chunked prefill by default above this max_model_len (NVIDIA)
V0_CHUNKED_BUDGET = 2048  # max_num_batched_tokens with chunked prefill (V0 default)
FLASHMLA_BLOCK_SIZE = 64  # vllm/platforms/cuda.py: FlashMLA's page size


def runs_v0(version: str, notes: str = "") -> bool:
    """Whether a `vllm serve` of this version (e.g. "0.7.4.dev181+gf35f8e22", "v0.7.0") ran the
    V0 engine: versions before 0.8.0 unless `VLLM_USE_V1=1` was set, later ones only with
    `VLLM_USE_V1=0`. An unreadable version is taken as V1 (today's default)."""
    if "VLLM_USE_V1=0" in notes:
        return True
    if "VLLM_USE_V1=1" in notes:
        return False
    release = engine_release(version)
    return release is not None and release[:2] < V1_DEFAULT_FROM


def vllm_v0_defaults(
    gpu: GpuSpec, max_model_len: int, mla: bool, **overrides: Any
) -> SchedulerConfig:
    """The scheduler V0 `vllm serve` sets up for a model of this context length (its
    max_model_len: --max-model-len, else the config's max_position_embeddings) on this GPU, with
    `overrides` (SchedulerConfig fields). Module docstring for each rule."""
    chunked = not mla and gpu.vendor == "nvidia" and max_model_len > V0_LONG_CONTEXT_TOKENS
    budget = V0_CHUNKED_BUDGET if chunked else max(max_model_len, V0_MIN_BATCHED_TOKENS)
    fields: dict[str, Any] = {
        "max_num_seqs": V0_MAX_NUM_SEQS,
        "max_num_batched_tokens": budget,
        "chunked_prefill": chunked,
        "prefix_caching": False,
        # chunked V0 mixes prefill chunks into the decode steps as V1 does (sim/continuous.py)
        "scheduling": "vllm" if chunked else VLLM_V0_SCHEDULING,
        **overrides,
    }
    return SchedulerConfig(**fields)


class VllmV0Scheduler(SglangScheduler):
    """vLLM V0 without chunked prefill: prefill-only steps first, admission by free blocks,
    preemption of the newest (module docstring)."""

    def add(self, seq: Seq, now_s: float) -> str | None:
        # no reservation: a prompt is refused only when it can never fit (or exceeds the budget)
        return ContinuousScheduler.add(self, seq, now_s)

    def _admissible(self, seq: Seq, cached_tokens: int, n: int) -> bool:  # noqa: ARG002
        return True  # free blocks, budget and max_num_seqs, checked by the caller, suffice

    def _newest_running(self) -> Seq:
        return ContinuousScheduler._newest_running(self)  # V0 preempts the last admitted

    def _preempt(self, seq: Seq, step: int) -> None:
        super()._preempt(seq, step)  # SGLang's decode-clock bookkeeping, then it queues it last
        self.waiting.appendleft(self.waiting.pop())  # V0 recomputes it first


def vllm_version_defaults(
    dep: Deployment, version: str = "", notes: str = "", max_model_len: int | None = None
) -> SchedulerConfig:
    """The scheduler `vllm serve` of `version` (a release, or an era preset name: `Era.stands_for`)
    sets up for `dep`, before the command's batch flags (module docstring). `notes` is the
    serving command (its VLLM_USE_V1 and VLLM_ATTENTION_BACKEND settings); `max_model_len` its
    --max-model-len, else the model's context. Without a version: today's V1 defaults."""
    era = engine_era(version)
    version = era.stands_for if era is not None and era.stands_for else version
    context = max_model_len or dep.model.max_context_tokens
    if runs_v0(version, f"{version} {notes}") and context:
        config = vllm_v0_defaults(dep.gpu, context, mla=dep.model.mla is not None)
    else:  # V1, or a V0 budget that is not known (a config without max_position_embeddings)
        config = engine_defaults("vllm", dep.gpu, dep.tp)
    rule = vllm_mla_rule(version) if dep.model.mla is not None else None
    if rule is not None:
        config = replace(config, memory_rule=rule)
    if "VLLM_ATTENTION_BACKEND=FLASHMLA" in notes.upper() and dep.gpu.vendor == "nvidia":
        config = replace(config, block_size=FLASHMLA_BLOCK_SIZE)
    return config


def is_vllm_era(engine: str) -> bool:
    """Whether `engine` names vLLM by one of its era presets (`vllm-2025h1`)."""
    era = engine_era(engine)
    return era is not None and bool(era.stands_for) and engine_preset(engine).name == "vllm"
