"""What the rules look at, pulled once out of a Run: time-weighted series on the run's clock.

Every series is a list of samples with a weight `dt_s`, so a mean is Σ v·dt / Σ dt whatever the
sampling. A sample holds until the next sample of the same source (the same GPU); the last one
holds for that source's median sampling period, cut at the run's end when the run has one (its
duration, else its last request's end): a sample taken at or after that end holds for nothing.
An imported log with no duration and no requests has no end, so its last sample holds for the
full median period and counts like the others (a two-row log, idle then busy, reads 50 % busy,
not 0 %). A lone sample holds until the end, or, with no end, for the median period of the
field's other GPUs (1 s when there is none).

GPU series concatenate the GPUs' series one after another (each GPU's in time order), so any
figure that compares samples over time must be taken per GPU: `sm_clock_gpu` and
`PowerClock.gpu` give each sample's GPU index (NO_GPU_INDEX where the source named none), for the
throttling rule's clock-drop and power-cap checks (which judge each GPU on its own).

`power_clock` pairs, sample by sample, the GPU readings that hold both a power and an SM clock
(with the enforced power limit where the source reported one): the power-cap check of the
throttling rule needs the clock of the very samples that sit at the power limit.

`busy` marks the samples taken while at least one request was in flight (from the records'
[sent_s, finish_s]); boundness is judged on those only, so idle stretches do not dilute a
saturated GPU (idle waste is a rule of its own). A run without request records (an imported GPU
log) counts every sample as busy.

GPU: NVML / nvidia-smi / DCGM samples (`run.telemetry`) when there are any, else the simulator's
timeline (power of all GPUs / number of GPUs; "utilization" = a step running, which is what NVML's
utilization.gpu measures: the share of time a kernel runs). The timeline has no memory
utilization; `mem_util` is then None and the rules use the cost model's view instead (rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tokenprobe.errors import TokenprobeError
from tokenprobe.hardware import GpuSpec, get_gpu
from tokenprobe.records import DeploymentConfig, Run, RunConfig


@dataclass(frozen=True)
class Series:
    """Samples `value` at `t_s` with weights `dt_s`; `busy`: a request was in flight."""

    t_s: np.ndarray
    value: np.ndarray
    dt_s: np.ndarray
    busy: np.ndarray

    def __len__(self) -> int:
        return int(self.t_s.size)

    def mean(self, busy_only: bool = False) -> float | None:
        mask = self.busy if busy_only else np.ones(self.t_s.size, dtype=bool)
        weights = self.dt_s[mask]
        if weights.size == 0 or float(weights.sum()) <= 0:
            return None
        return float(np.average(self.value[mask], weights=weights))

    def share(self, predicate: np.ndarray, busy_only: bool = False) -> float | None:
        """Time share (0..1) of the samples where `predicate` holds."""
        mask = self.busy if busy_only else np.ones(self.t_s.size, dtype=bool)
        total = float(self.dt_s[mask].sum())
        if total <= 0:
            return None
        return float(self.dt_s[mask & predicate].sum()) / total


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float | None:
    """The smallest value at which the weights, summed in value order, reach half their total
    (a plain median's lower middle when all weights are equal); None when the weights sum to 0."""
    total = float(weights.sum()) if weights.size else 0.0
    if total <= 0:
        return None
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    index = int(np.searchsorted(cumulative, total / 2, side="left"))
    return float(values[order][min(index, values.size - 1)])


@dataclass(frozen=True)
class PowerClock:
    """The GPU samples holding both a power reading and an SM clock, aligned: `clock_hz` is their
    SM-clock series (weights and busy marks as any series), `power_w[i]` and `limit_w[i]` belong
    to its sample i; `limit_w` is the enforced power limit the sample recorded (NaN: none);
    `gpu[i]` is its GPU index (NO_GPU_INDEX: the source named none)."""

    clock_hz: Series
    power_w: np.ndarray
    limit_w: np.ndarray
    gpu: np.ndarray


@dataclass
class Signals:
    """Everything the rules read; None / empty where the run did not record it."""

    window_s: float
    gpu: GpuSpec | None
    num_gpus: int
    gpu_source: str  # "telemetry", "timeline" or "none"
    power_w: Series | None = None  # per GPU
    gpu_util: Series | None = None
    mem_util: Series | None = None
    sm_clock_hz: Series | None = None
    sm_clock_gpu: np.ndarray | None = None  # GPU index of each sm_clock_hz sample
    throttle: Series | None = None  # NVML throttle-reason bit masks (as floats)
    power_clock: PowerClock | None = None  # power and SM clock of the same samples
    pcie_bytes_per_s: Series | None = None  # tx + rx, per GPU
    cpu_util: Series | None = None  # host, mean over cores
    process_cpu: Series | None = None  # server process, share of one core
    kv_usage: Series | None = None  # 0..1
    waiting: Series | None = None  # requests queued at the server
    preemptions: int | None = None
    timeouts: int = 0
    arrivals_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    notes: list[str] = field(default_factory=list)


NO_GPU_INDEX = -1  # the GPU index of a sample whose source named no GPU
LONE_SAMPLE_S = 1.0  # weight of a lone sample when neither an end nor a period is known


def _weights(t_s: np.ndarray, end_s: float | None, period_s: float | None = None) -> np.ndarray:
    """Sorted sample times -> how long each sample holds (module docstring); `end_s` None: the
    run has no known end; `period_s`: the period a lone sample holds for when there is none."""
    if t_s.size == 0:
        return t_s
    if t_s.size == 1:
        if end_s is None:
            return np.array([period_s if period_s and period_s > 0 else LONE_SAMPLE_S])
        return np.array([max(end_s - float(t_s[0]), 1e-9)])
    gaps = np.diff(t_s)
    last = float(np.median(gaps))
    if end_s is not None:
        last = min(last, end_s - float(t_s[-1]))
    weights: np.ndarray = np.maximum(np.append(gaps, last), 0.0)
    return weights


def _median_period(series_times: list[list[float]]) -> float | None:
    """The median gap between consecutive samples over several sources (None: no gap)."""
    gaps = [np.diff(np.sort(np.asarray(ts, dtype=float))) for ts in series_times if len(ts) > 1]
    joined = np.concatenate(gaps) if gaps else np.zeros(0)
    return float(np.median(joined)) if joined.size else None


def in_flight(run: Run, t_s: np.ndarray) -> np.ndarray:
    """Requests in flight at each time (sent_s <= t < finish_s; failed ones until their end)."""
    spans = [(r.sent_s, r.finish_s) for r in run.records if r.finish_s is not None]
    if not spans:
        return np.zeros(t_s.size, dtype=int)
    starts = np.sort(np.array([s for s, _ in spans]))
    ends = np.sort(np.array([e for _, e in spans]))
    started = np.searchsorted(starts, t_s, side="right")
    ended = np.searchsorted(ends, t_s, side="right")
    return (started - ended).astype(int)


def _series(
    run: Run,
    t_s: list[float],
    values: list[float],
    end_s: float | None,
    period_s: float | None = None,
) -> Series | None:
    if not t_s:
        return None
    t = np.asarray(t_s, dtype=float)
    order = np.argsort(t, kind="stable")
    t, v = t[order], np.asarray(values, dtype=float)[order]
    busy = in_flight(run, t) > 0 if run.records else np.ones(t.size, dtype=bool)
    return Series(t, v, _weights(t, end_s, period_s), busy)


def _field_by_gpu(
    run: Run, name: str, end_s: float | None, scale: float = 1.0
) -> tuple[Series | None, np.ndarray]:
    """One telemetry field over every GPU: weights per GPU, so each GPU counts for its time; with
    the GPU index of each sample (NO_GPU_INDEX: none)."""
    by_gpu: dict[int | None, tuple[list[float], list[float]]] = {}
    for s in run.telemetry:
        value = getattr(s, name)
        if value is None:
            continue
        ts, vs = by_gpu.setdefault(s.gpu_index, ([], []))
        ts.append(s.t_s)
        vs.append(float(value) * scale)
    period = _median_period([ts for ts, _ in by_gpu.values()])
    parts = [(index, _series(run, ts, vs, end_s, period)) for index, (ts, vs) in by_gpu.items()]
    found = [(index, p) for index, p in parts if p is not None]
    if not found:
        return None, np.zeros(0, dtype=int)
    series = _concatenate([p for _, p in found])
    gpus = np.concatenate([np.full(len(p), _index(i), dtype=int) for i, p in found])
    return series, gpus


def _concatenate(parts: list[Series]) -> Series:
    """Several GPUs' series one after another (module docstring: compare over time per GPU)."""
    return Series(
        *(np.concatenate([getattr(p, k) for p in parts]) for k in Series.__dataclass_fields__)
    )


def _index(gpu_index: int | None) -> int:
    return NO_GPU_INDEX if gpu_index is None else gpu_index


def _field(run: Run, name: str, end_s: float | None, scale: float = 1.0) -> Series | None:
    """One telemetry field over every GPU: weights per GPU, so each GPU counts for its time."""
    return _field_by_gpu(run, name, end_s, scale)[0]


def _power_clock(run: Run, end_s: float | None) -> PowerClock | None:
    """The samples with both power and SM clock, per GPU weighted like `_field`."""
    by_gpu: dict[int | None, list[tuple[float, float, float, float]]] = {}
    for s in run.telemetry:
        if s.power_w is None or s.sm_clock_hz is None:
            continue
        limit = float(s.power_limit_w) if s.power_limit_w is not None else np.nan
        row = (s.t_s, float(s.sm_clock_hz), float(s.power_w), limit)
        by_gpu.setdefault(s.gpu_index, []).append(row)
    if not by_gpu:
        return None
    period = _median_period([[row[0] for row in rows] for rows in by_gpu.values()])
    clocks: list[Series] = []
    power: list[float] = []
    limit_w: list[float] = []
    gpus: list[int] = []
    for index, rows in by_gpu.items():
        rows.sort(key=lambda row: row[0])  # _series keeps this order (stable sort by time)
        series = _series(run, [r[0] for r in rows], [r[1] for r in rows], end_s, period)
        assert series is not None
        clocks.append(series)
        power += [r[2] for r in rows]
        limit_w += [r[3] for r in rows]
        gpus += [_index(index)] * len(rows)
    clock = _concatenate(clocks)
    return PowerClock(clock, np.asarray(power), np.asarray(limit_w), np.asarray(gpus, dtype=int))


def _deployment(run: Run, notes: list[str]) -> DeploymentConfig:
    """The run config's deployment; a config that does not read is a note (nothing known)."""
    try:
        return RunConfig.of(run).deployment
    except TokenprobeError as exc:
        notes.append(f"run config: {exc}")
        return DeploymentConfig()


def _gpu_spec(dc: DeploymentConfig, notes: list[str]) -> GpuSpec | None:
    if dc.gpu is None:
        return None
    try:
        return get_gpu(dc.gpu)
    except TokenprobeError as exc:
        notes.append(f"GPU {dc.gpu!r} of the run config is not in the catalog ({exc})")
        return None


def _num_gpus(run: Run, dc: DeploymentConfig) -> int:
    """The simulator's num_gpus, else tp x pp when the config knows them, else the GPUs the
    telemetry saw (a measured run that was not told)."""
    recorded = run.config.get("num_gpus")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > 0:
        return recorded
    if dc.tp is not None or dc.pp is not None:
        return (dc.tp or 1) * (dc.pp or 1)
    indices = {s.gpu_index for s in run.telemetry if s.gpu_index is not None}
    return max(len(indices), 1)


def end_of(run: Run) -> float | None:
    """The run's end on its own clock: its duration, else its last request's end; None when it
    has neither (an imported GPU log)."""
    if run.duration_s:
        return float(run.duration_s)
    ends = [r.finish_s for r in run.records if r.finish_s is not None]
    return max(ends) if ends else None


def window_of(run: Run) -> float:
    end = end_of(run)
    return end if end is not None else 0.0


def _gpu_from_telemetry(sig: Signals, run: Run, end: float | None) -> None:
    sig.power_w = _field(run, "power_w", end)
    sig.gpu_util = _field(run, "gpu_util", end)
    sig.mem_util = _field(run, "mem_util", end)
    sig.sm_clock_hz, sig.sm_clock_gpu = _field_by_gpu(run, "sm_clock_hz", end)
    sig.throttle = _field(run, "throttle_reasons", end)
    sig.power_clock = _power_clock(run, end)
    tx, rx = _field(run, "pcie_tx_bytes_per_s", end), _field(run, "pcie_rx_bytes_per_s", end)
    if tx is not None and rx is not None and len(tx) == len(rx):
        sig.pcie_bytes_per_s = Series(tx.t_s, tx.value + rx.value, tx.dt_s, tx.busy)


def _gpu_from_timeline(sig: Signals, run: Run, end: float | None) -> None:
    tl = run.timeline
    t = [p.t_s for p in tl]
    sig.power_w = _series(run, t, [p.power_w / sig.num_gpus for p in tl], end)
    sig.gpu_util = _series(run, t, [1.0 if p.batch_size > 0 else 0.0 for p in tl], end)
    capacity = run.config.get("kv_capacity_blocks")
    if isinstance(capacity, int) and capacity > 0:
        sig.kv_usage = _series(run, t, [p.kv_blocks_used / capacity for p in tl], end)
    sig.waiting = _series(run, t, [float(p.queue_len) for p in tl], end)


def _server(sig: Signals, run: Run, end: float | None) -> None:
    ok = [s for s in run.server if s.error is None]
    kv = [(s.t_s, s.kv_cache_usage) for s in ok if s.kv_cache_usage is not None]
    waiting = [(s.t_s, s.requests_waiting) for s in ok if s.requests_waiting is not None]
    if kv:
        sig.kv_usage = _series(run, [t for t, _ in kv], [v for _, v in kv], end)
    if waiting:
        sig.waiting = _series(run, [t for t, _ in waiting], [v for _, v in waiting], end)
    counts = [s.preemptions_total for s in ok if s.preemptions_total is not None]
    if counts:
        sig.preemptions = int(max(counts) - min(counts))


def _host(sig: Signals, run: Run, end: float | None) -> None:
    cpu = [(h.t_s, h.cpu_util) for h in run.host if h.cpu_util is not None]
    proc = [(h.t_s, h.process_cpu_util) for h in run.host if h.process_cpu_util is not None]
    if cpu:
        sig.cpu_util = _series(run, [t for t, _ in cpu], [v for _, v in cpu], end)
    if proc:
        sig.process_cpu = _series(run, [t for t, _ in proc], [v for _, v in proc], end)


def signals_of(run: Run) -> Signals:
    """Pull the rules' inputs out of `run` (see the module docstring)."""
    end = end_of(run)
    notes: list[str] = []
    window = end if end is not None else 0.0
    dc = _deployment(run, notes)
    sig = Signals(window, _gpu_spec(dc, notes), _num_gpus(run, dc), "none", notes=notes)
    if run.telemetry:
        sig.gpu_source = "telemetry"
        _gpu_from_telemetry(sig, run, end)
    elif run.timeline:
        sig.gpu_source = "timeline"
        _gpu_from_timeline(sig, run, end)
    _server(sig, run, end)
    _host(sig, run, end)
    sim_preemptions = [r.extra.get("preemptions") for r in run.records if "preemptions" in r.extra]
    if sig.preemptions is None and sim_preemptions:
        sig.preemptions = int(sum(float(p) for p in sim_preemptions if isinstance(p, float | int)))
    sig.timeouts = sum(1 for r in run.records if r.error_kind == "timeout")
    sig.arrivals_s = np.sort(np.array([r.scheduled_s for r in run.records], dtype=float))
    return sig
