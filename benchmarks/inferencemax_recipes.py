"""What each InferenceMAX disaggregated configuration ran, read from its scripts and recipes.

`benchmarks/data/deployments/inferencemax_disagg.csv` (benchmarks/data/README.md, section 12) gives
per row the worker counts and GPUs; the flags each worker ran with are in InferenceMAX's sweep
config and in the recipe files its scripts check out. This table holds them, one `Recipe` per
search-space entry, every number read from the file its `source` names:

- InferenceMAX's sweep config at SemiAnalysisAI/InferenceX@296c0d72 (the last commit before the
  rows' last night, 2026-01-19; `git log --until=2026-01-19 -1`), `.github/configs/
  nvidia-master.yaml` (dsr1-fp4-gb200-dynamo-trt, gptoss-fp4-gb200-dynamo-trt, dsr1-fp{4,8}-gb200-
  dynamo-sglang) and `amd-master.yaml` (dsr1-fp8-mi355x-sglang-disagg): worker counts, TP/EP/
  attention DP, the TensorRT-LLM workers' max batch / max tokens / KV memory fraction, MTP size.
- Dynamo + TensorRT-LLM: `benchmarks/dsr1_fp4_gb200_dynamo-trt_slurm.sh` passes those to Dynamo's
  `components/backends/trtllm/performance_sweeps/benchmark_disagg.slurm` (ai-dynamo/dynamo@
  0b6abc82; prefill `ctx_tp_size` GPUs a server, `CTX_GPU_FRAC=0.85`), whose `scripts/bench.sh`
  (ai-dynamo/dynamo@0857f8c6) runs the client: `--random-range-ratio 0.8 --ignore-eos
  --use-chat-template`, `num_prompts = concurrency x MULTI_ROUND` (8). TensorRT-LLM's
  `max_batch_size` / `max_num_tokens` bound each attention-DP rank (each rank schedules its
  own batch), so a DEP worker's are the flag times its ranks. The prefill answers first, then the
  decode server takes the request with its KV (the proxy handoff, sim/disagg.py).
- Dynamo + SGLang: the yaml's TP/EP/DP "do nothing" (its own comment); `SCRIPT_MODE` picks a
  launch script of ai-dynamo/dynamo `examples/backends/sglang/slurm_jobs/scripts/gb200-fp{4,8}/
  disagg/`. Read: gb200-fp8/disagg/8k1k-max-tpt.sh (@370b7505), gb200-fp8/disagg/8k1k-low-
  latency.sh (@bc8ca754), gb200-fp4/disagg/1k1k-low-latency.sh (@75b4a35f), gb200-fp4/disagg/
  default.sh (@9086164a; the fp4 wide-EP script). A mode whose own script is not stored here
  takes its sibling's flags (low latency: TP over the worker's GPUs; max-tpt and middle-curve:
  DP attention + DeepEP), and its `source` says so. KV: Mooncake over multi-node NVLink
  (`MC_FORCE_MNNVL=1`), fp8 KV cache (`--kv-cache-dtype fp8_e4m3`). The client: scripts/vllm/
  bench.sh (@26778c32): `--random-range-ratio 0.8 --ignore-eos`, `num_prompts = 5 x concurrency`.
- SGLang PD on MI355X: `benchmarks/dsr1_fp8_mi355x_sglang-disagg_slurm.sh` runs billishyahao/
  sglang_disagg (branch sa-260114); its `sglang_disagg_server.sh` (stored @00a869bc) and
  `set_env_vars.sh` (stored @05cc04e0, a later snapshot of the same repository): fp8 KV, MoRI KV
  transfer (`--disaggregation-transfer-backend mori`), DP workers `--moe-a2a-backend mori
  --deepep-mode normal` (MoRI-EP, AMD's DeepEP counterpart), prefill DP `--max-running-requests
  4096 --chunked-prefill-size MORI_MAX_DISPATCH_TOKENS_PREFILL x TP` (12288 x 8) with two-batch
  overlap, prefill TP 256 / 262144; decode DP `MORI_MAX_DISPATCH_TOKENS_DECODE x TP` running
  requests (160 x ranks), decode TP+EP 256; MTP `--speculative-algorithm NEXTN --speculative-
  num-steps k --speculative-eagle-topk 1`. The client is InferenceMAX's own (RANDOM_RANGE_RATIO,
  default 0.8 in `.github/workflows/benchmark-multinode-tmpl.yml`; 10 prompts a user).

Each worker's flags are kept as the command-line text they are (`Worker.flags`), so the engine's
own flag readers turn them into a scheduler (`calibrate.serving.scheduler_for`) and an EP back
end (`cost.ep_comm_from_flags`): one home for what a flag means.
"""

from __future__ import annotations

from dataclasses import dataclass

IMAX = "SemiAnalysisAI/InferenceX@296c0d72115650f9edff14b56bb880e89a0071a2"
DYNAMO = "ai-dynamo/dynamo"
SGL_SCRIPTS = f"{DYNAMO}:examples/backends/sglang/slurm_jobs/scripts"
MI355X_SCRIPTS = "billishyahao/sglang_disagg@00a869bce2110cb089320759b0214449797ac361"
RANGE_RATIO = 0.8  # lengths uniform in [0.8 L, L]: every client above passes 0.8


@dataclass(frozen=True)
class Worker:
    """One prefill or decode worker: its GPUs, whether its attention is data parallel (one
    rank a GPU) and its experts spread over its GPUs, and its flags as the launch command has
    them (for a TensorRT-LLM attention-DP worker, one rank's `--max_batch_size`)."""

    gpus: int
    attention_dp: bool
    ep: bool
    flags: str = ""
    moe_backend: str = ""  # TensorRT-LLM's moe_config.backend (gen_yaml.py), else ""

    @property
    def ranks(self) -> int:
        return self.gpus if self.attention_dp else 1


@dataclass(frozen=True)
class Recipe:
    """One search-space entry: the concurrencies it ran, its two sides, MTP's draft tokens
    (0: none), the client's prompts a user and the engine side's handoff."""

    framework: str  # InferenceMAX's: dynamo-trt, dynamo-sglang, sglang-disagg
    prefix: str  # dsr1, gptoss
    precision: str
    isl: int
    osl: int
    concurrency: tuple[int, ...]  # as the rows give it (the client's max concurrency)
    prefill_workers: int
    prefill: Worker
    decode_workers: int
    decode: Worker
    mtp_k: int
    prompts_per_user: int
    source: str

    @property
    def spec(self) -> str:
        return "mtp" if self.mtp_k else "none"


def _trt_worker(
    gpus: int, adp: bool, ep: bool, batch: int, tokens: int, frac: float, decode: bool = True
) -> Worker:
    """gen_yaml.py (ai-dynamo/dynamo@357f7dfc:components/backends/trtllm/performance_sweeps/
    scripts/gen_yaml.py): a decode server's MoE back end is WIDEEP at tp >= 16 with attention
    DP, TRTLLM without attention DP, else CUTLASS; a prefill server's is not set (CUTLASS, the
    default); both store an fp8 KV cache (`kv_cache_config.dtype: fp8`)."""
    flags = f"--max_batch_size {batch} --max_num_tokens {tokens}"
    moe = "CUTLASS"
    if decode:
        moe = "WIDEEP" if gpus >= 16 and adp else ("TRTLLM" if not adp else "CUTLASS")
    return Worker(gpus, adp, ep, f"{flags} --kv_cache_free_gpu_mem_fraction {frac}", moe)


def _trt(
    prefix: str, isl: int, osl: int, conc: tuple[int, ...], p_n: int, p: tuple[int, bool, bool,
    int, int], d_n: int, d: tuple[int, bool, bool, int, int, float], mtp: int
) -> Recipe:  # fmt: skip
    """A dynamo-trt entry: conc-list per decode server (bench.sh multiplies it by the decode
    servers for dsr1; the rows give the client's), prefill at CTX_GPU_FRAC 0.85."""
    name = f"{prefix}-fp4-gb200-dynamo-trt"
    # bench.sh runs conc x decode servers users; the dsr1 rows' concurrencies are that (4 servers:
    # 4..564), the gpt-oss rows' the yaml's own (its release's bench.sh is not stored here)
    scale = d_n if prefix == "dsr1" else 1
    return Recipe(
        "dynamo-trt", prefix, "fp4", isl, osl, tuple(c * scale for c in conc), p_n,
        _trt_worker(*p, 0.85, decode=False), d_n, _trt_worker(*d), mtp, 8,
        f"{IMAX}:.github/configs/nvidia-master.yaml {name}; {DYNAMO}@0b6abc82:components/"
        "backends/trtllm/performance_sweeps/benchmark_disagg.slurm, scripts/bench.sh @0857f8c6",
    )  # fmt: skip


# Dynamo + SGLang launch scripts' flags (module docstring), by what a SCRIPT_MODE runs
_SGL = {
    ("fp8", "max-tpt"): (
        "gb200-fp8/disagg/8k1k-max-tpt.sh@370b7505",
        "--moe-a2a-backend deepep --deepep-mode normal --ep-num-redundant-experts 32 "
        "--chunked-prefill-size 131072 --max-running-requests 30000 --mem-fraction-static 0.80 "
        "--disable-radix-cache",
        "--moe-a2a-backend deepep --deepep-mode low_latency --ep-num-redundant-experts 32 "
        "--chunked-prefill-size 36864 --max-running-requests 8192 --mem-fraction-static 0.82 "
        "--cuda-graph-max-bs 256 --stream-interval 50 --disable-radix-cache",
    ),
    ("fp8", "low-latency"): (
        "gb200-fp8/disagg/8k1k-low-latency.sh@bc8ca754",
        "--chunked-prefill-size 24576 --max-running-requests 512 --mem-fraction-static 0.95 "
        "--disable-radix-cache",
        "--chunked-prefill-size 8192 --max-running-requests 512 --mem-fraction-static 0.95 "
        "--disable-radix-cache",
    ),
    ("fp4", "max-tpt"): (
        "gb200-fp4/disagg/default.sh@9086164a",
        "--chunked-prefill-size 65536 --max-prefill-tokens 16384 --max-running-requests 5632 "
        "--mem-fraction-static 0.84 --disable-radix-cache",
        "--moe-a2a-backend deepep --deepep-mode low_latency --ep-num-redundant-experts 32 "
        "--chunked-prefill-size 786432 --max-running-requests 67584 --mem-fraction-static 0.82 "
        "--cuda-graph-bs 384 --stream-interval 50 --disable-radix-cache",
    ),
    ("fp4", "low-latency"): (
        "gb200-fp4/disagg/1k1k-low-latency.sh@75b4a35f",
        "--chunked-prefill-size 8192 --max-running-requests 512 --mem-fraction-static 0.95 "
        "--disable-radix-cache",
        "--chunked-prefill-size 8192 --mem-fraction-static 0.95 --stream-interval 10 "
        "--disable-radix-cache",
    ),
}


def _sgl(
    precision: str, isl: int, osl: int, conc: tuple[int, ...], p_n: int, p_nodes: int,
    d_n: int, d_nodes: int, mode: str
) -> Recipe:  # fmt: skip
    """A dynamo-sglang entry: workers on 4-GPU GB200 trays; `mode` its SCRIPT_MODE."""
    kind = "low-latency" if mode.endswith("low-latency") else "max-tpt"
    script, p_flags, d_flags = _SGL[(precision, kind)]
    own = script.split("/")[-1].split("@")[0] == f"{mode}.sh"
    said = script if own else f"{script} (the {kind} sibling of {mode}.sh, not stored here)"
    adp = kind == "max-tpt"
    return Recipe(
        "dynamo-sglang", "dsr1", precision, isl, osl, conc,
        p_n, Worker(4 * p_nodes // p_n, adp, adp, p_flags),
        d_n, Worker(4 * d_nodes // d_n, adp, adp, d_flags), 0, 5,
        f"{IMAX}:.github/configs/nvidia-master.yaml dsr1-{precision}-gb200-dynamo-sglang "
        f"SCRIPT_MODE={mode}; {SGL_SCRIPTS}/{said}",
    )  # fmt: skip


def _mi355x(
    isl: int, osl: int, conc: tuple[int, ...], p_n: int, p_gpus: int, p_dp: bool, d_n: int,
    d_gpus: int, d_dp: bool, mtp: int
) -> Recipe:  # fmt: skip
    """A dsr1-fp8-mi355x-sglang-disagg entry (EP on for both sides, the script's exports)."""
    mori = "--moe-a2a-backend mori --deepep-mode normal "
    p_flags = (
        f"{mori}--enable-two-batch-overlap --max-running-requests 4096 "
        f"--chunked-prefill-size {12288 * p_gpus}" if p_dp
        else "--max-running-requests 256 --chunked-prefill-size 262144"
    )  # fmt: skip
    d_flags = f"{mori}--max-running-requests {160 * d_gpus}" if d_dp else (
        "--max-running-requests 256"
    )  # fmt: skip
    tail = " --mem-fraction-static {} --disable-radix-cache"
    return Recipe(
        "sglang-disagg", "dsr1", "fp8", isl, osl, conc,
        p_n, Worker(p_gpus, p_dp, True, p_flags + tail.format(0.8)),
        d_n, Worker(d_gpus, d_dp, True, d_flags + tail.format(0.85)), mtp, 10,
        f"{IMAX}:.github/configs/amd-master.yaml dsr1-fp8-mi355x-sglang-disagg; "
        f"{MI355X_SCRIPTS}:sglang_disagg_server.sh, set_env_vars.sh@05cc04e0",
    )  # fmt: skip


_T, _F = True, False
RECIPES: tuple[Recipe, ...] = (
    # dsr1-fp4-gb200-dynamo-trt (nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:0.5.1-rc0.pre3):
    # (gpus, attention DP, EP, max_batch_size, max_num_tokens[, kv memory fraction])
    _trt("dsr1", 1024, 1024, (1, 2, 4, 8, 16, 36), 1, (4, _F, _T, 4, 4608),
        4, (8, _F, _T, 32, 128, 0.9), 3),
    _trt("dsr1", 1024, 1024, (512, 1075), 1, (4, _T, _T, 4, 4608),
        1, (16, _T, _T, 64, 256, 0.7), 3),
    _trt("dsr1", 1024, 1024, (2150,), 2, (4, _T, _T, 4, 4608), 1, (16, _T, _T, 128, 256, 0.7), 1),
    _trt("dsr1", 1024, 1024, (512,), 1, (4, _T, _T, 4, 4608), 1, (32, _T, _T, 16, 64, 0.6), 3),
    _trt("dsr1", 1024, 1024, (2252,), 1, (4, _T, _T, 4, 4608), 1, (8, _T, _T, 256, 512, 0.8), 1),
    _trt("dsr1", 1024, 1024, (1, 2, 4, 8, 16, 32, 64, 141), 1, (4, _F, _T, 4, 4608),
        4, (8, _F, _T, 128, 128, 0.9), 0),
    _trt("dsr1", 1024, 1024, (1075,), 1, (4, _T, _T, 4, 4608), 1, (32, _T, _T, 32, 32, 0.7), 0),
    _trt("dsr1", 1024, 1024, (1075,), 1, (4, _T, _T, 4, 4608), 1, (16, _T, _T, 64, 64, 0.75), 0),
    _trt("dsr1", 1024, 1024, (2048, 4300), 2, (4, _T, _T, 4, 4608),
        1, (16, _T, _T, 256, 256, 0.75), 0),
    _trt("dsr1", 1024, 1024, (4300,), 1, (4, _T, _T, 4, 4608), 1, (8, _T, _T, 512, 512, 0.8), 0),
    _trt("dsr1", 8192, 1024, (1, 2, 4, 8, 18), 1, (4, _F, _T, 1, 8448),
        3, (8, _F, _T, 16, 64, 0.9), 3),
    _trt("dsr1", 8192, 1024, (128, 269), 5, (4, _T, _T, 1, 8448), 1, (32, _T, _T, 8, 32, 0.7), 3),
    _trt("dsr1", 8192, 1024, (538,), 8, (4, _T, _T, 1, 8448), 1, (32, _T, _T, 16, 64, 0.7), 3),
    _trt("dsr1", 8192, 1024, (1075,), 8, (4, _T, _T, 1, 8448), 1, (16, _T, _T, 64, 256, 0.75), 2),
    _trt("dsr1", 8192, 1024, (2150,), 6, (4, _T, _T, 1, 8448), 1, (8, _T, _T, 256, 512, 0.8), 1),
    _trt("dsr1", 8192, 1024, (1, 2, 4, 8, 16, 34), 1, (4, _F, _T, 1, 8448),
        3, (8, _F, _T, 32, 32, 0.9), 0),
    _trt("dsr1", 8192, 1024, (256, 538), 4, (4, _T, _T, 1, 8448), 1, (32, _T, _T, 16, 16, 0.7), 0),
    _trt("dsr1", 8192, 1024, (1075,), 6, (4, _T, _T, 1, 8448), 1, (16, _T, _T, 64, 64, 0.75), 0),
    _trt("dsr1", 8192, 1024, (2150,), 8, (4, _T, _T, 1, 8448), 1, (16, _T, _T, 128, 128, 0.75), 0),
    _trt("dsr1", 8192, 1024, (2150,), 5, (4, _T, _T, 1, 8448), 1, (8, _T, _T, 256, 256, 0.8), 0),
    # gptoss-fp4-gb200-dynamo-trt (nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:0.7.0.post2)
    _trt("gptoss", 1024, 1024, (1, 2, 4, 16, 32, 64, 128), 1, (1, _F, _F, 32, 20000),
        1, (4, _F, _F, 256, 20000, 0.9), 0),
    _trt("gptoss", 1024, 1024, (16,), 1, (1, _F, _F, 32, 20000), 4, (2, _F, _F, 32, 20000, 0.9), 0),
    _trt("gptoss", 1024, 1024, (256, 512, 1024, 2048, 2560), 1, (1, _F, _F, 32, 20000),
        1, (2, _T, _T, 1536, 20000, 0.9), 0),
    _trt("gptoss", 1024, 1024, (512, 1024, 2048, 2560), 1, (1, _F, _F, 32, 20000),
        2, (2, _T, _T, 1536, 20000, 0.9), 0),
    _trt("gptoss", 1024, 1024, (256, 1024, 1536), 1, (1, _F, _F, 32, 20000),
        1, (4, _T, _T, 512, 20000, 0.9), 0),
    _trt("gptoss", 1024, 1024, (3072,), 1, (1, _F, _F, 32, 20000),
        3, (4, _T, _T, 1024, 20000, 0.9), 0),
    _trt("gptoss", 8192, 1024, (1,), 1, (1, _F, _F, 32, 20000), 1, (8, _F, _F, 4, 20000, 0.9), 0),
    _trt("gptoss", 8192, 1024, (2, 4, 8, 16, 32, 64), 1, (1, _F, _F, 32, 20000),
        1, (4, _F, _F, 128, 20000, 0.9), 0),
    _trt("gptoss", 8192, 1024, (128, 512), 2, (1, _F, _F, 32, 20000),
        1, (4, _F, _F, 1024, 20000, 0.9), 0),
    _trt("gptoss", 8192, 1024, (256, 384), 2, (1, _F, _F, 32, 20000),
        1, (2, _F, _F, 512, 20000, 0.9), 0),
    _trt("gptoss", 8192, 1024, (128, 512), 2, (1, _F, _F, 32, 20000),
        1, (2, _T, _T, 512, 20000, 0.9), 0),
    # dsr1-fp{8,4}-gb200-dynamo-sglang (lmsysorg/sglang:v0.5.5.post2): PREFILL_NODES, DECODE_NODES
    _sgl("fp8", 1024, 1024, (4096,), 2, 4, 1, 8, "1k1k-max-tpt"),
    _sgl("fp8", 1024, 1024, (2, 4, 8, 16, 64, 128), 1, 1, 4, 4, "1k1k-low-latency"),
    _sgl("fp8", 1024, 1024, (1024, 2048, 4096), 3, 6, 1, 12, "1k1k-max-tpt"),
    # 4..32 at 296c0d72; 64..512 too at SemiAnalysisAI/InferenceX@c040b5cf23ced2c7e23d1da03e1
    # abae89e6426aa (2025-12-19), the nights the rows of those four are from
    _sgl("fp8", 8192, 1024, (4, 8, 16, 32, 64, 128, 256, 512), 1, 1, 1, 1, "8k1k-low-latency"),
    _sgl("fp8", 8192, 1024, (512, 1024, 2048, 6144), 5, 10, 1, 8, "8k1k-max-tpt"),
    _sgl("fp4", 1024, 1024, (4, 8, 32, 64), 1, 1, 2, 2, "1k1k-low-latency"),
    _sgl("fp4", 1024, 1024, (512, 1024, 2048, 4096, 8192), 4, 4, 1, 12, "1k1k-middle-curve"),
    _sgl("fp4", 1024, 1024, (8192, 12000, 15000), 4, 4, 1, 8, "1k1k-max-tpt"),
    _sgl("fp4", 8192, 1024, (4, 8, 32, 64), 1, 1, 4, 4, "8k1k-low-latency"),
    _sgl("fp4", 8192, 1024, (512, 1024, 2048, 4096), 6, 6, 1, 12, "8k1k-middle-curve"),
    _sgl("fp4", 8192, 1024, (1024, 2048, 8192), 10, 10, 1, 8, "8k1k-max-tpt"),
    # dsr1-fp8-mi355x-sglang-disagg (rocm/sgl-dev:sglang-0.5.6.post1-rocm700-mi35x-mori-0113)
    *(
        _mi355x(isl, osl, conc, 1, 8, dp, d_n, 16 // d_n, dp, mtp)
        for isl, osl in ((1024, 1024), (8192, 1024), (1024, 8192))
        for mtp in (2, 0)
        for conc, dp, d_n in (
            ((2048,), True, 1), ((256, 512, 1024), True, 2), ((32, 64, 128), False, 2)
        )
    ),
)  # fmt: skip
