"""The run's die temperature for the rules: the catalog's static power at the measured mean
temperature (leakage rises with it at the same clock: cost/thermal.py, issue 19 item 2)."""

from __future__ import annotations

from tokenprobe.cost import idle_power_at_w
from tokenprobe.hardware import GpuSpec
from tokenprobe.records import Run


def mean_temp_c(run: Run) -> float | None:
    """Mean GPU temperature over the run's telemetry samples that carry one (NVML, nvidia-smi,
    DCGM `temp_c`), None without any."""
    temps = [s.temp_c for s in run.telemetry if s.temp_c is not None]
    return sum(temps) / len(temps) if temps else None


def catalog_static_w(gpu: GpuSpec, num_gpus: int, run: Run) -> tuple[float, str]:
    """The catalog idle power x GPUs at the run's mean temperature (where it has one), and how."""
    how = f"catalog idle power of {gpu.name} x {num_gpus}"
    temp = mean_temp_c(run)
    if temp is None:
        return gpu.idle_w * num_gpus, how
    return idle_power_at_w(gpu.idle_w, temp) * num_gpus, f"{how} at the run's {temp:.0f} °C"
