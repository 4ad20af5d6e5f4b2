"""A model placed on hardware: GPU type, parallelism, precisions, efficiencies (one frozen object).

Parallelism (requirement E7), as vLLM and TensorRT-LLM lay it out:
- tensor parallel `tp`: every linear layer split over `tp` GPUs (Megatron-LM, Shoeybi et al.
  arXiv:1909.08053): attention heads and MLP columns divide by tp; two all-reduces per layer.
  KV heads are split too; when tp > kv heads they are replicated (vLLM `QKVParallelLinear`).
  MLA's latent KV is not split by heads, so every TP rank holds all of it (vLLM MLA backend).
- pipeline parallel `pp`: layers split into `pp` stages; activations sent stage to stage.
- attention data parallel (`attention_dp=True`, with expert parallelism): vLLM's
  `--data-parallel-size N --enable-expert-parallel` layout for MoE models: every GPU holds the
  whole attention and dense weights and runs them on its 1/N of the sequences; only the routed
  experts are spread over the N GPUs, and tokens reach them by all-to-all (dispatch, combine).
  With `dp_ranks` R < tp, the tp GPUs form R attention ranks of tp / R GPUs each (vLLM
  `--data-parallel-size R --tensor-parallel-size tp/R`, SGLang `--tp tp --dp R
  --enable-dp-attention`): a rank splits its attention and dense layers over its own GPUs
  (Megatron TP, all-reduces inside the rank), the experts spread over all tp GPUs.
- expert parallel (`expert_parallel=True`): the routed experts of an MoE layer are spread whole
  over the tp GPUs instead of each expert being split (vLLM `--enable-expert-parallel`, EP = TP);
  tokens are exchanged by all-to-all.

Topology: the replica's tp x pp GPUs fill `nodes` servers of `gpus_per_node` in order (TP group
by TP group, stage by stage, as vLLM and SGLang place ranks), and GPUs talk over the GPU's
scale-up `link` inside a scale-up domain (`domain_gpus`: the node on HGX and PCIe servers, the
72-GPU rack on GB200/GB300 NVL72) and over the scale-out NIC between domains (cost/comm.py).
Both default from the GPU's catalog topology (`hardware.TopologySpec`); `nodes` to the fewest
servers that hold the replica. A GPU without a topology (a user file without [topology]) is one
domain of any size, as before topology was modelled, and cannot span nodes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from tokenprobe.cost.efficiency import DEFAULT_EFFICIENCY, Efficiency
from tokenprobe.cost.energy import DEFAULT_POWER, PowerModel
from tokenprobe.cost.epcomm import DEFAULT_EP_COMM, EpComm
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.hardware import GpuSpec, get_gpu
from tokenprobe.model import ModelSpec, get_model
from tokenprobe.precision import DEFAULT_ACTIVATION, Dtype, get_dtype

# GPUs one model replica may span (tp x pp): far above any deployment (DeepSeek-V3's largest
# published serving layout is 320 GPUs), so only nonsense is refused.
MAX_GPUS = 1 << 16

# The compute format a matmul falls back to on a GPU without native support for the requested
# one (e.g. fp8 on A100 runs as W8A16: vLLM's Marlin fp8 kernels dequantize to fp16).
_FALLBACK_COMPUTE = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class Deployment:
    model: ModelSpec
    gpu: GpuSpec
    tp: int = 1
    pp: int = 1
    expert_parallel: bool = False
    attention_dp: bool = False
    dp_ranks: int | None = None  # attention ranks under attention_dp; None: one per GPU (tp)
    weight_dtype: Dtype = field(default_factory=lambda: get_dtype("bf16"))
    act_dtype: Dtype = field(default_factory=lambda: get_dtype("bf16"))
    kv_dtype: Dtype = field(default_factory=lambda: get_dtype("bf16"))
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    power: PowerModel = DEFAULT_POWER
    power_limit_w: float | None = None
    cpu_offload_bytes: float = 0.0  # weights per GPU kept in host memory (vLLM --cpu-offload-gb)
    nodes: int | None = None  # servers the replica spans; None: the fewest that hold it
    gpus_per_node: int | None = None  # None: the GPU's catalog topology
    ep_comm: EpComm = DEFAULT_EP_COMM  # EP dispatch/combine back end, overlap, EPLB (epcomm.py)

    def __post_init__(self) -> None:
        if not isinstance(self.ep_comm, EpComm):
            raise ConfigError("ep_comm", self.ep_comm, "an EpComm (cost/epcomm.py)")
        _check_parallelism(
            self.model, self.tp, self.pp, self.expert_parallel, self.attention_dp, self.dp_ranks,
            self.ep_comm.redundant_experts,
        )  # fmt: skip
        per_node, nodes = _placement(self.gpu, self.tp, self.pp, self.nodes, self.gpus_per_node)
        object.__setattr__(self, "gpus_per_node", per_node)
        object.__setattr__(self, "nodes", nodes)
        offload = finite("cpu_offload_bytes", self.cpu_offload_bytes, lo=0)
        object.__setattr__(self, "cpu_offload_bytes", offload)
        if self.power_limit_w is not None:
            object.__setattr__(self, "power_limit_w", finite("power_limit_w", self.power_limit_w))
        if self.power_limit_w is not None and not self.power_limit_w > self.gpu.idle_w:
            # a cap at or below idle power leaves nothing to run kernels with (nvidia-smi
            # refuses limits below the board's minimum, which is well above idle)
            raise ConfigError(
                "power_limit_w", self.power_limit_w,
                f"watts above the {self.gpu.name} idle power ({self.gpu.idle_w:.0f} W)",
            )  # fmt: skip

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    @functools.cached_property
    def domain_gpus(self) -> int:
        """GPUs of one scale-up domain: the NVL72 rack where the fabric spans servers, else
        the node (a GPU without a catalog topology: the whole replica)."""
        topo = self.gpu.topology
        if topo is not None and topo.rack_scale:
            return topo.scale_up_gpus
        assert self.gpus_per_node is not None  # set by __post_init__
        return self.gpus_per_node

    @property
    def crosses_domains(self) -> bool:
        """Some of the replica's traffic takes the scale-out NICs."""
        return self.num_gpus > self.domain_gpus

    @functools.cached_property
    def compute_dtype(self) -> str:
        """The dtype matmuls run in: the activation dtype if the GPU has it natively, else the
        widest supported 16-bit format (weights are dequantized on the fly)."""
        if self.gpu.peak_flop_per_s_for(self.act_dtype.name):
            return self.act_dtype.name
        for name in _FALLBACK_COMPUTE:
            if self.gpu.peak_flop_per_s_for(name):
                return name
        raise ConfigError("gpu", self.gpu.name, "has no tensor-core peak for bf16/fp16/fp32")

    @functools.cached_property
    def peak_flop_per_s(self) -> float:
        peak = self.gpu.peak_flop_per_s_for(self.compute_dtype)
        assert peak is not None  # compute_dtype only returns supported formats
        return peak

    @property
    def dense_tp(self) -> int:
        """How many ways attention and dense layers are split (under attention DP: a rank's
        GPUs, 1 unless `dp_ranks` < tp)."""
        return self.tp // self.dp

    @property
    def dp(self) -> int:
        """How many ways the sequences are split for attention and dense layers (the ranks)."""
        if not self.attention_dp:
            return 1
        return self.tp if self.dp_ranks is None else self.dp_ranks

    @property
    def kv_heads_per_gpu(self) -> float:
        """KV heads a GPU stores per token it holds: split by tp, replicated when tp exceeds them;
        MLA and attention DP: all (the model's attention part says: model/attention.py)."""
        return self.model.attention.kv_heads_per_gpu(self.dense_tp)

    @functools.cached_property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV-cache bytes one token of context occupies on one GPU (its layers, its heads): the
        sum over the model's layers of what each part caches (recurrent layers: none)."""
        kb = self.kv_dtype.bytes_per_element
        per_gpu = self.model.kv_bytes_per_token_per_gpu(kb, self.dense_tp)
        # under attention DP a token lives on one GPU: amortised over the dp GPUs
        return per_gpu / self.pp / self.dp

    @functools.cached_property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token of context occupies on the whole deployment (all GPUs).

        For GQA without replication this is 2 x layers x kv_heads x head_dim x bytes
        (seed 004's formula; e.g. Llama-2-70B fp16: 80 x 8 x 128 x 2 x 2 B = 320 KiB).
        """
        return self.kv_bytes_per_token_per_gpu * self.num_gpus


def _check_parallelism(
    model: ModelSpec,
    tp: int,
    pp: int,
    expert_parallel: bool,
    attention_dp: bool = False,
    dp_ranks: int | None = None,
    redundant_experts: int = 0,
) -> None:
    for name, value in (("tp", tp), ("pp", pp)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GPUS:
            raise ConfigError(name, value, f"an integer in [1, {MAX_GPUS:,}]")
    if tp * pp > MAX_GPUS:
        raise ConfigError("tp x pp", tp * pp, f"at most {MAX_GPUS:,} GPUs per replica")
    for name, flag in (("expert_parallel", expert_parallel), ("attention_dp", attention_dp)):
        if not isinstance(flag, bool):
            raise ConfigError(name, flag, "true or false")
    if attention_dp and not expert_parallel:
        raise ConfigError("attention_dp", True, "needs expert_parallel (vLLM's DP + EP layout)")
    dense = tp
    if dp_ranks is not None:
        if isinstance(dp_ranks, bool) or not isinstance(dp_ranks, int) or dp_ranks < 1:
            raise ConfigError("dp_ranks", dp_ranks, "an integer >= 1")
        if not attention_dp or tp % dp_ranks:
            raise ConfigError("dp_ranks", dp_ranks, f"with attention_dp, a divisor of tp={tp}")
        dense = tp // dp_ranks
    elif attention_dp:
        dense = 1
    name = "tp" if not attention_dp else "tp / dp_ranks"  # the GPUs that split a layer
    if model.num_heads % dense:
        raise ConfigError(
            name, dense, f"must divide the {model.num_heads} attention heads of {model.name}"
        )
    for kv in model.kv_head_counts:  # one count, or each layer's (DeciLM's variable GQA)
        if model.mla is None and kv % dense and dense % kv:
            raise ConfigError(name, dense, f"must divide or be a multiple of the {kv} KV heads")
    if pp > model.num_layers:
        raise ConfigError("pp", pp, f"at most the {model.num_layers} layers of {model.name}")
    if expert_parallel:
        if model.moe is None:
            raise ConfigError("expert_parallel", True, f"{model.name} has no experts")
        physical = model.moe.num_experts + redundant_experts  # EPLB's copies (epcomm.py)
        if physical % tp:
            extra = f" + {redundant_experts} redundant" if redundant_experts else ""
            raise ConfigError(
                "tp",
                tp,
                f"must divide the {model.moe.num_experts}{extra} experts under expert "
                "parallelism (EPLB's redundant experts can make it: --ep-num-redundant-experts)",
            )
    elif redundant_experts:
        raise ConfigError("redundant_experts", redundant_experts, "0 without expert parallelism")


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GPUS:
        raise ConfigError(name, value, f"an integer in [1, {MAX_GPUS:,}]")
    return value


def _placement(
    gpu: GpuSpec, tp: int, pp: int, nodes: int | None, gpus_per_node: int | None
) -> tuple[int, int]:
    """(gpus_per_node, nodes) of a replica of tp x pp GPUs, checked: enough GPUs, no empty
    server, and a TP group that does not straddle a scale-up domain when it leaves one."""
    n, topo = tp * pp, gpu.topology
    if gpus_per_node is None:
        gpus_per_node = n if topo is None else topo.gpus_per_node
    per_node = _count("gpus_per_node", gpus_per_node)
    count = _count("nodes", nodes) if nodes is not None else -(-n // per_node)
    if count * per_node < n:
        raise ConfigError(
            "nodes x gpus_per_node", f"{count} x {per_node} = {count * per_node}",
            f"at least tp x pp = {n} GPUs",
        )  # fmt: skip
    if (count - 1) * per_node >= n:
        raise ConfigError(
            "nodes", count,
            f"at most {-(-n // per_node)}: tp x pp = {n} GPUs fill that many servers of "
            f"{per_node}; to spread them over {count}, give fewer GPUs per node",
        )  # fmt: skip
    if count > 1 and topo is None:
        raise ConfigError(
            "nodes", count,
            f"1 ({gpu.name} has no [{gpu.name}.topology] with a NIC to price traffic "
            "between nodes)",
        )  # fmt: skip
    domain = topo.scale_up_gpus if topo is not None and topo.rack_scale else per_node
    if n > domain and tp % domain and domain % tp:
        raise ConfigError(
            "tp", tp,
            f"a divisor or multiple of the {domain}-GPU scale-up domain of {gpu.name} "
            f"(a TP group may not straddle it; {count} nodes x {per_node} GPUs)",
        )  # fmt: skip
    return per_node, count


def make_deployment(
    model: str | ModelSpec,
    gpu: str | GpuSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    expert_parallel: bool = False,
    attention_dp: bool = False,
    dp_ranks: int | None = None,
    weight_dtype: str = "bf16",
    act_dtype: str | None = None,
    kv_dtype: str | None = None,
    efficiency: Efficiency | None = None,
    power: PowerModel | None = None,
    power_limit_w: float | None = None,
    cpu_offload_bytes: float = 0.0,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    ep_comm: EpComm | None = None,
) -> Deployment:
    """Resolve names to specs and dtypes. Activations default to what the weight format computes
    in (precision.DEFAULT_ACTIVATION); the KV cache defaults to 16-bit, except fp8 W8A8 whose
    engines store an fp8 cache by default (TensorRT-LLM FP8 recipe)."""
    w = get_dtype(weight_dtype, "weight_dtype")
    act = get_dtype(act_dtype or DEFAULT_ACTIVATION[w.name], "act_dtype")
    default_kv = "fp8" if act.name == "fp8" else ("fp16" if act.name == "fp16" else "bf16")
    kv = get_dtype(kv_dtype or default_kv, "kv_dtype")
    return Deployment(
        model=get_model(model) if isinstance(model, str) else model,
        gpu=get_gpu(gpu) if isinstance(gpu, str) else gpu,
        tp=tp,
        pp=pp,
        expert_parallel=expert_parallel,
        attention_dp=attention_dp,
        dp_ranks=dp_ranks,
        weight_dtype=w,
        act_dtype=act,
        kv_dtype=kv,
        efficiency=efficiency or DEFAULT_EFFICIENCY,
        power=power or DEFAULT_POWER,
        power_limit_w=power_limit_w,
        cpu_offload_bytes=cpu_offload_bytes,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        ep_comm=ep_comm or DEFAULT_EP_COMM,
    )
