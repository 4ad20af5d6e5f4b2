"""NVML through nvidia-ml-py: the ONLY module of tokenprobe that imports `pynvml`.

Every vendor unit is converted here, once (DESIGN.md "convert only at the edges"):

    nvmlDeviceGetPowerUsage             mW  -> W      (x MILLI)
    nvmlDeviceGetTotalEnergyConsumption mJ  -> J      (x MILLI; cumulative since driver load,
                                                       Volta and newer; NotSupported elsewhere)
    nvmlDeviceGetUtilizationRates       %   -> 0..1   (gpu, memory: share of the last sample period)
    nvmlDeviceGetMemoryInfo             bytes
    nvmlDeviceGetClockInfo              MHz -> Hz     (x MEGA; SM and memory clocks)
    nvmlDeviceGetTemperature            °C
    nvmlDeviceGetPcieThroughput         KB/s -> B/s   (x KILO: NVML says "KB/s" without saying
                                                       1000 or 1024; we take the SI kilo, an
                                                       assumption worth 2.4 % at most)
    nvmlDeviceGetCurrentClocksEventReasons (older drivers: ...ClocksThrottleReasons): bit mask
    nvmlDeviceGetEnforcedPowerLimit     mW  -> W      (x MILLI; the limit the power controller
                                                       applies, the lowest of all limiters)

On Ampere/Hopper `nvmlDeviceGetPowerUsage` is a one-second average, not an instant reading; the
energy counter is the better source of run energy where it exists.

Errors: `nvmlInit` failing (library missing, no driver) raises `TelemetryError` with the NVML code;
after that, `NvmlGpus.read` never raises for a failing call: a field that NVML does not support
is None from then on (with a note), and any other failure is reported in `GpuReading.failures` for
the sampler to record as a gap.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tokenprobe.errors import TelemetryError
from tokenprobe.records import TelemetrySample
from tokenprobe.units import KILO, MEGA, MILLI

PERCENT = 0.01

# (field of TelemetrySample, how to read it from (nvml, handle)) in the order they are read.
_Reader = Callable[[Any, Any], float | int]


def _power_w(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetPowerUsage(handle)) * MILLI


def _energy_j(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) * MILLI


def _gpu_util(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu) * PERCENT


def _mem_util(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetUtilizationRates(handle).memory) * PERCENT


def _mem_used_bytes(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetMemoryInfo(handle).used)


def _sm_clock_hz(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)) * MEGA


def _mem_clock_hz(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)) * MEGA


def _temp_c(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))


def _pcie_tx(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_TX_BYTES)) * KILO


def _pcie_rx(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetPcieThroughput(handle, nvml.NVML_PCIE_UTIL_RX_BYTES)) * KILO


def _throttle(nvml: Any, handle: Any) -> int:
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if getter is None:  # nvidia-ml-py before the 12.535 rename
        getter = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(getter(handle))


def _power_limit_w(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetEnforcedPowerLimit(handle)) * MILLI


READERS: dict[str, _Reader] = {
    "power_w": _power_w,
    "energy_j": _energy_j,
    "gpu_util": _gpu_util,
    "mem_util": _mem_util,
    "mem_used_bytes": _mem_used_bytes,
    "sm_clock_hz": _sm_clock_hz,
    "mem_clock_hz": _mem_clock_hz,
    "temp_c": _temp_c,
    "pcie_tx_bytes_per_s": _pcie_tx,
    "pcie_rx_bytes_per_s": _pcie_rx,
    "throttle_reasons": _throttle,
    "power_limit_w": _power_limit_w,
}


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU read once: the sample (None when no field answered) and what failed, by field.

    `failures` maps a field to NVML's message and code for calls that raised an error other than
    NotSupported (those are transient or fatal: GPU lost, timeout, unknown): the sampler records
    them as gaps. `answered` is False when every field failed, i.e. the GPU stopped answering.
    """

    gpu_index: int
    sample: TelemetrySample | None
    failures: dict[str, tuple[str, int | None]] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.sample is not None


def load_pynvml() -> Any:
    """Import nvidia-ml-py's `pynvml`; TelemetryError when the package is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise TelemetryError(f"nvidia-ml-py is not installed ({exc})") from None


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return int(value) if isinstance(value, int) else None


class NvmlGpus:
    """Every GPU NVML sees, opened once; `read(i, t_s)` returns one `GpuReading`.

    Fields that NVML reports NotSupported on a GPU are not asked again; `notes` says which.
    Call `close()` (or use as a context manager) to shut NVML down.
    """

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml = load_pynvml() if nvml is None else nvml
        self.notes: list[str] = []
        self._error: type[BaseException] = self._nvml.NVMLError
        try:
            self._nvml.nvmlInit()
        except self._error as exc:
            raise TelemetryError(f"NVML did not initialise: {exc}", _code(exc)) from None
        try:
            count = int(self._nvml.nvmlDeviceGetCount())
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self.names = [self._name(h) for h in self._handles]
        except self._error as exc:
            self._nvml.nvmlShutdown()
            raise TelemetryError(f"NVML could not list GPUs: {exc}", _code(exc)) from None
        self._unsupported: list[set[str]] = [set() for _ in self._handles]

    def _name(self, handle: Any) -> str:
        name = self._nvml.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    @property
    def count(self) -> int:
        return len(self._handles)

    def read(self, index: int, t_s: float) -> GpuReading:
        """Read every supported field of GPU `index`; never raises for an NVML failure."""
        handle = self._handles[index]
        values: dict[str, Any] = {}
        failures: dict[str, tuple[str, int | None]] = {}
        not_supported = self._nvml.NVML_ERROR_NOT_SUPPORTED
        for name, reader in READERS.items():
            if name in self._unsupported[index]:
                continue
            try:
                values[name] = reader(self._nvml, handle)
            except self._error as exc:
                code = _code(exc)
                if code == not_supported:
                    self._unsupported[index].add(name)
                    self.notes.append(f"GPU {index} ({self.names[index]}): {name} not supported")
                else:
                    failures[name] = (str(exc), code)
        if not values:
            return GpuReading(index, None, failures)
        sample = replace(TelemetrySample(t_s=t_s, gpu_index=index), **values)
        return GpuReading(index, sample, failures)

    def close(self) -> None:
        with contextlib.suppress(self._error):  # a lost GPU's library: nothing left to do
            self._nvml.nvmlShutdown()

    def __enter__(self) -> NvmlGpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
