"""A simulated run's energy on a named basis, and its static share (issue 19, seed 003 2.4).

The simulator prices GPU energy (`result.energy_summary`: its `total_j` is on the "GPU" basis).
A run simulated with the host's base power (`simulate(host_power=True)`, `simulate
--host-power`) records `host_base_w` in its config (hosts.toml `base_power_w` over the host's
GPUs, per GPU used: `cost.host_base_power_w`), and every figure here is then on the basis
"GPU + host" (`cost.EnergyPrices.energy_j`: GPU energy + host base x duration).

Static energy is what the run pays whatever its load: the GPUs' idle power (their leakage and
always-on floor with a model loaded) and the host's base, over the whole run. Its share of the
run's energy is what seed 003 warns of: "if the GPU runs at low utilization, static power's
share becomes ugly".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenprobe.cost import EnergyPrices
from tokenprobe.units import JOULES_PER_KWH, MEGA


def _per_million_kwh(joules: float, tokens: int) -> float | None:
    return joules / tokens * MEGA / JOULES_PER_KWH if tokens else None


def basis_figures(
    gpu_energy_j: float, config: Mapping[str, Any], duration_s: float, output_tokens: int
) -> dict[str, Any]:
    """The run's energy on its basis, the host's part and the static share (module doc)."""
    prices = EnergyPrices(host_base_w=float(config.get("host_base_w", 0.0)))
    total_j = prices.energy_j(gpu_energy_j, duration_s)
    static_j = prices.static_j(float(config.get("idle_power_w", 0.0)), duration_s)
    return {
        "energy_basis": prices.basis,
        "basis_total_j": total_j,
        "host_base_j": prices.host_base_w * duration_s,
        "static_j": static_j,
        "static_share": static_j / total_j if total_j > 0 else 0.0,
        "basis_kwh_per_million_output_tokens": _per_million_kwh(total_j, output_tokens),
        "static_kwh_per_million_output_tokens": _per_million_kwh(static_j, output_tokens),
    }
