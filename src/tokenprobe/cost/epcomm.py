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
  the others' from their entry GPU). Under group-limited routing (DeepSeek-V3's `n_group` 8 /
  `topk_group` 4: a token's experts in at most 4 of 8 groups) p_gpu and p_dom are those of
  cost/epbalance.py's `reach_probability`, which bounds the nodes a token reaches by
  min(topk_group, m − 1) when a node holds whole groups (the uniform formulas when ungrouped).
- `allgather` (vLLM `--all2all-backend naive` / `allgather_reducescatter`: the EP group
  all-gathers every rank's tokens and reduce-scatters the outputs back; vllm-project/vllm
  v0.10-0.11 vllm/distributed/device_communicators/all2all.py `NaiveAll2AllManager`,
  `AgRsAll2AllManager`): every token to every other EP GPU, d − 1 copies over the link and
  n − d over the NIC, at NCCL's rates like the plain all-to-all.
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

Load imbalance: the exchange ends with the GPU that receives the most copies and the experts'
layer with the one that computes the most rows, the same GPU; both are priced at f times the
mean GPU's (cost/epbalance.py: f from the experts per GPU, the tokens of the step and the
profile's routing skew, lowered by EPLB), except under `allgather`, where every GPU receives
all the tokens.

DeepGEMM's grouped GEMMs (contiguous layout after a normal dispatch, masked layout after a
low-latency one: LMSYS blog, "DeepGEMM Integration") are not a term of their own: the experts'
kernels run at the profile's `moe_compute` / `fp8_moe` rates, and the masked layout's padding
of each expert's rows to a tile only adds FLOP to steps whose expert reads bound them anyway.

Redundant experts (`redundant_experts`, SGLang `--ep-num-redundant-experts`, vLLM
`--eplb-config.num_redundant_experts`): EPLB places E + r physical experts (DeepSeek-V3: 256 + 32
= 288, which 72 GPUs divide; LMSYS blog, "Expert Parallelism Load Balancer"), each GPU holding
(E + r)/n of them (memory) while the routed rows it computes stay T·k/n on the mean GPU. EPLB
(redundant experts, or `eplb` alone: vLLM and SGLang `--enable-eplb`) balances the persistent
part of the expert popularity: cost/epbalance.py prices what it leaves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tokenprobe.cost.release import engine_release
from tokenprobe.errors import ConfigError

BACKENDS = ("all-to-all", "deepep", "allgather")
MODES = ("auto", "normal", "low-latency")  # DeepEP kernels (SGLang --deepep-mode)
DISPATCH_DTYPES = ("auto", "fp8", "bf16")
FP8_SCALE_GROUP = 128  # channels per fp32 scale (DeepEP / SGLang per-token-group quantisation)
FP8_BYTES_PER_ELEMENT = 1 + 4 / FP8_SCALE_GROUP
MAX_REDUNDANT_EXPERTS = 1 << 12


@dataclass(frozen=True, slots=True)
class EpComm:
    """How the MoE layers move tokens under attention DP + EP (module docstring)."""

    backend: str = "all-to-all"
    mode: str = "auto"  # deepep: normal kernels, low-latency kernels, or per step
    dispatch_dtype: str = "auto"  # auto: fp8 for fp8 checkpoints under deepep, else bf16
    overlap: bool = False  # two-batch overlap
    redundant_experts: int = 0
    eplb: bool = False  # experts placed by measured load (implied by redundant experts)

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
        if not isinstance(self.eplb, bool):
            raise ConfigError("eplb", self.eplb, "true or false")
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

    @property
    def balanced(self) -> bool:
        """Whether EPLB places the experts by their measured load (cost/epbalance.py)."""
        return self.eplb or self.redundant_experts > 0

    def label(self) -> str:
        parts = [self.backend if self.backend != "deepep" else f"deepep-{self.mode}"]
        parts += ["two-batch overlap"] if self.overlap else []
        parts += [f"{self.redundant_experts} redundant experts"] if self.redundant_experts else []
        parts += ["EPLB"] if self.eplb and not self.redundant_experts else []
        return ", ".join(parts)


DEFAULT_EP_COMM = EpComm()


# Engine flags that set the EP back end (`ep_comm_from_flags`). SGLang (server_args.py of
# sgl-project/sglang, 2025): `--moe-a2a-backend deepep` (earlier `--enable-deepep-moe`),
# `--deepep-mode auto|normal|low_latency` (default auto), `--enable-two-batch-overlap`,
# `--ep-num-redundant-experts N` (default 0). vLLM: `--all2all-backend deepep_high_throughput`
# (normal kernels) / `deepep_low_latency`, `--enable-dbo` (dual-batch overlap),
# `--eplb-config '{"num_redundant_experts": N}'`; both `--enable-eplb`. vLLM's other back ends
# (vllm-project/vllm v0.10-0.11 vllm/distributed/device_communicators/all2all.py, `--all2all-
# backend` / VLLM_ALL2ALL_BACKEND): `naive` and `allgather_reducescatter` gather every rank's
# tokens to every EP GPU and reduce-scatter the outputs back (backend `allgather`); `pplx`
# sends per expert like DeepEP's low-latency kernels, priced as the plain all-to-all. Without
# them vLLM runs its default back end (VLLM_DEFAULT_ALL2ALL, `vllm_ep_comm`) and SGLang its
# default path (`--moe-a2a-backend none`), priced as the plain all-to-all (DEFAULT_EP_COMM).
# vLLM's `--all2all-backend` / VLLM_ALL2ALL_BACKEND values as (back end, DeepEP kernels): the
# one map of vLLM's names, read by `ep_comm_from_flags` and by the CLI's `--all2all-backend`.
VLLM_ALL2ALL_BACKENDS = {
    "naive": ("allgather", "auto"),
    "allgather_reducescatter": ("allgather", "auto"),
    "pplx": ("all-to-all", "auto"),
    "deepep_high_throughput": ("deepep", "normal"),
    "deepep_low_latency": ("deepep", "low-latency"),
}
# vLLM's back end when neither `--all2all-backend` nor VLLM_ALL2ALL_BACKEND names one, by the
# first release that has it, newest first: "naive" through 0.10 (vllm/envs.py
# `VLLM_ALL2ALL_BACKEND: str = 'naive'`: https://docs.vllm.ai/en/v0.9.0.1/api/vllm/envs.html,
# https://docs.vllm.ai/en/v0.10.1.1/api/vllm/envs.html), "allgather_reducescatter" from 0.11
# (`... = "allgather_reducescatter"`: https://docs.vllm.ai/en/v0.11.0/api/vllm/envs.html, the
# same in v0.11.1 and v0.12.0; later releases move it to vllm/config/parallel.py
# `ParallelConfig.all2all_backend`, default "allgather_reducescatter"). Both gather every
# rank's tokens to every EP GPU (backend `allgather`); a release that cannot be read is today's.
VLLM_DEFAULT_ALL2ALL = (((0, 11, 0), "allgather_reducescatter"), ((0, 0, 0), "naive"))


def vllm_default_all2all(version: str = "") -> str:
    """vLLM's default `--all2all-backend` name in release `version` (VLLM_DEFAULT_ALL2ALL)."""
    release = engine_release(version)  # None for "" or no major.minor
    if release is None:
        return VLLM_DEFAULT_ALL2ALL[0][1]
    return next(name for first, name in VLLM_DEFAULT_ALL2ALL if release >= first)


def vllm_ep_comm(version: str = "") -> EpComm:
    """The EpComm of vLLM `version`'s default back end (VLLM_DEFAULT_ALL2ALL)."""
    return EpComm(*VLLM_ALL2ALL_BACKENDS[vllm_default_all2all(version)])


_SGLANG_DEEPEP_FLAGS = (r"--moe-a2a-backend[ =]deepep\b", r"--enable-deepep-moe\b")
# the flag after the variable: vLLM reads VLLM_ALL2ALL_BACKEND only when the flag is unset
_VLLM_BACKEND_FLAGS = (
    r"VLLM_ALL2ALL_BACKEND=\"?(\w+)",
    r"--all2all-backend[ =](\w+)",
)
_OVERLAP_FLAGS = (r"--enable-two-batch-overlap\b", r"--enable-dbo\b")
_REDUNDANT_FLAGS = (
    r"--ep-num-redundant-experts[ =](\d+)",
    r"num_redundant_experts\"?\s*[:=]\s*(\d+)",
)


def ep_comm_from_flags(command: str, default: EpComm = DEFAULT_EP_COMM) -> EpComm:
    """The EpComm a serving command's flags ask for (the flags above); the back end and its
    kernels are `default`'s (the engine's own: sim.engine_ep_comm) when no flag names one."""
    backend, mode = default.backend, default.mode
    if any(re.search(p, command) for p in _SGLANG_DEEPEP_FLAGS):
        backend = "deepep"
    for pattern in _VLLM_BACKEND_FLAGS:
        hit = re.search(pattern, command)
        if hit and hit.group(1) in VLLM_ALL2ALL_BACKENDS:
            backend, mode = VLLM_ALL2ALL_BACKENDS[hit.group(1)]
    found = re.search(r"--deepep-mode[ =](auto|normal|low_latency)\b", command)
    if found:
        mode = found.group(1).replace("_", "-")
    overlap = any(re.search(p, command) for p in _OVERLAP_FLAGS)
    redundant = 0
    for pattern in _REDUNDANT_FLAGS:
        hit = re.search(pattern, command)
        if hit:
            redundant = int(hit.group(1))
    eplb = re.search(r"--enable-eplb\b", command) is not None
    return EpComm(backend, mode, "auto", overlap, redundant, eplb)
