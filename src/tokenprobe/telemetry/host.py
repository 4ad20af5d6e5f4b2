"""Host counters through psutil, and RAPL CPU/DRAM energy from /sys/class/powercap.

The reader fills `records.HostSample` (the run folder's host.jsonl; re-exported here). Units:
fractions 0..1 (CPU per core, the process's CPU as a share of ONE core, so 2.0 means two busy
cores), bytes, and joules for RAPL (a cumulative counter since the reader opened, wrap-arounds
already unrolled).

RAPL zones are read from `<root>/intel-rapl:*` (and nested `intel-rapl:*:*`): `name` says
"package-0", "dram", "core"...; `energy_uj` is a µJ counter that wraps at `max_energy_range_uj`.
Since Linux 5.10 `energy_uj` is readable by root only; an unreadable tree gives no zones and a note.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # no stubs in the dev deps

from tokenprobe.records import HostSample
from tokenprobe.units import MICRO

__all__ = ["POWERCAP_ROOT", "HostReader", "HostSample", "RaplReader"]

PERCENT = 0.01
POWERCAP_ROOT = Path("/sys/class/powercap")


@dataclass(slots=True)
class _Zone:
    name: str
    path: Path
    range_uj: int
    last_uj: int
    total_j: float = 0.0


class RaplReader:
    """Cumulative RAPL energy per zone in J, unrolling the counter's wrap-around."""

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        self.notes: list[str] = []
        self._zones: list[_Zone] = []
        for directory in sorted(root.glob("intel-rapl:*")):
            zone = self._open(directory)
            if zone is not None:
                self._zones.append(zone)
        if not self._zones:
            self.notes.append(f"RAPL: no readable energy_uj under {root} (needs root since 5.10)")

    def _open(self, directory: Path) -> _Zone | None:
        try:
            name = (directory / "name").read_text().strip()
            energy_uj = int((directory / "energy_uj").read_text())
            range_path = directory / "max_energy_range_uj"
            range_uj = int(range_path.read_text()) if range_path.exists() else 0
        except (OSError, ValueError):
            return None
        # zone names repeat across sockets (two "dram"): the directory's suffix keeps them apart
        label = f"{name}:{directory.name.removeprefix('intel-rapl:')}"
        return _Zone(label, directory / "energy_uj", range_uj, energy_uj)

    @property
    def zones(self) -> list[str]:
        return [z.name for z in self._zones]

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for zone in self._zones:
            try:
                now_uj = int(zone.path.read_text())
            except (OSError, ValueError):
                continue
            delta = now_uj - zone.last_uj
            if delta < 0 and zone.range_uj > 0:
                delta += zone.range_uj + 1  # the counter wrapped once since the last read
            zone.last_uj = now_uj
            zone.total_j += max(delta, 0) * MICRO
            out[zone.name] = zone.total_j
        return out


class HostReader:
    """psutil counters (and RAPL when readable); `pid` adds that process's CPU share.

    psutil's CPU percentages are relative to the previous call, so the first call is made here
    and thrown away. A process that exits gives `process_cpu_util=None` and a note.
    """

    def __init__(self, pid: int | None = None, powercap_root: Path = POWERCAP_ROOT) -> None:
        self.notes: list[str] = []
        psutil.cpu_percent(percpu=True)
        self._process: psutil.Process | None = None
        if pid is not None:
            try:
                self._process = psutil.Process(pid)
                self._process.cpu_percent(None)
            except psutil.Error as exc:
                self.notes.append(f"process {pid}: {exc}; its CPU share is not sampled")
                self._process = None
        self.rapl = RaplReader(powercap_root)
        self.notes.extend(self.rapl.notes)

    def _process_cpu(self) -> float | None:
        if self._process is None:
            return None
        try:
            return float(self._process.cpu_percent(None)) * PERCENT
        except psutil.Error as exc:
            self.notes.append(f"process {self._process.pid} no longer readable: {exc}")
            self._process = None
            return None

    def read(self, t_s: float) -> HostSample:
        cores = tuple(float(c) * PERCENT for c in psutil.cpu_percent(percpu=True))
        memory = psutil.virtual_memory()
        net = psutil.net_io_counters(nowrap=False)  # 64-bit kernel counters: no wrap to undo
        return HostSample(
            t_s=t_s,
            cpu_util_per_core=cores,
            ram_used_bytes=float(memory.total - memory.available),
            ram_total_bytes=float(memory.total),
            net_sent_bytes=float(net.bytes_sent) if net is not None else None,
            net_recv_bytes=float(net.bytes_recv) if net is not None else None,
            process_cpu_util=self._process_cpu(),
            rapl_energy_j=self.rapl.read(),
        )
