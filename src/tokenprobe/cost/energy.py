"""GPU power and energy (requirement E13) and the power-cap effect (E14, first order).

Board power while a kernel mix runs (the usual utilization-based linear model, e.g. Kandiah et
al. "AccelWattch", MICRO 2021, and the ML.ENERGY observation that memory-bound decode draws well
under TDP):

    P = P_idle + (P_max - P_idle) * min(1, a_compute * u_compute + a_memory * u_memory)

where u_compute and u_memory are the fractions of the step's time the tensor cores and HBM are
busy at their achievable rates, and P_max = min(TDP, power limit). The activity coefficients
are parameters (`PowerModel`), checked against ML.ENERGY v3 and Argonne power rows by
`benchmarks/validate.py`.

Power cap: if the power the work asks for exceeds the cap, the GPU lowers its clock. Dynamic
power scales roughly with f·V² ~ f³ (DVFS with voltage tracking frequency), so the clock falls to
f = (P_cap_dyn / P_dyn)^(1/3) and compute-bound time stretches by 1/f, while HBM-bound time
stretches only by 1/f^β, β = `memory_clock_sensitivity` = 0.3 (the memory clock is not lowered;
fewer loads are in flight at a lower SM clock, so bandwidth falls a little; Zeus/Perseus
observe memory-bound phases losing little speed under lower SM clocks). This is why seed 003
sees ~10 % speed lost at 70 % of TDP on inference.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.units import JOULES_PER_KWH, MEGA


@dataclass(frozen=True, slots=True)
class PowerModel:
    compute_activity: float = 0.75
    memory_activity: float = 0.60
    dvfs_exponent: float = 3.0
    memory_clock_sensitivity: float = 0.3

    def __post_init__(self) -> None:
        for name in ("compute_activity", "memory_activity", "dvfs_exponent"):
            object.__setattr__(self, name, finite(f"power.{name}", getattr(self, name)))
        object.__setattr__(
            self,
            "memory_clock_sensitivity",
            finite("power.memory_clock_sensitivity", self.memory_clock_sensitivity),
        )
        for name in ("compute_activity", "memory_activity"):
            value = getattr(self, name)
            if not 0 <= value <= 2:
                raise ConfigError(f"power.{name}", value, "a coefficient in [0, 2]")
        if not 1 <= self.dvfs_exponent <= 4:
            raise ConfigError("power.dvfs_exponent", self.dvfs_exponent, "in [1, 4]")
        if not 0 <= self.memory_clock_sensitivity <= 1:
            raise ConfigError(
                "power.memory_clock_sensitivity", self.memory_clock_sensitivity, "in [0, 1]"
            )

    def activity(self, compute_util: float, memory_util: float) -> float:
        return min(1.0, self.compute_activity * compute_util + self.memory_activity * memory_util)

    def clock_fraction(self, idle_w: float, tdp_w: float, cap_w: float, activity: float) -> float:
        """Fraction of full clock the GPU runs at under `cap_w` for work of this activity."""
        wanted_dyn_w = (tdp_w - idle_w) * activity
        allowed_dyn_w = max(cap_w - idle_w, 0.0)
        if wanted_dyn_w <= allowed_dyn_w or wanted_dyn_w <= 0:
            return 1.0
        return float((allowed_dyn_w / wanted_dyn_w) ** (1.0 / self.dvfs_exponent))


DEFAULT_POWER = PowerModel()


def joules_to_kwh_per_million(joules_per_token: float) -> float:
    """J/token -> kWh per million tokens."""
    return joules_per_token * MEGA / JOULES_PER_KWH


@dataclass(frozen=True, slots=True)
class EnergyPrices:
    """Facility and price options: PUE multiplies GPU energy by the data-centre overhead;
    `server_overhead_fraction` adds CPU/DRAM/fans/NIC power as a share of GPU power."""

    pue: float = 1.0
    server_overhead_fraction: float = 0.0
    electricity_usd_per_kwh: float | None = None
    gpu_hour_usd: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pue", finite("pue", self.pue))
        frac = finite("server_overhead_fraction", self.server_overhead_fraction)
        object.__setattr__(self, "server_overhead_fraction", frac)
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
        return self.pue * (1.0 + self.server_overhead_fraction)

    @property
    def basis(self) -> str:
        """What every energy figure counts: "GPU", "GPU + host (x1.20)", "facility (...)"."""
        host = f"GPU + host (x{1 + self.server_overhead_fraction:.2f})"
        base = host if self.server_overhead_fraction > 0 else "GPU"
        return base if self.pue == 1.0 else f"facility: {base} x PUE {self.pue:.2f}"
