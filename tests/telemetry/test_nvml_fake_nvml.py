"""nvml.py against a fake pynvml (the vendor seam): every field, every unit, every failure."""

from __future__ import annotations

import sys

import pytest

from telemetry.fake_nvml import (
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_TIMEOUT,
    FakeGpu,
)
from tokenprobe.errors import TelemetryError
from tokenprobe.telemetry.nvml import NvmlGpus, load_pynvml


def test_reads_every_field_in_si_units_fake_nvml(fake_nvml):
    fake_nvml([FakeGpu()])
    with NvmlGpus() as gpus:
        assert gpus.count == 1
        assert gpus.names == ["NVIDIA H100 80GB HBM3"]
        reading = gpus.read(0, t_s=1.5)
    sample = reading.sample
    assert reading.answered and reading.failures == {}
    assert sample.t_s == 1.5 and sample.gpu_index == 0
    assert sample.power_w == pytest.approx(250.0)  # 250 000 mW
    assert sample.energy_j == pytest.approx(1025.0)  # 1 000 000 mJ + one 25 000 mJ step
    assert sample.gpu_util == pytest.approx(0.87)
    assert sample.mem_util == pytest.approx(0.43)
    assert sample.mem_used_bytes == 70 * 2**30
    assert sample.sm_clock_hz == pytest.approx(1.98e9)
    assert sample.mem_clock_hz == pytest.approx(2.619e9)
    assert sample.temp_c == 61
    assert sample.pcie_tx_bytes_per_s == pytest.approx(1.5e6)  # 1500 KB/s
    assert sample.pcie_rx_bytes_per_s == pytest.approx(2.5e5)
    assert sample.throttle_reasons == 0x4
    assert sample.power_limit_w == pytest.approx(700.0)  # 700 000 mW


def test_shutdown_on_close_fake_nvml(fake_nvml):
    module = fake_nvml([FakeGpu(), FakeGpu()])
    with NvmlGpus() as gpus:
        assert gpus.count == 2
    assert module.calls[0] == "nvmlInit"
    assert module.calls[-1] == "nvmlShutdown"


def test_gpu_without_energy_counter_gives_none_and_one_note_fake_nvml(fake_nvml):
    module = fake_nvml(
        [FakeGpu(fail={"nvmlDeviceGetTotalEnergyConsumption": NVML_ERROR_NOT_SUPPORTED})]
    )
    gpus = NvmlGpus()
    first, second = gpus.read(0, 0.0), gpus.read(0, 0.1)
    assert first.sample.energy_j is None and second.sample.energy_j is None
    assert first.sample.power_w == pytest.approx(250.0)
    assert first.failures == {}  # NotSupported is a fact about the GPU, not a gap
    assert gpus.notes == ["GPU 0 (NVIDIA H100 80GB HBM3): energy_j not supported"]
    assert module.calls.count("nvmlDeviceGetTotalEnergyConsumption") == 1  # not asked again


def test_failing_call_is_reported_per_field_fake_nvml(fake_nvml):
    fake_nvml([FakeGpu(fail={"nvmlDeviceGetTemperature": NVML_ERROR_TIMEOUT})])
    reading = NvmlGpus().read(0, 0.0)
    assert reading.sample.temp_c is None
    assert reading.sample.power_w == pytest.approx(250.0)
    assert reading.failures == {"temp_c": ("Timeout", NVML_ERROR_TIMEOUT)}


def test_lost_gpu_gives_no_sample_fake_nvml(fake_nvml):
    fake_nvml([FakeGpu(lost=True)])
    reading = NvmlGpus().read(0, 0.0)
    assert not reading.answered
    assert {code for _, code in reading.failures.values()} == {NVML_ERROR_GPU_IS_LOST}


def test_library_not_found_raises_telemetry_error_with_code_fake_nvml(fake_nvml):
    fake_nvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(TelemetryError) as info:
        NvmlGpus()
    assert info.value.code == NVML_ERROR_LIBRARY_NOT_FOUND


def test_package_missing_raises_telemetry_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    with pytest.raises(TelemetryError, match="nvidia-ml-py is not installed"):
        load_pynvml()


def test_only_nvml_module_imports_pynvml():
    import re
    from pathlib import Path

    import tokenprobe

    importing = re.compile(r"^\s*(import|from) pynvml|import_module\(\"pynvml\"\)", re.M)
    root = Path(tokenprobe.__file__).parent
    importers = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if importing.search(p.read_text())
    )
    assert importers == ["telemetry/nvml.py"]
