"""Expert-parallel dispatch and combine as the engines run them (issue 17): the back end that moves
the tokens, the precision of each hop, per-node deduplication, overlap with compute, redundant
experts. `Deployment.ep_comm` holds the setting; the default is the plain all-to-all the cost
model priced before (every routed copy sent, 16-bit both ways, no overlap), so a deployment
that names no back end is priced as it was.

Per MoE layer a GPU under attention DP sends its T tokens to the GPUs holding their k experts
(dispatch) and receives the expert outputs back (combine). With n EP GPUs in m scale-up domains
of d, E routed experts (e = E/n per GPU, e·d per domain), the copies of one token that leave
its GPU are, by back end:

- `all-to-all` (NCCL all-to-all, DeepEP's low-latency kernels): one copy per routed expert,
  k copies, of which k(d−1)/n stay in the domain and k(n−d)/n cross the NIC under uniform
  routing. DeepEP's low-latency kernels send per expert too: their receive buffer holds
  `num_max_dispatch_tokens_per_rank x num_ranks` rows per local expert, and the README's
  bandwidth is k·T·bytes/time (128 tokens x 8 x 7,392 B / 48 GB/s = 158 us vs 155 us
  reported at EP32; deepseek-ai/DeepEP@0aaa6744c890c5af051f622252975c4393795000:README.md,
  "Low-latency kernels with pure RDMA").
- `deepep` normal kernels ("NVLink and RDMA forwarding", same README): a token crosses the NIC
  once per destination domain, to the GPU of the same local index, which forwards it over
  NVLink to each GPU of its domain that holds one of its experts (once per GPU, not per
  expert). With p_gpu = 1 − C(E−e, k)/C(E, k) the chance a given GPU holds one of a token's
  experts and p_dom = 1 − C(E−e·d, k)/C(E, k) the same for a domain (uniform routing):
      NIC copies = (m − 1)·p_dom,   NVLink copies = (n − m)·p_gpu
  (every GPU but the m entry GPUs is reached over NVLink: its own domain's from the sender,
  the others' from their entry GPU). DeepSeek's group-limited routing (4 of 8 groups) would
  lower p_dom further; the model's config does not carry it, so routing is taken uniform.
  SGLang picks the kernels per step (`--deepep-mode auto`: normal for a batch with a prefill,
  low-latency for a decode-only one; LMSYS large-scale-EP blog, "Expert Parallelism with
  DeepEP").

Each copy carries the hidden vector: dispatch in FP8 (e4m3, one fp32 scale per 128 channels:
1 + 4/128 bytes per element, the `fp8_factor` of DeepEP's tests/test_internode.py and SGLang's
`sglang_per_token_group_quant_fp8(hidden_states, 128)` before a normal dispatch when DeepGEMM
runs the experts: sgl-project/sglang@003a81bf2870c07b110de13641ad4f0ba63b1fa1:python/sglang/srt/
layers/moe/token_dispatcher/deepep.py) or 16-bit; combine in BF16 (the experts' outputs). One
hop takes t = α_link + α_extra + max(link_bytes / rate_link, α_nic + nic_bytes / rate_nic),
the two paths running at once (DeepEP pipelines RDMA and NVLink chunks; NCCL's all-to-all sends
to all peers together).

Rates: the plain all-to-all uses the engine profile's `efficiency.link` on both paths
(cost/comm.py); DeepEP's kernels reach their own, read off DeepEP's README (H800, 200 GB/s
NVLink per direction, CX7 400 Gb/s = 50 GB/s): normal intranode EP8 153 / 158 GB/s dispatch /
combine (0.765 / 0.79 of the link); normal internode EP32 58 / 57 GB/s "logical" RDMA bandwidth,
which counts the sender's own domain too (test_internode.py `num_rdma_token_sent` counts every
domain a token reaches): (m−1)/m = 3/4 of it crosses the NIC, 43.5 / 42.75 GB/s = 0.87 / 0.855
of the NIC; low-latency EP32 48 / 53 GB/s counting all k copies, (n−d)/n = 3/4 of them on the
NIC: 0.72 / 0.795.

Overlap (`overlap`): SGLang's two-batch overlap (`--enable-two-batch-overlap`, vLLM's
`--enable-dbo`) splits the batch in two micro-batches and runs one's dispatch/combine while
the other computes (LMSYS blog, "Two-batch Overlap"), so a step takes max(GPU work, EP
communication) instead of their sum (cost.step / cost.dpep apply it); the micro-batches' lower
kernel efficiency at small batches (the blog's −27 % at 32 tokens a GPU) is not modelled.

DeepGEMM's grouped GEMMs (contiguous layout after a normal dispatch, masked layout after a
low-latency one: LMSYS blog, "DeepGEMM Integration") are not a term of their own: the experts'
kernels run at the profile's `moe_compute` / `fp8_moe` rates, and the masked layout's padding
of each expert's rows to a tile only adds FLOP to steps whose expert reads bound them anyway.

Redundant experts (`redundant_experts`, SGLang `--ep-num-redundant-experts`, vLLM
`--eplb-config.num_redundant_experts`): EPLB places E + r physical experts (DeepSeek-V3: 256 + 32
= 288, which 72 GPUs divide; LMSYS blog, "Expert Parallelism Load Balancer"), each GPU holding
(E + r)/n of them (memory) while the routed rows it computes stay T·k/n. The cost model already
prices the experts' compute at the mean load per GPU, which is what EPLB's placement aims for,
so r changes the layout and the memory, not the balance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenprobe.errors import ConfigError

if TYPE_CHECKING:
    from tokenprobe.cost.deployment import Deployment
    from tokenprobe.cost.shape import BatchShape

BACKENDS = ("all-to-all", "deepep")
MODES = ("auto", "normal", "low-latency")  # DeepEP kernels (SGLang --deepep-mode)
DISPATCH_DTYPES = ("auto", "fp8", "bf16")
FP8_SCALE_GROUP = 128  # channels per fp32 scale (DeepEP / SGLang per-token-group quantisation)
FP8_BYTES_PER_ELEMENT = 1 + 4 / FP8_SCALE_GROUP
BF16_BYTES_PER_ELEMENT = 2.0
MAX_REDUNDANT_EXPERTS = 1 << 12

# DeepEP's achieved rates as shares of the link / NIC (module docstring): (dispatch, combine)
DEEPEP_NORMAL_LINK = (153 / 200, 158 / 200)
DEEPEP_NORMAL_NIC = (58 * 3 / 4 / 50, 57 * 3 / 4 / 50)
DEEPEP_LL_NIC = (48 * 3 / 4 / 50, 53 * 3 / 4 / 50)


@dataclass(frozen=True, slots=True)
class EpComm:
    """How the MoE layers move tokens under attention DP + EP (module docstring)."""

    backend: str = "all-to-all"
    mode: str = "auto"  # deepep: normal kernels, low-latency kernels, or per step
    dispatch_dtype: str = "auto"  # auto: fp8 for fp8 checkpoints under deepep, else bf16
    overlap: bool = False  # two-batch overlap
    redundant_experts: int = 0

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("ep_backend", self.backend, BACKENDS),
            ("deepep_mode", self.mode, MODES),
            ("ep_dispatch_dtype", self.dispatch_dtype, DISPATCH_DTYPES),
        ):
            if value not in allowed:
                raise ConfigError(name, value, f"one of {', '.join(allowed)}")
        if not isinstance(self.overlap, bool):
            raise ConfigError("two_batch_overlap", self.overlap, "true or false")
        r = self.redundant_experts
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= MAX_REDUNDANT_EXPERTS:
            raise ConfigError("redundant_experts", r, f"an integer in [0, {MAX_REDUNDANT_EXPERTS}]")

    @classmethod
    def from_mapping(cls, doc: Mapping[str, Any]) -> EpComm:
        """An EpComm from its fields as a run's config.json records them; an unknown key is
        a ConfigError naming it."""
        known = {f.name for f in fields(cls)}
        for key in doc:
            if key not in known:
                raise ConfigError(f"ep_comm.{key}", doc[key], f"one of {', '.join(sorted(known))}")
        return cls(**doc)

    def label(self) -> str:
        parts = [self.backend if self.backend != "deepep" else f"deepep-{self.mode}"]
        parts += ["two-batch overlap"] if self.overlap else []
        parts += [f"{self.redundant_experts} redundant experts"] if self.redundant_experts else []
        return ", ".join(parts)


DEFAULT_EP_COMM = EpComm()


def ep_kernels(dep: Deployment, prefill: bool) -> str:
    """The kernels one step's MoE layers use: `all-to-all`, `normal` or `low-latency`."""
    ep = dep.ep_comm
    if ep.backend == "all-to-all":
        return "all-to-all"
    if ep.mode == "auto":
        return "normal" if prefill else "low-latency"
    return ep.mode


def dispatch_bytes_per_element(dep: Deployment) -> float:
    """Bytes per hidden element of one dispatched copy (module docstring)."""
    dtype = dep.ep_comm.dispatch_dtype
    if dtype == "auto":
        fp8 = dep.ep_comm.backend == "deepep" and dep.weight_dtype.name == "fp8"
        dtype = "fp8" if fp8 else "bf16"
    if dtype == "fp8":
        return FP8_BYTES_PER_ELEMENT
    return max(dep.act_dtype.bytes_per_element, BF16_BYTES_PER_ELEMENT)


def _miss(experts: int, held: float, k: int) -> float:
    """C(E − held, k) / C(E, k): the chance none of a token's k experts is among `held` of E
    (`held` may be fractional: the product form of the ratio)."""
    return math.prod(max(0.0, (experts - held - i) / (experts - i)) for i in range(k))


def copies_per_token(dep: Deployment, kind: str) -> tuple[float, float]:
    """(copies over the scale-up link, copies over the NIC) of one token in one hop
    (module docstring); 0 without attention DP + EP."""
    moe = dep.model.moe
    n = dep.tp
    if moe is None or n <= 1 or not dep.attention_dp:
        return 0.0, 0.0
    d = min(n, dep.domain_gpus)
    m = -(-n // d)
    k, experts = moe.experts_per_token, moe.num_experts
    if kind == "normal":
        p_gpu = 1.0 - _miss(experts, experts / n, k)
        p_dom = 1.0 - _miss(experts, experts * d / n, k) if m > 1 else 0.0
        return (n - m) * p_gpu, (m - 1) * p_dom
    return k * (d - 1) / n, k * (n - d) / n


def _rates(dep: Deployment, kind: str, hop: int) -> tuple[float, float]:
    """(link bytes/s, NIC bytes/s) of one GPU in hop 0 (dispatch) or 1 (combine)."""
    link = dep.gpu.link
    topo = dep.gpu.topology
    nic = topo.nic_bytes_per_s if topo is not None else 0.0
    if kind == "all-to-all":
        eff = dep.efficiency.link
        return link.bytes_per_s * eff * link.collective_factor, nic * eff
    link_rate = link.bytes_per_s * DEEPEP_NORMAL_LINK[hop]
    share = DEEPEP_NORMAL_NIC if kind == "normal" else DEEPEP_LL_NIC
    return link_rate, nic * share[hop]


def _slower(a: Any, b: Any) -> Any:
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


def hop_bytes(dep: Deployment, tokens: Any, prefill: bool) -> list[tuple[Any, Any]]:
    """[(link bytes, NIC bytes)] one GPU sends in the dispatch and in the combine of one MoE
    layer, for its `tokens` tokens."""
    kind = ep_kernels(dep, prefill)
    link_c, nic_c = copies_per_token(dep, kind)
    h = dep.model.hidden_size
    out = []
    combine = max(dep.act_dtype.bytes_per_element, BF16_BYTES_PER_ELEMENT)
    for bpe in (dispatch_bytes_per_element(dep), combine):
        per_token = h * bpe
        out.append((tokens * per_token * link_c, tokens * per_token * nic_c))
    return out


def exchange_parts_s(dep: Deployment, tokens: Any, prefill: bool) -> tuple[Any, Any]:
    """(inside the domain, over the NICs) seconds of one MoE layer's dispatch + combine of a
    GPU's `tokens` tokens: each hop's fixed cost and its slower path; the NIC's seconds count
    as inter-node when the NIC path is the slower one (as cost/comm.py's all-to-all)."""
    kind = ep_kernels(dep, prefill)
    link, eff = dep.gpu.link, dep.efficiency
    topo = dep.gpu.topology
    across = topo is not None and dep.tp > dep.domain_gpus
    fixed = link.latency_s + eff.alltoall_extra_latency_s
    intra: Any = 0.0
    inter: Any = 0.0
    for hop, (link_b, nic_b) in enumerate(hop_bytes(dep, tokens, prefill)):
        link_rate, nic_rate = _rates(dep, kind, hop)
        intra_s = link_b / link_rate
        if not across or topo is None:
            intra = intra + fixed + intra_s
            continue
        nic_s = topo.nic_latency_s + nic_b / nic_rate
        nic_slower = nic_s >= intra_s
        if isinstance(nic_slower, np.ndarray):
            intra = intra + fixed + np.where(nic_slower, 0.0, intra_s)
            inter = inter + np.where(nic_slower, nic_s, 0.0)
        elif nic_slower:
            intra, inter = intra + fixed, inter + nic_s
        else:
            intra, inter = intra + fixed + intra_s, inter
    return intra, inter


def overlapped_s(dep: Deployment, gpu_s: Any, ep_s: Any) -> Any:
    """Seconds of a step's EP communication hidden under its GPU work: min of the two under
    two-batch overlap (the step then takes max(gpu, comm)), else none."""
    if not dep.ep_comm.overlap:
        return 0.0
    return -_slower(-gpu_s, -ep_s)  # the smaller


def physical_experts(dep: Deployment) -> int:
    """Routed experts placed over the EP GPUs: the model's plus EPLB's redundant copies."""
    moe = dep.model.moe
    return 0 if moe is None else moe.num_experts + dep.ep_comm.redundant_experts


def exchange_layers(dep: Deployment) -> int:
    """MoE layers whose tokens are dispatched and combined under attention DP + EP (0 without)."""
    if not (dep.attention_dp and dep.model.moe is not None and dep.tp > 1):
        return 0
    return sum(n for spec, n in dep.model.layer_groups if spec.moe)


def ep_exchange_s(dep: Deployment, shape: BatchShape) -> Any:
    """Seconds of one pass's expert-parallel dispatches and combines under attention DP (0
    otherwise): each GPU's share of the tokens, every MoE layer, priced by the deployment's EP
    back end (cost/epcomm.py; the plain all-to-all by default)."""
    layers = exchange_layers(dep)
    if not layers:
        return 0.0
    intra, inter = exchange_parts_s(dep, shape.tokens / dep.tp, has_prefill(shape))
    return layers * (intra + inter)


def has_prefill(shape: BatchShape) -> bool:
    """Whether a step carries prompt tokens (SGLang's DeepEP `auto` mode picks its kernels by
    it: cost/epcomm.py)."""
    return bool(np.any(np.asarray(shape.prefill_tokens) > 0))


def ep_exchange_breakdown(dep: Deployment, shape: BatchShape, moe_layers: int) -> dict[str, Any]:
    """comm_breakdown's all-to-all entries re-priced by the EP back end: bytes one GPU sends
    per dispatch + combine pair and over its NIC, seconds inside the domain and over the NICs."""
    tokens, prefill = shape.tokens / dep.tp, has_prefill(shape)
    hops = hop_bytes(dep, tokens, prefill)
    intra, inter = exchange_parts_s(dep, tokens, prefill)
    return {
        "alltoall_bytes": sum(link + nic for link, nic in hops) / 2,
        "alltoall_inter_node_bytes": sum(nic for _, nic in hops) / 2,
        "alltoall_s": moe_layers * (intra + inter),
        "ep_backend": dep.ep_comm.label(),
        "ep_kernels": ep_kernels(dep, prefill),
        "ep_dispatch_bytes_per_element": dispatch_bytes_per_element(dep),
    }


# Engine flags that set the EP back end (`ep_comm_from_flags`). SGLang (server_args.py of
# sgl-project/sglang, 2025): `--moe-a2a-backend deepep` (earlier `--enable-deepep-moe`),
# `--deepep-mode auto|normal|low_latency` (default auto), `--enable-two-batch-overlap`,
# `--ep-num-redundant-experts N` (default 0). vLLM: `--all2all-backend deepep_high_throughput`
# (normal kernels) / `deepep_low_latency`, `--enable-dbo` (dual-batch overlap),
# `--eplb-config '{"num_redundant_experts": N}'`. Without them both engines run their default
# path, priced as the plain all-to-all (DEFAULT_EP_COMM).
_DEEPEP_FLAGS = (
    (r"--moe-a2a-backend[ =]deepep\b", None),
    (r"--enable-deepep-moe\b", None),
    (r"--all2all-backend[ =]deepep_high_throughput\b", "normal"),
    (r"--all2all-backend[ =]deepep_low_latency\b", "low-latency"),
)
_OVERLAP_FLAGS = (r"--enable-two-batch-overlap\b", r"--enable-dbo\b")
_REDUNDANT_FLAGS = (
    r"--ep-num-redundant-experts[ =](\d+)",
    r"num_redundant_experts\"?\s*[:=]\s*(\d+)",
)


def ep_comm_from_flags(command: str) -> EpComm:
    """The EpComm a serving command's flags ask for (the flags above), else the default."""
    backend, mode = "all-to-all", "auto"
    for pattern, kind in _DEEPEP_FLAGS:
        if re.search(pattern, command):
            backend, mode = "deepep", kind or mode
    found = re.search(r"--deepep-mode[ =](auto|normal|low_latency)\b", command)
    if found:
        mode = found.group(1).replace("_", "-")
    overlap = any(re.search(p, command) for p in _OVERLAP_FLAGS)
    redundant = 0
    for pattern in _REDUNDANT_FLAGS:
        hit = re.search(pattern, command)
        if hit:
            redundant = int(hit.group(1))
    return EpComm(backend, mode, "auto", overlap, redundant)
