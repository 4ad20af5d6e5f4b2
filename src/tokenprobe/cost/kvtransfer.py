"""A prompt's KV cache moved from a prefill worker to a decode worker (disaggregated serving:
SGLang PD with Mooncake/NIXL, NVIDIA Dynamo, llm-d, vLLM's P/D connectors). The one home of the
transfer's price: `simulate --disaggregate` (sim/disagg.py) queues each transfer on the decode
worker's link, `estimate --disaggregate` shows one as a stage of its own.

    time = latency + bytes / bandwidth

Bytes: the prompt's KV as the receiving worker stores it, `kv_bytes_per_token x prompt` of the
decode worker's deployment (every receiving GPU gets its shard: with prefill tp ≠ decode tp the
total is the same, the KV of the model's layers and heads, re-cut into the decode worker's
shards; only KV heads replicated over tp > KV heads, and MLA's latent held whole by every
rank, add copies). vLLM's NIXL connector moves KV between workers of different tp
(docs.vllm.ai/en/stable/features/nixl_connector_compatibility: "Hetero TP").

Bandwidth: the shards move in parallel, one GPU link each; a worker pair of tp_p and tp_d GPUs
uses min(tp_p, tp_d) links at once (the side with fewer GPUs sends or receives the larger
shards, and sets the pace), each:
- the scale-up link (NVLink, xGMI) when every worker fits in one scale-up domain (NIXL moves KV
  over NVLink inside a node);
- else each GPU's scale-out NIC (catalog topology: DGX H100 / B200 each have 8 x ConnectX-7
  400 Gb/s for 8 GPUs, NVIDIA DGX datasheets); a GPU without a topology: one 400 Gb/s NIC.
Latency: the GPU link's small-message latency plus, across domains, the NIC's, a lower bound
(the connectors' own bookkeeping is not modelled).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tokenprobe.cost.deployment import Deployment
from tokenprobe.errors import ConfigError
from tokenprobe.units import GIGA

NIC_BYTES_PER_S_PER_GPU = 400 * GIGA / 8  # one ConnectX-7 400 Gb/s per GPU (DGX H100/B200)
MAX_WORKERS = 1024
_SPEC = re.compile(r"^\s*(\d+)\s*p\s*(\d+)\s*d\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Split:
    """How many prefill and decode workers (`1p3d`)."""

    prefill: int
    decode: int

    @classmethod
    def parse(cls, text: str) -> Split:
        m = _SPEC.match(text)
        if m is None:
            raise ConfigError("disaggregate", text, "P prefill and D decode workers, e.g. 1p3d")
        split = cls(int(m.group(1)), int(m.group(2)))
        for name, n in (("prefill workers", split.prefill), ("decode workers", split.decode)):
            if not 1 <= n <= MAX_WORKERS:
                raise ConfigError("disaggregate", text, f"{name} in [1, {MAX_WORKERS}]")
        return split


@dataclass(frozen=True, slots=True)
class KvLink:
    """The path of a prompt's KV to a decode worker: `links` GPU links in parallel."""

    kind: str  # the scale-up link's kind ("nvlink", "xgmi", ...) or "nic"
    links: int
    bytes_per_s: float  # all the links together
    latency_s: float

    def time_s(self, n_bytes: float) -> float:
        return self.latency_s + n_bytes / self.bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "link": self.kind,
            "links": self.links,
            "bytes_per_s": self.bytes_per_s,
            "latency_s": self.latency_s,
        }


def kv_link(
    prefill: Deployment,
    decode: Deployment,
    prefill_workers: int = 1,
    decode_workers: int = 1,
    bytes_per_s: float | None = None,
) -> KvLink:
    """The link from a `prefill` worker to a `decode` worker when `prefill_workers` and
    `decode_workers` of them are deployed (module docstring); `bytes_per_s` replaces the
    bandwidth (`--kv-link-gb-per-s`)."""
    gpus = prefill.num_gpus * prefill_workers + decode.num_gpus * decode_workers
    links = min(prefill.num_gpus, decode.num_gpus)
    gpu, topo = decode.gpu, decode.gpu.topology
    if topo is not None and gpus <= topo.scale_up_gpus:
        link = KvLink(gpu.link.kind, links, gpu.link.bytes_per_s * links, gpu.link.latency_s)
    elif topo is not None:
        latency = gpu.link.latency_s + topo.nic_latency_s
        link = KvLink("nic", links, topo.nic_bytes_per_s * links, latency)
    else:
        link = KvLink("nic", links, NIC_BYTES_PER_S_PER_GPU * links, gpu.link.latency_s)
    if bytes_per_s is not None:
        if not bytes_per_s > 0:
            raise ConfigError("kv_link_bytes_per_s", bytes_per_s, "a bandwidth > 0")
        link = KvLink(link.kind, links, bytes_per_s, link.latency_s)
    return link


def kv_transfer_bytes(decode: Deployment, prompt_tokens: float) -> float:
    """Bytes of a prompt's KV as the decode worker stores it (module docstring)."""
    return decode.kv_bytes_per_token * prompt_tokens


def kv_transfer_stage(
    prefill: Deployment,
    decode: Deployment,
    prompt_tokens: int,
    batch: int = 1,
    split: Split | None = None,
) -> dict[str, Any]:
    """`estimate --disaggregate`: one prefill worker's batch of `batch` prompts moved to one
    decode worker of a `split` deployment, back to back on its link (as the simulator queues
    them); its time adds to TTFT."""
    split = split or Split(1, 1)
    link = kv_link(prefill, decode, split.prefill, split.decode)
    n_bytes = kv_transfer_bytes(decode, prompt_tokens)
    one = link.time_s(n_bytes)
    return {
        "disaggregate": f"{split.prefill}p{split.decode}d",
        **link.to_dict(),
        "prefill_tp": prefill.tp,
        "decode_tp": decode.tp,
        "bytes_per_request": n_bytes,
        "bytes": n_bytes * batch,
        "time_per_request_s": one,
        "time_s": one * batch,
    }
