"""`simulate`'s tables for the serving front end (--api-server-processes, --host) and the
batch window (--batch-window-s): the same data as the `frontend` and `batch_window` blocks of
`--json`."""

from __future__ import annotations

from typing import Any

from tokenprobe.cli.render import Col, print_table
from tokenprobe.units import MILLI, fmt_s

PAIR_COLUMNS = (Col("metric"), Col("value", kind="num", justify="right"))


def num(x: float | None, digits: int) -> str:
    """A figure with thousands separators, "-" when unknown (simulate's tables use it too)."""
    return "-" if x is None else f"{x:,.{digits}f}"


def ms(seconds: float | None, digits: int) -> str:
    """Seconds shown in milliseconds with `num`'s digits ("-" when unknown)."""
    return num(None if seconds is None else seconds / MILLI, digits)


def batch_window_effect(
    window_s: float, plain: dict[str, Any], held: dict[str, Any]
) -> dict[str, Any]:
    """TTFT, power and energy per output token without and with the batch window."""

    def row(d: dict[str, Any]) -> dict[str, Any]:
        e = d["energy"]
        return {
            "ttft_p50_s": d["ttft_s"]["p50"],
            "ttft_p90_s": d["ttft_s"]["p90"],
            "average_power_w": e["average_power_w"],
            "joules_per_output_token": e["joules_per_output_token"],
            "joules_per_token_all_in": e["joules_per_token_all_in"],
            "steps": d["steps"],
        }

    return {"window_s": window_s, "without": row(plain), "with": row(held)}


def frontend_table(f: dict[str, Any]) -> None:
    rows = [
        ("API-server processes", str(f["api_server_processes"])),
        ("their utilization", num(100 * (f["utilization"] or 0.0), 1) + " %"),
        ("wait in front of them mean / p90", f"{fmt_s(f['wait_mean_s'] or 0)} / "
         f"{fmt_s(f['wait_p90_s'] or 0)}"),
        ("requests queued there (mean)", num(f["queue_mean"], 1)),
        ("token delivery lag (mean)", fmt_s(f["token_lag_mean_s"] or 0.0)),
    ]  # fmt: skip
    print_table("Serving front end (CPU)", PAIR_COLUMNS, rows)


WINDOW_COLUMNS = (
    Col("batch window", kind="name"),
    *(Col(h, kind="num", justify="right") for h in ("TTFT p50", "TTFT p90", "avg W", "J/out tok")),
)


def window_table(b: dict[str, Any]) -> None:
    rows = [
        [
            label,
            fmt_s(r["ttft_p50_s"] or 0.0),
            fmt_s(r["ttft_p90_s"] or 0.0),
            num(r["average_power_w"], 0),
            num(r["joules_per_output_token"], 4),
        ]
        for label, r in (("none", b["without"]), (fmt_s(b["window_s"]), b["with"]))
    ]
    print_table("Effect of the batch window (same arrivals)", WINDOW_COLUMNS, rows)
