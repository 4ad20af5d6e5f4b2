"""The sampler thread over a fake pynvml (vendor seam) and the real host (psutil)."""

from __future__ import annotations

import itertools
import math
import statistics
import sys
import time

import pytest

from telemetry.fake_nvml import (
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNKNOWN,
    FakeGpu,
)
from tokenprobe.errors import ConfigError
from tokenprobe.records import TELEMETRY_FILE, RunWriter, read_run
from tokenprobe.telemetry.nvml import NvmlGpus
from tokenprobe.telemetry.sampler import GPU_LOST, Sampler, make_sampler
from tokenprobe.units import now_s


def _wake_lateness_s(period_s: float, ticks: int) -> float:
    """Median lateness of a plain sleep-until-the-next-tick loop on this machine now: how late
    any thread wakes here (a few µs on an idle box, milliseconds on a loaded one)."""
    t0 = time.perf_counter()
    late = []
    for k in range(1, ticks + 1):
        time.sleep(max(0.0, t0 + k * period_s - time.perf_counter()))
        late.append(time.perf_counter() - (t0 + k * period_s))
    return statistics.median(late)


def test_period_is_honoured_on_the_run_clock_fake_nvml(fake_nvml):
    fake_nvml([FakeGpu()])
    t0 = now_s()
    with Sampler(NvmlGpus(), host=None, period_s=0.05, t0_s=t0) as sampler:
        time.sleep(0.62)
    # the bound is derived from what this machine does now, measured right after the run
    noise_s = _wake_lateness_s(0.05, 8)
    times = [s.t_s for s in sampler.samples]
    assert 12 <= len(times) + sampler.missed_ticks <= 16  # ticks at 0, 0.05, ... 0.60 s
    ticks = [math.floor(t / 0.05 + 1e-9) for t in times]
    assert ticks == sorted(set(ticks))  # one sample per tick of the grid t0 + k * period
    lateness = [t - k * 0.05 for t, k in zip(times, ticks, strict=True)]
    assert statistics.median(lateness) < 0.01 + 2 * noise_s, noise_s
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.median(gaps) == pytest.approx(0.05, abs=0.01 + 2 * noise_s)


def test_samples_every_gpu_and_streams_them_to_a_run_writer_fake_nvml(fake_nvml, tmp_path):
    fake_nvml([FakeGpu(), FakeGpu(power_mw=100_000)])
    with RunWriter(tmp_path, "measured", {}, 0.0) as writer:
        sampler = Sampler(NvmlGpus(), None, period_s=0.02, on_sample=writer.add_telemetry)
        for k in range(3):
            sampler.sample_once(k * 0.02)
        writer.close()
    run = read_run(tmp_path)
    assert [(s.gpu_index, s.power_w) for s in run.telemetry[:2]] == [(0, 250.0), (1, 100.0)]
    assert len(run.telemetry) == 6
    assert (tmp_path / TELEMETRY_FILE).exists()


def test_failing_call_opens_extends_and_closes_a_gap_fake_nvml(fake_nvml):
    module = fake_nvml([FakeGpu()])
    sampler = Sampler(NvmlGpus(), None, period_s=0.1)
    sampler.sample_once(0.0)
    module.gpus[0].fail["nvmlDeviceGetTemperature"] = NVML_ERROR_UNKNOWN
    sampler.sample_once(0.1)
    sampler.sample_once(0.2)
    del module.gpus[0].fail["nvmlDeviceGetTemperature"]
    sampler.sample_once(0.3)
    assert len(sampler.samples) == 4
    assert [s.temp_c for s in sampler.samples] == [61, None, None, 61]
    (gap,) = sampler.gaps
    assert (gap.start_s, gap.end_s, gap.gpu_index, gap.what) == (0.1, 0.2, 0, "temp_c")
    assert gap.reason == "Unknown Error"
    assert any("temp_c failed at t=0.100" in n for n in sampler.notes)
    assert any("temp_c reads again at t=0.300" in n for n in sampler.notes)


def test_gpu_that_stops_answering_is_a_gap_not_a_crash_fake_nvml(fake_nvml):
    module = fake_nvml([FakeGpu(), FakeGpu()])
    with Sampler(NvmlGpus(), None, period_s=0.02) as sampler:
        time.sleep(0.1)
        module.gpus[1].lost = True
        time.sleep(0.1)
        module.gpus[1].lost = False
        time.sleep(0.1)
    lost = [g for g in sampler.gaps if g.what == GPU_LOST]
    assert len(lost) == 1 and lost[0].gpu_index == 1
    assert lost[0].reason == "GPU is lost"
    assert lost[0].end_s >= lost[0].start_s
    gpu0 = [s.t_s for s in sampler.samples if s.gpu_index == 0]
    gpu1 = [s.t_s for s in sampler.samples if s.gpu_index == 1]
    assert len(gpu1) < len(gpu0)  # gpu 0 kept being sampled through gpu 1's gap
    assert not any(lost[0].start_s <= t <= lost[0].end_s for t in gpu1)
    assert any("GPU 1 stopped answering" in n for n in sampler.notes)
    assert any("GPU 1 answers again" in n for n in sampler.notes)
    assert not any("sampler tick failed" in n for n in sampler.notes)


def test_gpu_without_energy_counter_samples_energy_as_none_fake_nvml(fake_nvml):
    fake_nvml([FakeGpu(fail={"nvmlDeviceGetTotalEnergyConsumption": NVML_ERROR_NOT_SUPPORTED})])
    sampler = Sampler(NvmlGpus(), None)
    sampler.sample_once(0.0)
    sampler.sample_once(0.1)
    assert [s.energy_j for s in sampler.samples] == [None, None]
    assert sampler.gaps == []
    assert sampler.notes == ["GPU 0 (NVIDIA H100 80GB HBM3): energy_j not supported"]


def test_nvml_library_missing_means_host_only_with_a_note_fake_nvml(fake_nvml):
    fake_nvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    with make_sampler(period_s=0.05) as sampler:
        time.sleep(0.2)
    assert sampler.gpus is None
    assert sampler.samples == []
    assert len(sampler.host_samples) >= 2
    assert sampler.notes[0].startswith("NVML unavailable")
    assert "code 12" in sampler.notes[0]


def test_nvidia_ml_py_not_installed_means_host_only(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    sampler = make_sampler(period_s=0.05)
    sampler.sample_once(0.0)
    assert sampler.gpus is None and len(sampler.host_samples) == 1
    assert "nvidia-ml-py is not installed" in sampler.notes[0]


def test_a_failing_source_does_not_kill_the_thread_fake_nvml(fake_nvml):
    fake_nvml([FakeGpu()])
    gpus = NvmlGpus()
    calls = {"n": 0}
    real_read = gpus.read

    def flaky(index, t_s):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom")
        return real_read(index, t_s)

    gpus.read = flaky
    with Sampler(gpus, None, period_s=0.02) as sampler:
        time.sleep(0.15)
    assert any("sampler tick failed: RuntimeError: boom" in n for n in sampler.notes)
    assert len(sampler.samples) >= 3


def test_period_must_be_positive():
    with pytest.raises(ConfigError, match="period_s"):
        Sampler(None, None, period_s=0.0)


def test_real_pynvml_without_a_driver_means_host_only():
    """This machine's real nvidia-ml-py with no NVIDIA driver (skipped where there is one)."""
    from tokenprobe.errors import TelemetryError

    try:
        NvmlGpus().close()
    except TelemetryError:
        pass
    else:
        pytest.skip("NVML works here")
    sampler = make_sampler(period_s=0.05)
    sampler.sample_once(0.0)
    assert sampler.gpus is None and sampler.samples == [] and len(sampler.host_samples) == 1
    assert sampler.notes[0].startswith("NVML unavailable")
