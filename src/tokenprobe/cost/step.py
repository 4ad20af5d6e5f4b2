"""Time, power and energy of one engine step from the roofline (requirements E5-E7, E12, E13).

Each operator takes t = kernels·α + max(FLOP / (peak·η_c), bytes / (BW_hbm·η_m)) (Williams, Waterman
& Patterson, "Roofline", CACM 2009; per-operator as in LLM-Viewer, arXiv:2402.16363). Tensor-
parallel all-reduces (one per row-parallel matmul, Megatron-LM: two per layer, after attention and
after the MLP/MoE; one per Nemotron-H block) and pipeline sends are added without overlap, as vLLM
runs them; a fixed per-step overhead (scheduling, sampling) closes the step. Every second of the
step is attributed to the resource that bounds it: compute, memory (HBM), communication, or overhead
(per-kernel overheads and the step overhead).

With pipeline parallelism the step is one full pass through all `pp` stages (the latency a token
sees); each GPU works 1/pp of it unless the engine keeps pp micro-batches in flight.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any

import numpy as np

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.energy import GpuWork
from tokenprobe.cost.energy_figures import EnergyFigures, energy_figures
from tokenprobe.cost.ops import (
    EXPERT_EXCESS,
    LATENT_PREFILL,
    MEMORY_EFFICIENCY_FIELD,
    OpTerm,
    expert_weight_elements,
    head_terms,
    layer_terms,
)
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.stepcomm import comm_volumes, exposed_comm_s, link_bytes, offload_step_s

BOUNDS = ("compute", "memory", "communication", "overhead")


@dataclass(frozen=True, slots=True)
class OpCost:
    """One operator of a step on one GPU, all its layers together."""

    name: str
    layers: float
    flop: float
    hbm_bytes: float
    compute_s: float  # at the achievable compute rate
    memory_s: float  # at the achievable HBM rate
    time_s: float
    bound: str

    @property
    def arithmetic_intensity(self) -> float:
        """FLOP per HBM byte (the roofline's x axis)."""
        return self.flop / self.hbm_bytes if self.hbm_bytes else 0.0


@dataclass(frozen=True, slots=True)
class StepCost:
    """One step. Times in seconds; FLOP and bytes per GPU; energy over all GPUs."""

    time_s: float
    compute_s: float  # time attributed to compute-bound operators
    memory_s: float
    comm_s: float
    overhead_s: float
    flop: float
    hbm_bytes: float
    compute_util: float  # 0..1, tensor cores busy at the achievable rate
    memory_util: float
    power_w: float  # per GPU, average over the step
    energy_j: float  # all GPUs
    clock_fraction: float  # < 1 when a power limit slows the clock

    @property
    def bound(self) -> str:
        return max(self.shares().items(), key=lambda kv: kv[1])[0]

    def shares(self) -> dict[str, float]:
        total = self.time_s or 1.0
        return {
            "compute": self.compute_s / total,
            "memory": self.memory_s / total,
            "communication": self.comm_s / total,
            "overhead": self.overhead_s / total,
        }


def terms(dep: Deployment, shape: BatchShape) -> Iterator[OpTerm]:
    return chain(layer_terms(dep, shape), head_terms(dep, shape))


# GEMM rows between which the tensor-core efficiency climbs from `compute_decode` to
# `compute_prefill` (linear in log2 rows). A GEMM of M rows is cut into tiles of 64-128 rows
# (Hopper wgmma / Ampere mma CTA tiles); with few rows most of each tile and most SMs idle, and
# cuBLAS reaches its large-GEMM efficiency only once M gives every SM whole tiles over the
# weight's N dimension (NVIDIA "Matrix Multiplication Background" guide, tile and wave
# quantization). Rows, not the step's phase, set it: a decode batch of 900 sequences is a large
# GEMM, a 64-token prefill chunk a small one.
SMALL_GEMM_ROWS = 128.0
LARGE_GEMM_ROWS = 2048.0
_LOG2_SPAN = math.log2(LARGE_GEMM_ROWS / SMALL_GEMM_ROWS)


def rates(dep: Deployment, rows: Any) -> tuple[Any, float]:
    """Achievable FLOP/s for GEMMs of `rows` token rows (a number or an array), and HBM bytes/s."""
    eff = dep.efficiency
    if isinstance(rows, (int, float)):  # the simulator's per-step path: no numpy scalars
        x = math.log2(max(rows, 1.0) / SMALL_GEMM_ROWS) / _LOG2_SPAN
        frac: Any = min(1.0, max(0.0, x))
    else:
        frac = np.clip(np.log2(np.maximum(rows, 1.0) / SMALL_GEMM_ROWS) / _LOG2_SPAN, 0.0, 1.0)
    eta_c = eff.compute_decode + (eff.compute_prefill - eff.compute_decode) * frac
    return dep.peak_flop_per_s * eta_c, dep.gpu.hbm_bytes_per_s * eff.memory


def host_time_s(dep: Deployment, shape: BatchShape) -> Any:
    """Host work the GPU does not hide: once per step, plus per sequence stepped (sampling,
    input rows, detokenization; `Efficiency.seq_overhead_s`), plus once in a step with prompt
    tokens (`Efficiency.mixed_step_overhead_s`). Numbers or arrays (sweep.py).
    Under attention DP `shape` is the whole step and each of the `dep.dp` ranks' schedulers
    steps its own 1/dp of the sequences, in parallel (SGLang starts one scheduler process a DP
    rank, sgl-project/sglang `managers/data_parallel_controller.py`; vLLM one engine core a
    rank, cost/dpep.py), so a step waits for one rank's share, as the gang step has it."""
    eff = dep.efficiency
    host = eff.step_overhead_s + eff.seq_overhead_s * shape.logit_rows / dep.dp
    if not eff.mixed_step_overhead_s:
        return host
    # a step with prompt tokens, where the engine cannot replay it as one CUDA graph
    seqs = shape.prefill_seqs
    has_prompt = seqs > 0 if isinstance(seqs, (int, float)) else np.asarray(seqs) > 0
    return host + eff.mixed_step_overhead_s * has_prompt


def special_byte_rates(dep: Deployment) -> dict[str, float]:
    """Achievable HBM bytes/s of the operators with an efficiency of their own."""
    hbm, eff = dep.gpu.hbm_bytes_per_s, dep.efficiency
    rates = {op: hbm * getattr(eff, field) for op, field in MEMORY_EFFICIENCY_FIELD.items()}
    rates["experts"] *= _quantized_moe_scale(dep)
    rates[EXPERT_EXCESS] = rates["experts"]  # the same kernels, more rows
    rates["attention"] *= mla_attention_scale(dep)
    rates["ssm"] = min(rates["ssm"], hbm * eff.memory)  # `ssm_memory` is a ceiling
    return rates


def mla_attention_scale(dep: Deployment) -> float:
    """Rate of the attention kernels of an MLA model relative to GQA ones
    (`Efficiency.mla_attention`: the era's latent-attention kernels, both roofline rates)."""
    return dep.efficiency.mla_attention if dep.model.mla is not None else 1.0


def _quantized_moe_scale(dep: Deployment) -> float:
    """Rate of the expert kernels on quantized expert weights relative to 16-bit ones: 8-bit
    (FP8 with block or channel scales, INT8) and sub-8-bit (MXFP4, INT4 groups) formats run
    different kernels, so each has its own efficiency (`fp8_moe`, `quantized_moe`)."""
    bits = dep.weight_dtype.bits
    if dep.model.moe is None or bits >= 16:
        return 1.0
    return dep.efficiency.fp8_moe if bits >= 8 else dep.efficiency.quantized_moe


def flop_rate_scales(dep: Deployment) -> dict[str, float]:
    """Operators whose kernels reach less of the tensor-core rate than the dense GEMMs: the
    fused-MoE expert kernels (`Efficiency.moe_compute`), slower again when they dequantize
    quantized expert weights (`fp8_moe`, `quantized_moe`, which slow their HBM rate too), an
    MLA model's attention (`mla_attention`, which slows its HBM rate too) and its prefill in the
    absorbed form where an engine runs it so (`mla_latent_prefill`)."""
    scales = {
        "attention": mla_attention_scale(dep),
        LATENT_PREFILL: dep.efficiency.mla_latent_prefill,
    }
    if dep.model.moe is not None:
        scales["experts"] = dep.efficiency.moe_compute * _quantized_moe_scale(dep)
        scales[EXPERT_EXCESS] = scales["experts"]
    return {op: scale for op, scale in scales.items() if scale != 1}


@dataclass(frozen=True, slots=True)
class StepConstants:
    """What the price of a step derives from its Deployment alone, worked out once per
    deployment (`step_constants`) instead of on every step: the simulator prices 10^4-10^5
    steps exactly per run on one deployment. The same values the functions above return, so a
    step costs exactly what it did without them (tests/cost/test_step_constants.py)."""

    special: dict[str, float]  # special_byte_rates
    fscale: dict[str, float]  # flop_rate_scales
    kernel_overhead_s: float  # Efficiency.kernel_overhead_s
    quantized_moe_scale: float
    cap_w: float  # power_cap_w
    capped: bool  # cap below the TDP: the step may run at a lower clock
    no_comm: bool  # no all-reduce, EP exchange, pipeline send or offload: comm and link bytes 0
    offload_s: float  # a step's streamed-weight seconds (stepcomm.offload_step_s), inside comm_s
    figures: EnergyFigures
    die_dynamic_w: float
    dequant_ops_per_element: float  # CUDA-core ops per expert weight element read (dequant_ops)
    rates: dict[float, tuple[float, float]]  # `rates` by GEMM rows, filled as steps ask


def step_constants(dep: Deployment) -> StepConstants:
    """`dep`'s StepConstants, kept on the (frozen, so unchanging) Deployment as
    `ops.group_coeffs` keeps its layer coefficients."""
    cached: StepConstants | None = dep.__dict__.get("_step_constants")
    if cached is None:
        cached = _constants(dep)
        object.__setattr__(dep, "_step_constants", cached)
    return cached


def _constants(dep: Deployment) -> StepConstants:
    _, allreduces, _, a2a_count = comm_volumes(dep, BatchShape(decode_seqs=1))
    figures = energy_figures(dep.gpu)
    cap_w = power_cap_w(dep)
    return StepConstants(
        special=special_byte_rates(dep),
        fscale=flop_rate_scales(dep),
        kernel_overhead_s=dep.efficiency.kernel_overhead_s,
        quantized_moe_scale=_quantized_moe_scale(dep),
        cap_w=cap_w,
        capped=cap_w < dep.gpu.tdp_w,
        no_comm=not (allreduces or a2a_count or dep.pp > 1 or dep.cpu_offload_bytes > 0),
        offload_s=offload_step_s(dep),
        figures=figures,
        die_dynamic_w=figures.die_dynamic_w(dep.gpu),
        dequant_ops_per_element=_dequant_ops_per_element(dep, figures),
        rates={},
    )


def op_costs(dep: Deployment, shape: BatchShape, clock_fraction: float = 1.0) -> list[OpCost]:
    """Per-operator detail of a step (for reports, the roofline plot and attribution)."""
    out = []
    for name, n, flop, nbytes, tc, tm, tk in _op_times(dep, shape, clock_fraction):
        bound = "overhead" if tk > tc and tk > tm else ("compute" if tc >= tm else "memory")
        out.append(
            OpCost(name, n, n * flop, n * nbytes, n * tc, n * tm, n * (tk + max(tc, tm)), bound)
        )
    return out


def _op_times(
    dep: Deployment, shape: BatchShape, clock_fraction: float
) -> Iterator[tuple[str, float, float, float, float, float, float]]:
    """(name, layers, flop, bytes, compute_s, memory_s, kernel_overhead_s) per layer."""
    k = step_constants(dep)
    rows = shape.tokens
    if isinstance(rows, (int, float)):  # a step's rates by its rows, kept with the constants
        rated = k.rates.get(rows)
        if rated is None:
            rated = k.rates[rows] = rates(dep, rows)
        flop_rate, byte_rate = rated
    else:
        flop_rate, byte_rate = rates(dep, rows)
    flop_rate *= clock_fraction
    # memory-bound kernels lose only a little bandwidth when the SM clock drops (power.py)
    mem_scale = clock_fraction**dep.power.memory_clock_sensitivity
    byte_rate *= mem_scale
    special, fscale, alpha = k.special, k.fscale, k.kernel_overhead_s
    base_byte_rate = byte_rate / mem_scale  # the operators without a rate of their own
    for name, n, flop, nbytes, kernels in terms(dep, shape):
        tm = nbytes / (special.get(name, base_byte_rate) * mem_scale)
        tc = flop / (flop_rate * fscale.get(name, 1.0))
        yield name, n, flop, nbytes, tc, tm, kernels * alpha


def step_cost(dep: Deployment, shape: BatchShape) -> StepCost:
    """Roofline time, power and energy of one step of `shape` on deployment `dep`. Under a power
    limit the clock falls until the work fits (cost.energy's DVFS law) and the step stretches."""
    return StepCost(*_step_figures(dep, shape))


def step_time_energy(dep: Deployment, shape: BatchShape) -> tuple[float, float]:
    """`step_cost`'s time_s and energy_j, without building the StepCost (the simulator's exact
    steps: 10^4-10^5 a run)."""
    figures = _step_figures(dep, shape)
    return figures[0], figures[_ENERGY]


# _step_at_clock's figures come as a tuple in StepCost's field order (one StepCost per call of
# step_cost only: building the frozen dataclass took a tenth of an exact step's price)
_FIELDS = [f.name for f in fields(StepCost)]
_POWER, _ENERGY = _FIELDS.index("power_w"), _FIELDS.index("energy_j")
_Figures = tuple[float, ...]


def _step_figures(dep: Deployment, shape: BatchShape) -> _Figures:
    figures, wanted_w = _step_at_clock(dep, shape, 1.0)
    k = step_constants(dep)
    if k.capped and figures[_POWER] >= k.cap_w:  # the work asks more than the cap allows
        # Efficiencies are fitted at the TDP, where large GEMMs already run power-limited; only
        # the cap's cut below what the work draws at the TDP slows the clock further.
        f = dep.power.clock_fraction(dep.gpu.idle_w, min(dep.gpu.tdp_w, wanted_w), k.cap_w)
        if f < 1.0:
            figures, _ = _step_at_clock(dep, shape, f)
    return figures


def power_cap_w(dep: Deployment) -> float:
    """One GPU's power ceiling: its power limit, at most its TDP."""
    limit = dep.power_limit_w
    return dep.gpu.tdp_w if limit is None else min(limit, dep.gpu.tdp_w)


def _step_at_clock(
    dep: Deployment, shape: BatchShape, clock_fraction: float
) -> tuple[_Figures, float]:
    """The step at `clock_fraction` of full clock, its power capped (StepCost's fields); and
    the power it asks. The deployment's constants come from `step_constants`."""
    compute_s = memory_s = kernel_s = busy_c = busy_m = flop = nbytes = 0.0
    experts_s = 0.0
    for name, n, op_flop, op_bytes, tc, tm, tk in _op_times(dep, shape, clock_fraction):
        if tc >= tm:
            compute_s += n * tc
        else:
            memory_s += n * tm
        if name == EXPERT_EXCESS:  # the busiest EP GPU's extra rows: time, not the mean
            continue  # GPU's work (the others wait them out; cost/epbalance.py)
        if name == "experts":
            experts_s += n * max(tc, tm)
        kernel_s += n * tk
        busy_c += n * tc
        busy_m += n * tm
        flop += n * op_flop
        nbytes += n * op_bytes
    k = step_constants(dep)
    pp, step_overhead_s = dep.pp, host_time_s(dep, shape)
    # one pass crosses every stage: stage work repeats pp times in the latency, once per GPU
    gpu_s = (compute_s + memory_s + kernel_s) * pp
    # two-batch overlap hides the EP exchange under the GPU work (cost/epcomm.py)
    comm_s = 0.0 if k.no_comm else exposed_comm_s(dep, shape, gpu_s)
    time_s = gpu_s + comm_s + step_overhead_s
    u_c, u_m = min(1.0, busy_c / time_s), min(1.0, busy_m / time_s)
    # the part of the expert kernels' time that quantized weights add is instruction issue
    issue_s = experts_s * (1.0 - k.quantized_moe_scale) if experts_s else 0.0
    wanted_w = _power_w(dep, shape, k, time_s, comm_s, u_c, nbytes, clock_fraction, issue_s)
    power_w = min(k.cap_w, wanted_w)
    figures = (
        time_s,
        compute_s * pp,  # compute_s
        memory_s * pp,  # memory_s
        comm_s,
        kernel_s * pp + step_overhead_s,  # overhead_s
        flop,
        nbytes,  # hbm_bytes
        u_c,  # compute_util
        u_m,  # memory_util
        power_w,
        power_w * time_s * dep.num_gpus,  # energy_j
        clock_fraction,
    )
    return figures, wanted_w


def _power_w(
    dep: Deployment,
    shape: BatchShape,
    k: StepConstants,
    time_s: float,
    comm_s: float,
    compute_util: float,
    hbm_bytes: float,
    clock_fraction: float,
    issue_s: float,
) -> float:
    """Power of one GPU over the step (cost.energy), before the cap. A GPU is busy for its own
    stage's share of the pass and for the communication: host gaps between back-to-back steps
    (0.1-1 ms) are far shorter than the time the driver takes to drop the clocks, so the busy
    power is paid through them (ML.ENERGY's figure is each GPU's NVML energy counter over its
    steady-state window, every host gap inside it: ml-energy/benchmark@c1d6557fbf7c7c495749b0fc
    f649f71774eabde9:mlenergy/benchmark/llm/benchmark.py, ZeusMonitor and RequestTracker; pricing
    host time at idle power instead, b refitted, was tried on its H100 rows: power MdAPE 7.9 ->
    8.2 %, energy per output token 10.1 -> 12.0 %, B200's transferred energy 13.6 -> 15.0 %).
    During exposed communication only the exchange kernels' SMs stay busy (cost.energy,
    `comm_s`). `issue_s`: kernel time bound by instruction issue (the quantized MoE kernels'
    share beyond a 16-bit kernel's, cost.energy)."""
    busy_s = (time_s - comm_s) / dep.pp + comm_s
    # tensor work: the FLOP the compute time amounts to at the peak rate (cost.energy)
    tensor_flop = compute_util * time_s * dep.peak_flop_per_s * clock_fraction
    per_element = k.dequant_ops_per_element
    work = GpuWork(  # positional (faster): dtype, flop, hbm and link bytes, time, busy, ...
        dep.compute_dtype,
        tensor_flop,
        hbm_bytes,
        0.0 if k.no_comm else link_bytes(dep, shape),
        time_s,
        busy_s,
        dep.gpu.idle_w,
        k.die_dynamic_w,  # die_dynamic_w
        None,  # temp_c: the reference temperature
        per_element * expert_weight_elements(dep, shape) if per_element else 0.0,  # cuda_ops
        issue_s,
        # exposed communication: only the all-reduce kernels' SMs stay clocked; streamed
        # weights (offload) stall GEMMs on every SM, so that part stays whole-die
        max(0.0, comm_s - k.offload_s),
    )
    return dep.power.power_w(work, k.figures, clock_fraction)


def dequant_ops(dep: Deployment, shape: BatchShape, figures: EnergyFigures) -> Any:
    """CUDA-core instructions one GPU issues in one pass to unpack its weight-only quantized
    expert weights (catalog/energy.toml `dequant_ops_per_element`: MXFP4 under a bf16 MMA), once
    per expert weight element read; 0 where the tensor cores take the weights as stored. Only
    routed experts: the MXFP4 checkpoints quantize the MoE weights and keep attention in 16 bits
    (OpenAI gpt-oss model card: "quantization of the MoE weights to MXFP4")."""
    ops = _dequant_ops_per_element(dep, figures)
    return ops * expert_weight_elements(dep, shape) if ops else 0.0


def _dequant_ops_per_element(dep: Deployment, figures: EnergyFigures) -> float:
    """CUDA-core instructions per routed-expert weight element read (`dequant_ops`); 0.0 for a
    dense model or weights the tensor cores take as stored."""
    if dep.model.moe is None or not figures.dequant_ops_per_element:
        return 0.0
    per_element_j = figures.dequant_j_per_element(dep.weight_dtype.name, dep.compute_dtype)
    if per_element_j <= 0:
        return 0.0
    return per_element_j / figures.cuda_op_j


def idle_power_w(dep: Deployment) -> float:
    """All GPUs of the deployment idling with the model loaded."""
    return dep.gpu.idle_w * dep.num_gpus


def host_gap_power_w(dep: Deployment) -> float:
    """One GPU while the engine's CPU works between its kernels (`host_time_s`): idle plus the
    busy clock-tree power b·D, which `_power_w` pays through such gaps (they are shorter than the
    driver's clock drop), and none of the work energy (FLOP, bytes) of the step."""
    die_w = energy_figures(dep.gpu).die_dynamic_w(dep.gpu)
    return dep.gpu.idle_w + dep.power.busy_power_fraction * die_w
