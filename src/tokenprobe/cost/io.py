"""Host memory, storage and PCIe: model loading (E10) and CPU offload of weights or KV (E11).

Model loading (cold start) is its own fault domain, separate from token generation:
    cold_start = checkpoint_bytes / storage_bytes_per_s          (NVMe or network storage)
               + weights_per_gpu / host_link_bytes_per_s          (host -> GPU, GPUs in parallel)
               + engine_init_s                                    (CUDA context, CUDA graphs)
and a warm restart reads the checkpoint from the page cache at DRAM speed when it fits in host
memory. The stages are summed: vLLM and TensorRT-LLM load shard by shard (read, then copy),
with little overlap. `engine_init_s` defaults to 20 s, between what public vLLM start-up logs
show: CUDA-graph capture alone 15 s for Llama-3-8B (vllm-project/vllm#10460, "Graph capturing
finished in 15 secs"), and V1's whole "init engine (profile, create kv cache, warmup model)"
34.1 s with a warm torch.compile cache (7.5 s compile, 17 s graph capture; vllm-project/vllm
#20264); a cold torch.compile adds tens of seconds (28.8 s in kubernetes-sigs/gateway-api-
inference-extension#550). Both it and the storage bandwidth are parameters (`estimate
--engine-init-s`, `--storage-gb-per-s`).

Offload (vLLM `--cpu-offload-gb`): offloaded weights stay in pinned host memory and are read
over the host link on every forward pass (UVA), so each step pays
offload_bytes / host_link_bytes_per_s on top of its GPU time (no overlap in vLLM's UVA path).
KV swap: moving one request's KV cache between host and GPU costs kv_bytes / host_link speed;
the alternative on preemption is recomputing it (a prefill of the context), and the cheaper
of the two is what an engine should do.
"""

from __future__ import annotations

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.host import DEFAULT_ENGINE_INIT_S
from tokenprobe.cost.memory import (
    DEFAULT_BUDGET,
    kv_bytes_per_request_per_gpu,
    weights_bytes_per_gpu,
)
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.step import step_cost
from tokenprobe.hardware import HostSpec


def load_stage(
    dep: Deployment,
    host: HostSpec,
    storage_bytes_per_s: float | None = None,
    engine_init_s: float = DEFAULT_ENGINE_INIT_S,
) -> dict[str, float | bool]:
    """Cold and warm start times, seconds, and the bytes moved."""
    per_gpu = weights_bytes_per_gpu(dep)
    checkpoint = per_gpu * dep.num_gpus
    storage = storage_bytes_per_s or host.nvme_bytes_per_s
    read_s = checkpoint / storage
    copy_s = per_gpu / dep.gpu.host_bytes_per_s
    cached = checkpoint <= 0.8 * host.dram_bytes  # page cache keeps it for a warm restart
    warm_read_s = checkpoint / host.dram_bytes_per_s if cached else read_s
    return {
        "checkpoint_bytes": checkpoint,
        "storage_bytes_per_s": storage,
        "storage_read_s": read_s,
        "host_to_gpu_s": copy_s,
        "engine_init_s": engine_init_s,
        "cold_start_s": read_s + copy_s + engine_init_s,
        "warm_start_s": warm_read_s + copy_s + engine_init_s,
        "checkpoint_fits_page_cache": cached,
    }


def kv_swap_stage(dep: Deployment, context_tokens: int) -> dict[str, float | str]:
    """Swap one request's KV to/from host memory vs recompute it (prefill of the context)."""
    kv_bytes = kv_bytes_per_request_per_gpu(dep, context_tokens, DEFAULT_BUDGET.block_size)
    swap_s = kv_bytes / dep.gpu.host_bytes_per_s
    recompute_s = step_cost(dep, BatchShape.prefill(context_tokens)).time_s
    return {
        "kv_bytes_per_gpu": kv_bytes,
        "swap_in_s": swap_s,
        "recompute_s": recompute_s,
        "cheaper": "swap" if swap_s < recompute_s else "recompute",
    }
