"""A run report's energy rows, each naming its basis, and its serving front end (issue 19).

Energy: the simulator's and the energy join's figures are GPU energy ("GPU: ..."); a simulated
run's `basis_*` and `static_*` figures are on the basis it names (`energy_basis`, e.g. "GPU +
host (base 360 W)": sim/energy_basis.py). `kwh_per_million_tokens_all_in` is all the run's
energy over its output tokens, and says so.

Front end: a run simulated with the API-server processes as a resource (sim/frontend.py) has a
`frontend` block in its summary: processes, their utilisation, the requests' wait in front of
them (mean, p50, p90, p99), the mean queue there and the token delivery lag.
"""

from __future__ import annotations

from typing import Any

from tokenprobe.report import fmt
from tokenprobe.report.html import Row, Section, Table

_ON_BASIS = (
    "basis_total_j",
    "basis_kwh_per_million_output_tokens",
    "host_base_j",
    "static_j",
    "static_share",
    "static_kwh_per_million_output_tokens",
)
_LABELS = {
    "kwh_per_million_tokens_all_in": "kWh per million output tokens, all the run's energy",
    "basis_total_j": "energy total (J)",
    "basis_kwh_per_million_output_tokens": "kWh per million output tokens, all the run's energy",
    "host_base_j": "host base energy (J)",
    "static_j": "static energy: GPU idle floor + host base (J)",
    "static_share": "static share of the energy",
    "static_kwh_per_million_output_tokens": "static kWh per million output tokens",
}
UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (("_j", " (J)"), ("_w", " (W)"), ("_s", " (s)"))


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def label(key: str) -> str:
    """`average_power_w` -> `average power (W)`: the unit suffix becomes a unit."""
    if key in _LABELS:
        return _LABELS[key]
    for suffix, unit in UNIT_SUFFIXES:
        if key.endswith(suffix):
            return key.removesuffix(suffix).replace("_", " ") + unit
    return key.replace("_", " ")


def energy_rows(e: dict[str, Any]) -> list[Row]:
    """Every number of the energy block, its label prefixed with its basis."""
    basis = str(e.get("energy_basis") or "GPU")
    rows: list[Row] = []
    for key, value in e.items():
        if not _is_num(value):
            continue
        text = fmt.pct(value) if key == "static_share" else fmt.num(value)
        rows.append((f"{basis if key in _ON_BASIS else 'GPU'}: {label(key)}", text))
    return rows


def frontend_sections(summary: dict[str, Any]) -> list[Section]:
    """The serving front end of a simulated run, when its summary has one."""
    fe = summary.get("frontend")
    if not isinstance(fe, dict):
        return []
    rows: list[Row] = [
        ("API-server processes", str(fe.get("api_server_processes", "-"))),
        ("their utilisation", fmt.pct(fe.get("utilization"))),
        *(
            (f"wait in front of them, {name}", fmt.ms(fe.get(f"wait_{name}_s"), unit=True))
            for name in ("mean", "p50", "p90", "p99")
            if f"wait_{name}_s" in fe
        ),
        ("requests queued there (mean)", fmt.num(fe.get("queue_mean"))),
        ("token delivery lag (mean)", fmt.ms(fe.get("token_lag_mean_s"), unit=True)),
    ]
    return [Section("Serving front end (CPU)", tables=[Table("Front end", ("", ""), rows)])]
