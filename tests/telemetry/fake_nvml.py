"""A stand-in for nvidia-ml-py's `pynvml`, for tests at the vendor seam (no GPU here).

It keeps pynvml's names, vendor units (mW, mJ, %, bytes, MHz, °C, KB/s) and error style (an
`NVMLError` carrying the NVML return code in `.value`), so `tokenprobe.telemetry.nvml` runs
unchanged against it. Tests inject failures per GPU and per function.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(f"NVML error {value}")

    def __str__(self) -> str:
        names = {3: "Not Supported", 10: "Timeout", 12: "NVML Shared Library Not Found"}
        names.update({15: "GPU is lost", 999: "Unknown Error"})
        return names.get(self.value, f"error {self.value}")


@dataclass
class FakeGpu:
    """Readings in NVML's own units."""

    name: str = "NVIDIA H100 80GB HBM3"
    power_mw: int = 250_000
    energy_mj: int = 1_000_000
    util_gpu_pct: int = 87
    util_mem_pct: int = 43
    mem_used_bytes: int = 70 * 2**30
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    temp_c: int = 61
    pcie_tx_kb_per_s: int = 1500
    pcie_rx_kb_per_s: int = 250
    reasons: int = 0x4
    power_limit_mw: int = 700_000
    energy_step_mj: int = 25_000  # added at every energy read: 250 W over 0.1 s
    fail: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code
    lost: bool = False


def make_fake_pynvml(gpus: list[FakeGpu], init_error: int | None = None) -> types.ModuleType:
    """A module object with pynvml's function names, reading from `gpus`."""
    module = types.ModuleType("pynvml")
    calls: list[str] = []

    def call(name: str, handle: int) -> FakeGpu:
        calls.append(name)
        gpu = gpus[handle]
        if gpu.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        if name in gpu.fail:
            raise NVMLError(gpu.fail[name])
        return gpu

    def init() -> None:
        calls.append("nvmlInit")
        if init_error is not None:
            raise NVMLError(init_error)

    def energy(handle: int) -> int:
        gpu = call("nvmlDeviceGetTotalEnergyConsumption", handle)
        gpu.energy_mj += gpu.energy_step_mj
        return gpu.energy_mj

    def clock(handle: int, kind: int) -> int:
        gpu = call("nvmlDeviceGetClockInfo", handle)
        return gpu.sm_clock_mhz if kind == NVML_CLOCK_SM else gpu.mem_clock_mhz

    def pcie(handle: int, counter: int) -> int:
        gpu = call("nvmlDeviceGetPcieThroughput", handle)
        return gpu.pcie_tx_kb_per_s if counter == NVML_PCIE_UTIL_TX_BYTES else gpu.pcie_rx_kb_per_s

    def utilization(handle: int) -> types.SimpleNamespace:
        gpu = call("nvmlDeviceGetUtilizationRates", handle)
        return types.SimpleNamespace(gpu=gpu.util_gpu_pct, memory=gpu.util_mem_pct)

    def memory(handle: int) -> types.SimpleNamespace:
        gpu = call("nvmlDeviceGetMemoryInfo", handle)
        return types.SimpleNamespace(used=gpu.mem_used_bytes, total=80 * 2**30)

    module.__dict__.update(
        {k: v for k, v in globals().items() if k.startswith("NVML_")},
        NVMLError=NVMLError,
        calls=calls,
        gpus=gpus,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("nvmlShutdown"),
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: gpus[h].name.encode(),
        nvmlDeviceGetPowerUsage=lambda h: call("nvmlDeviceGetPowerUsage", h).power_mw,
        nvmlDeviceGetTotalEnergyConsumption=energy,
        nvmlDeviceGetUtilizationRates=utilization,
        nvmlDeviceGetMemoryInfo=memory,
        nvmlDeviceGetClockInfo=clock,
        nvmlDeviceGetTemperature=lambda h, s: call("nvmlDeviceGetTemperature", h).temp_c,
        nvmlDeviceGetPcieThroughput=pcie,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: (
            call("nvmlDeviceGetCurrentClocksEventReasons", h).reasons
        ),
        nvmlDeviceGetEnforcedPowerLimit=lambda h: (
            call("nvmlDeviceGetEnforcedPowerLimit", h).power_limit_mw
        ),
    )
    return module
