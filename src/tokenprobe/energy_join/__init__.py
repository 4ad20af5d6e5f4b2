"""The energy join (M3): a Run's power samples against its request records.

Everything rests on *intervals* between consecutive samples of one GPU, each with its energy:
- from the energy counter when both ends have `energy_j` (ΔE, exact whatever the sampling), else
- from power by the trapezoid rule, (P_a + P_b)/2 · (t_b - t_a);
- a run with no telemetry but a simulator timeline uses its piecewise-constant `power_w` (all GPUs).
Intervals are clipped to the run window [0, T] (T = `run.duration_s`, else the last record end).
Run energy = Σ interval energies; when both sources exist on some intervals, both totals are given
over those intervals and `counter_integral_disagreement` = (integral - counter) / counter is the
measurement-quality figure (NVML's power on Ampere/Hopper is a 1 s average; the counter is not).

Work in flight. Each request is two phases with constant token rates: prefill processes
`input_tokens` over [sent_s + queue_s, first_token_s]; decode produces `output_tokens - 1` over
[first_token_s, finish_s] (the first token comes out of the prefill pass). Failed requests without
a first token carry no work. The work at an instant is Σ rates, prefill tokens weighted by
`prefill_token_weight` (by default the ratio of the fitted J/prefill-token to J/decode-token when
the fit below is usable, else 1). An interval's energy goes to the requests in flight in proportion
to their work inside it, so Σ per-request energy = `active_energy_j`, the energy of intervals with
work in flight; intervals with none make `idle_time_energy_j`.

Idle baseline: the mean power of intervals with no request in flight when they add up to at least
`MIN_IDLE_S`, else the `idle_percentile` (5th) of interval power; `static_energy_j` = baseline ×
covered time and `static_share` its share of the run energy (seed 003 §2.4).

Prefill vs decode: weighted least squares over intervals (weights = their length) of
    P_i = P_static + e_prefill · r_prefill,i + e_decode · r_decode,i
where r are the interval's mean prefill (input) and decode (output) token rates; e_prefill and
e_decode are then J per token (W / (token/s)). Fitted per GPU and summed (tensor-parallel GPUs all
work on every token). Needs `MIN_FIT_INTERVALS` intervals and a full-rank design, else None.
The fit is non-negative (`nonnegative_lstsq`): a coefficient the data would push below zero is
held at 0 and named in `at_zero`. Its uncertainty: the standard error of each free coefficient,
sqrt(diag(s^2 (X'WX)^-1)) on the free columns with s^2 the weighted residual variance over
n - k degrees of freedom (the ordinary least-squares formula, e.g. Seber & Lee, "Linear
Regression Analysis", 2003, section 3.3), summed over GPUs in quadrature; None for a
coefficient held at 0 (its error is one-sided). It is a lower bound: NVML's power reading is a
moving average (~1 s on Ampere/Hopper), so neighbouring intervals are correlated and the
effective number of independent intervals is smaller than n.

Thermal drift: the first vs the last minutes of a long run (seed 003 §6.5), in `drift.py`.

Layout: `intervals.py` (the two time bases: energy intervals and work in flight), `drift.py`,
and this module (the join itself and its report).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tokenprobe.energy_join.drift import DriftWindow, ThermalDrift, thermal_drift
from tokenprobe.energy_join.intervals import (
    GAP_FACTOR,
    Intervals,
    Phases,
    cumulative_work,
    intervals_of,
    phases_of,
    window_of,
)
from tokenprobe.errors import ConfigError
from tokenprobe.records import Run
from tokenprobe.units import JOULES_PER_KWH, MEGA

MIN_IDLE_S = 5.0
MIN_FIT_INTERVALS = 10


@dataclass(frozen=True, slots=True)
class PrefillDecodeFit:
    static_w: float
    j_per_prefill_token: float
    j_per_decode_token: float
    r2: float
    intervals: int
    prefill_energy_j: float  # j_per_prefill_token × input tokens of the run
    decode_energy_j: float
    # coefficients the non-negative fit held at 0 (an unconstrained fit would have made them
    # negative: a static power or an energy per token below zero is not physics)
    at_zero: tuple[str, ...] = ()
    # standard errors (module docstring); None for a coefficient held at 0 or without a
    # residual degree of freedom
    static_w_se: float | None = None
    j_per_prefill_token_se: float | None = None
    j_per_decode_token_se: float | None = None

    @property
    def kwh_per_million_input_tokens(self) -> float:
        return self.j_per_prefill_token * MEGA / JOULES_PER_KWH

    @property
    def kwh_per_million_output_tokens(self) -> float:
        return self.j_per_decode_token * MEGA / JOULES_PER_KWH


@dataclass(frozen=True, slots=True)
class EnergyReport:
    """The join's figures (SI units; kWh only in the `kwh_*` conveniences the seeds quote)."""

    energy_j: float
    energy_source: str  # "counter", "integral", "counter+integral" or "timeline"
    counter_energy_j: float | None
    integral_energy_j: float | None
    counter_integral_disagreement: float | None
    window_s: float
    coverage: float  # share of the window covered by intervals no longer than GAP_FACTOR periods
    period_s: float
    gpus: int
    idle_baseline_w: float
    idle_baseline_method: str
    static_energy_j: float
    idle_time_energy_j: float
    active_energy_j: float
    request_energy_j: dict[str, float]
    input_tokens: int
    output_tokens: int
    prefill_token_weight: float
    fit: PrefillDecodeFit | None
    drift: ThermalDrift | None
    notes: list[str] = field(default_factory=list)

    @property
    def static_share(self) -> float:
        return self.static_energy_j / self.energy_j if self.energy_j > 0 else 0.0

    @property
    def idle_time_share(self) -> float:
        return self.idle_time_energy_j / self.energy_j if self.energy_j > 0 else 0.0

    def kwh_per_million(self, tokens: int) -> float | None:
        return self.energy_j / JOULES_PER_KWH * MEGA / tokens if tokens > 0 else None

    @property
    def kwh_per_million_output_tokens(self) -> float | None:
        """Whole-run energy over generated tokens (seed 003's 每百万Token耗电)."""
        return self.kwh_per_million(self.output_tokens)

    @property
    def kwh_per_million_input_tokens(self) -> float | None:
        return self.kwh_per_million(self.input_tokens)

    @property
    def kwh_per_million_tokens(self) -> float | None:
        return self.kwh_per_million(self.input_tokens + self.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("static_share", "idle_time_share", "kwh_per_million_output_tokens"):
            out[name] = getattr(self, name)
        out["kwh_per_million_input_tokens"] = self.kwh_per_million_input_tokens
        out["kwh_per_million_tokens"] = self.kwh_per_million_tokens
        if self.drift is not None:
            out["drift"]["drifted"] = self.drift.drifted
        return out


# ---------------------------------------------------------------- the join


def _fit_prefill_decode(
    intervals: list[Intervals], phases: Phases, input_tokens: int, output_tokens: int
) -> PrefillDecodeFit | None:
    coef = np.zeros(3)
    variance = np.zeros(3)
    known = np.ones(3, dtype=bool)  # a standard error exists for every GPU's coefficient
    ss_res = ss_tot = 0.0
    used = 0
    for iv in intervals:
        dt = iv.length_s
        if len(dt) < MIN_FIT_INTERVALS:
            return None
        x_p = np.diff(cumulative_work(phases, phases.is_prefill, 1.0, _edges(iv))) / dt
        x_d = np.diff(cumulative_work(phases, ~phases.is_prefill, 1.0, _edges(iv))) / dt
        design = np.column_stack([np.ones_like(dt), x_p, x_d])
        power = iv.energy_j / dt
        w = np.sqrt(dt)
        if np.linalg.matrix_rank(design * w[:, None]) < 3:
            return None
        beta = nonnegative_lstsq(design * w[:, None], power * w)
        residual = power - design @ beta
        var = _coef_variance(design * w[:, None], residual * w, beta > 0)
        known &= ~np.isnan(var)
        variance += np.nan_to_num(var)
        mean = np.average(power, weights=dt)
        ss_res += float(np.sum(dt * residual**2))
        ss_tot += float(np.sum(dt * (power - mean) ** 2))
        coef += beta
        used += len(dt)
    if used == 0:
        return None
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    names = ("static_w", "j_per_prefill_token", "j_per_decode_token")
    se = [float(np.sqrt(v)) if ok else None for v, ok in zip(variance, known, strict=True)]
    return PrefillDecodeFit(
        static_w=float(coef[0]),
        j_per_prefill_token=float(coef[1]),
        j_per_decode_token=float(coef[2]),
        r2=r2,
        intervals=used,
        prefill_energy_j=float(coef[1]) * input_tokens,
        decode_energy_j=float(coef[2]) * output_tokens,
        at_zero=tuple(n for n, c in zip(names, coef, strict=True) if c == 0.0),
        static_w_se=se[0],
        j_per_prefill_token_se=se[1],
        j_per_decode_token_se=se[2],
    )


def _coef_variance(a: np.ndarray, residual: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Variance of each least-squares coefficient of `a x = b` (module docstring) given the
    weighted residuals, over the `free` columns; NaN for the others, and for all when no degree
    of freedom is left."""
    out = np.full(a.shape[1], np.nan)
    k = int(free.sum())
    dof = a.shape[0] - k
    if k == 0 or dof <= 0:
        return out
    s2 = float(residual @ residual) / dof
    x = a[:, free]
    out[free] = s2 * np.diag(np.linalg.pinv(x.T @ x))
    return out


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin ||a x − b|| subject to x ≥ 0, exactly, for the few columns of the energy split.

    The optimum of a convex quadratic over the orthant is the unconstrained least-squares
    solution on some set of free columns with the others at 0 (the KKT conditions; Lawson &
    Hanson, "Solving Least Squares Problems", 1974, ch. 23): try every set (2^n − 1 of them,
    7 here) and keep the feasible one with the smallest residual.
    """
    n = a.shape[1]
    best, best_res = np.zeros(n), float(np.sum(b**2))
    for mask in range(1, 2**n):
        cols = [j for j in range(n) if mask >> j & 1]
        x_free, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
        if np.any(x_free < 0):
            continue
        x = np.zeros(n)
        x[cols] = x_free
        res = float(np.sum((a @ x - b) ** 2))
        if res < best_res - 1e-12 * max(1.0, best_res):
            best, best_res = x, res
    return best


def _edges(iv: Intervals) -> np.ndarray:
    return np.concatenate([iv.start_s, iv.end_s[-1:]]) if len(iv.start_s) else iv.start_s


def _interval_work(iv: Intervals, phases: Phases, prefill_weight: float) -> np.ndarray:
    """Work (weighted tokens) inside each interval, evaluated at its own start and end."""
    work = cumulative_work(phases, phases.is_prefill, prefill_weight, iv.end_s)
    work -= cumulative_work(phases, phases.is_prefill, prefill_weight, iv.start_s)
    work += cumulative_work(phases, ~phases.is_prefill, 1.0, iv.end_s)
    work -= cumulative_work(phases, ~phases.is_prefill, 1.0, iv.start_s)
    return np.asarray(np.maximum(work, 0.0), dtype=np.float64)


def _attribute(
    intervals: list[Intervals], phases: Phases, prefill_weight: float
) -> tuple[np.ndarray, float]:
    """Per-request energy and the active energy (Σ over intervals with work in flight).

    A request's share of interval i is rate_r·overlap_r,i / W_i, so its energy is
    rate_r · ∫ d(t) dt over its phase, with d = E_i / W_i (J per token) on interval i: one
    cumulative integral per GPU and two np.interp per phase.
    """
    energy = np.zeros(len(phases.request_ids))
    active = 0.0
    for iv in intervals:
        work = _interval_work(iv, phases, prefill_weight)
        busy = work > 1e-12
        active += float(np.sum(iv.energy_j[busy]))
        density = np.divide(iv.energy_j, work, out=np.zeros_like(work), where=busy)  # J/token
        # piecewise constant density on possibly non-contiguous intervals: integrate per edge
        edges = np.concatenate([iv.start_s, iv.end_s])
        order = np.argsort(edges, kind="stable")
        values = np.concatenate([density, -density])[order]
        knots = edges[order]
        level = np.cumsum(values)
        integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(knots))])
        at_end = np.interp(phases.end_s, knots, integral)
        at_start = np.interp(phases.start_s, knots, integral)
        weight = np.where(phases.is_prefill, prefill_weight, 1.0)
        np.add.at(energy, phases.owner, phases.rate * weight * (at_end - at_start))
    return energy, active


def _idle_baseline(
    intervals: list[Intervals], phases: Phases, percentile: float
) -> tuple[float, str, float]:
    """(baseline W summed over GPUs, method, energy of intervals with no work in flight)."""
    baseline = idle_energy = 0.0
    methods: set[str] = set()
    for iv in intervals:
        idle = _interval_work(iv, phases, 1.0) <= 1e-12
        idle_energy += float(np.sum(iv.energy_j[idle]))
        idle_s = float(np.sum(iv.length_s[idle]))
        if idle_s >= MIN_IDLE_S:
            baseline += float(np.sum(iv.energy_j[idle])) / idle_s
            methods.add("no request in flight")
        else:
            baseline += float(np.percentile(iv.energy_j / iv.length_s, percentile))
            methods.add(f"p{percentile:g} of power")
    return baseline, " + ".join(sorted(methods)), idle_energy


def _coverage(intervals: list[Intervals], window_s: float) -> float:
    if window_s <= 0:
        return 0.0
    shares = []
    for iv in intervals:
        ok = iv.length_s <= GAP_FACTOR * iv.period_s if iv.period_s > 0 else iv.length_s > 0
        shares.append(float(np.sum(iv.length_s[ok])) / window_s)
    return min(shares, default=0.0)


def join_energy(
    run: Run,
    *,
    idle_percentile: float = 5.0,
    drift_window_s: float = 300.0,
    prefill_token_weight: float | None = None,
) -> EnergyReport:
    """The energy figures of a run (see the module docstring for every method)."""
    if not 0 <= idle_percentile <= 100:
        raise ConfigError("idle_percentile", idle_percentile, "a percentile in 0..100")
    intervals = intervals_of(run)
    if not intervals:
        raise ConfigError("run.telemetry", len(run.telemetry), "needs ≥ 2 power or energy samples")
    window_s = window_of(run)
    phases = phases_of(run.records)
    input_tokens = sum(r.input_tokens for r in run.records if r.first_token_s is not None)
    output_tokens = sum(r.output_tokens for r in run.records)
    notes: list[str] = []
    fit = _fit_prefill_decode(intervals, phases, input_tokens, output_tokens)
    weight = prefill_token_weight
    if weight is None:
        usable = fit is not None and fit.j_per_prefill_token > 0 and fit.j_per_decode_token > 0
        weight = fit.j_per_prefill_token / fit.j_per_decode_token if fit and usable else 1.0
    if fit is None:
        notes.append("prefill/decode fit not identifiable (too few intervals or no variation)")
    per_request, active = _attribute(intervals, phases, weight)
    baseline, method, idle_energy = _idle_baseline(intervals, phases, idle_percentile)
    total = float(sum(np.sum(iv.energy_j) for iv in intervals))
    covered_s = max(float(np.sum(iv.length_s)) for iv in intervals)
    counter = [iv.counter_j for iv in intervals if iv.counter_j is not None]
    integral = [iv.integral_j for iv in intervals if iv.integral_j is not None]
    counter_j, integral_j = (sum(counter), sum(integral)) if counter else (None, None)
    coverage = _coverage(intervals, window_s)
    if coverage < 0.95:
        notes.append(f"sampling covers {coverage:.0%} of the run window: energy is a lower bound")
    return EnergyReport(
        energy_j=total,
        energy_source=_source(intervals),
        counter_energy_j=counter_j,
        integral_energy_j=integral_j,
        counter_integral_disagreement=(integral_j - counter_j) / counter_j
        if counter_j and integral_j is not None
        else None,
        window_s=window_s,
        coverage=coverage,
        period_s=float(np.median([iv.period_s for iv in intervals])),
        gpus=len(intervals),
        idle_baseline_w=baseline,
        idle_baseline_method=method,
        static_energy_j=baseline * covered_s,
        idle_time_energy_j=idle_energy,
        active_energy_j=active,
        request_energy_j=dict(zip(phases.request_ids, map(float, per_request), strict=True)),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        prefill_token_weight=weight,
        fit=fit,
        drift=thermal_drift(run, intervals, phases, window_s, drift_window_s),
        notes=notes,
    )


def _source(intervals: list[Intervals]) -> str:
    if any(iv.from_timeline for iv in intervals):
        return "timeline"
    if all(bool(np.all(iv.from_counter)) for iv in intervals):
        return "counter"
    return "counter+integral" if any(np.any(iv.from_counter) for iv in intervals) else "integral"


__all__ = [
    "DriftWindow",
    "EnergyReport",
    "Intervals",
    "Phases",
    "PrefillDecodeFit",
    "ThermalDrift",
    "cumulative_work",
    "intervals_of",
    "join_energy",
    "nonnegative_lstsq",
    "phases_of",
]
