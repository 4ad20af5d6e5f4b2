"""Per-generation energy figures (catalog/energy.toml): a tensor FLOP, a DRAM bit, a link bit.

The catalog maps every catalog GPU to its generation (SM design and process node) and its memory
kind, and gives per generation the energy of a dense tensor-core FLOP by compute dtype, per memory
kind the DRAM energy per bit, per link kind the energy per bit sent (figures and their sources in
the file). `energy_figures(gpu)` resolves them to SI (J/FLOP, J/byte) for one `GpuSpec`.

Where the file gives them, a generation also has the energy of one CUDA-core instruction (one
thread's FP32 FMA lane) and, per weight format its kernels unpack in CUDA cores before a 16-bit
MMA (MXFP4 on Hopper), the instructions that costs per weight element (`dequant_j_per_element`).

A catalog GPU with an `sm_count` also has the share of its SMs that exposed communication
occupies (`comm_sm_share`: vLLM's custom all-reduce's limit of 36 blocks, one an SM,
`VLLM_CUSTOM_ALLREDUCE_MAX_BLOCKS`, catalog/energy.toml, taken for every kind of exchange): the
rest of the die is clock-gated while a step waits on an exchange.

A catalog GPU with `die_power_of` runs another catalog GPU's die at that GPU's clocks (the same
datasheet peaks) under a higher board limit (GH200's 900 W over H100 SXM's 700 W): its dynamic
power is at most that GPU's TDP − idle (`die_limit_w`), which the power model takes as the
ceiling rather than the board's limit (cost/energy.py; catalog/energy.toml says why).

A GPU the catalog does not map (a user's `--gpu my.toml`) gets the same derivation the catalog's
tensor figures come from, applied to its own spec: e_flop = (TDP − idle) / (U_GEMM × dense peak)
per dtype it has; its DRAM is taken as HBM3 and its link by its kind. The figure is then as good
as that derivation, which is said in `EnergyFigures.source`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tokenprobe.errors import SchemaError
from tokenprobe.files import parse_toml
from tokenprobe.hardware import GpuSpec, get_gpu
from tokenprobe.precision import get_dtype
from tokenprobe.units import BITS_PER_BYTE, PICO

CATALOG = "energy.toml"
# The SMs an exchange between GPUs runs on while a step waits for it: vLLM's custom all-reduce
# launches at most 36 blocks of 512 threads, one an SM (vllm-project/vllm@036bb685581dbedcd6cf7
# fc845fe87268c7d1191:csrc/custom_all_reduce.cuh, CustomAllreduce::allreduce block_limit = 36;
# catalog/energy.toml). It stands for every kind of exposed communication (cost/energy.py gates
# all of a step's `comm_s` by `comm_sm_share`: the TP all-reduce, the EP exchange, the rest):
# NCCL's kernels "also only take a small amount of SMs" (that file's comment).
VLLM_CUSTOM_ALLREDUCE_MAX_BLOCKS = 36
U_GEMM = 0.8  # fraction of the dense peak a large GEMM sustains at the power limit (energy.toml)
DEFAULT_MEMORY = "hbm3"


@dataclass(frozen=True, slots=True)
class EnergyFigures:
    """What work costs on one GPU, SI: J per tensor FLOP by dtype, J per DRAM byte, J per byte
    sent over its GPU-to-GPU link."""

    generation: str
    memory: str
    tensor_j_per_flop: Mapping[str, float]
    dram_j_per_byte: float
    link_j_per_byte: float
    source: str
    cuda_op_j: float = 0.0  # J per CUDA-core instruction lane (0: no figure)
    dequant_ops_per_element: Mapping[str, float] = field(default_factory=dict)
    # share of the SMs exposed communication runs on (vLLM's custom all-reduce's block limit
    # over sm_count; 1: unknown, the whole die counted busy)
    comm_sm_share: float = 1.0
    # dynamic power the die draws at most, W: the TDP − idle of the board whose die and clocks
    # it runs (energy.toml `die_power_of`); None: the board's own power limit is the ceiling
    die_limit_w: float | None = None

    def flop_j(self, dtype: str) -> float:
        """J per FLOP in `dtype` (a name or alias); a dtype without a figure costs what the
        generation's bf16 (or fp16) FLOP costs, as a GPU without native support runs it there."""
        name = get_dtype(dtype).name
        table = self.tensor_j_per_flop
        for key in (name, "bf16", "fp16"):
            if key in table:
                return table[key]
        return max(table.values())

    def dequant_j_per_element(self, weight_dtype: str, compute_dtype: str) -> float:
        """J to unpack and scale one weight element of `weight_dtype` in CUDA cores before a
        `compute_dtype` MMA; 0 when the tensor cores take the format as it is (weights and
        compute in the same dtype) or the catalog has no count for it on this generation."""
        weight = get_dtype(weight_dtype).name
        if weight == get_dtype(compute_dtype).name:
            return 0.0
        return self.dequant_ops_per_element.get(weight, 0.0) * self.cuda_op_j

    @property
    def base_flop_j(self) -> float:
        """The generation's 16-bit FLOP energy: the unit the on-chip byte cost is counted in."""
        return self.flop_j("bf16")

    def die_dynamic_w(self, gpu: GpuSpec) -> float:
        """The die's dynamic range: what its tensor cores draw at the rate a large GEMM sustains,
        U_GEMM x e_flop(bf16) x its 16-bit peak; TDP − idle on the generation's flagship (and on a
        GPU outside the catalog), whatever power limit the board is sold with."""
        peak = gpu.peak_flop_per_s_for("bf16") or gpu.peak_flop_per_s_for("fp16")
        if peak is None:
            return gpu.tdp_w - gpu.idle_w
        return U_GEMM * self.base_flop_j * peak


def _fail(where: str, what: str) -> SchemaError:
    return SchemaError(f"catalog/{CATALOG}", f"{where}: {what}")


def _positive(table: Mapping[str, Any], key: str, where: str) -> float:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
        raise _fail(where, f"{key}={value!r} should be a number > 0")
    return float(value)


@functools.lru_cache(maxsize=1)
def _catalog() -> dict[str, Any]:
    text = resources.files("tokenprobe").joinpath("catalog", CATALOG).read_text("utf-8")
    return _check(parse_toml(text, f"catalog/{CATALOG}"))


def catalog_table(name: str) -> Mapping[str, Any]:
    """One top-level table of catalog/energy.toml (a SchemaError naming it when missing)."""
    table = _catalog().get(name)
    if not isinstance(table, Mapping):
        raise _fail(name, "missing table")
    return table


def _check(doc: dict[str, Any]) -> dict[str, Any]:
    """Every table has its figures, positive; every GPU names a known generation and memory."""
    for section in ("generation", "memory", "link", "gpu"):
        if not isinstance(doc.get(section), Mapping):
            raise _fail(section, "missing table")
    for name, gen in doc["generation"].items():
        flops = gen.get("tensor_pj_per_flop")
        if not isinstance(flops, Mapping) or not flops:
            raise _fail(f"generation.{name}", "tensor_pj_per_flop should be a table of dtypes")
        for dtype in flops:
            get_dtype(dtype)  # an unknown dtype name is a ConfigError naming it
            _positive(flops, dtype, f"generation.{name}.tensor_pj_per_flop")
        if "cuda_core_pj_per_op" in gen:
            _positive(gen, "cuda_core_pj_per_op", f"generation.{name}")
        ops = gen.get("dequant_ops_per_element", {})
        if not isinstance(ops, Mapping) or (ops and "cuda_core_pj_per_op" not in gen):
            raise _fail(
                f"generation.{name}",
                "dequant_ops_per_element should be a table of dtypes, with cuda_core_pj_per_op",
            )
        for dtype in ops:
            get_dtype(dtype)
            _positive(ops, dtype, f"generation.{name}.dequant_ops_per_element")
    for name, mem in doc["memory"].items():
        _positive(mem, "dram_pj_per_bit", f"memory.{name}")
    for name, link in doc["link"].items():
        _positive(link, "pj_per_bit", f"link.{name}")
    for name, entry in doc["gpu"].items():
        for key, section in (("generation", "generation"), ("memory", "memory")):
            if entry.get(key) not in doc[section]:
                raise _fail(f"gpu.{name}", f"{key}={entry.get(key)!r} is not a [{section}] table")
        if "sm_count" in entry:
            _positive(entry, "sm_count", f"gpu.{name}")
        donor = entry.get("die_power_of")
        if donor is not None and (
            donor not in doc["gpu"] or doc["gpu"][donor]["generation"] != entry["generation"]
        ):
            raise _fail(f"gpu.{name}", f"die_power_of={donor!r}: not a [gpu] of its generation")
    return doc


def _derived_tensor_j(gpu: GpuSpec) -> dict[str, float]:
    """energy.toml's derivation on this GPU's own spec: (TDP − idle) / (U_GEMM × peak)."""
    dyn_w = gpu.tdp_w - gpu.idle_w
    return {k: dyn_w / (U_GEMM * peak) for k, peak in gpu.peak_flop_per_s.items() if peak > 0}


def _link_j(doc: Mapping[str, Any], kind: str) -> float:
    link = doc["link"].get(kind)
    pj = float(link["pj_per_bit"]) if link else max(v["pj_per_bit"] for v in doc["link"].values())
    return pj * PICO * BITS_PER_BYTE


@functools.lru_cache(maxsize=64)
def energy_figures(gpu: GpuSpec) -> EnergyFigures:
    """The energy figures of `gpu`: its generation's, or derived from its spec (module doc)."""
    doc = _catalog()
    entry = doc["gpu"].get(gpu.name)
    op_j, dequant, comm_share, die_limit_w = 0.0, {}, 1.0, None
    if entry is None:
        tensor = _derived_tensor_j(gpu)
        memory, generation = DEFAULT_MEMORY, "derived"
        source = f"{gpu.name}: not in catalog/{CATALOG}; tensor figures derived from its spec"
    else:
        generation, memory = entry["generation"], entry["memory"]
        gen = doc["generation"][generation]
        tensor = {get_dtype(k).name: float(v) * PICO for k, v in gen["tensor_pj_per_flop"].items()}
        op_j = float(gen.get("cuda_core_pj_per_op", 0.0)) * PICO
        ops = gen.get("dequant_ops_per_element", {})
        dequant = {get_dtype(k).name: float(v) for k, v in ops.items()}
        if "sm_count" in entry:
            comm_share = min(1.0, VLLM_CUSTOM_ALLREDUCE_MAX_BLOCKS / float(entry["sm_count"]))
        source = f"catalog/{CATALOG}: generation {generation}, memory {memory}"
        if "die_power_of" in entry:  # the board runs that GPU's die at its clocks (energy.toml)
            donor = get_gpu(str(entry["die_power_of"]))
            die_limit_w = donor.tdp_w - donor.idle_w
    dram = float(doc["memory"][memory]["dram_pj_per_bit"]) * PICO * BITS_PER_BYTE
    link_j = _link_j(doc, gpu.link.kind)
    return EnergyFigures(
        generation, memory, tensor, dram, link_j, source, op_j, dequant, comm_share, die_limit_w
    )


def gpu_generation(gpu: GpuSpec) -> str:
    """The generation catalog/energy.toml maps `gpu` to ("hopper", "blackwell", "cdna3", ...), or
    "" for a GPU it does not map (a user's file): engine profiles are fitted per generation
    (calibrate.select_profile), since an engine runs other kernels on each."""
    entry = _catalog()["gpu"].get(gpu.name)
    return str(entry["generation"]) if entry is not None else ""
