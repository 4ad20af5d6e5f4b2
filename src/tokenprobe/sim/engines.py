"""What each serving engine sets up by default, as a `SchedulerConfig` (`simulate --engine`).

- vllm (`vllm serve`, v1 engine): `vllm_defaults`: 1024 sequences and 8192
  batched tokens on GPUs of >= 70 GiB other than A100, else 256 and 2048; gpu_memory_utilization
  0.9 of HBM less weights and the profile run; prefix caching on; preempt the newest when short.
- sglang (`sglang.launch_server`): chunked_prefill_size by GPU memory, 16384 from 160 GiB
  (B200, MI300X), 8192 from 60 GiB (H100, H200, A100 80 GB), 4096 from 35 GiB, else 2048;
  mem_fraction_static 0.88/0.87/0.85/0.81 at TP 1/2/4/8 (0.81 beyond), the share of HBM for
  weights + KV, activations in the rest (sglang/srt/server_args.py); running requests bounded
  by the KV pool (`SGLANG_MAX_RUNNING` caps them for the simulator); the radix cache keeps
  prompts, so a retracted request finds them again. Scheduled as SGLang schedules
  (sim/sglang_scheduler.py: prefill-first batches, KV reserved by new_token_ratio,
  retraction), with page_size 1, max_prefill_tokens 16384, schedule_conservativeness 1 and
  mixed chunks off (server_args.py ServerArgs defaults, 0.4-0.5).
- tensorrt-llm (`trtllm-serve`, 1.x): max_batch_size 2048, max_num_tokens 8192; the KV cache
  takes free_gpu_memory_fraction 0.9 of the memory free once the engine is loaded; the
  guaranteed-no-evict capacity scheduler (KV for a request's whole length at admission, never
  preempt); KV block reuse on (KvCacheConfig enable_block_reuse).
- tensorrt-llm-2025h1 (`trtllm-serve --backend pytorch`, 0.17): the same, except that an MLA
  model runs without chunked context and without block reuse (`TRTLLM_SERVE_2025H1`).
These are what the collected serving benchmarks ran (benchmarks/data), which replay them with
the flags of each serving command on top (`tokenprobe.calibrate.serving`).

`PRESETS` is the one registry of engines: each `EnginePreset` names the engine, its aliases, the
serving-command flags that set its batch limits and KV memory, and the shipped cost profile
(calibrate/profiles/<name>.toml) fitted for it on each GPU vendor, and on a vendor's GPU generation
where its kernels there need their own (`"nvidia/blackwell"`), which `calibrate.select_profile`
loads (`simulate --engine vllm --gpu mi300x` prices with `vllm-rocm`, `--gpu b200` with
`vllm-blackwell`). The scheduler defaults are `engine_defaults` below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EP_COMM,
    SGLANG_RULE,
    TRTLLM_RULE,
    EpComm,
    engine_release,
    vllm_ep_comm,
)
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import GpuSpec
from tokenprobe.sim.atom import ATOM_SERVE
from tokenprobe.sim.base import GUARANTEED_NO_EVICT, SGLANG_SCHEDULING, SchedulerConfig
from tokenprobe.units import GiB


@dataclass(frozen=True)
class Era:
    """An engine's era: the releases it covers (version prefixes, `EnginePreset.era_of`), the
    release its name stands for when no version is given (`vllm-2025h1` -> 0.7.3: its V0 engine
    and MLA memory rule, sim/vllm_v0.py), the scheduler defaults of its own, if any
    (`tensorrt-llm-2025h1`: TRTLLM_SERVE_2025H1), and the shipped profile per GPU vendor where
    the era's kernels there were fitted apart from the era's own profile (SGLang 0.4 on ROCm:
    `sglang-rocm`), which the engine's later releases on that vendor do not inherit."""

    prefixes: tuple[str, ...]
    stands_for: str = ""
    scheduler: SchedulerConfig | None = None
    profiles: Mapping[str, str] = field(default_factory=dict)
    dp_padding: bool | None = None  # pads DP ranks (EnginePreset.dp_padding); None: the engine's


def plain_exchange(_version: str) -> EpComm:
    """An engine's exchange when it has no back end of its own by release: the plain
    all-to-all (cost/epcomm.py), as SGLang's default path is priced (`moe_a2a_backend: ... =
    "none"` in sgl-project/sglang python/sglang/srt/server_args.py ServerArgs, 0.5.x) and
    TensorRT-LLM's."""
    return DEFAULT_EP_COMM


DEFAULT_RANK_ROUTER = "least-loaded"  # a DP group's dispatch for a name that is no preset


@dataclass(frozen=True)
class EnginePreset:
    """One serving engine: its names, its serving flags, its shipped profile per GPU vendor.

    `flags` maps a SchedulerConfig field (max_num_seqs, max_num_batched_tokens,
    gpu_memory_utilization) to the command-line spellings that set it, first match wins.
    `profiles` maps a GPU vendor (hardware.VENDORS) to the shipped profile fitted for this
    engine's kernels there; a vendor without one is priced with the model's defaults. A key
    "<vendor>/<generation>" (a generation of catalog/energy.toml, `cost.gpu_generation`) names
    the profile for that generation's GPUs, which runs before the vendor's (`profile_for`).
    `eras` maps an era's name (a shipped profile of that name prices it) to its `Era`: the
    versions whose kernels differ enough to need their own efficiencies (SGLang 0.4's and vLLM
    0.7-0.9's MLA and block-FP8 MoE kernels, early 2025); an era name is also a name of the
    preset (`engine_preset("sglang-2025h1")` is SGLang's, with its scheduler and flags).

    Data parallelism with expert parallelism (sim/dpep.py, sim/dpep_fleet.py): `dp_padding`,
    whether every DP rank's batch is padded to the largest rank's token count on every step
    (cost/dpep.py; an era may say otherwise, `Era.dp_padding`); `dp_rank_router`, how a DP
    group's own dispatch spreads its requests over its ranks; `ep_exchange`, the MoE layers'
    exchange of a release (its version string; "" for today's) when no flag names one.
    """

    name: str
    aliases: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    profiles: Mapping[str, str] = field(default_factory=dict)
    eras: Mapping[str, Era] = field(default_factory=dict)
    dp_padding: bool = False
    dp_rank_router: str = DEFAULT_RANK_ROUTER
    ep_exchange: Callable[[str], EpComm] = plain_exchange

    def profile_for(self, vendor: str, generation: str = "") -> str | None:
        """The profile for a GPU of `vendor` and `generation`: the generation's, else the
        vendor's, else None."""
        return self.profiles.get(f"{vendor}/{generation}", self.profiles.get(vendor))

    def era_of(self, version: str) -> str | None:
        """The era whose version prefixes match `version` ("0.4.3.post2", "v0.7.0"), or None."""
        release = engine_release(version)
        if release is None:
            return None
        v = ".".join(str(part) for part in release)
        return next((name for name, era in self.eras.items() if v.startswith(era.prefixes)), None)


# trtllm-serve 1.x: the same on every GPU
TRTLLM_SERVE = SchedulerConfig(
    max_num_seqs=2048,  # max_batch_size
    max_num_batched_tokens=8192,  # max_num_tokens
    gpu_memory_utilization=0.9,  # KvCacheConfig free_gpu_memory_fraction
    memory_rule=TRTLLM_RULE,
    capacity_policy=GUARANTEED_NO_EVICT,
    prefix_caching=True,  # enable_block_reuse
)
# trtllm-serve --backend pytorch of TensorRT-LLM 0.17 (early 2025) on an MLA model: the executor
# turns chunked context and KV block reuse off for MLA (`create_py_executor`: `if is_mla(config):
# enable_block_reuse = False; enable_chunked_context = False`), so a prompt is prefilled whole in
# one step within max_num_tokens; the rest as 1.x (BuildConfig's 2048 / 8192, the KV pool 0.9 of
# what a max_num_tokens dummy forward leaves free, guaranteed-no-evict). Its PyTorchConfig also
# defaulted to use_cuda_graph=False and enable_overlap_scheduler=False: kernels launched from
# Python, host work in series with the GPU; those are the `tensorrt-llm-2025h1` profile's
# (benchmarks/fit_trtllm_era.py derives them; the sources are in its docstring).
TRTLLM_SERVE_2025H1 = replace(TRTLLM_SERVE, chunked_prefill=False, prefix_caching=False)


PRESETS = {
    "vllm": EnginePreset(
        "vllm",
        ("vllm-openai",),
        {
            "max_num_seqs": ("--max-num-seqs",),
            "max_num_batched_tokens": ("--max-num-batched-tokens",),
            "gpu_memory_utilization": ("--gpu-memory-utilization",),
            # a switch: the scheduler plans step k+1 while the GPU runs step k
            # (SchedulerConfig.overlap_schedule, sim/sglang_overlap.py; vLLM's
            # `async_scheduling`, vllm/config/scheduler.py, 0.10.2+)
            "overlap_schedule": ("--async-scheduling",),
        },
        # vllm-rocm: vLLM for ROCm (AMD's rocm/vllm images) on MI300X, fitted on AMD's tables;
        # vllm-blackwell: vLLM 0.11 on B200 (sm100 kernels), fitted on ML.ENERGY's B200 runs
        {"nvidia": "vllm", "nvidia/blackwell": "vllm-blackwell", "amd": "vllm-rocm"},
        # 0.7-0.9 (Jan-Jun 2025): the DeepSeek-V3/R1 launch versions, Triton block-FP8 fused MoE
        # and the MLA backend from 0.7.1 (its release notes; 0.7.0 cached full K/V:
        # cost/vllm_mla_era.py); 0.10 (Jul 2025) is where the `vllm` profile's data starts
        # V0 (the era's 0.7.3) had no DP padding
        {"vllm-2025h1": Era(("0.7.", "0.8.", "0.9."), stands_for="0.7.3", dp_padding=False)},
        # vLLM 0.10-0.11 (the `vllm` preset's era; vllm-blackwell is 0.11.1) pads every DP rank's
        # batch to the largest rank's token count on every step whenever CUDA graphs are
        # configured, its default (`--enforce-eager` turns them off): vllm-project/vllm@v0.11.1:
        # vllm/v1/worker/gpu_model_runner.py `allow_dp_padding = self.compilation_config.
        # cudagraph_mode != CUDAGraphMode.NONE`, the configured mode rather than the step's,
        # passed to dp_utils.coordinate_batch_across_dp, whose `_post_process_dp_padding`
        # returns the largest rank's count for every rank, prefill steps included (the older
        # `get_dp_padding` says as much: "TODO(tms): There are many cases where padding is
        # enabled for prefills, causing unnecessary and excessive padding of activations").
        # Later vLLM pads only steps the synced runtime mode replays as a graph
        # (vllm-project/vllm@00746147f8cf4b7715d9cdc591d5dd6f4d12b27f:vllm/v1/worker/dp_utils.py
        # `should_dp_pad = synced_cudagraph_mode != 0 or should_ubatch`), not modelled: those
        # versions have no preset.
        dp_padding=True,
        # vLLM's DP coordinator balances on the ranks' waiting and running counts
        dp_rank_router="least-loaded",
        ep_exchange=vllm_ep_comm,  # VLLM_DEFAULT_ALL2ALL: its allgather, by release
    ),
    "sglang": EnginePreset(
        "sglang",
        (),
        {
            "max_num_seqs": ("--max-running-requests",),
            "max_num_batched_tokens": ("--chunked-prefill-size",),
            "gpu_memory_utilization": ("--mem-fraction-static",),
            "max_prefill_tokens": ("--max-prefill-tokens",),
            "schedule_conservativeness": ("--schedule-conservativeness",),
            "scheduler_recv_interval": ("--scheduler-recv-interval",),
        },
        # sglang-rocm-aiter: 0.5 for ROCm (AITER MLA/MoE/GEMM kernels, the custom all-reduce),
        # `sglang`'s figures carried over, not fitted (its notes; benchmarks/amd_today.py)
        {"nvidia": "sglang", "amd": "sglang-rocm-aiter"},
        # 0.4.x (Dec 2024 - May 2025): the DeepSeek-V3/R1 launch versions (Triton/FlashInfer MLA,
        # Triton block-FP8 fused MoE); 0.5 (Aug 2025) is where the `sglang` profile's data starts.
        # sglang-rocm: 0.4 for ROCm on MI300X (Triton MLA decode and block-FP8 fused MoE in their
        # HIP launches, all-reduces on RCCL), fitted on dstack's MI300X DeepSeek-R1 runs; later
        # ROCm images (AITER kernels, the custom all-reduce) are not priced by it
        {"sglang-2025h1": Era(("0.4.",), profiles={"amd": "sglang-rocm"})},
        # not padded here: its DP attention gathers each rank's own tokens (sim/sglang_dp.py);
        # its DataParallelController round-robins (`--load-balance-method` default), its eras too
        dp_rank_router="round-robin",
    ),
    "tensorrt-llm": EnginePreset(
        "tensorrt-llm",
        ("trt-llm", "tensorrtllm", "trtllm", "trtllm-serve"),
        {
            "max_num_seqs": ("--max_batch_size", "--max-batch-size"),
            "max_num_batched_tokens": ("--max_num_tokens", "--max-num-tokens"),
        },
        {"nvidia": "tensorrt-llm"},
        # 0.17 (Feb 2025): the first PyTorch back end, which served DeepSeek-R1; its defaults
        # (eager launches, no overlap scheduler; MLA without chunked context or block reuse) are
        # TRTLLM_SERVE_2025H1 above
        {"tensorrt-llm-2025h1": Era(("0.17.",), scheduler=TRTLLM_SERVE_2025H1)},
    ),
    # AMD's ATOM (ROCm/ATOM): vLLM V0's scheduler with ATOM's limits (sim/atom.py), AMD GPUs only
    "atom": EnginePreset(
        "atom",
        ("rocm-atom",),
        {
            "max_num_seqs": ("--max-num-seqs",),
            "max_num_batched_tokens": ("--max-num-batched-tokens",),
            "gpu_memory_utilization": ("--gpu-memory-utilization",),
        },
        {},
    ),
}
ENGINES = tuple(PRESETS)


def _key(name: str) -> str:
    """A preset, alias or era name as the tables spell it (case and spaces ignored)."""
    return name.strip().lower().replace(" ", "-")


def _find(name: str) -> EnginePreset | None:
    key = _key(name)
    return next(
        (p for p in PRESETS.values() if key == p.name or key in p.aliases or key in p.eras), None
    )


def engine_preset(name: str) -> EnginePreset:
    """The preset named `name` or one of its aliases or eras (case and spaces ignored)."""
    preset = _find(name)
    if preset is None:
        raise ConfigError("engine", name, f"one of {', '.join(ENGINES)}")
    return preset


def is_engine(name: str) -> bool:
    """Whether `name` names a preset, one of its aliases or eras (`engine_preset` finds it)."""
    return _find(name) is not None


def pads_ranks(engine: str | None) -> bool:
    """Whether `engine` (a preset, alias or era name) pads every DP rank to the largest rank's
    tokens (`EnginePreset.dp_padding`, or its era's); a name that is no preset (a fork's
    label) does not."""
    if not engine or not is_engine(engine):
        return False
    era = engine_era(engine)
    if era is not None and era.dp_padding is not None:
        return era.dp_padding
    return engine_preset(engine).dp_padding


def rank_router_for(engine: str | None) -> str:
    """How `engine` spreads a DP group's requests over its ranks (`EnginePreset.dp_rank_router`;
    a name that is no preset: least-loaded, vLLM's)."""
    if not engine or not is_engine(engine):
        return DEFAULT_RANK_ROUTER
    return engine_preset(engine).dp_rank_router


def engine_ep_comm(engine: str | None, version: str | None = None) -> EpComm:
    """The MoE layers' exchange `engine` of release `version` runs when no flag names one
    (`EnginePreset.ep_exchange`; an era's release is the one it stands for); a name that is
    no preset: the plain all-to-all (DEFAULT_EP_COMM)."""
    if not engine or not is_engine(engine):
        return DEFAULT_EP_COMM
    era = engine_era(engine)
    release = version or (era.stands_for if era is not None else "")
    return engine_preset(engine).ep_exchange(release)


def engine_era(name: str) -> Era | None:
    """The `Era` that `name` names (an era preset name such as "vllm-2025h1", case and spaces
    ignored as `engine_preset` ignores them), or None for any other text (an engine's own name,
    a release)."""
    key = _key(name)
    return next((p.eras[key] for p in PRESETS.values() if key in p.eras), None)


SGLANG_MEM_FRACTION = {1: 0.88, 2: 0.87, 4: 0.85, 8: 0.81}  # by TP; 0.81 beyond
SGLANG_MEM_FRACTION_BEYOND = 0.81
SGLANG_MAX_RUNNING = 4096  # SGLang bounds running requests by its KV pool; a cap for the sim
SGLANG_PAGE_SIZE = 1  # server_args.py ServerArgs.page_size (0.4-0.5): KV per token, no blocks
# chunked_prefill_size by GPU memory: (at least this many HBM bytes, tokens), largest first
SGLANG_CHUNK_TOKENS_BY_HBM_BYTES = (
    (160 * GiB, 16384),
    (60 * GiB, 8192),
    (35 * GiB, 4096),
    (0.0, 2048),
)


# vllm/engine/arg_utils.py `get_batch_defaults` (vLLM >= 0.9, V1, API server): GPUs of >= 70 GiB
# other than A100 get 1024 sequences and 8192 batched tokens; others (A100: a larger budget
# lowered its throughput, vLLM PR #17885) 256 and 2048.
VLLM_BIG_GPU_BYTES = 70 * GiB
VLLM_BIG_DEFAULTS = (1024, 8192)
VLLM_SMALL_DEFAULTS = (256, 2048)


def vllm_defaults(gpu: GpuSpec, **overrides: Any) -> SchedulerConfig:
    """The scheduler `vllm serve` sets up on this GPU, with `overrides` (SchedulerConfig fields).
    The V1 engine also turns prefix caching on by default (`enable_prefix_caching`)."""
    big = gpu.hbm_bytes >= VLLM_BIG_GPU_BYTES and not gpu.name.startswith("a100")
    seqs, tokens = VLLM_BIG_DEFAULTS if big else VLLM_SMALL_DEFAULTS
    fields = {
        "max_num_seqs": seqs,
        "max_num_batched_tokens": tokens,
        "prefix_caching": True,
        **overrides,
    }
    return SchedulerConfig(**fields)


def engine_defaults(engine: str, gpu: GpuSpec, tp: int = 1, **overrides: Any) -> SchedulerConfig:
    """The scheduler `engine` (a preset name or alias) sets up on `tp` GPUs of this kind, with
    `overrides` (fields). An era with scheduler defaults of its own (`Era.scheduler`) gets
    them."""
    era = engine_era(engine)
    if era is not None and era.scheduler is not None:
        return replace(era.scheduler, **overrides)
    engine = engine_preset(engine).name
    if engine == "vllm":
        return vllm_defaults(gpu, **overrides)
    if engine == "tensorrt-llm":
        return replace(TRTLLM_SERVE, **overrides)
    if engine == "atom":
        return replace(ATOM_SERVE, **overrides)
    chunk = next(t for low, t in SGLANG_CHUNK_TOKENS_BY_HBM_BYTES if gpu.hbm_bytes >= low)
    fields: dict[str, Any] = {
        "max_num_seqs": SGLANG_MAX_RUNNING,
        # SGLang's scheduler: the step budget is the prefill chunk; a decode batch has none
        "scheduling": SGLANG_SCHEDULING,
        "max_num_batched_tokens": chunk,
        "block_size": SGLANG_PAGE_SIZE,
        "gpu_memory_utilization": SGLANG_MEM_FRACTION.get(tp, SGLANG_MEM_FRACTION_BEYOND),
        "memory_rule": SGLANG_RULE,
        "prefix_caching": True,
        **overrides,
    }
    return SchedulerConfig(**fields)
