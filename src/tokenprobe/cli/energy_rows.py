"""Rows of a simulated run's energy on its basis and its static share (sim/energy_basis.py)."""

from __future__ import annotations

from typing import Any


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def basis_rows(e: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's energy on the basis it names (GPU alone, or GPU + host), then the static
    share: the GPUs' idle floor and the host's base over the whole run."""
    basis = e.get("energy_basis")
    if basis is None:  # a fleet's summed energy (no basis figures yet)
        return []
    rows = []
    if basis != "GPU":
        rows += [
            (f"{basis}: energy total", f"{e['basis_total_j']:,.0f} J"),
            (
                f"{basis}: kWh per million output tokens",
                _num(e["basis_kwh_per_million_output_tokens"], 3),
            ),
        ]
    parts = "GPU idle" if basis == "GPU" else "GPU idle + host base"
    rows += [
        (
            f"{basis}: static share ({parts})",
            _num(100 * e["static_share"], 1) + " %",
        ),
        (
            f"{basis}: static kWh per million output tokens",
            _num(e["static_kwh_per_million_output_tokens"], 3),
        ),
    ]
    return rows
