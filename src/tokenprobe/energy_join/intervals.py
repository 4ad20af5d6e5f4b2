"""Intervals of energy between consecutive samples, and the work in flight from the records.

See `tokenprobe.energy_join` for the methods; this module holds the two time bases they share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenprobe.records import RequestRecord, Run, TelemetrySample

GAP_FACTOR = 3.0  # an interval longer than 3 median periods is a gap in the sampling


@dataclass(frozen=True, slots=True)
class Intervals:
    """One GPU's consecutive sample pairs (arrays of equal length), clipped to the run window."""

    gpu_index: int | None
    start_s: np.ndarray
    end_s: np.ndarray
    energy_j: np.ndarray
    from_counter: np.ndarray  # bool
    counter_j: float | None  # Σ counter ΔE over intervals where both sources exist
    integral_j: float | None  # Σ trapezoid over the same intervals
    period_s: float  # median sampling period (0 for a timeline)
    from_timeline: bool = False

    @property
    def length_s(self) -> np.ndarray:
        return np.asarray(self.end_s - self.start_s, dtype=np.float64)


def window_of(run: Run) -> float:
    if run.duration_s is not None:
        return run.duration_s
    ends = [r.finish_s if r.finish_s is not None else r.sent_s for r in run.records]
    return max(ends, default=max((s.t_s for s in run.telemetry), default=0.0))


def _gpu_intervals(samples: Sequence[TelemetrySample], window_s: float) -> Intervals | None:
    rows = sorted((s for s in samples if s.power_w is not None or s.energy_j is not None), key=_t)
    if len(rows) < 2:
        return None
    t = np.array([s.t_s for s in rows])
    p = np.array([np.nan if s.power_w is None else s.power_w for s in rows])
    e = np.array([np.nan if s.energy_j is None else s.energy_j for s in rows])
    dt = np.diff(t)
    trapezoid = (p[1:] + p[:-1]) / 2 * dt
    counter = np.diff(e)
    use_counter = np.isfinite(counter) & (counter >= 0)  # a negative ΔE is a counter reset
    energy = np.where(use_counter, counter, trapezoid)
    keep = (dt > 0) & np.isfinite(energy)
    both = keep & use_counter & np.isfinite(trapezoid)
    lo, hi = np.clip(t[:-1], 0, window_s), np.clip(t[1:], 0, window_s)
    share = np.divide(hi - lo, dt, out=np.zeros_like(dt), where=dt > 0)
    keep &= hi > lo
    counter_j = float(np.sum((counter * share)[both & keep])) if np.any(both & keep) else None
    integral_j = float(np.sum((trapezoid * share)[both & keep])) if np.any(both & keep) else None
    return Intervals(
        gpu_index=rows[0].gpu_index,
        start_s=lo[keep],
        end_s=hi[keep],
        energy_j=(energy * share)[keep],
        from_counter=use_counter[keep],
        counter_j=counter_j,
        integral_j=integral_j,
        period_s=float(np.median(dt[dt > 0])) if np.any(dt > 0) else 0.0,
    )


def _t(sample: TelemetrySample) -> float:
    return sample.t_s


def _timeline_intervals(run: Run, window_s: float) -> Intervals | None:
    points = sorted(run.timeline, key=lambda p: p.t_s)
    if not points:
        return None
    t = np.array([p.t_s for p in points] + [max(window_s, points[-1].t_s)])
    lo, hi = np.clip(t[:-1], 0, window_s), np.clip(t[1:], 0, window_s)
    keep = hi > lo
    energy = np.array([p.power_w for p in points]) * (hi - lo)
    none = np.zeros(int(keep.sum()), bool)
    return Intervals(None, lo[keep], hi[keep], energy[keep], none, None, None, 0.0, True)


def intervals_of(run: Run) -> list[Intervals]:
    """Per-GPU intervals of the run's telemetry, or the simulator timeline when there is none."""
    window_s = window_of(run)
    by_gpu: dict[int | None, list[TelemetrySample]] = defaultdict(list)
    for sample in run.telemetry:
        by_gpu[sample.gpu_index].append(sample)
    out = [iv for s in by_gpu.values() if (iv := _gpu_intervals(s, window_s)) is not None]
    if not out and (timeline := _timeline_intervals(run, window_s)) is not None:
        out.append(timeline)
    return out


@dataclass(frozen=True, slots=True)
class Phases:
    """Constant-rate phases of all requests: prefill (input tokens) and decode (output tokens)."""

    request_ids: list[str]
    start_s: np.ndarray
    end_s: np.ndarray
    tokens: np.ndarray
    is_prefill: np.ndarray
    owner: np.ndarray  # index into request_ids

    @property
    def rate(self) -> np.ndarray:
        return np.asarray(self.tokens / (self.end_s - self.start_s), dtype=np.float64)


def phases_of(records: Sequence[RequestRecord]) -> Phases:
    ids: list[str] = []
    rows: list[tuple[float, float, float, bool, int]] = []
    for r in records:
        ids.append(r.request_id)
        owner = len(ids) - 1
        if r.first_token_s is None:
            continue
        prefill_start = r.sent_s + (r.queue_s or 0.0)
        if r.first_token_s > prefill_start and r.input_tokens > 0:
            rows.append((prefill_start, r.first_token_s, float(r.input_tokens), True, owner))
        # a stream cut short has no finish_s: its decode ran until its last token arrived
        end = r.finish_s if r.finish_s is not None else max(r.token_times_s, default=None)
        if end is not None and end > r.first_token_s and r.output_tokens > 1:
            rows.append((r.first_token_s, end, float(r.output_tokens - 1), False, owner))
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    return Phases(
        ids,
        np.array(cols[0], float),
        np.array(cols[1], float),
        np.array(cols[2], float),
        np.array(cols[3], bool),
        np.array(cols[4], int),
    )


def cumulative_work(phases: Phases, mask: np.ndarray, weight: float, t: np.ndarray) -> np.ndarray:
    """W(t) = tokens (× weight) processed by the phases in `mask` up to each time in `t`.

    Σ rate · clip(t - start, 0, length) done as a sweep: the total rate is piecewise constant
    between phase boundaries, so W is piecewise linear and exact under np.interp.
    """
    if not np.any(mask):
        return np.zeros_like(t)
    rate = phases.rate[mask] * weight
    times = np.concatenate([phases.start_s[mask], phases.end_s[mask]])
    deltas = np.concatenate([rate, -rate])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    rate_after = np.cumsum(deltas)
    work = np.concatenate([[0.0], np.cumsum(rate_after[:-1] * np.diff(times))])
    return np.asarray(np.interp(t, times, work, left=0.0, right=float(work[-1])), np.float64)
