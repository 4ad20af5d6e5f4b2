"""GPU power and energy from the work a step does (requirements E13, E14; issue 18 item 4).

Board power over a step of length t on one GPU, running at a fraction f of its full clock:

    P = P_idle + b·D·f^n·(busy_s − (1 − σ)·comm_s) / t + (1 − b)·D·f^n·(issue_s / t)
        + [ f^(n−1)·( e_flop(gen, dtype)·FLOP_tc + r·e_flop(gen, bf16)·bytes_hbm
                      + (1 − b)·e_op(gen)·ops )
            + e_dram(mem)·bytes_hbm + e_link(kind)·bytes_link ] / t

and never more than the power limit (min(TDP, cap)), nor, on a board that runs another board's
die at that board's clocks (catalog/energy.toml `die_power_of`: GH200 runs H100 SXM's GH100 at
its clocks, the same datasheet peaks, under a 900 W limit), more than idle + that board's TDP −
idle (`EnergyFigures.die_limit_w`; × f^n at clock fraction f). The efficiencies are H100's,
fitted where its 700 W limit holds large GEMMs; the same kernels at the same speed on the same
die draw what they draw there, not the 900 W a higher limit would allow. TokenPowerBench on a
GH200 144GB (vLLM 0.10.1, Qwen2.5-7B, 30,035-token prompts at ~56 % of the dense peak, batch 1):
the highest NVML reading of the run is 679.6 W (a ~1 s average over a ~1 s prefill), where the
900 W ceiling had the prefill at 879 W; whole-run energy per output token +23.8 -> +12.2 %,
power +27.3 -> +15.3 % (benchmarks/data README section 13). The terms, each a mechanism:
- P_idle: the board with a CUDA context and a model loaded, no kernel running (gpus.toml), at the
  die's temperature when it is known (leakage rises with it at the same clock: cost/thermal.py).
- e_flop·FLOP_tc: tensor-core work, J per FLOP by dtype and GPU generation (catalog/energy.toml:
  the board's dynamic power at its limit over the rate a large GEMM sustains there). FLOP_tc is
  the work the operators' compute time amounts to at the dense peak, FLOP / η_c: a GEMM that
  reaches η_c of the peak (tile padding, pipeline bubbles) keeps its SMs and operand paths busy
  1/η_c as long, and they draw power all that time; so a compute-bound GPU reaches its limit
  whatever η_c its kernels reach, as every GPU's GEMMs do.
- (1 − b)·e_op·ops: CUDA-core instructions the step's kernels issue beside the tensor work:
  unpacking and scaling weight-only quantized weights (MXFP4 under a bf16 MMA on Hopper: 3.1
  instructions an element), once per expert weight element read
  (`EnergyFigures.dequant_j_per_element`, catalog/energy.toml). They hide under the kernel's
  memory time, not under its power: gpt-oss-120b on one H100 at batch 64 draws 688 W.
  e_op is the board's whole dynamic range over the rate of an FP32 FMA stream at its limit,
  (TDP − idle) / (U_GEMM·lanes/s) = D / (U_GEMM·lanes/s) on the flagship (energy.toml), so it
  holds the busy share b·D that this formula pays apart while any kernel runs (the SMs'
  clocks, schedulers and operand paths): an instruction adds only the rest, (1 − b)·e_op, and
  such a stream at the derivation's rate draws idle + b·D + (1 − b)·D = TDP, the derivation's
  own premise. ML.ENERGY v3 H100, gpt-oss-20b/120b (MXFP4, 33 rows), with the `vllm` profile's
  fitted pair kept: power MdAPE 16.0 -> 10.5 % (median signed +16.0 -> +8.6 %), energy per
  output token 7.3 -> 8.0 % (+6.6 -> -4.1 %); every other row is unchanged (only Hopper has a
  dequantization count). The tensor figure e_flop holds the same share; there the cap clips a
  compute-bound step, and netting it too (with b and r refitted on H100: r 9 -> 80, b 0.45 ->
  0.31) lowers the power MdAPE on H100 8.6 -> 6.9 %, B200 11.7 -> 10.8 %, GH200 9.7 -> 4.0 %
  (A100 10.8 -> 12.4 %) but raises energy per output token on H100 10.4 -> 12.3 % and B200
  13.6 -> 15.1 %: the H100 MoE and FP8 groups' predicted steps are 7-16 % fast (vLLM time, not
  power) and the fitted pair's +6 % power bias offsets that. Left until the time is fixed.
- (1 − b)·D·issue_s: the part of the fused-MoE kernels' time that quantized expert weights add
  (1 − `fp8_moe` or 1 − `quantized_moe` of it: the in-loop scale and dequantize work of
  efficiency.py) is instruction-bound, not memory-bound: the SMs issue at full rate and draw the
  whole dynamic range D, not the busy share b·D. ML.ENERGY v3 H100, vLLM 0.11: Qwen3-235B-A22B
  in block-FP8 on 8 GPUs at batch 8 reads half the bytes of the BF16 model, takes 24.7 ms a
  token where BF16 takes 20.2, and draws 450 W a GPU where BF16 draws 354.
- e_dram·bytes: DRAM energy per bit of the GPU's memory kind (HBM2E/HBM3/HBM3E, GDDR6; vendor
  figures in catalog/energy.toml), not scaled by the SM clock (the memory clock stays).
- r·e_flop(bf16)·bytes: moving each HBM byte through L2, the crossbar and the register file.
  No public per-generation figure exists (energy.toml), so it is counted in units of the
  generation's 16-bit FLOP energy (same transistors, wires and clock): r =
  `chip_flop_per_byte`, fitted (engine profiles, H100 rows only).
- e_link·bytes_link: bytes each GPU sends over NVLink/xGMI/PCIe (SerDes, energy.toml).
- b·D: the clock tree and always-on logic of a GPU that runs kernels, above idle, while it runs
  them (`busy_s`: its share of the step; cost.step), as a share of the die's dynamic range
  D = U_GEMM·e_flop(bf16)·bf16 peak (TDP − idle on a generation's flagship; the same die under
  another board limit, GH200's 900 W, keeps it); b = `busy_power_fraction`, fitted.
- (1 − σ)·comm_s: while a tensor-parallel step waits on its exposed all-reduce (or EP exchange),
  the exchange runs on a few SMs and the rest of the die is clock-gated, so the busy power is
  paid on σ = `EnergyFigures.comm_sm_share` of the die: vLLM's custom all-reduce launches 36
  blocks, one an SM ("NCCL kernels also only take a small amount of SMs", its code says;
  catalog/energy.toml), σ = 36/132 on an H100 SXM, 36/148 on a B200 (1, the whole die, on a
  GPU without an SM count). This is why an H100's power over-prediction grew with TP: ML.ENERGY
  v3 H100, `vllm` profile, median signed power error at 1/2/4/8 GPUs -1.0/+6.4/+11.1/+12.8 %
  before, -1.1/+3.9/+10.0/+6.3 % with it (b refitted 0.449 -> 0.443; energy per output token
  10.3 -> 10.1 %, B200's transferred 13.2 -> 13.5 %). What is left at 4 GPUs is mostly
  Llama-3.1/3.3-70B at batch 96-900, where the predicted steps are up to 42 % too slow (the
  time model) and so ask more tensor power than the 700 W limit gives.
Utilisation-based linear models (AccelWattch, Kandiah et al. MICRO 2021) have this shape:
constant + per-event energies; here the events are FLOPs and bytes, whose counts the roofline
already has, and the energies are per generation, so the model carries to a GPU it was not fitted
on through that GPU's figures (the transfer check is benchmarks/validate.py's energy section).

Power cap (DVFS): dynamic power goes as f·V² ~ f^n (n = `dvfs_exponent` = 3, voltage tracking
frequency), energy per operation as V² ~ f^(n−1). If the work asks for more than a cap below the
TDP allows, the clock falls to f = ((cap − idle) / (min(P(1), TDP) − idle))^(1/n) (the
efficiencies are fitted at the TDP, where large GEMMs already run power-limited): compute-bound time
stretches by 1/f, HBM-bound time only by 1/f^β (β = `memory_clock_sensitivity` = 0.3: fewer loads
in flight at a lower SM clock; Zeus/Perseus see memory-bound phases lose little speed), and the
power reported is that at clock f, never above the cap. This is why seed 003 sees ~10 % speed
lost at 70 % of TDP on inference: with the `vllm` profile on H100 at a 490 W cap, a prefill-heavy
batch (Llama-3.1-8B, 16 x 4096 in / 16 out) takes 13.2 % longer end to end (70B TP4, 16 x 8192 /
8: 11.7 %) and uses 20 % (22 %) less energy per input token; a decode-heavy one (8B, 64 x 128 /
1024) 0.9 % longer (70B TP4 at batch 128: 1.9 %), 7 % (17 %) less energy per output token
(`estimate_deployment`, docs/accuracy.md compares these with public measurements).

What the H100 fit says (benchmarks/fit_profiles.py, ML.ENERGY v3, 243 rows): r = 9.2, i.e. ~7 pJ
of on-chip energy per HBM byte beside the DRAM's 31 pJ, and b = 0.45 (283 W above idle while
kernels run): a serving GPU's power is mostly its busy power and the DRAM traffic, and both carry
to another GPU through its die and its memory. The CUDA-core and instruction-issue terms came
later and add no free parameter. Refitting r and b with them on the 274 H100 rows of today only
slides along a valley those rows do not resolve (r 9 -> 110 with b 0.45 -> 0.20 moves the H100
power MdAPE from 8.8 to 8.1 %, a paired bootstrap 95 % interval of -1.6 to +0.9 points, and the
B200 energy transfer from 17.0 to 20.8 %), so the fitted pair is kept. Since the all-reduce's SM
share, `vllm` fits b alone (0.443) with r kept at 9.24: refitted together the pair ran to r = 80,
b = 0.28 (H100 power 8.1 -> 7.5 %, but energy per output token 10.1 -> 11.2 % and B200's 13.5 ->
13.6 %), an on-chip cost of 64 pJ per HBM byte, twice the DRAM's own.

Tried and left out (Dec 2026, same rows, b refitted): the tensor term on the FLOP done rather than
FLOP / η_c (a waiting SM does no tensor work) with the SM share removes most of the growth with
TP (-3.8/+0.4/+4.3/+3.6 % at 1/2/4/8 GPUs; power MdAPE H100 7.5 %, B200 10.4 %, GH200 7.4 %) but
raises energy per output token on H100 10.3 -> 12.1 % and on B200 13.2 -> 14.8 %: the energy
rows follow how long the GEMMs run, as FLOP / η_c says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from tokenprobe.cost.energy_figures import EnergyFigures
from tokenprobe.cost.thermal import idle_power_at_w
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.hardware import HostSpec
from tokenprobe.units import JOULES_PER_KWH, MEGA

RANGES = {
    "chip_flop_per_byte": (0.0, 2000.0),
    "busy_power_fraction": (0.0, 1.0),
    "dvfs_exponent": (1.0, 4.0),
    "memory_clock_sensitivity": (0.0, 1.0),
}
"""Allowed range of each PowerModel field (physical limits, not data)."""
LEGACY_FIELDS = frozenset({"compute_activity", "memory_activity"})
"""Fields of the activity-factor power model (P = idle + (TDP − idle)·(a_c·u_c + a_m·u_m)) that
runs recorded before issue 18 may carry."""


@dataclass(frozen=True, slots=True)
class PowerModel:
    """The two fitted power parameters and the DVFS law (module docstring).

    `chip_flop_per_byte`: on-chip energy of one HBM byte, in 16-bit tensor FLOPs of the same GPU
    generation. `busy_power_fraction`: power of a GPU running kernels above idle, as a share of
    its die's dynamic range (TDP − idle on the flagship). Defaults: the `vllm` profile's H100
    fit (benchmarks/fit_profiles.py), rounded."""

    chip_flop_per_byte: float = 9.24
    busy_power_fraction: float = 0.443
    dvfs_exponent: float = 3.0
    memory_clock_sensitivity: float = 0.3

    def __post_init__(self) -> None:
        for name, (lo, hi) in RANGES.items():
            value = finite(f"power.{name}", getattr(self, name))
            object.__setattr__(self, name, value)
            if not lo <= value <= hi:
                raise ConfigError(f"power.{name}", value, f"in [{lo:g}, {hi:g}]")

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> PowerModel:
        """A PowerModel from recorded field values (a run's config). The activity factors of the
        model this one replaced (LEGACY_FIELDS) are dropped: such a run is repriced with this
        model's defaults; any other unknown key is a ConfigError naming it."""
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known and key not in LEGACY_FIELDS:
                raise ConfigError(f"power.{key}", values[key], f"one of {', '.join(sorted(known))}")
        return cls(**{k: float(v) for k, v in values.items() if k in known})

    def power_w(
        self,
        work: GpuWork,
        figures: EnergyFigures,
        clock_fraction: float = 1.0,
    ) -> float:
        """Board power of one GPU over one step (module formula), before the cap."""
        f = clock_fraction
        volt2 = f ** (self.dvfs_exponent - 1.0)
        b = self.busy_power_fraction
        work_j = volt2 * (
            figures.flop_j(work.dtype) * work.flop
            + self.chip_flop_per_byte * figures.base_flop_j * work.hbm_bytes
            + (1.0 - b) * figures.cuda_op_j * work.cuda_ops  # its busy share is b·D's (docstring)
        )
        work_j += (
            figures.dram_j_per_byte * work.hbm_bytes + figures.link_j_per_byte * work.link_bytes
        )
        # exposed TP communication keeps only the all-reduce kernels' SMs clocked (docstring)
        gated_s = (1.0 - figures.comm_sm_share) * min(work.comm_s, work.busy_s)
        busy = min(1.0, (work.busy_s - gated_s) / work.time_s)
        issue = min(busy, work.issue_s / work.time_s)  # instruction-bound kernel time
        die_w = work.die_dynamic_w * f**self.dvfs_exponent
        idle_w = idle_power_at_w(work.idle_w, work.temp_c)  # leakage at the die's temperature
        dynamic_w = b * die_w * busy + (1.0 - b) * die_w * issue + work_j / work.time_s
        if figures.die_limit_w is not None:  # another board's die at its clocks (docstring)
            dynamic_w = min(dynamic_w, figures.die_limit_w * f**self.dvfs_exponent)
        return float(idle_w + dynamic_w)

    def clock_fraction(self, idle_w: float, wanted_w: float, cap_w: float) -> float:
        """Fraction of full clock at which work asking `wanted_w` fits under `cap_w`."""
        wanted_dyn_w, allowed_dyn_w = wanted_w - idle_w, max(cap_w - idle_w, 0.0)
        if wanted_dyn_w <= allowed_dyn_w or wanted_dyn_w <= 0:
            return 1.0
        return float((allowed_dyn_w / wanted_dyn_w) ** (1.0 / self.dvfs_exponent))


@dataclass(frozen=True, slots=True)
class GpuWork:
    """What one GPU did in one step: tensor FLOP (in `dtype`), HBM bytes, link bytes sent, the
    step's time and the part of it kernels ran; the board's idle power and its die's dynamic
    range (`EnergyFigures.die_dynamic_w`); the die's temperature when known (cost/thermal.py);
    CUDA-core instructions beside the tensor work (`cuda_ops`, dequantization) and the kernel
    time bound by instruction issue rather than memory (`issue_s`; module docstring)."""

    dtype: str
    flop: float
    hbm_bytes: float
    link_bytes: float
    time_s: float
    busy_s: float
    idle_w: float
    die_dynamic_w: float
    temp_c: float | None = None  # die temperature, C (cost/thermal.py); None: the reference
    cuda_ops: float = 0.0  # CUDA-core instruction lanes (weight dequantization)
    issue_s: float = 0.0  # kernel time bound by instruction issue (quantized MoE kernels)
    comm_s: float = 0.0  # exposed communication time within busy_s (TP all-reduce, EP exchange)


DEFAULT_POWER = PowerModel()


def joules_to_kwh_per_million(joules_per_token: float) -> float:
    """J/token -> kWh per million tokens."""
    return joules_per_token * MEGA / JOULES_PER_KWH


@dataclass(frozen=True, slots=True)
class EnergyPrices:
    """The energy basis and prices (issue 19): every energy figure is

        E = PUE x ( E_gpu x (1 + server_overhead_fraction) + host_base_w x duration )

    `host_base_w`: the fixed power of the server around the GPUs (CPUs, DRAM, NICs, NVSwitches,
    fans, PSU losses) charged to this deployment, from the host's `base_power_w` over its GPUs
    (`host_base_power_w`); it is paid for as long as the deployment runs, busy or idle.
    `server_overhead_fraction`: the host's power that rises with the GPUs' (fans, PSU losses),
    as a share of GPU power, kept as the dynamic part on top of the fixed base (0 unless a
    measurement gives it). PUE multiplies both for the facility."""

    pue: float = 1.0
    server_overhead_fraction: float = 0.0
    electricity_usd_per_kwh: float | None = None
    gpu_hour_usd: float | None = None
    host_base_w: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "pue", finite("pue", self.pue))
        frac = finite("server_overhead_fraction", self.server_overhead_fraction)
        object.__setattr__(self, "server_overhead_fraction", frac)
        base = finite("host_base_w", self.host_base_w, lo=0.0, hi=1e9)
        object.__setattr__(self, "host_base_w", base)
        for name in ("electricity_usd_per_kwh", "gpu_hour_usd"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, finite(name, getattr(self, name)))
        if not 1.0 <= self.pue <= 5.0:
            raise ConfigError("pue", self.pue, "between 1.0 and 5.0")
        if not 0.0 <= self.server_overhead_fraction <= 5.0:
            raise ConfigError(
                "server_overhead_fraction", self.server_overhead_fraction, "between 0 and 5"
            )
        for name in ("electricity_usd_per_kwh", "gpu_hour_usd"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(name, value, "a price >= 0")

    @property
    def facility_factor(self) -> float:
        """What multiplies GPU energy (the host's base power is added apart: `energy_j`)."""
        return self.pue * (1.0 + self.server_overhead_fraction)

    def energy_j(self, gpu_j: float, duration_s: float) -> float:
        """GPU energy over `duration_s` on this basis (class formula); never negative."""
        return self.facility_factor * max(gpu_j, 0.0) + self.pue * self.host_base_w * max(
            duration_s, 0.0
        )

    def static_j(self, gpu_idle_w: float, duration_s: float) -> float:
        """The part of `energy_j` paid whatever the load: the GPUs' idle power (their static
        and leakage floor) and the host's base power, over `duration_s`."""
        return self.energy_j(gpu_idle_w * duration_s, duration_s)

    @property
    def basis(self) -> str:
        """What every energy figure counts: "GPU", "GPU + host (base 360 W)", "facility (...)"."""
        parts = []
        if self.host_base_w > 0:
            parts.append(f"base {self.host_base_w:,.0f} W")
        if self.server_overhead_fraction > 0:
            parts.append(f"dynamic x{1 + self.server_overhead_fraction:.2f}")
        base = f"GPU + host ({', '.join(parts)})" if parts else "GPU"
        return base if self.pue == 1.0 else f"facility: {base} x PUE {self.pue:.2f}"


def host_base_power_w(host: HostSpec, num_gpus: int) -> float:
    """The host's fixed power charged to a deployment of `num_gpus`: its base power over the
    GPUs it holds, per GPU used (a deployment on 2 of a DGX's 8 GPUs pays a quarter; on 16, two
    servers). A host without the figure is a ConfigError naming the host and the field."""
    if host.base_power_w is None or host.gpus is None:
        raise ConfigError(
            f"host {host.name}: base_power_w",
            host.base_power_w,
            "a host with base_power_w and gpus (catalog/hosts.toml: dgx-h100, dgx-b200; "
            "--host NAME) or a host .toml file that gives them",
        )
    return host.base_power_w * num_gpus / host.gpus
