"""SGLang 0.4's `--enable-dp-attention`: the scheduler each data-parallel attention rank runs.

From sgl-project/sglang v0.4.x, python/sglang/srt/server_args.py `ServerArgs.__post_init__`
(read in a stored copy of the file of the v0.4.3 line: it has `enable_flashinfer_mla`, added in
Feb 2025, and `speculative_algorithm`; the v0.4.0/0.4.1 copy has the same two lines below, and
also turns the overlap scheduler off):

    if self.enable_dp_attention:
        self.dp_size = self.tp_size
        self.chunked_prefill_size = self.chunked_prefill_size // 2
        self.schedule_conservativeness = self.schedule_conservativeness * 0.3

and the chunked_prefill_size default before it: 8192, or 2048 on GPUs of less than 25,000 MB
(the memory table of SGLang 0.5, `engines.SGLANG_CHUNK_TOKENS_BY_HBM_BYTES`, came later).

Each of the dp_size = tp ranks is a scheduler of its own (managers/scheduler.py: the
DataParallelController round-robins requests to them, `load_balance_method` "round_robin"),
with its own waiting queue, running batch and KV pool, and runs SGLang's prefill-first policy
(sim/sglang_scheduler.py) with these settings: a prefill chunk of 4096 tokens on an 80-141 GB
GPU, and a KV reservation ratio 0.3 x SGLang's (new_token_ratio from 0.21, not 0.7). Before every
forward pass the ranks all-gather their token counts (`prepare_dp_attn_batch`), a rank with
nothing to run joins with an idle batch, and the MoE layers run on every rank's tokens
together: the step of all ranks waits for the slowest rank, as sim/dpep.py steps them. One rank
prefilling a 3,200-token prompt therefore runs its attention over the whole prompt on its own
GPU (data-parallel attention splits requests, not heads), while the other ranks' decodes wait.
The rows replay through `simulate_fleet(dp=N, router="round-robin")` (calibrate/serving.py);
under a closed loop of fixed lengths (sim/gang_feed.py) the users finish together and come back
together, so a request's TTFT is the wave's prefills on its rank and the decode steps between
waves are undisturbed.

Every 0.4 server, ranks or not, orders its waiting queue by `--schedule-policy lpm`, the 0.4
default (`schedule_policy: str = "lpm"` in both copies of server_args.py; sim/sglang_scheduler.py),
and a plain tensor-parallel one (no --enable-dp-attention) runs the overlap loop, which hides the
host's per-step time under the GPU's (sim/sglang_overlap.py).

Not modelled: the CUDA graph that DP attention runs only when every rank decodes
(`can_run_dp_cuda_graph`: an all-reduce MIN of "is decode or idle"), the padding of ranks to a
common token count, and SGLang 0.5's rule (chunked_prefill_size // dp_size), which this module
does not apply (rows of other versions keep the engine's own defaults).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tokenprobe.hardware import GpuSpec
from tokenprobe.sim.base import LPM, SchedulerConfig
from tokenprobe.sim.engines import PRESETS, engine_era, engine_preset
from tokenprobe.units import MiB

if TYPE_CHECKING:
    from tokenprobe.cost import Deployment

SGLANG_04_ERA = "sglang-2025h1"  # the era whose 0.4 server_args.py this module transcribes
DP_CHUNK_DIVISOR = 2  # chunked_prefill_size // 2 with --enable-dp-attention (0.4.x)
DP_CONSERVATIVENESS_FACTOR = 0.3  # schedule_conservativeness x 0.3 with --enable-dp-attention
CHUNK_TOKENS_04 = 8192  # chunked_prefill_size default (0.4.x), GPUs of >= 25,000 MB
CHUNK_TOKENS_04_SMALL = 2048  # below 25,000 MB
SMALL_GPU_BYTES_04 = 25_000 * MiB  # get_nvgpu_memory_capacity() is in MiB (nvidia-smi)
ERA_04 = PRESETS["sglang"].eras[SGLANG_04_ERA]


def runs_sglang_04(engine: str, version: str = "") -> bool:
    """Whether `engine` of `version` is an SGLang 0.4 server: the era named
    (`--engine sglang-2025h1`) or an SGLang release of the 0.4 line ("0.4.3.post2", "v0.4.1",
    "0.4.2.post4 (ROCm 6.3)"), read as every release is (`EnginePreset.era_of`)."""
    if engine_era(engine) is ERA_04:
        return True
    preset = engine_preset(engine)
    return preset.name == "sglang" and preset.era_of(version) == SGLANG_04_ERA


def sglang_04_scheduler(
    config: SchedulerConfig, gpu: GpuSpec, *, dp_attention: bool, chunk_flag: bool
) -> SchedulerConfig:
    """An SGLang 0.4 server's scheduler from the sglang preset's `config`: the 0.4 chunk
    default (unless the command set `--chunked-prefill-size`, `chunk_flag`), then, with
    `dp_attention`, the per-rank settings of --enable-dp-attention (module docstring), else the
    overlap loop that hides the host's per-step time (sim/sglang_overlap.py)."""
    chunk = config.max_num_batched_tokens
    if not chunk_flag:
        chunk = CHUNK_TOKENS_04 if gpu.hbm_bytes >= SMALL_GPU_BYTES_04 else CHUNK_TOKENS_04_SMALL
    config = replace(config, schedule_policy=LPM)  # server_args.py: schedule_policy "lpm"
    if not dp_attention:  # a plain TP server runs the overlap loop (sim/sglang_overlap.py)
        return replace(config, max_num_batched_tokens=chunk, overlap_schedule=True)
    return replace(
        config,
        max_num_batched_tokens=max(1, chunk // DP_CHUNK_DIVISOR),
        schedule_conservativeness=config.schedule_conservativeness * DP_CONSERVATIVENESS_FACTOR,
    )


def server_config(
    engine: str,
    dep: Deployment,
    config: SchedulerConfig,
    version: str = "",
    *,
    chunk_flag: bool = False,
) -> SchedulerConfig:
    """The scheduler the server of `engine` (of `version`) runs for `dep`, from `config` (the
    engine's defaults, with the serving command's flags where the caller has them): an SGLang
    0.4 server's settings (`sglang_04_scheduler`; its --enable-dp-attention ones when `dep`
    runs attention DP; `chunk_flag`: the command set --chunked-prefill-size), any other
    server's `config` unchanged. The one place the 0.4 rule is applied: calibrate's
    `scheduler_for` (every replayed row) and `simulate`'s server defaults call it."""
    if not runs_sglang_04(engine, version):
        return config
    return sglang_04_scheduler(
        config, dep.gpu, dp_attention=dep.attention_dp, chunk_flag=chunk_flag
    )
