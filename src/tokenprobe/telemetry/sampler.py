"""A background thread that samples every GPU (NVML) and the host (psutil) on `units.now_s()`.

Times are run-relative: `t_s = now_s() - t0_s`, where `t0_s` is the run's start on the same clock
as the request records (the bench passes its own; by default the sampler's start). Ticks are on a
fixed grid `t0 + k * period_s`; a tick that comes too late (the machine was busy) is skipped and
counted in `missed_ticks` rather than sampled twice in a hurry.

Nothing the hardware does crashes the sampler:
- NVML missing or failing to initialise: a note, and host-only sampling.
- A counter a GPU lacks (NVML NotSupported): that field stays None, with a note (nvml.py).
- A call that fails (GPU lost, timeout...): a `Gap` for that GPU and field, extended while the
  failure lasts and closed when it answers again, plus one note per start of failure.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, TelemetryError
from tokenprobe.records import HOST_FILE, NOTES_FILE, HostSample, TelemetrySample
from tokenprobe.telemetry.host import HostReader
from tokenprobe.telemetry.nvml import GpuReading, NvmlGpus
from tokenprobe.units import now_s

DEFAULT_PERIOD_S = 0.1
GPU_LOST = "gpu"  # the `what` of a gap when no field of a GPU answered


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch [start_s, end_s] (run-relative, inclusive of the failed ticks) without data.

    `what` is a TelemetrySample field name, or "gpu" when the whole GPU stopped answering.
    """

    start_s: float
    end_s: float
    gpu_index: int | None
    what: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_s": self.start_s,
            "end_s": self.end_s,
            "gpu_index": self.gpu_index,
            "what": self.what,
            "reason": self.reason,
        }


def open_gpus(nvml: Any | None = None) -> tuple[NvmlGpus | None, list[str]]:
    """NVML's GPUs, or None and a note saying why sampling will be host-only."""
    try:
        gpus = NvmlGpus(nvml)
    except TelemetryError as exc:
        return None, [f"NVML unavailable ({exc}): sampling the host only"]
    if gpus.count == 0:
        gpus.close()
        return None, ["NVML sees no GPU: sampling the host only"]
    return gpus, []


class Sampler:
    """Sample GPUs and host every `period_s` in a thread; `start()`/`stop()` or `with`.

    `on_sample` (e.g. `RunWriter.add_telemetry`) is called from the sampling thread for every GPU
    sample, as it is taken; `on_host_sample` (e.g. a `HostLog`) likewise for every host sample.
    Results: `samples`, `host_samples`, `gaps`, `notes`, `missed_ticks`.
    """

    def __init__(
        self,
        gpus: NvmlGpus | None,
        host: HostReader | None,
        period_s: float = DEFAULT_PERIOD_S,
        t0_s: float | None = None,
        on_sample: Callable[[TelemetrySample], object] | None = None,
        notes: list[str] | None = None,
        on_host_sample: Callable[[HostSample], object] | None = None,
    ) -> None:
        if not period_s > 0:
            raise ConfigError("period_s", period_s, "a positive number of seconds, e.g. 0.1")
        self.gpus = gpus
        self.host = host
        self.period_s = period_s
        self.t0_s = t0_s
        self.on_sample = on_sample
        self.on_host_sample = on_host_sample
        self.samples: list[TelemetrySample] = []
        self.host_samples: list[HostSample] = []
        self.gaps: list[Gap] = []
        self.notes: list[str] = list(notes or [])
        self.missed_ticks = 0
        self._open_gaps: dict[tuple[int, str], int] = {}  # (gpu, what) -> index in self.gaps
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------ one tick

    def sample_once(self, t_s: float) -> None:
        """Take one reading of every source at run-relative time `t_s` (the thread's tick)."""
        if self.gpus is not None:
            for index in range(self.gpus.count):
                self._take_gpu(self.gpus.read(index, t_s), t_s)
            self._collect_notes(self.gpus.notes)
        if self.host is not None:
            sample = self.host.read(t_s)
            with self._lock:
                self.host_samples.append(sample)
            if self.on_host_sample is not None:
                self.on_host_sample(sample)
            self._collect_notes(self.host.notes)

    def _take_gpu(self, reading: GpuReading, t_s: float) -> None:
        index = reading.gpu_index
        if reading.sample is None:
            reason = "; ".join(sorted({msg for msg, _ in reading.failures.values()}))
            self._fail(index, GPU_LOST, reason or "no field answered", t_s)
        else:
            self._recover(index, GPU_LOST, t_s)
            with self._lock:
                self.samples.append(reading.sample)
            if self.on_sample is not None:
                self.on_sample(reading.sample)
            for what, (message, _code) in reading.failures.items():
                self._fail(index, what, message, t_s)
            for key in [k for k in self._open_gaps if k[0] == index and k[1] != GPU_LOST]:
                if key[1] not in reading.failures:
                    self._recover(index, key[1], t_s)

    def _fail(self, index: int, what: str, reason: str, t_s: float) -> None:
        key = (index, what)
        with self._lock:
            if key in self._open_gaps:
                position = self._open_gaps[key]
                self.gaps[position] = replace(self.gaps[position], end_s=t_s)
                return
            self._open_gaps[key] = len(self.gaps)
            self.gaps.append(Gap(t_s, t_s, index, what, reason))
            subject = "stopped answering" if what == GPU_LOST else f"{what} failed"
            self.notes.append(f"GPU {index} {subject} at t={t_s:.3f} s: {reason}")

    def _recover(self, index: int, what: str, t_s: float) -> None:
        with self._lock:
            if self._open_gaps.pop((index, what), None) is not None:
                subject = "answers" if what == GPU_LOST else f"{what} reads"
                self.notes.append(f"GPU {index} {subject} again at t={t_s:.3f} s")

    def _collect_notes(self, source: list[str]) -> None:
        if source:
            with self._lock:
                self.notes.extend(source)
            source.clear()

    # ------------------------------------------------------------ the thread

    def start(self) -> Sampler:
        if self._thread is not None:
            raise TelemetryError("sampler already started")
        if self.t0_s is None:
            self.t0_s = now_s()
        self._thread = threading.Thread(target=self._loop, name="tokenprobe-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        t0 = self.t0_s if self.t0_s is not None else now_s()
        tick = max(0, int((now_s() - t0) / self.period_s))
        while not self._stop.is_set():
            target = t0 + tick * self.period_s
            wait_s = target - now_s()
            if wait_s > 0 and self._stop.wait(wait_s):
                break
            try:
                self.sample_once(now_s() - t0)
            except Exception as exc:  # a dead thread would lose the rest of the run silently
                with self._lock:
                    self.notes.append(f"sampler tick failed: {type(exc).__name__}: {exc}")
            following = max(int((now_s() - t0) / self.period_s) + 1, tick + 1)
            self.missed_ticks += following - tick - 1
            tick = following

    def stop(self) -> None:
        """Stop the thread (waits for the tick in progress) and close NVML."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.gpus is not None:
            self.gpus.close()
            self._collect_notes(self.gpus.notes)

    def snapshot(self) -> tuple[list[TelemetrySample], list[HostSample]]:
        """Copies of what was sampled so far, safe to read while the thread runs."""
        with self._lock:
            return list(self.samples), list(self.host_samples)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_sampler(
    period_s: float = DEFAULT_PERIOD_S,
    *,
    t0_s: float | None = None,
    pid: int | None = None,
    host: bool = True,
    on_sample: Callable[[TelemetrySample], object] | None = None,
    on_host_sample: Callable[[HostSample], object] | None = None,
) -> Sampler:
    """A sampler over every GPU NVML sees (host-only with a note when it sees none) and the host."""
    gpus, notes = open_gpus()
    host_reader = HostReader(pid=pid) if host else None
    return Sampler(
        gpus,
        host_reader,
        period_s,
        t0_s=t0_s,
        on_sample=on_sample,
        notes=notes,
        on_host_sample=on_host_sample,
    )


# ---------------------------------------------------------------- files of a run folder
# host.jsonl and telemetry_notes.json are part of the run folder (records.py; read_run reads them).


def notes_doc(sampler: Sampler, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sampler's period, missed ticks, gaps and notes (plus `extra`): telemetry_notes.json."""
    doc: dict[str, Any] = {
        "period_s": sampler.period_s,
        "missed_ticks": sampler.missed_ticks,
        "gaps": [g.to_dict() for g in sampler.gaps],
        "notes": list(sampler.notes),
    }
    doc.update(extra or {})
    return doc


class HostLog:
    """`on_host_sample` that appends one JSON line per HostSample to <directory>/host.jsonl."""

    def __init__(self, directory: str | Path) -> None:
        self._file = (Path(directory) / HOST_FILE).open("w", encoding="utf-8")

    def __call__(self, sample: HostSample) -> None:
        self._file.write(json.dumps(sample.to_dict(), allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_notes(
    directory: str | Path, sampler: Sampler, extra: dict[str, Any] | None = None
) -> Path:
    """<directory>/telemetry_notes.json: period, missed ticks, gaps and notes (plus `extra`)."""
    doc = notes_doc(sampler, extra)
    path = Path(directory) / NOTES_FILE
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
