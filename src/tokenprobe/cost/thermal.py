"""GPU static power at a die temperature (issue 19 item 2; seed 003 section 6.5).

Leakage current grows exponentially with die temperature at the same clock and voltage, so a
GPU's static floor, the idle power of gpus.toml (`GpuSpec.idle_w`: a CUDA context and a model
loaded, no kernel), is priced at temperature T as

    P_idle(T) = P_idle(T_ref) x exp(k x (T - T_ref))

with k = `leakage_per_kelvin` (0.0088 per K: Liao, He & Lepak, IEEE TCAD 2005, their 65 nm
table) and T_ref = `reference_temp_c` (41 C, where the catalog's idle figures were read), both in
catalog/energy.toml [thermal] with their sources. Only the leakage part of the idle power
truly rises (always-on clocks and memory refresh do not), so this bounds the effect from above.

Where it is used: the power model (`PowerModel.power_w`) takes a step's `GpuWork.temp_c`
(None = T_ref, so every estimate and simulation without a temperature is unchanged, and the
engine profiles' fits stand); `diagnose`'s idle-waste check prices the catalog's static power at
the run's measured mean temperature (NVML/nvidia-smi `temp_c`). Example: an H100 at 70 C draws
70 x exp(0.0088 x 29) = 90.3 W idle, 20 W more than at 41 C.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from tokenprobe.cost.energy_figures import CATALOG, catalog_table
from tokenprobe.errors import SchemaError

MIN_TEMP_C, MAX_TEMP_C = -40.0, 150.0  # beyond any die a GPU reports (NVML: degrees C)


@dataclass(frozen=True, slots=True)
class Thermal:
    leakage_per_kelvin: float
    reference_temp_c: float

    def idle_power_w(self, idle_w: float, temp_c: float | None) -> float:
        """The static floor at `temp_c` (module formula); `idle_w` itself when None."""
        if temp_c is None:
            return idle_w
        t = min(max(temp_c, MIN_TEMP_C), MAX_TEMP_C)
        return idle_w * math.exp(self.leakage_per_kelvin * (t - self.reference_temp_c))


@functools.lru_cache(maxsize=1)
def thermal() -> Thermal:
    """The [thermal] figures of catalog/energy.toml (a SchemaError if missing or out of range)."""
    table = catalog_table("thermal")
    k, ref = table.get("leakage_per_kelvin"), table.get("reference_temp_c")
    ok_k = isinstance(k, int | float) and 0 <= k < 1
    ok_ref = isinstance(ref, int | float) and MIN_TEMP_C <= ref <= MAX_TEMP_C
    if not (ok_k and ok_ref):
        raise SchemaError(f"catalog/{CATALOG}", f"thermal: leakage_per_kelvin={k!r}, "
                          f"reference_temp_c={ref!r} out of range")  # fmt: skip
    return Thermal(float(k), float(ref))  # type: ignore[arg-type]


def idle_power_at_w(idle_w: float, temp_c: float | None) -> float:
    """`Thermal.idle_power_w` with the catalog's figures."""
    return thermal().idle_power_w(idle_w, temp_c)
