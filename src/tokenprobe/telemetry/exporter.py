"""A Prometheus exporter for `tokenprobe monitor --prometheus PORT` (prometheus-client).

Gauges, in SI units with Prometheus' unit suffixes (`prometheus_text.GPU_METRICS` reads them back):

    tokenprobe_gpu_power_watts{gpu}                 tokenprobe_gpu_energy_joules{gpu} (counter)
    tokenprobe_gpu_utilization_ratio{gpu}           tokenprobe_gpu_memory_utilization_ratio{gpu}
    tokenprobe_gpu_memory_used_bytes{gpu}           tokenprobe_gpu_temperature_celsius{gpu}
    tokenprobe_gpu_sm_clock_hertz{gpu}              tokenprobe_gpu_memory_clock_hertz{gpu}
    tokenprobe_gpu_pcie_tx_bytes_per_second{gpu}    tokenprobe_gpu_pcie_rx_bytes_per_second{gpu}
    tokenprobe_gpu_throttle_reasons{gpu}            tokenprobe_gpu_power_limit_watts{gpu}
    tokenprobe_host_cpu_utilization_ratio           tokenprobe_host_memory_used_bytes
    tokenprobe_host_rapl_energy_joules{zone}
    tokenprobe_monitor_energy_joules                all GPUs since the monitor started
    tokenprobe_run_input_tokens, tokenprobe_run_output_tokens   tokens of the watched run so far
    tokenprobe_joules_per_output_token, tokenprobe_output_tokens_per_joule   NaN until known

Derived figures: `EnergyMeter` adds each GPU's energy since the monitor started (the energy
counter's ΔE where the GPU has one, else the trapezoid of power), and `RecordsTail` counts the
tokens of requests appended to a run folder's records.jsonl after the monitor started; J per output
token is their ratio. Start the monitor before the run, or the ratio covers only the overlap.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server

from tokenprobe.errors import ConfigError
from tokenprobe.records import RECORDS_FILE, TelemetrySample
from tokenprobe.telemetry.host import HostSample

GPU_GAUGES: dict[str, tuple[str, str]] = {
    "power_w": ("tokenprobe_gpu_power_watts", "GPU power draw (W)"),
    "energy_j": ("tokenprobe_gpu_energy_joules", "GPU energy counter (J, arbitrary origin)"),
    "gpu_util": ("tokenprobe_gpu_utilization_ratio", "GPU utilization (0..1)"),
    "mem_util": ("tokenprobe_gpu_memory_utilization_ratio", "Memory controller busy (0..1)"),
    "mem_used_bytes": ("tokenprobe_gpu_memory_used_bytes", "GPU memory used (bytes)"),
    "sm_clock_hz": ("tokenprobe_gpu_sm_clock_hertz", "SM clock (Hz)"),
    "mem_clock_hz": ("tokenprobe_gpu_memory_clock_hertz", "Memory clock (Hz)"),
    "temp_c": ("tokenprobe_gpu_temperature_celsius", "GPU temperature (°C)"),
    "pcie_tx_bytes_per_s": ("tokenprobe_gpu_pcie_tx_bytes_per_second", "PCIe TX (bytes/s)"),
    "pcie_rx_bytes_per_s": ("tokenprobe_gpu_pcie_rx_bytes_per_second", "PCIe RX (bytes/s)"),
    "throttle_reasons": ("tokenprobe_gpu_throttle_reasons", "NVML clock event reasons bit mask"),
    "power_limit_w": ("tokenprobe_gpu_power_limit_watts", "Enforced power limit (W)"),
}


class EnergyMeter:
    """Energy of every GPU since the first sample it saw (J), one sample at a time."""

    def __init__(self) -> None:
        self._last: dict[int | None, TelemetrySample] = {}
        self.energy_j = 0.0

    def add(self, sample: TelemetrySample) -> None:
        last = self._last.get(sample.gpu_index)
        self._last[sample.gpu_index] = sample
        if last is None or sample.t_s <= last.t_s:
            return
        if sample.energy_j is not None and last.energy_j is not None:
            if sample.energy_j >= last.energy_j:  # a drop is a counter reset: skip the step
                self.energy_j += sample.energy_j - last.energy_j
        elif sample.power_w is not None and last.power_w is not None:
            self.energy_j += (sample.power_w + last.power_w) / 2 * (sample.t_s - last.t_s)


class RecordsTail:
    """Token counts of the records appended to `<run_dir>/records.jsonl` since construction."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / RECORDS_FILE
        self._offset = self.path.stat().st_size if self.path.exists() else 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.requests = 0

    def poll(self) -> None:
        """Read complete new lines; a half-written last line waits for the next poll."""
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                self.input_tokens += int(record.get("input_tokens") or 0)
                self.output_tokens += int(record.get("output_tokens") or 0)
                self.requests += 1


class Exporter:
    """The gauges above on their own registry; `serve(port)` exposes them on /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._gpu = {
            name: Gauge(metric, help_, ["gpu"], registry=self.registry)
            for name, (metric, help_) in GPU_GAUGES.items()
        }
        reg = self.registry
        self._cpu = Gauge("tokenprobe_host_cpu_utilization_ratio", "Host CPU (0..1)", registry=reg)
        self._ram = Gauge("tokenprobe_host_memory_used_bytes", "Host RAM used", registry=reg)
        self._rapl = Gauge("tokenprobe_host_rapl_energy_joules", "RAPL (J)", ["zone"], registry=reg)
        self._energy = Gauge("tokenprobe_monitor_energy_joules", "GPU J since start", registry=reg)
        self._in = Gauge("tokenprobe_run_input_tokens", "Input tokens of the run", registry=reg)
        self._out = Gauge("tokenprobe_run_output_tokens", "Output tokens of the run", registry=reg)
        self._jpt = Gauge("tokenprobe_joules_per_output_token", "J per output token", registry=reg)
        self._tpj = Gauge("tokenprobe_output_tokens_per_joule", "Output tokens per J", registry=reg)
        self._jpt.set(math.nan)
        self._tpj.set(math.nan)
        self._server: Any = None

    def update(self, samples: Iterable[TelemetrySample], host: HostSample | None = None) -> None:
        """Set the GPU gauges from the latest sample of each GPU (and the host's)."""
        for sample in samples:
            gpu = str(sample.gpu_index if sample.gpu_index is not None else 0)
            for name, gauge in self._gpu.items():
                value = getattr(sample, name)
                if value is not None:
                    gauge.labels(gpu=gpu).set(float(value))
        if host is not None:
            if host.cpu_util is not None:
                self._cpu.set(host.cpu_util)
            if host.ram_used_bytes is not None:
                self._ram.set(host.ram_used_bytes)
            for zone, energy_j in host.rapl_energy_j.items():
                self._rapl.labels(zone=zone).set(energy_j)

    def set_energy(
        self, energy_j: float, input_tokens: int | None, output_tokens: int | None
    ) -> None:
        """Energy since start and, when the run's tokens are known, J/token and tokens/J."""
        self._energy.set(energy_j)
        if input_tokens is not None:
            self._in.set(input_tokens)
        if output_tokens is not None:
            self._out.set(output_tokens)
            if output_tokens > 0 and energy_j > 0:
                self._jpt.set(energy_j / output_tokens)
                self._tpj.set(output_tokens / energy_j)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve /metrics on addr:port from a daemon thread (loopback by default)."""
        try:
            self._server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as exc:
            raise ConfigError("prometheus", port, f"a free TCP port on {addr} ({exc})") from None

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
