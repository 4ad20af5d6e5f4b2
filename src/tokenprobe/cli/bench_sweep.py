"""`bench --sweep rate=auto` (the knee under the SLOs) and the verdict on a finished run's
errors (`--max-error-rate`): what bench decides from a run's summary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tokenprobe.cli.app import err_console, guarded, print_json
from tokenprobe.errors import ConfigError
from tokenprobe.records import RUN_MARKERS, prepare_run_folder

if TYPE_CHECKING:
    from tokenprobe.loadgen import BenchConfig

AUTO_SWEEP = "rate=auto"
DEFAULT_SWEEP_POINTS = 8
MAX_SWEEP_POINTS = 64


def is_auto_sweep(text: str | None) -> bool:
    return text is not None and text.replace(" ", "").lower() == AUTO_SWEEP


def error_verdict(summary: dict[str, Any], max_error_rate: float) -> str | None:
    """Why a finished run counts as failed (every request failed, or more than
    `max_error_rate` of them), with the counts by failure kind; None when it does not."""
    failed, total = summary["failed"], summary["completed"] + summary["failed"]
    if not failed:
        return None
    kinds = ", ".join(f"{k}: {v}" for k, v in sorted(summary["errors"].items()))
    if failed == total:
        return f"every request failed ({failed} of {total}: {kinds}); results are written"
    if failed / total > max_error_rate:
        return (
            f"{failed} of {total} requests failed ({failed / total:.0%} > --max-error-rate "
            f"{max_error_rate:g}; {kinds}); results are written"
        )
    return None


def prepare_sweep_folder(root: Path, overwrite: bool) -> None:
    """An auto sweep's folder, checked before anything is sent: it cannot know its points'
    names in advance, so a folder holding any earlier run (itself or a point) is refused
    without --overwrite, and with it every earlier point's run files are removed (a stale point
    would join the new sweep's curves)."""
    prepare_run_folder(root, overwrite)
    points = [
        p for p in root.iterdir() if p.is_dir() and any((p / m).exists() for m in RUN_MARKERS)
    ]
    if points and not overwrite:
        raise ConfigError(
            "out",
            str(root),
            f"already holds sweep points ({points[0].name}, ...); pass "
            "--overwrite to replace them, or choose another folder",
        )
    for point in points:
        prepare_run_folder(point, overwrite=True)


def auto_sweep(
    base: BenchConfig,
    measure: Callable[[BenchConfig], dict[str, Any]],
    json_out: bool,
    max_error_rate: float,
    max_points: int,
) -> None:
    """`--sweep rate=auto`: the highest request rate whose run meets the SLOs (at least
    metrics.SLO_ATTAINMENT of the requests within them and not too many errors), found by
    metrics.RateSearch from --rate (default 1 req/s), one run folder per rate tried under --out
    (the report of that folder draws the curves and marks the same knee). Exit 1 when no rate
    met the SLOs."""
    from tokenprobe.loadgen import sweep_configs
    from tokenprobe.metrics import SLO_ATTAINMENT, RateSearch, slo_attainment

    search = RateSearch(base.rate_per_s or 1.0, max_points=max_points)
    points: list[dict[str, Any]] = []
    while (rate := search.next_rate()) is not None:
        (config,) = sweep_configs(base, "rate_per_s", [rate])
        config = replace(config, sweep_point=len(points))  # fresh prompts at every point
        # the sweep's folder was checked up front
        guarded(partial(prepare_run_folder, config.out or base.out or ".", overwrite=True))
        summary = measure(config)
        share = slo_attainment(summary)
        verdict = error_verdict(summary, max_error_rate)
        passed = share is not None and share >= SLO_ATTAINMENT and verdict is None
        search.record(rate, passed)
        points.append(
            {"out": config.out, "rate_per_s": rate, "slo_attainment": share, "meets_slos": passed}
            | summary
        )
        if not json_out:
            shown = "-" if share is None else f"{share:.0%}"
            err_console.print(
                f"rate {rate:.4g} req/s: {shown} of requests within the SLOs: "
                + (
                    "meets them" if passed else "misses them" + (f" ({verdict})" if verdict else "")
                ),
                highlight=False,
                markup=False,
            )
    knee = search.best
    if json_out:
        print_json({"sweep": "rate=auto", "knee_rate_per_s": knee, "points": points})
    elif knee is not None:
        err_console.print(
            f"knee: {knee:.4g} req/s, the highest rate tried with at least {SLO_ATTAINMENT:.0%} "
            f"of requests within the SLOs ({len(points)} runs; `tokenprobe report {base.out}` "
            "draws the curves)",
            highlight=False,
            markup=False,
        )
    if knee is None:
        lowest = min(p["rate_per_s"] for p in points)
        err_console.print(
            f"[bold red]error:[/] no rate tried (down to {lowest:.4g} req/s) met the SLOs; "
            "results are written",
            highlight=False,
        )
        raise typer.Exit(1)
