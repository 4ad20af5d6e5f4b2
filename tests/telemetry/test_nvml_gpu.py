"""Real NVML on a real GPU (`pytest -m gpu`); skipped where NVML sees no GPU.

A steady 30 s load (PyTorch matmuls when torch is installed, else the idle GPU, which is steady
too), sampled at 20 Hz: the energy counter and the integral of power must agree within 5 %.
"""

from __future__ import annotations

import threading
import time

import pytest

from tokenprobe.energy_join import join_energy
from tokenprobe.errors import TelemetryError
from tokenprobe.records import Run
from tokenprobe.telemetry.nvml import NvmlGpus
from tokenprobe.telemetry.sampler import Sampler
from tokenprobe.units import now_s

pytestmark = pytest.mark.gpu


@pytest.fixture
def real_gpus():
    try:
        gpus = NvmlGpus()
    except TelemetryError as exc:
        pytest.skip(f"no NVML here: {exc}")
    if gpus.count == 0:
        gpus.close()
        pytest.skip("NVML sees no GPU")
    return gpus


def _matmul_load(stop: threading.Event) -> None:
    try:
        import torch
    except ImportError:
        stop.wait()
        return
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    while not stop.is_set():
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def test_energy_counter_agrees_with_integrated_power_at_20_hz(real_gpus):
    stop = threading.Event()
    load = threading.Thread(target=_matmul_load, args=(stop,), daemon=True)
    load.start()
    time.sleep(5.0)  # let power settle (NVML power is a 1 s average on recent GPUs)
    t0 = now_s()
    with Sampler(real_gpus, None, period_s=0.05, t0_s=t0) as sampler:
        time.sleep(30.0)
    stop.set()
    load.join(timeout=10)
    first = [s for s in sampler.samples if s.gpu_index == 0]
    assert len(first) >= 0.9 * 30 / 0.05, sampler.notes
    if first[0].energy_j is None:
        pytest.skip(f"{real_gpus.names[0]} has no energy counter")
    run = Run("measured", telemetry=first, duration_s=30.0)
    report = join_energy(run)
    assert report.coverage > 0.95
    assert abs(report.counter_integral_disagreement) < 0.05
