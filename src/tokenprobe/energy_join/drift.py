"""Thermal drift (seed 003 §6.5): the first vs the last minutes of a long run.

"Run 20 min, compare the first and last 5": mean power, SM clock, temperature and output tokens/s
over the first and last `drift_window_s` (default 300 s, shrunk to a quarter of short runs; none
under 60 s). Flagged when the SM clock falls > 5 %, or J per output token rises > 5 %, or power
rises > 5 % while tokens/s falls > 5 %.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenprobe.energy_join.intervals import Intervals, Phases, cumulative_work
from tokenprobe.records import Run

DRIFT_THRESHOLD = 0.05
MIN_DRIFT_RUN_S = 60.0


@dataclass(frozen=True, slots=True)
class DriftWindow:
    power_w: float | None
    sm_clock_hz: float | None
    temp_c: float | None
    tokens_per_s: float


@dataclass(frozen=True, slots=True)
class ThermalDrift:
    window_s: float
    first: DriftWindow
    last: DriftWindow
    signals: list[str]

    @property
    def drifted(self) -> bool:
        return bool(self.signals)


def _window_mean(values: list[tuple[float, float]], lo: float, hi: float) -> float | None:
    inside = [v for t, v in values if lo <= t <= hi]
    return sum(inside) / len(inside) if inside else None


def _window(
    run: Run, intervals: list[Intervals], phases: Phases, lo: float, hi: float
) -> DriftWindow:
    energy = 0.0
    for iv in intervals:
        overlap = np.clip(np.minimum(iv.end_s, hi) - np.maximum(iv.start_s, lo), 0, None)
        energy += float(np.sum(iv.energy_j * overlap / iv.length_s))
    decode = ~phases.is_prefill
    bounds = np.array([lo, hi])
    tokens = float(np.diff(cumulative_work(phases, decode, 1.0, bounds))[0])
    clocks = [(s.t_s, s.sm_clock_hz) for s in run.telemetry if s.sm_clock_hz is not None]
    temps = [(s.t_s, s.temp_c) for s in run.telemetry if s.temp_c is not None]
    return DriftWindow(
        power_w=energy / (hi - lo) if intervals else None,
        sm_clock_hz=_window_mean(clocks, lo, hi),
        temp_c=_window_mean(temps, lo, hi),
        tokens_per_s=tokens / (hi - lo),
    )


def _ratio(last: float | None, first: float | None) -> float | None:
    return last / first if last is not None and first else None


def thermal_drift(
    run: Run, intervals: list[Intervals], phases: Phases, window_s: float, drift_window_s: float
) -> ThermalDrift | None:
    if window_s < MIN_DRIFT_RUN_S:
        return None
    span = min(drift_window_s, window_s / 4)
    first = _window(run, intervals, phases, 0.0, span)
    last = _window(run, intervals, phases, window_s - span, window_s)
    signals: list[str] = []
    clock = _ratio(last.sm_clock_hz, first.sm_clock_hz)
    if clock is not None and clock < 1 - DRIFT_THRESHOLD:
        signals.append(f"SM clock fell to {clock:.1%} of the first window")
    power = _ratio(last.power_w, first.power_w)
    speed = _ratio(last.tokens_per_s, first.tokens_per_s)
    if power is not None and speed:
        per_token = power / speed
        if per_token > 1 + DRIFT_THRESHOLD:
            signals.append(f"J per output token rose to {per_token:.1%} of the first window")
        if power > 1 + DRIFT_THRESHOLD and speed < 1 - DRIFT_THRESHOLD:
            signals.append(f"power rose to {power:.1%} while tokens/s fell to {speed:.1%}")
    return ThermalDrift(span, first, last, signals)
