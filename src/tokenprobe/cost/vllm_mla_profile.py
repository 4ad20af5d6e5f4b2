"""What vLLM 0.7's start-up profile takes from an MLA model's KV cache (beyond vllm_mla_era.py).

vLLM 0.7 (V0 `Worker.determine_num_available_blocks`, vllm/worker/worker.py, with
`vllm.utils.memory_profiling`) gives the KV cache

    total_gpu_memory x gpu_memory_utilization - weights - non_torch_increase - torch_peak_increase

and prints each term ("the current vLLM instance can use total_gpu_memory (..) x
gpu_memory_utilization (..) = ..; model weights take ..; non_torch_memory takes ..; PyTorch
activation peak memory takes ..; the rest of the memory reserved for KV Cache is .."). One such
log of DeepSeek-R1 on 8 x H200 at TP 8 with vLLM 0.7.3 (V0, --gpu-memory-utilization 0.85
--max-model-len 128000 --max-num-batched-tokens 32000 --max-num-seqs 1024, block 16; a public
notes page "nvidia cuda", 2025-03-12/15, stored in the code index as file 20903468563) reads
139.81 GiB x 0.85 = 118.84 GiB; weights 83.88 GiB; non_torch 7.16 GiB; activation peak 6.37 GiB;
KV 21.43 GiB = 18,418 blocks of 16 x 61 x 1,280 B (the padded latent of cost/vllm_mla_era.py to
the byte). Three terms the era rule lacked, each read from that log or vLLM's/NCCL's code:

1. `total_gpu_memory` is what CUDA reports (`torch.cuda.mem_get_info`), 139.81 GiB on an H200,
   not the 141 GiB sold (nvidia-smi: 143,771 MiB = 140.4 GiB; the driver keeps the rest):
   `cuda_total_bytes`: the catalog's `cuda_total_gib` (`GpuSpec.cuda_total_bytes`, catalog/
   gpus.toml, known for the GPUs a vLLM log of ours names), the catalog's HBM elsewhere.
2. Activations: the profile run pushes max_num_batched_tokens tokens through the MLA prefill path
   (`MLACommonImpl._forward_prefill`, vllm/attention/backends/mla/utils.py in 0.7.1-0.7.3;
   `DeepseekV2Attention.forward` in 0.7.0: the same tensors), which holds per token and GPU, at
   the o_proj, in the 16-bit dtype: the residual stream and its normed copy (2 x hidden); the
   q_a output (q_lora_rank); the kv_a output that `split` keeps alive (kv_lora_rank + rope) and
   its normed copy (kv_lora_rank); q, k = cat(k_nope, k_pe) and V zero-padded to the QK head
   dim (3 x heads/tp x (nope + rope)); the kv_b output (heads/tp x (nope + v)); the attention
   output cut to V and made contiguous (heads/tp x v); the o_proj output (hidden):
   `mla_prefill_bytes_per_token_per_gpu`. DeepSeek-R1 at TP 8: 3 x 7168 + 1536 + 2 x 512 + 64 +
   16 x (3 x 192 + 256 + 128) = 39,488 elements, 78,976 B per token, against the generic
   model's 45 kB (cost/memory.py: widest per-token tensors). With the fused-MoE chunk caches
   (cost/vllm_mla_era.py), added as cost/memory.py adds them, the log's 32,000 tokens give
   32,000 x 78,976 + 32,000 x 8 x 7,936 x 2 = 6.59e9 B = 6.14 GiB, 6.20 GiB with the fp32
   logits `memory_report` adds, against its 6.37 (-2.7 %).
   (The two do not live at once in the code read: their maximum, ~5.3 GiB with the MoE layer's
   own per-token tensors, would leave the log ~1 GiB short; what else the profile run holds
   is not found, so the sum stands, as before.)
3. non_torch memory: NCCL's NVLink SHARP buffers. On NVSwitch systems of Hopper and later, NCCL
   enables NVLS for communicators of more than 2 GPUs (vllm-project/vllm issue 9699, 8 x H200)
   and each GPU allocates `nvlsTotalSize` = nHeads x nChannels x 2 x (buffSize + memSize):
   "NCCL INFO NVLS comm .. nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize
   301989888 nvlsTotalSize 2415919104" (that issue): 24 channels x 2 x 6 MiB = 288 MiB a rank,
   2.25 GiB at 8. vLLM 0.7's TP group opens two NCCL communicators on its GPUs
   (vllm/distributed/parallel_state.py `GroupCoordinator`: its `PyNcclCommunicator`, for the
   all-reduces, and torch's ProcessGroupNCCL `device_group`, which the logits gather of the
   profile run uses), so 4.5 GiB a GPU at TP 8: `nvls_bytes_per_gpu`. With the rule's 1 GiB
   runtime (CUDA/cuBLAS/NCCL ring buffers, cost/memory.py) that is 5.5 GiB of the log's 7.16:
   1.66 GiB of non-torch memory is not modelled.
Checked against (neither is fitted): that log's KV, modelled 23.50 GiB against 21.43 (+9.7 %:
the 1.66 GiB above and 0.24 GiB of weights); vLLM PR 14842's log (DeepSeek-R1 TP 8 V0 on H200,
main of 2025-03-14 without the absorbed matrices, 0.9, 163,840 tokens, 256 sequences, blocks of
64): 4,739 blocks = 22.05 GiB measured, modelled 25.22 GiB, 5,418 blocks (+14 %; 35.9 GiB
before these terms).
"""

from __future__ import annotations

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.vllm_mla_era import VLLM_MLA_RULES
from tokenprobe.hardware import GpuSpec
from tokenprobe.precision import activation_bytes_per_element
from tokenprobe.units import MiB

# NCCL's NVLS buffers (vllm-project/vllm issue 9699's NCCL log, module docstring)
NVLS_CHANNELS = 24  # nvlsPerRankSize 301989888 / (2 x (4194304 + 2097152))
NVLS_BUFF_BYTES = 4 * MiB  # buffSize 4194304
NVLS_MEM_BYTES = 2 * MiB  # memSize 2097152
NVLS_MIN_RANKS = 3  # "only enabled for n > 2 GPUs" (issue 9699)
NVLS_LINKS = ("nvlink4", "nvlink5")  # NVLink SHARP: NVSwitch of Hopper and later
VLLM_TP_NCCL_COMMUNICATORS = 2  # GroupCoordinator: pynccl + torch device_group


def cuda_total_bytes(gpu: GpuSpec) -> float:
    """The GPU memory CUDA reports (what vLLM multiplies by gpu_memory_utilization): the
    catalog's `cuda_total_gib` where a vLLM log gave it, else the catalog's HBM."""
    return gpu.cuda_total_bytes if gpu.cuda_total_bytes is not None else gpu.hbm_bytes


def nvls_bytes_per_gpu(dep: Deployment) -> float:
    """NCCL NVLS buffers one GPU of the TP group holds (module docstring, 3): 0 off NVSwitch
    (a PCIe part, AMD) or for groups of 2 or fewer."""
    gpu, tp = dep.gpu, dep.tp
    domain = gpu.topology.scale_up_gpus if gpu.topology is not None else tp
    if gpu.vendor != "nvidia" or gpu.link.kind not in NVLS_LINKS or tp < NVLS_MIN_RANKS:
        return 0.0
    if tp > domain:  # the group leaves the NVSwitch domain: NVLS is per domain (not modelled)
        return 0.0
    per_comm = tp * NVLS_CHANNELS * 2 * (NVLS_BUFF_BYTES + NVLS_MEM_BYTES)
    return VLLM_TP_NCCL_COMMUNICATORS * per_comm


def mla_prefill_bytes_per_token_per_gpu(dep: Deployment) -> float:
    """Activation bytes one token holds on one GPU at the o_proj of vLLM 0.7's MLA prefill path
    (module docstring, 2); 0 for a model without MLA."""
    mla = dep.model.mla
    if mla is None:
        return 0.0
    h = dep.model.hidden_size
    heads = dep.model.num_heads / dep.dense_tp
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    latent = mla.q_lora_rank + 2 * mla.kv_lora_rank + mla.qk_rope_head_dim
    per_head = 3 * qk + (mla.qk_nope_head_dim + mla.v_head_dim) + mla.v_head_dim
    ab = activation_bytes_per_element(dep.act_dtype)
    return (3 * h + latent + heads * per_head) * ab


def _era_applies(dep: Deployment, rule: str) -> bool:
    """Whether `rule` is a vLLM 0.7 MLA rule and `dep` an MLA model: what the three terms
    below (the profile run's, module docstring) need."""
    return rule in VLLM_MLA_RULES and dep.model.mla is not None


def era_usable_bytes(dep: Deployment, rule: str, utilization: float) -> float | None:
    """total_gpu_memory x gpu_memory_utilization under a vLLM 0.7 MLA rule; None otherwise."""
    return cuda_total_bytes(dep.gpu) * utilization if _era_applies(dep, rule) else None


def era_runtime_bytes(dep: Deployment, rule: str) -> float:
    """Non-torch memory a vLLM 0.7 MLA rule adds to the runtime parameter (NVLS); 0 otherwise."""
    return nvls_bytes_per_gpu(dep) if _era_applies(dep, rule) else 0.0


def era_prefill_bytes_per_token(dep: Deployment, rule: str) -> float:
    """The MLA prefill path's per-token activation bytes under a vLLM 0.7 MLA rule; 0 otherwise."""
    return mla_prefill_bytes_per_token_per_gpu(dep) if _era_applies(dep, rule) else 0.0
