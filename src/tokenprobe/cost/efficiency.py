"""The cost model's explicit efficiency and overhead parameters.

A roofline gives a lower bound; real kernels reach a fraction of each peak. Those fractions are
parameters here, not constants buried in formulas, so `tokenprobe calibrate` can fit them and a
user can see and change them (`--efficiency key=value`). Defaults and where they come from:

- `compute_prefill` 0.70, `compute_decode` 0.55: achieved fraction of the dense tensor-core peak
  in large (>= 2048 token rows, as in prefill) and skinny (<= 128 rows, as in small decode
  batches) GEMMs; in between it climbs linearly in log2(rows) (`cost.step.rates`), so a mixed
  step or a 900-sequence decode batch is priced by its rows, not by its phase. cuBLAS reaches
  ~70-80 % of peak on H100/A100 bf16 for M, N, K >= 4096 (NVIDIA "Matrix Multiplication
  Background" guide; vidur's H100 profiles in shared/validation: Llama-2-7B mlp_up_proj at
  4096 tokens runs at ~68 % of 989 TFLOP/s), and less at small M where tiles are partly empty.
- `memory` 0.80: achieved fraction of HBM bandwidth by streaming kernels (GEMV weight reads,
  paged attention). STREAM-like copies reach ~90 % on H100; decode kernels with many small
  operators land nearer 75-85 % (LLM-Viewer and vLLM decode measurements).
- `link` 0.80: achieved fraction of the per-direction GPU-GPU bandwidth by a ring all-reduce's
  bus bandwidth (nccl-tests busbw reaches ~80 % of the NVLink per-direction rate; see the vidur
  collectives profile in shared/validation).
- `attention_memory` 0.60: achieved fraction of HBM bandwidth by decode attention over a paged KV
  cache (scattered blocks, one query row per sequence); PagedAttention and FlashInfer decode
  kernels reach ~50-75 % of peak (FlashInfer, arXiv:2501.01005, fig. 7; vLLM paged-attention
  kernel benchmarks), lower than dense weight reads.
- `moe_memory` 0.80: achieved HBM fraction of the fused-MoE expert kernels (vLLM `fused_moe`,
  grouped GEMMs over scattered expert weights). Kept equal to `memory` until calibration
  (issue 8) fits it: ML.ENERGY's vLLM MoE runs suggest lower values on large expert counts.
- `ssm_memory` 1.0: a ceiling, as a fraction of the HBM peak, on the rate of the Mamba-2 layers'
  recurrent-state traffic (the `ssm` operator: each decoding sequence's state read and written
  once a step by the decode kernel, `selective_state_update`); the operator runs at the lesser of
  it and `memory`, so 1 means "as any streaming kernel". vLLM's kernel is Triton, launched with
  one (BLOCK_SIZE_M, num_warps) per state size: (4, 4) for dstate 128 in vLLM 0.11
  (vllm/model_executor/layers/mamba/ops/mamba_ssm.py; Blackwell got its own launch only in
  vllm-project/vllm PR #32873, Jan 2026, "Tune Mamba selective scan kernel for B200"). At that
  launch the kernel is bound on the SM side, not by HBM: on an H200 (4.8 TB/s, 132 SMs) it moves
  2.81-2.85 TB/s (fp32 state, headdim 64, dstate 128: 65,536 B read + written per sequence and
  head, EffBatch 1024 / 4096 / 8192 in 23.85 / 94.81 / 188.20 us; vllm-project/vllm PR #44251's
  heuristic column), the rate the `vllm` profile's `memory` gives an H100 (3.35 TB/s x 0.85), so
  a faster HBM does not speed it up; it scales with the SMs. `vllm-blackwell` sets B200's 148
  SMs (Chips and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025: 74 SMs a
  die, clocks like H100 SXM5's) at the H200 figure per SM: 2.84 TB/s x 148 / 132 / 8 TB/s = 0.40
  (benchmarks/fit_blackwell.py `SSM_MEMORY_B200`), not fitted.
- `quantized_moe` 1.0 and `fp8_moe` 1.0: how fast, relative to the 16-bit kernels, the fused-MoE
  expert kernels run when the expert weights are stored in 4 bits with group scales (MXFP4,
  INT4; `quantized_moe`) or in 8 bits with block or channel scales (FP8 128x128 blocks, INT8;
  `fp8_moe`). Such kernels dequantize inside the GEMM's inner loop, and where the GPU has no
  native unit for the format (MXFP4 on Hopper) they also compute in 16 bits after an unpack; the
  two formats run different kernels (vLLM: Triton w8a8 block-FP8 fused_moe vs Marlin/triton
  MXFP4), so each has its own figure. Each scales both the HBM and the compute rate of the
  `experts` operator. Left at 1 (no penalty) until calibrated: ML.ENERGY's vLLM 0.11 H100 runs
  put Qwen3-235B-FP8 at TP8 *slower* than the same model in BF16 at TP8 (24.7 vs 20.2 ms at
  batch 8), which no bandwidth- or FLOP-based term can produce, while gpt-oss (MXFP4) runs
  close to the bandwidth the same profile gives 16-bit experts.
- `mla_attention` 1.0: how fast, relative to the GQA attention kernels, an engine's multi-head
  latent attention (MLA, DeepSeek-V2/V3/R1, Kimi-K2) kernels run: it scales both the HBM rate
  (`attention_memory`) and the tensor-core rate of the `attention` operator of MLA layers. The
  absorbed decode form (ops in model/attention.py: 2·heads·(2·kv_lora + rope) FLOP per query-key
  pair over a 576-element latent) reads one shared latent per token for all 128 heads, a shape
  paged-attention kernels were not written for; engines of early 2025 ran it in Triton or
  FlashInfer kernels far from either roofline (SGLang 0.4's Triton MLA decode, vLLM 0.7's Triton
  MLA before FlashMLA, github.com/deepseek-ai/FlashMLA: "up to 3000 GB/s in memory-bound
  configuration" on H800, ~90 % of the HBM rate, and the FlashInfer MLA kernels, flashinfer
  0.2.1, Feb 2025; AMD's ROCm blog "Supercharge DeepSeek-R1 Inference on AMD Instinct MI300X",
  Mar 2025: AITER's MLA decode 17x the previous ROCm kernel). 1 (no penalty) unless a profile of
  that era fits it, on DeepSeek-V3/R1 serving runs of early 2025
  (benchmarks/data/deepseek_2025h1.csv): `sglang-2025h1` (SGLang 0.4) 0.56, `vllm-2025h1`
  (vLLM 0.7, FlashMLA) 0.88.
- `mla_absorbed_prefill` 0: the share of an MLA model's prefill query-key pairs that the engine
  computes in the absorbed latent form (decode's 2·heads·(2·kv_lora + rope) FLOP a pair: 278,528
  for DeepSeek-V3's 128 heads) instead of the MHA form over decompressed keys and values
  (2·heads·(qk_nope + rope + v_head): 81,920), 3.4x the FLOP (model/attention.py `Mla`). Not a
  fitted figure: it is what the engine's code does. 0 for vLLM (MHA prefill: vllm/attention/
  backends/mla `_forward_prefill`) and today's SGLang (MHA with a chunked prefix cache since
  sgl-project/sglang PR #5113, Apr 2025). SGLang 0.4.1-0.4.4 on its default Triton backend ran
  the MHA form only for a batch with no cached prefix (deepseek_v2.py `no_absorb`: "Use normal
  computation for prefill and use weight absorption for extend/decode", `is_extend() and
  extend_prefix_lens.sum() == 0`) and the absorbed form for every other extend; PR #5113 says
  that form is slow for prefill ("MLA with absorption has overly large computational intensity
  when q contains many tokens"). With the radix cache on (the default), every prompt after the
  first finds at least its BOS token cached (sglang.bench_serving builds its random prompts
  from tokenizer.encode, which prepends it; a prefix of 1 token is a match at page size 1), so
  `sglang-2025h1` sets 1: every prefill of those benchmarks ran absorbed (SGLang's own log
  line shows it for a fresh prompt: "#new-token: 6748, #cached-token: 1", sgl-project/sglang
  issue #3280, Feb 2025). Those pairs are the `latent_prefill` operator (cost/ops.py).
- `mla_latent_prefill` 1.0: the tensor-core rate of that absorbed-form prefill kernel relative
  to the dense GEMMs at the same rows (only read where `mla_absorbed_prefill` > 0): SGLang 0.4's
  Triton extend kernel over the 576-wide latent, which PR #5113 found to be the bottleneck of
  long prefills ("Profiling revealed that the attention kernel's slow runtime is the primary
  bottleneck"). 1 (no penalty) unless a profile fits it: `sglang-2025h1` 0.03, fitted on its
  fitted rows; the SGLang repo's v0.4.1 DeepSeek-V3 runs identify it once each
  --enable-dp-attention rank prefills its own prompts over all 128 heads on one GPU
  (sim/sglang_dp.py), and the held-out dstack H200 online runs then read TTFT ~3.5 s for one
  3,200-token prompt a rank, as measured (the profile's notes have the figures).
- `moe_compute` 1.0: the tensor-core rate of the fused-MoE expert kernels relative to the dense
  GEMMs at the same phase. A grouped GEMM over many experts gives each expert a handful of rows
  (Qwen3-30B-A3B at batch 512: 8 x 512 / 128 = 32 rows an expert), padded up to the kernel's
  row tile (vLLM fused_moe's BLOCK_SIZE_M, 16-64), and reloads an expert's weight tile for each
  tile of rows, so it runs further below peak than a dense GEMM of the same FLOP. 1 (no
  penalty) until calibrated: ML.ENERGY's vLLM 0.11 MoE runs grow faster with batch than the
  dense-rate roofline (gpt-oss-120b on 2 H100s: +60 us per added sequence measured, +34 us
  with the earlier vllm profile), while the dense models' slope is met within a few per cent.
  The vllm profile fits 0.54, tensorrt-llm 0.91 (Argonne's Mixtral runs).
- `routing_skew` 0: how unevenly a MoE router spreads a batch's tokens over the experts, as the σ
  of a log-normal expert popularity (ops.expected_distinct_experts). At 0 routing is uniform and
  8 tokens of Qwen3-30B-A3B (top-8 of 128) touch 52 distinct experts; real routers favour some
  experts (popular experts take several times the mean load in a batch: e.g. Huang et al.,
  "Towards MoE Deployment", arXiv:2303.06182), so a small decode batch reads fewer expert
  weights than uniform routing says, while a large batch still reads them all. 0 until
  calibrated: the vllm profile fits 1.2 on ML.ENERGY's and GPUStack's MoE runs (at 1.3, 8
  Qwen3-30B-A3B tokens touch ~37 experts, not 52); TensorRT-LLM and vLLM-2024, fitted on
  Argonne's Mixtral (top-2 of 8, all touched from a few tokens), stay near the fit's start.
- `alltoall_extra_latency_s` 0 s: what one expert-parallel all-to-all (dispatch or combine)
  costs beyond the link's per-message latency (`LinkSpec.latency_s`, an all-reduce-hop figure).
  All-to-all among 8 GPUs synchronises all of them, so it is likely larger; left at 0 until
  calibrated. No data here measures it yet: ML.ENERGY's MoE runs, first read as DP+EP, ran
  tensor-parallel attention with experts spread (their launch configs), with no all-to-all.
- `allreduce_extra_latency_s` 0 s: what one tensor-parallel all-reduce (its in-domain phase
  across domains) costs beyond the link's per-message latency (`LinkSpec.latency_s`: the custom
  all-reduce's one-shot figure on NVLink/xGMI), GPU-side time on the step's stream like the
  all-reduce itself (cost/comm.py), so an overlap loop that hides the host's per-step time
  (sim/sglang_overlap.py) does not hide it. It is the collective library's fixed cost where an
  engine runs its TP all-reduces on NCCL/RCCL instead of a custom one-shot kernel: RCCL's ring
  or tree kernels on small messages take 25-26 us at 8-128 B (rccl-tests all_reduce_perf over
  16 MI250X GCDs before RCCL's 1-shot path, ROCm/rccl PR #929), against 3.7-7.8 us for a
  custom one-shot kernel (sgl-project/sglang PR #2904, H100, TP 2-8, 512 B-32 KiB, no graphs).
  0 (the link's figure alone) unless a profile fits it: `sglang-rocm` 70 us (SGLang 0.4.2 on
  MI300X, whose custom all-reduce was off on ROCm: sgl-project/sglang PR #3406; the fit, and
  why it is above rccl-tests' figure, in benchmarks/sglang_rocm.py).
- `request_overhead_s` 0 s: latency every request spends in the serving front end, outside the
  GPU steps: HTTP parsing, chat template, tokenization, hand-off to the engine process (ZMQ in
  vLLM V1 and SGLang), detokenization and streaming of the first chunk. It adds to TTFT and
  end-to-end time (the simulator admits a request that much after it was sent) but occupies no
  GPU. 0 for offline engines (`LLM.generate`, gptSessionBenchmark, the Argonne and TRT-LLM v0.9
  tables), fitted per serving engine: at concurrency 1-4 GPUStack's Qwen3-8B H100 runs measure a
  median TTFT of 60 ms on vLLM 0.11, 27 ms on SGLang 0.5 and 45 ms on TensorRT-LLM 1.x for a
  233-token prompt whose prefill the cost model puts at 8 ms (benchmarks/data).
- `kernel_overhead_s` 4 µs: time every kernel adds beyond its roofline time: launch gap, ramp-up
  and tail (partly filled waves) even inside a CUDA graph (NVIDIA "Getting Started with CUDA
  Graphs": ~2-3 µs launch per kernel; small-kernel tail effects add as much). Each operator
  counts its kernels (ops.py), so this is the per-layer launch/overhead floor.
- `step_overhead_s` 0.5 ms: per engine step CPU work not hidden behind the GPU (scheduling,
  sampling, detokenizing a batch, Python), vLLM v1 scale; TensorRT-LLM is lower.
- `seq_overhead_s` 0 by default: the part of that host work that grows with the sequences in
  the step (input tensors and sampling metadata built per sequence, its new token sampled,
  detokenized and appended), not hidden behind the GPU. vLLM 0.5 spent most of a decode step on
  such CPU work at high batch, which v0.6 cut by overlapping it ("vLLM v0.6.0: 2.7x Throughput
  Improvement", vLLM blog, Sep 2024). Left at 0 in the defaults (no engine-neutral figure);
  the profiles fit it: Argonne's static batches slow down with batch more than the GPU work
  does (without it the vllm-2024 profile put vLLM 0.5 at batch 64 27 % too fast, at batch 1
  5 % too slow).
- `mixed_step_overhead_s` 0 s: host time a step that carries prompt tokens adds, where the
  engine cannot replay such a step as one CUDA graph. vLLM 0.11 captures full graphs only for the
  batches its attention backend declares it can (`AttentionCGSupport`): FlashAttention 3, the
  Hopper default, ALWAYS (mixed prefill-decode batches too), FlashInfer, the Blackwell default,
  UNIFORM_SINGLE_TOKEN_DECODE (vllm/v1/attention/backends/flash_attn.py and flashinfer.py of that
  release; platform default: vllm-project/vllm@1c0d9ecf:vllm/platforms/cuda.py); a mixed step
  then runs piecewise graphs with attention outside them, every layer's attention launched from
  Python, after FlashInfer plans its prefill on the host. 0 (no such step cost) unless a profile
  fits it: `vllm-blackwell` does, on ML.ENERGY's B200 runs, whose output rate sits further below
  batch / median ITL than on H100 (mean step over median step 1.12-1.31 for the 8B-70B dense chat
  runs against 1.03-1.10 on H100; benchmarks/fit_blackwell.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.units import MICRO, MILLI

UNBOUNDED = frozenset({"routing_skew"})  # parameters that are not fractions (>= 0)
SHARES = frozenset({"mla_absorbed_prefill"})  # shares of the work: 0 (none) .. 1 (all)
# upper bounds far beyond any fit (overheads are µs to ms; routing_skew 0.5-1.3), below what
# breaks the arithmetic (a log-normal σ of 1000 turns the expert popularities into NaN)
MAX_OVERHEAD_S = 10.0
MAX_ROUTING_SKEW = 5.0


@dataclass(frozen=True, slots=True)
class Efficiency:
    compute_prefill: float = 0.70
    compute_decode: float = 0.55
    memory: float = 0.80
    attention_memory: float = 0.60
    moe_memory: float = 0.80
    ssm_memory: float = 1.0
    link: float = 0.80
    quantized_moe: float = 1.0
    fp8_moe: float = 1.0
    moe_compute: float = 1.0
    mla_attention: float = 1.0
    mla_absorbed_prefill: float = 0.0
    mla_latent_prefill: float = 1.0
    routing_skew: float = 0.0
    alltoall_extra_latency_s: float = 0.0
    allreduce_extra_latency_s: float = 0.0
    request_overhead_s: float = 0.0
    kernel_overhead_s: float = 4 * MICRO
    step_overhead_s: float = 0.5 * MILLI
    seq_overhead_s: float = 0.0
    mixed_step_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            hi = MAX_OVERHEAD_S if f.name.endswith("_s") else None
            hi = MAX_ROUTING_SKEW if f.name == "routing_skew" else hi
            hi = 1.0 if f.name in SHARES else hi
            value = finite(f"efficiency.{f.name}", getattr(self, f.name), lo=0, hi=hi)
            object.__setattr__(self, f.name, value)
            fraction = not f.name.endswith("_s") and f.name not in UNBOUNDED | SHARES
            if fraction and not 0 < value <= 1:
                raise ConfigError(f"efficiency.{f.name}", value, "a fraction in (0, 1]")

    def with_overrides(self, overrides: dict[str, float]) -> Efficiency:
        names = {f.name for f in fields(self)}
        for key in overrides:
            if key not in names:
                raise ConfigError("efficiency", key, f"one of {', '.join(sorted(names))}")
        return replace(self, **overrides)


DEFAULT_EFFICIENCY = Efficiency()
