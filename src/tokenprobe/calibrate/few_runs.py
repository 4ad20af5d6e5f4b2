"""Calibration from a server's few runs (MISSION M5), judged on that server's other runs.

A user runs three loads on their server (light, middle, heavy), calibrates on them, and predicts
the rest of that server's runs with the fitted parameters. `few_runs` plays that on public data
split by run: each measured series (one engine, model, GPU and parallelism: `Row.run`, i.e. one
server) of at least `MIN_SERIES_ROWS` rows gives its rows of lowest, middle and highest load
(`Row.load`: concurrency, batch or rate) to the fit, started from the shipped profile of the
row's engine on its GPU's vendor, and every other row of the series is predicted before (shipped
profile) and after (fitted). No row is both fitted and judged. benchmarks/calibrate_few_runs.py
prints the pooled figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from tokenprobe.calibrate.fit import Params, fit
from tokenprobe.calibrate.observations import Row, observe
from tokenprobe.calibrate.profile import load_profile, profile_name_for
from tokenprobe.cost import gpu_generation
from tokenprobe.errors import TokenprobeError

MIN_SERIES_ROWS = 6
CALIBRATION_RUNS = 3

Errors = dict[str, dict[str, list[tuple[float, float]]]]
"""source -> metric -> (|error| before, |error| after) of each held-back row."""


def profile_of(row: Row) -> str | None:
    """The shipped profile that prices this row: its engine's on its GPU's vendor and generation
    (`select_profile`: vLLM on MI300X is `vllm-rocm`, on B200 `vllm-blackwell`); None where none
    ships."""
    gpu = row.deployment.gpu
    try:
        return profile_name_for(row.engine, gpu.vendor, gpu_generation(gpu))
    except TokenprobeError:  # an engine without a preset (e.g. the PyTorch profiler's rows)
        return None


def shipped_params(row: Row) -> Params:
    """The parameters the row is priced with out of the box: its shipped profile, else defaults."""
    name = profile_of(row)
    if name is None:
        return Params()
    p = load_profile(name)
    return Params(p.efficiency, p.power)


def _load(row: Row) -> tuple[float, str]:
    """A series' load order: the load each row ran at (`Row.load`), then its label."""
    return row.load, row.label


def pick(series: Sequence[Row], k: int = CALIBRATION_RUNS) -> tuple[list[Row], list[Row]]:
    """(the k rows a user would run first: lightest, evenly spaced middles, heaviest; the rest)."""
    if k < 2:
        raise ValueError("k: at least the lightest and the heaviest run")
    ordered = sorted(series, key=_load)
    chosen = {round(i * (len(ordered) - 1) / (k - 1)) for i in range(k)}
    return [ordered[i] for i in sorted(chosen)], [
        r for i, r in enumerate(ordered) if i not in chosen
    ]


def few_runs(rows: Sequence[Row], k: int = CALIBRATION_RUNS) -> Errors:
    """Fit each server on k of its rows, judge it on the others (module docstring)."""
    series: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        series[row.run].append(row)
    out: Errors = defaultdict(lambda: defaultdict(list))
    for members in series.values():
        if len(members) < max(MIN_SERIES_ROWS, k + 1):
            continue
        fitted, held = pick(members, k)
        start = shipped_params(fitted[0])
        params = fit(fitted, start=start).params
        before = observe(held, start.efficiency, start.power)
        after = observe(held, params.efficiency, params.power)
        for b, a in zip(before, after, strict=True):
            out[b.source][b.metric].append((abs(b.error), abs(a.error)))
    return out
